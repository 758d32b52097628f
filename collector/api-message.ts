/** A request and a response of the HTTP API, socket-free (http.ts adapts them to node:http). */
export interface ApiRequest {
  method: string;
  /** Path and query, e.g. `/v1/captures/c-1/report.md`. */
  url: string;
  headers: Record<string, string | undefined>;
  body?: string;
}

/**
 * A body sent as it is read (a bundle as one archive): its length known before the first byte,
 * its chunks pulled one at a time so a large file never sits whole in memory.
 */
export interface StreamBody {
  length: number;
  /**
   * The bytes in order. Throws where they cannot be what the headers promised: the response is cut
   * there (never ended as if whole).
   */
  chunks(): AsyncIterable<Uint8Array>;
  /** Lets go of what it holds (open files); called whether or not it was read, more than once. */
  release(): void;
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer | StreamBody;
}

/** Whether a response's body is streamed. */
export const isStreamBody = (b: ApiResponse['body']): b is StreamBody =>
  typeof b === 'object' && !Buffer.isBuffer(b);

/** A request and a response of the HTTP API, socket-free (http.ts adapts them to node:http). */
export interface ApiRequest {
  method: string;
  /** Path and query, e.g. `/v1/captures/c-1/report.md`. */
  url: string;
  headers: Record<string, string | undefined>;
  body?: string;
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

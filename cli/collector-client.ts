/**
 * The CLI's client for the collector's JSON API (`hoptrace capture`, `doctor --collector`,
 * `repro` in cluster mode): bearer token, JSON bodies, and one mapping of failures to errors that
 * say what, where and what to do — unreachable, token refused, the collector's own error (its
 * code, message, where and hint), or a reply that is not the API's.
 *
 * Every call ends: it is aborted past its deadline (COLLECTOR_UNREACHABLE, "no reply within …"),
 * and a reply body longer than the cap is not read further (COLLECTOR_BAD_RESPONSE). A JSON reply
 * is read as the reply kind the caller names (collector-replies.ts): one of another shape is
 * COLLECTOR_BAD_RESPONSE too.
 */
import { detailOf, ERRORS, HoptraceError, type ErrorCode } from '../common/errors';
import type { Reply } from './reply-shapes';

interface ApiErrorBody {
  error?: { code?: unknown; message?: unknown; where?: unknown; hint?: unknown };
}

/** What to check when the URL answered, but not as the hoptrace API of this version does. */
export const NOT_HOPTRACE =
  "check --collector points at a hoptrace collector of this command's version; kubectl hoptrace: check the collector pod's image, kubectl hoptrace install --image";

/** How long one call may take, and the longest reply kept (a bundle file is the largest). */
export interface CollectorLimits {
  timeoutMs: number;
  maxReplyBytes: number;
}

export const DEFAULT_COLLECTOR_LIMITS: CollectorLimits = {
  timeoutMs: 30_000,
  maxReplyBytes: 256 * 1024 * 1024,
};

export class CollectorClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
    private readonly doFetch: typeof fetch = fetch,
    private readonly limits: CollectorLimits = DEFAULT_COLLECTOR_LIMITS,
  ) {}

  /** One call; throws HoptraceError when unreachable or on HTTP ≥ 400. */
  async call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; text: string }> {
    const { status, bytes } = await this.send(method, path, body);
    return { status, text: bytes.toString('utf8') };
  }

  /** A GET whose reply is kept as bytes (a bundle file such as evidence.pcapng). */
  async bytes(path: string): Promise<Buffer> {
    return (await this.send('GET', path)).bytes;
  }

  private async send(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; bytes: Buffer }> {
    const url = new URL(path, this.base).toString();
    const ac = new AbortController();
    const timer = setTimeout(() => {
      ac.abort(new Error(`no reply within ${this.limits.timeoutMs / 1000} s`));
    }, this.limits.timeoutMs);
    try {
      let res: Response;
      try {
        res = await this.doFetch(url, {
          method,
          headers: {
            authorization: `Bearer ${this.token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: ac.signal,
        });
      } catch (e) {
        throw this.failed(e, method, url, ac.signal);
      }
      let bytes: Buffer;
      try {
        bytes = await readCapped(res, this.limits.maxReplyBytes, `${method} ${url}`);
      } catch (e) {
        throw this.failed(e, method, url, ac.signal);
      }
      if (res.status >= 400) throw apiError(res.status, bytes.toString('utf8'), `${method} ${url}`);
      return { status: res.status, bytes };
    } finally {
      clearTimeout(timer);
      ac.abort(); // nothing is left reading (a no-op once the reply is whole)
    }
  }

  /**
   * A failed fetch or reply: its own coded cause (a reply cut off, a port-forward that failed —
   * the transport knows more than "unreachable"), the deadline, or unreachable.
   */
  private failed(e: unknown, method: string, url: string, signal: AbortSignal): HoptraceError {
    if (e instanceof HoptraceError) return e;
    const inner = e instanceof Error ? e.cause : undefined;
    if (inner instanceof HoptraceError) return inner;
    const cause = signal.aborted
      ? (signal.reason as Error).message
      : inner instanceof Error
        ? inner.message
        : e instanceof Error
          ? e.message
          : String(e);
    return new HoptraceError('COLLECTOR_UNREACHABLE', `${method} ${url} failed (${cause})`, {
      where: this.base,
      hint: 'check --collector and that `hoptrace collector` runs and is reachable from here',
    });
  }

  /** One call whose reply must be JSON of the `reply` kind. */
  async json<T>(method: string, path: string, reply: Reply<T>, body?: unknown): Promise<T> {
    const { text } = await this.call(method, path, body);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new HoptraceError('COLLECTOR_BAD_RESPONSE', `${method} ${path} did not return JSON`, {
        where: this.base,
        hint: NOT_HOPTRACE,
      });
    }
    const r = reply.read(parsed);
    if ('why' in r)
      throw new HoptraceError('COLLECTOR_BAD_RESPONSE', `not ${reply.what}: ${r.why}`, {
        where: `${method} ${new URL(path, this.base).toString()}`,
        hint: NOT_HOPTRACE,
      });
    return r.value;
  }
}

/** The reply's body, read up to `max` bytes; past it the read stops: COLLECTOR_BAD_RESPONSE. */
async function readCapped(res: Response, max: number, request: string): Promise<Buffer> {
  const tooLong = (): HoptraceError =>
    new HoptraceError('COLLECTOR_BAD_RESPONSE', `the reply is longer than ${max} bytes`, {
      where: request,
      hint: NOT_HOPTRACE,
    });
  if (Number(res.headers.get('content-length') ?? 0) > max) {
    await res.body?.cancel();
    throw tooLong();
  }
  if (res.body === null) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let length = 0;
  const reader = res.body.getReader() as ReadableStreamDefaultReader<Uint8Array>;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
    if (length > max) {
      await reader.cancel();
      throw tooLong();
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  return Buffer.concat(chunks);
}

function apiError(status: number, text: string, request: string): HoptraceError {
  let body: ApiErrorBody = {};
  try {
    body = JSON.parse(text) as ApiErrorBody;
  } catch {
    // not the API's error shape; handled below
  }
  if (status === 401) {
    return new HoptraceError('API_UNAUTHORIZED', 'the collector refused the token', {
      where: request,
      hint: 'give the collector token with --token-file or HOPTRACE_TOKEN',
    });
  }
  const e = body.error;
  if (typeof e?.code === 'string' && e.code in ERRORS && typeof e.message === 'string') {
    const where = typeof e.where === 'string' ? e.where : undefined;
    const hint = typeof e.hint === 'string' ? e.hint : undefined;
    return new HoptraceError(e.code as ErrorCode, detailOf(e.message, e.code, where, hint), {
      where: where ?? request,
      ...(hint === undefined ? {} : { hint }),
    });
  }
  return new HoptraceError('COLLECTOR_BAD_RESPONSE', `HTTP ${status} without a hoptrace error`, {
    where: request,
    hint: NOT_HOPTRACE,
  });
}

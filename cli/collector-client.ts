/**
 * The CLI's client for the collector's JSON API (`hoptrace capture`, `doctor --collector`,
 * `repro` in cluster mode): bearer token, JSON bodies, and one mapping of failures to errors that
 * say what, where and what to do — unreachable, token refused, the collector's own error (its
 * code, message, where and hint), or a reply that is not the API's.
 */
import { detailOf, ERRORS, HoptraceError, type ErrorCode } from '../common/errors';

interface ApiErrorBody {
  error?: { code?: unknown; message?: unknown; where?: unknown; hint?: unknown };
}

const NOT_HOPTRACE = 'check --collector points at a hoptrace collector';

export class CollectorClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
    private readonly doFetch: typeof fetch = fetch,
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
    let res: Response;
    try {
      res = await this.doFetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (e) {
      const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : String(e);
      throw new HoptraceError('COLLECTOR_UNREACHABLE', `${method} ${url} failed (${cause})`, {
        where: this.base,
        hint: 'check --collector and that `hoptrace collector` runs and is reachable from here',
      });
    }
    const bytes = Buffer.from(await res.arrayBuffer());
    if (res.status >= 400) throw apiError(res.status, bytes.toString('utf8'), `${method} ${url}`);
    return { status: res.status, bytes };
  }

  /** One call whose reply must be JSON. */
  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const { text } = await this.call(method, path, body);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new HoptraceError('COLLECTOR_BAD_RESPONSE', `${method} ${path} did not return JSON`, {
        where: this.base,
        hint: NOT_HOPTRACE,
      });
    }
  }
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

/**
 * A `fetch` over connections that a function opens (here: port-forwards to the collector pod,
 * with TLS on top), so CollectorClient and `hoptrace capture` run unchanged over them. Only what
 * those clients use: a string or URL, method, plain-object headers, a string body, a signal; the
 * whole reply is read. A connection failure rejects like undici's fetch (TypeError with the cause),
 * which CollectorClient maps to COLLECTOR_UNREACHABLE.
 *
 * Every request ends: past `timeoutMs` (from the request to the reply's last byte), or when the
 * caller's signal aborts, the request and its connection are destroyed (the port-forward's
 * WebSocket with it) and the fetch rejects; a reply longer than `maxReplyBytes` is cut off the
 * same way, its cause COLLECTOR_BAD_RESPONSE, rather than held in memory.
 */
import { request } from 'node:http';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { HoptraceError } from '../../common/errors';

/** Opens one connection to the collector (one per request: `Connection: close`). */
export type Connector = () => Duplex;

export interface StreamFetchLimits {
  /** From sending the request to the reply's last byte. */
  timeoutMs: number;
  /** The longest reply body kept. */
  maxReplyBytes: number;
}

/** TLS over a connection, trusting only `ca`, checking the certificate names `servername`. */
export function withTls(open: Connector, ca: Buffer, servername: string): Connector {
  return () => {
    const raw = open();
    const tls = tlsConnect({ socket: raw, ca, servername });
    // The TLS socket does not always take the stream under it down with it.
    tls.once('close', () => raw.destroy());
    return tls;
  };
}

export function streamFetch(open: Connector, limits: StreamFetchLimits): typeof fetch {
  const f = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const headers: Record<string, string> = {};
    const given = init.headers ?? {};
    for (const [k, v] of given instanceof Headers
      ? given.entries()
      : Object.entries(given as Record<string, string>))
      headers[k] = v;
    const body = typeof init.body === 'string' ? init.body : undefined;
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const signal = init.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      let conn: Duplex | undefined;
      let settled = false;
      const done = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const fail = (cause: unknown): void => {
        if (!done()) return;
        req.destroy();
        conn?.destroy();
        reject(new TypeError('fetch failed', { cause }));
      };
      const timer = setTimeout(() => {
        fail(new Error(`no reply within ${limits.timeoutMs / 1000} s`));
      }, limits.timeoutMs);
      const onAbort = (): void => {
        fail(signal?.reason ?? new Error('aborted'));
      };
      const tooLong = (): HoptraceError =>
        new HoptraceError(
          'COLLECTOR_BAD_RESPONSE',
          `the reply to ${init.method ?? 'GET'} ${url.pathname} is longer than ${limits.maxReplyBytes} bytes`,
          { where: url.host, hint: 'check the port-forward reaches the hoptrace collector' },
        );
      const req = request(
        {
          method: init.method ?? 'GET',
          host: url.hostname,
          path: `${url.pathname}${url.search}`,
          headers: { ...headers, host: url.host, connection: 'close' },
          createConnection: () => {
            conn = open();
            return conn;
          },
        },
        (res) => {
          const declared = Number(res.headers['content-length'] ?? 0);
          if (declared > limits.maxReplyBytes) {
            fail(tooLong());
            return;
          }
          const chunks: Buffer[] = [];
          let length = 0;
          res.on('data', (c: Buffer) => {
            length += c.length;
            if (length > limits.maxReplyBytes) fail(tooLong());
            else chunks.push(c);
          });
          res.on('error', (e) => {
            fail(e);
          });
          res.on('end', () => {
            if (!done()) return;
            const status = res.statusCode ?? 0;
            const h = new Headers();
            for (const [k, v] of Object.entries(res.headers)) {
              if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
            }
            const empty = status === 204 || status === 304 || init.method === 'HEAD';
            resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers: h }));
          });
        },
      );
      req.on('error', (e) => {
        fail(e);
      });
      if (signal?.aborted === true) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      req.end(body);
    });
  };
  return f;
}

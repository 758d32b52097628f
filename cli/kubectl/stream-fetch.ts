/**
 * A `fetch` over connections that a function opens (here: port-forwards to the collector pod,
 * with TLS on top), so CollectorClient and `hoptrace capture` run unchanged over them. Only what
 * those clients use: a string or URL, method, plain-object headers, a string body; the whole reply
 * is read. A connection failure rejects like undici's fetch (TypeError with the cause), which
 * CollectorClient maps to COLLECTOR_UNREACHABLE.
 */
import { request } from 'node:http';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';

/** Opens one connection to the collector (one per request: `Connection: close`). */
export type Connector = () => Duplex;

/** TLS over a connection, trusting only `ca`, checking the certificate names `servername`. */
export function withTls(open: Connector, ca: Buffer, servername: string): Connector {
  return () => tlsConnect({ socket: open(), ca, servername });
}

export function streamFetch(open: Connector): typeof fetch {
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
    return new Promise<Response>((resolve, reject) => {
      const req = request(
        {
          method: init.method ?? 'GET',
          host: url.hostname,
          path: `${url.pathname}${url.search}`,
          headers: { ...headers, host: url.host, connection: 'close' },
          createConnection: () => open(),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (e) => {
            reject(new TypeError('fetch failed', { cause: e }));
          });
          res.on('end', () => {
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
        reject(new TypeError('fetch failed', { cause: e }));
      });
      req.end(body);
    });
  };
  return f;
}

/**
 * A `fetch` over node's http client, for the two peers the plugin reads: the collector, over
 * connections that a function opens (port-forwards to its pod, with TLS on top), so CollectorClient
 * and `hoptrace capture` run unchanged over them; and the Kubernetes API server, through the
 * http.Agent client-node builds for each request (its CA, client certificate, proxy-url), for the
 * API clients of cluster.ts (api-http.ts). Only what those clients use: a string or URL, method,
 * plain-object headers, a string body, a signal; the whole reply is read. A connection failure
 * rejects like undici's fetch (TypeError with the cause), which CollectorClient maps to
 * COLLECTOR_UNREACHABLE.
 *
 * Every request ends: past `timeoutMs` (from the request to the reply's last byte), or when the
 * caller's signal aborts, the request and its connection are destroyed (the port-forward's
 * WebSocket with it) and the fetch rejects; a reply longer than `maxReplyBytes` is cut off the
 * same way, and so is one whose status no fetch Response can carry (outside 200-599), the cause
 * the peer's bad-reply error (COLLECTOR_BAD_RESPONSE unless `badReply` says otherwise) rather than
 * a reply held in memory or a RangeError thrown from a socket callback.
 */
import {
  request as httpRequest,
  type Agent,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { HoptraceError } from '../../common/errors';

/** Opens one connection to the collector (one per request: `Connection: close`). */
export type Connector = () => Duplex;

/**
 * How a request reaches its server: a connection a function opens (a port-forward), or an
 * http.Agent that opens it (client-node's for the API server).
 */
export type Route = Connector | Agent;

/**
 * The error of a reply the fetch will not hand on: `problem` says what is wrong with it (`is longer
 * than N bytes`, `has HTTP status N`).
 */
export type BadReply = (problem: string, method: string, url: URL) => HoptraceError;

export interface StreamFetchLimits {
  /** From sending the request to the reply's last byte. */
  timeoutMs: number;
  /** The longest reply body kept. */
  maxReplyBytes: number;
}

/** The collector's: COLLECTOR_BAD_RESPONSE naming the request, through the port-forward. */
const collectorBadReply: BadReply = (problem, method, url) =>
  new HoptraceError('COLLECTOR_BAD_RESPONSE', `the reply to ${method} ${url.pathname} ${problem}`, {
    where: url.host,
    hint: 'check the port-forward reaches the hoptrace collector',
  });

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

/** What a request sends (streamRequest): fetch's RequestInit, reduced to what the clients use. */
export interface StreamInit {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
  signal?: AbortSignal | undefined;
}

/** A reply read whole, under the cap. */
export interface WholeReply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * One request along `route`, its reply read whole; rejects with the cause (the socket's error, the
 * deadline, the signal's reason, `badReply`'s error), the request and its connection destroyed.
 */
export function streamRequest(
  route: Route,
  limits: StreamFetchLimits,
  badReply: BadReply = collectorBadReply,
): (url: URL, init: StreamInit) => Promise<WholeReply> {
  return (url, init) => {
    const { method, signal, body } = init;
    const headers: Record<string, string> = { ...init.headers };
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    return new Promise<WholeReply>((resolve, reject) => {
      let conn: Duplex | undefined;
      let settled = false;
      const done = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const fail = (cause: Error): void => {
        if (!done()) return;
        req.destroy();
        conn?.destroy();
        reject(cause);
      };
      const timer = setTimeout(() => {
        fail(new Error(`no reply within ${limits.timeoutMs / 1000} s`));
      }, limits.timeoutMs);
      const onAbort = (): void => {
        const reason: unknown = signal?.reason;
        fail(reason instanceof Error ? reason : new Error('aborted', { cause: reason }));
      };
      const onResponse = (res: IncomingMessage): void => {
        const status = res.statusCode ?? 0;
        // Not an HTTP status a fetch Response can carry (a peer may send any three digits).
        if (status < 200 || status > 599) {
          fail(badReply(`has HTTP status ${status}`, method, url));
          return;
        }
        const tooLong = (): HoptraceError =>
          badReply(`is longer than ${limits.maxReplyBytes} bytes`, method, url);
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
          if (done()) resolve({ status, headers: res.headers, body: Buffer.concat(chunks) });
        });
      };
      const options = {
        method,
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, host: url.host, connection: 'close' },
      };
      const req =
        typeof route === 'function'
          ? httpRequest(
              {
                ...options,
                host: url.hostname,
                createConnection: () => {
                  conn = route();
                  return conn;
                },
              },
              onResponse,
            )
          : (url.protocol === 'https:' ? httpsRequest : httpRequest)(
              {
                ...options,
                protocol: url.protocol,
                // A URL writes an IPv6 host in brackets; the resolver takes it without.
                hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
                port: url.port,
                agent: route,
              },
              onResponse,
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
}

/** streamRequest as a `fetch` (what CollectorClient and `hoptrace capture` take). */
export function streamFetch(
  route: Route,
  limits: StreamFetchLimits,
  badReply: BadReply = collectorBadReply,
): typeof fetch {
  const send = streamRequest(route, limits, badReply);
  const f = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const headers: Record<string, string> = {};
    const given = init.headers ?? {};
    for (const [k, v] of given instanceof Headers
      ? given.entries()
      : Object.entries(given as Record<string, string>))
      headers[k] = v;
    const method = init.method ?? 'GET';
    let reply: WholeReply;
    try {
      reply = await send(url, {
        method,
        headers,
        body: typeof init.body === 'string' ? init.body : undefined,
        signal: init.signal ?? undefined,
      });
    } catch (cause) {
      throw new TypeError('fetch failed', { cause });
    }
    const h = new Headers();
    for (const [k, v] of Object.entries(reply.headers)) {
      if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
    }
    // The statuses a Response may not have a body for (null body statuses, Fetch §2.2.3).
    const empty =
      reply.status === 204 || reply.status === 205 || reply.status === 304 || method === 'HEAD';
    return new Response(empty ? null : reply.body, { status: reply.status, headers: h });
  };
  return f;
}

/**
 * One HTTP request whose reply is read whole, under a deadline and a length cap: the transport the
 * kubectl plugin sends its requests to the collector with (over a port-forward,
 * cli/kubectl/stream-fetch.ts), and that both the plugin's and the collector's Kubernetes clients
 * send theirs to the API server with (through the http.Agent client-node builds for each request,
 * collector/k8s/api-http.ts). Only what those clients use: a URL, method, plain-object headers, a
 * string body, a signal.
 *
 * Every request ends: past `timeoutMs` (from the request to the reply's last byte), or when the
 * caller's signal aborts, the request and its connection are destroyed (a port-forward's WebSocket
 * with it) and the request rejects; a reply longer than `maxReplyBytes` is cut off the same way,
 * and so is one whose status no fetch Response can carry (outside 200-599), the cause the peer's
 * bad-reply error (`badReply`) rather than a reply held in memory or a RangeError thrown from a
 * socket callback.
 */
import {
  request as httpRequest,
  type Agent,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import type { HoptraceError } from './errors';

/** Opens one connection to the server (one per request: `Connection: close`). */
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
  badReply: BadReply,
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

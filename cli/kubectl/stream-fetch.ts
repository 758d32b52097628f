/**
 * A `fetch` over node's http client, for the collector as the plugin reads it: over connections
 * that a function opens (port-forwards to its pod, with TLS on top), so CollectorClient and
 * `hoptrace capture` run unchanged over them. Each request goes through streamRequest
 * (common/stream-request.ts): a deadline, a reply cap, a status a Response can carry, else the
 * request and its connection are destroyed. A connection failure rejects like undici's fetch
 * (TypeError with the cause), which CollectorClient maps to COLLECTOR_UNREACHABLE; a reply the
 * transport refuses is COLLECTOR_BAD_RESPONSE unless `badReply` says otherwise.
 */
import { connect as tlsConnect } from 'node:tls';
import { HoptraceError } from '../../common/errors';
import {
  streamRequest,
  type BadReply,
  type Connector,
  type Route,
  type StreamFetchLimits,
  type WholeReply,
} from '../../common/stream-request';

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

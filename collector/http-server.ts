/**
 * The collector's one HTTP(S) server, which carries the API and the agents' WebSocket upgrades,
 * with the bounds Node leaves open: without them 150 requests trickling their bodies a byte every
 * 2 s held their sockets for minutes (adversarial review F8; Node's defaults are 60 s for headers,
 * 300 s for a request, 120 s for a TLS handshake, checked every 30 s, and no connection cap).
 *
 * The API has no long-lived request: bodies are at most 1 MiB, no event stream, no long poll. One
 * answer streams — a bundle as one archive (collector/bundle-archive.ts), sent as the client reads
 * it — and these timeouts do not cut it: Node's request timeout ends once the request has arrived.
 * An upgraded connection is no longer a request to Node, so the agents'
 * WebSockets — and an upgrade waiting for its authentication — are not cut by these timeouts
 * (test/unit/http-server.test.ts checks it); their liveness is the hub's heartbeat.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { HoptraceError } from '../common/errors';
import type { CollectorLogger } from './logger';

export interface HttpLimits {
  /** A request's headers must have arrived this long after it started (else 408, closed). */
  headersTimeoutMs: number;
  /** A whole request, body included, must have arrived this long after it started. */
  requestTimeoutMs: number;
  /** How often Node looks for requests past those timeouts. */
  checkIntervalMs: number;
  /** A TLS handshake must be done this long after the connection opened (HTTPS only). */
  handshakeTimeoutMs: number;
  /** Open connections at most, the agents' WebSockets included; more are closed at once. */
  maxConnections: number;
}

export const HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  // 1 MiB in 30 s is 35 KB/s: any client that means it is far faster.
  requestTimeoutMs: 30_000,
  // Node's 30 s let a request run up to 40 s past its headers timeout.
  checkIntervalMs: 1_000,
  handshakeTimeoutMs: 10_000,
  // One per agent (a 5,000-node cluster is 5,000) plus API clients, with room.
  maxConnections: 10_000,
};

export interface CollectorServerOptions {
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** PEM CA of agents' client certificates: every peer is asked for one, none is required. */
  clientCa?: string | Buffer;
  limits?: Partial<HttpLimits>;
  logger?: CollectorLogger;
}

/** How often a refused connection is logged at most (a flood must not flood the log). */
const DROP_LOG_EVERY_MS = 60_000;

/**
 * The server, not listening yet. A TLS certificate or key that is not PEM of a matching pair is
 * COLLECTOR_TLS.
 */
export function createCollectorServer(opts: CollectorServerOptions = {}): Server {
  const L = { ...HTTP_LIMITS, ...opts.limits };
  const common = {
    headersTimeout: L.headersTimeoutMs,
    requestTimeout: L.requestTimeoutMs,
    connectionsCheckingInterval: L.checkIntervalMs,
  };
  let server: Server;
  if (opts.tls === undefined) server = createHttpServer(common);
  else {
    const { cert, key } = opts.tls;
    try {
      server = createHttpsServer({
        ...common,
        cert,
        key,
        handshakeTimeout: L.handshakeTimeoutMs,
        ...(opts.clientCa !== undefined
          ? { ca: opts.clientCa, requestCert: true, rejectUnauthorized: false }
          : {}),
      });
    } catch (e) {
      throw new HoptraceError('COLLECTOR_TLS', e instanceof Error ? e.message : String(e), {
        where: '--tls-cert/--tls-key',
        hint: 'give a PEM certificate and its PEM private key (openssl x509 -in CERT -noout checks one)',
      });
    }
  }
  server.maxConnections = L.maxConnections;
  let dropped = 0;
  let loggedAtMs = -Infinity;
  server.on('drop', () => {
    dropped++;
    const now = Date.now();
    if (now - loggedAtMs < DROP_LOG_EVERY_MS) return;
    loggedAtMs = now;
    opts.logger?.warn(
      { code: 'COLLECTOR_BUSY', count: dropped },
      `${L.maxConnections} connections are open, the most the collector holds: new ones are closed at once (${dropped} so far)`,
    );
  });
  return server;
}

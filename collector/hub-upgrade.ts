/**
 * HTTP upgrade helpers of the agent hub: who is asking, and refusing before a WebSocket exists.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { hostPort } from '../common/endpoint';

const REASONS: Record<number, string> = {
  401: 'Unauthorized',
  404: 'Not Found',
  503: 'Service Unavailable',
};

/** `address:port` of the peer, for logs (never the token or any header value). */
export function remoteOf(req: IncomingMessage): string {
  const s = req.socket;
  return hostPort(s.remoteAddress ?? '?', s.remotePort ?? 0);
}

/** Answers an upgrade request with a plain HTTP status and closes the socket. */
export function refuseUpgrade(socket: Duplex, status: number): void {
  const reason = REASONS[status] ?? 'Error';
  const extra = status === 401 ? 'WWW-Authenticate: Bearer realm="hoptrace"\r\n' : '';
  // A peer that resets the socket first must not crash the collector.
  socket.on('error', () => undefined);
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\n${extra}Connection: close\r\nContent-Length: 0\r\n\r\n`,
  );
}

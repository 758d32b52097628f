/**
 * The proxy pod: a tiny L7 reverse proxy that terminates the client's TCP connection and opens its
 * own to the backend, rewriting the request the way nginx's proxy_pass does by default: same
 * method and path, but `HTTP/1.0` upstream, `Host` set to the upstream, `Connection: close`,
 * hop-by-hop headers dropped, `X-Forwarded-For` appended. Only the request line, the path and the
 * application's own headers survive — the usual case for correlating across a proxy.
 *
 * Usage: node proxy.js --host 10.244.2.9 --port 8080 --upstream 10.244.2.5:8080
 */
import { connect, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';

const MAX_HEAD = 16 * 1024;
// RFC 9110 §7.6.1: connection-specific fields a proxy must not forward.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

/** Rewrites a client request head for the upstream; null when it is not an HTTP request. */
export function rewriteRequestHead(
  head: string,
  upstreamHost: string,
  clientAddr: string,
): string | null {
  const lines = head.split('\r\n');
  const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? '');
  if (m === null) return null;
  const out = [`${m[1]} ${m[2]} HTTP/1.0`, `Host: ${upstreamHost}`, 'Connection: close'];
  let xff: string | null = null;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (HOP_BY_HOP.has(name)) continue;
    if (name === 'x-forwarded-for') {
      xff = line.slice(colon + 1).trim();
      continue;
    }
    out.push(line);
  }
  out.push(`X-Forwarded-For: ${xff === null ? clientAddr : `${xff}, ${clientAddr}`}`);
  return out.join('\r\n') + '\r\n\r\n';
}

function handle(client: Socket, upstream: { host: string; port: number }): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) {
      if (head.length > MAX_HEAD) client.destroy();
      return;
    }
    client.off('data', onData);
    client.pause();
    const clientAddr = client.remoteAddress ?? '';
    const rewritten = rewriteRequestHead(
      head.subarray(0, end).toString('latin1'),
      `${upstream.host}:${upstream.port}`,
      clientAddr,
    );
    if (rewritten === null) {
      client.end('HTTP/1.0 400 Bad Request\r\nConnection: close\r\n\r\n');
      return;
    }
    const up = connect({ host: upstream.host, port: upstream.port }, () => {
      process.stdout.write(
        JSON.stringify({
          event: 'proxied',
          src: clientAddr,
          sport: client.remotePort,
          upstreamLocal: `${up.localAddress}:${up.localPort}`,
          requestLine: rewritten.split('\r\n')[0],
        }) + '\n',
      );
      up.write(rewritten, 'latin1');
      const rest = head.subarray(end + 4);
      if (rest.length > 0) up.write(rest);
      client.pipe(up);
      client.resume();
    });
    up.pipe(client);
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
  };
  client.on('data', onData);
  client.on('error', () => client.destroy());
}

function main(): void {
  const { values } = parseArgs({
    options: { host: { type: 'string' }, port: { type: 'string' }, upstream: { type: 'string' } },
  });
  const port = Number(values.port);
  const m = /^([\d.]+):(\d+)$/.exec(values.upstream ?? '');
  if (values.host === undefined || !Number.isInteger(port) || m === null) {
    process.stderr.write('usage: proxy --host IP --port N --upstream IP:PORT\n');
    process.exit(2);
  }
  const upstream = { host: m[1]!, port: Number(m[2]) };
  const server = createServer((c) => {
    handle(c, upstream);
  });
  server.listen({ host: values.host, port }, () => {
    process.stdout.write(JSON.stringify({ event: 'listening', host: values.host, port }) + '\n');
  });
  const stop = (): void => {
    server.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (require.main === module) main();

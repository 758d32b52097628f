/**
 * The backend: a tiny HTTP server run inside the backend pod namespace. It binds the addresses it
 * is given (never 0.0.0.0 or ::; a dual-stack pod passes its IPv4 and its IPv6 address, one
 * listener each, so an IPv4 client is never seen as ::ffff:a.b.c.d), performs no name lookups,
 * and answers every request with the source it observed, so the lab can compare the
 * application's view with the captures; `?bytes=N` (at most 16 MiB) pads the answer with N bytes
 * written 1,000 at a time without Nagle, so the reply is thousands of segments rather than a few
 * 64 KiB GSO ones (the per-flow counters' lab). One JSON line on stdout per event:
 * {"event":"listening"} once every address is bound, {"event":"request",...} per request.
 *
 * Usage: node http-server.js --host 10.244.2.5 [--host fd00:10:244:2::5] --port 8080
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';

function handle(req: IncomingMessage, res: ServerResponse): void {
  const src = req.socket.remoteAddress ?? '';
  const sport = req.socket.remotePort ?? 0;
  process.stdout.write(
    JSON.stringify({
      event: 'request',
      src,
      sport,
      method: req.method,
      url: req.url,
      httpVersion: req.httpVersion,
      headers: req.headers,
    }) + '\n',
  );
  res.writeHead(200, { 'content-type': 'text/plain' });
  const pad = Number(/[?&]bytes=(\d{1,8})(?:&|$)/.exec(req.url ?? '')?.[1] ?? 0);
  if (pad === 0 || pad > 16 << 20) {
    res.end(`observed-src=${src}:${sport}\n`);
    return;
  }
  res.write(`observed-src=${src}:${sport}\n`);
  req.socket.setNoDelay(true);
  const chunk = Buffer.alloc(1000, 'x');
  let left = pad;
  const more = (): void => {
    while (left > 0) {
      const n = Math.min(left, chunk.length);
      left -= n;
      // One segment per write: wait for the socket to take each one before the next.
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        res.once('drain', more);
        return;
      }
      if (left > 0) {
        setImmediate(more);
        return;
      }
    }
    res.end();
  };
  more();
}

function listen(host: string, port: number): Promise<Server> {
  const server = createServer(handle);
  // The keep-alive scenario holds its connection idle while the captures are armed (seconds,
  // live); Node's default of 5 s would close it first.
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { host: { type: 'string', multiple: true }, port: { type: 'string' } },
  });
  const hosts = values.host ?? [];
  const port = Number(values.port);
  if (hosts.length === 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
    process.stderr.write('usage: http-server --host IP [--host IP ...] --port N\n');
    process.exit(2);
  }
  const servers = await Promise.all(hosts.map((h) => listen(h, port)));
  process.stdout.write(JSON.stringify({ event: 'listening', hosts, port }) + '\n');
  const stop = (): void => {
    for (const server of servers) {
      server.close();
      server.closeAllConnections();
    }
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (require.main === module)
  main().catch((e: unknown) => {
    process.stderr.write(`http-server: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });

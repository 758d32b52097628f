/**
 * The backend: a tiny HTTP server run inside the backend pod namespace. It binds the address it
 * is given (never 0.0.0.0), performs no name lookups, and answers every request with the source
 * it observed, so the lab can compare the application's view with the captures. One JSON line on
 * stdout per event: {"event":"listening"} once bound, {"event":"request",...} per request.
 *
 * Usage: node http-server.js --host 10.244.2.5 --port 8080
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

function main(): void {
  const { values } = parseArgs({ options: { host: { type: 'string' }, port: { type: 'string' } } });
  const host = values.host;
  const port = Number(values.port);
  if (host === undefined || !Number.isInteger(port) || port <= 0 || port > 65535) {
    process.stderr.write('usage: http-server --host IP --port N\n');
    process.exit(2);
  }
  const server = createServer((req, res) => {
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
    res.end(`observed-src=${src}:${sport}\n`);
  });
  // The keep-alive scenario holds its connection idle while the captures are armed (seconds,
  // live); Node's default of 5 s would close it first.
  server.keepAliveTimeout = 60_000;
  server.listen({ host, port }, () => {
    process.stdout.write(JSON.stringify({ event: 'listening', host, port }) + '\n');
  });
  const stop = (): void => {
    server.close();
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (require.main === module) main();

/**
 * The collector's server bounds (adversarial review F8: 150 requests trickling their bodies held
 * their sockets 55 s and more): headers and whole requests within their timeouts, TLS handshakes
 * too, a connection cap; and the agents' WebSockets, which must stay open, are not cut by them.
 * Every wait is for a condition (a socket closed), bounded, never a sleep.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import { createApi } from '../../collector/http';
import { createCollectorServer, HTTP_LIMITS } from '../../collector/http-server';
import { silentLogger, type CollectorLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { FakeHub } from './collector-fixtures';
import { eventually } from './eventually';
import { RawAgent, TOKEN, closeServer, hello } from './transport-fixtures';

/** Small limits, so a test waits fractions of a second for them. */
const QUICK = { headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 50 };

async function listening(t: { teardown(fn: () => Promise<void>): void }, s: Server) {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    s.closeAllConnections();
    await closeServer(s);
  });
  return (s.address() as AddressInfo).port;
}

/** A raw socket that records whether it was closed (`gone`) and what it was answered. */
function rawSocket(port: number): Socket & { gone: boolean; answer: string } {
  const s = Object.assign(connect(port, '127.0.0.1'), { gone: false, answer: '' });
  s.on('error', () => undefined);
  s.on('data', (d: Buffer) => (s.answer += d.toString('latin1')));
  s.on('close', () => (s.gone = true));
  return s;
}

/** A self-signed certificate and its key (openssl, EC: quick). */
function selfSigned(t: { teardown(fn: () => void): void }): { cert: Buffer; key: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-srv-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
  args.push('-nodes', '-keyout', 'k.pem', '-out', 'c.pem', '-days', '1', '-subj', '/CN=127.0.0.1');
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  return { cert: readFileSync(join(dir, 'c.pem')), key: readFileSync(join(dir, 'k.pem')) };
}

/** Writes `text` a byte every `ms` until the socket closes. */
function trickle(s: Socket & { gone: boolean }, text: string, ms = 20): void {
  let i = 0;
  const timer = setInterval(() => {
    if (s.gone || i >= text.length) clearInterval(timer);
    else s.write(text.charAt(i++));
  }, ms);
}

void t.test('the limits are set on the server (http and https)', (t) => {
  const http = createCollectorServer();
  t.equal(http.headersTimeout, 10_000);
  t.equal(http.requestTimeout, 30_000);
  t.equal(http.maxConnections, 10_000);
  t.equal(
    (http as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval,
    1_000,
  );
  t.same(HTTP_LIMITS, {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    checkIntervalMs: 1_000,
    handshakeTimeoutMs: 10_000,
    maxConnections: 10_000,
  });
  const tls = selfSigned(t);
  const https = createCollectorServer({ tls });
  t.equal(https.headersTimeout, 10_000);
  t.equal(https.requestTimeout, 30_000);
  t.equal(https.maxConnections, 10_000);
  t.throws(() => createCollectorServer({ tls: { cert: 'x', key: 'y' } }), {
    code: 'COLLECTOR_TLS',
  });
  t.end();
});

void t.test(
  'trickled headers and a trickled body are answered 408 and closed; a connection that never finishes its TLS handshake is closed',
  async (t) => {
    const store = new CaptureStore({
      dir: mkdtempSync(join(tmpdir(), 'hoptrace-srv-')),
      fsync: false,
    });
    t.teardown(() => {
      rmSync(store.dir, { recursive: true, force: true });
    });
    const sessions = new SessionManager({ hub: new FakeHub(), store, logger: silentLogger() });
    t.teardown(() => sessions.close());
    const server = createCollectorServer({ limits: QUICK });
    const api = createApi({ sessions, tokens: [TOKEN], collectorId: 'c', logger: silentLogger() });
    server.on('request', api.listener());
    const port = await listening(t, server);

    const headers = rawSocket(port);
    trickle(headers, `GET /v1/captures HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(10_000)}`);
    const body = rawSocket(port);
    body.write(
      `POST /v1/captures HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n',
    );
    trickle(body, `{"points": "${'a'.repeat(10_000)}`);
    t.ok(await eventually(() => headers.gone && body.gone, 15_000), 'both closed');
    t.match(headers.answer, /^HTTP\/1\.1 408 /);
    t.match(body.answer, /^HTTP\/1\.1 408 /);

    const tls = selfSigned(t);
    // Only the handshake timeout is short here: it alone can close the silent socket.
    const https = createCollectorServer({
      tls,
      limits: { handshakeTimeoutMs: 300, headersTimeoutMs: 600_000, requestTimeoutMs: 600_000 },
    });
    const silent = rawSocket(await listening(t, https));
    t.ok(await eventually(() => silent.gone, 15_000), 'no handshake: closed');
  },
);

void t.test("the agents' WebSockets outlive the request timeout", async (t) => {
  const server = createCollectorServer({ limits: QUICK });
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
    heartbeatMs: 60_000,
  });
  hub.onMessage(() => Promise.resolve());
  t.teardown(() => hub.close());
  const port = await listening(t, server);
  const agent = RawAgent.connect(port, TOKEN);
  t.ok(await agent.opened);
  agent.send({ seq: 0, kind: 'hello', hello: hello('a1') });
  await agent.next((e) => e.kind === 'helloAck');
  // A request that starts after the agent connected is cut by the request timeout: once it is,
  // the agent's connection has been open longer than that, through at least one check.
  const slow = rawSocket(port);
  slow.write(`POST /v1/captures HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n`);
  trickle(slow, 'a'.repeat(100), 50);
  t.ok(await eventually(() => slow.gone, 15_000), 'the request was cut');
  t.equal(agent.closeCode, undefined, 'the agent was not');
  agent.send({ seq: 0, kind: 'heartbeat', heartbeat: { unixMs: 1 } });
  await agent.next((e) => e.kind === 'heartbeat');
  t.pass('and it is still served');
  agent.ws.close();
  await agent.closed;
});

void t.test('past maxConnections a new connection is closed at once, and logged', async (t) => {
  const warned: string[] = [];
  const logger: CollectorLogger = {
    ...silentLogger(),
    warn: (f, msg) => warned.push(`${f.code ?? ''} ${msg}`),
  };
  const server = createCollectorServer({ limits: { maxConnections: 2 }, logger });
  server.on('request', (_req, res) => res.end('ok'));
  const port = await listening(t, server);
  let accepted = 0;
  server.on('connection', () => accepted++);
  const held = [rawSocket(port), rawSocket(port)];
  // The server counts a connection once it accepted it: wait until both are.
  t.ok(await eventually(() => accepted === 2, 10_000), 'two accepted');
  const third = rawSocket(port);
  t.ok(await eventually(() => third.gone, 10_000), 'the third is closed');
  t.equal(third.answer, '', 'without an answer');
  t.notOk(
    held.some((s) => s.gone),
    'the others stay',
  );
  t.match(
    warned.join('\n'),
    /^COLLECTOR_BUSY 2 connections are open, the most the collector holds/,
  );
  for (const s of held) s.destroy();
});

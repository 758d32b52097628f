/**
 * A doctor request or conntrack query that breaks one of the agent's bounds
 * (common/command-limits.ts) over loopback: the real hub, sessions and HTTP API, a real agent link
 * serving requests. The agent answers it refused (DOCTOR_BAD_REQUEST) instead of dropping it, and
 * the collector's caller hears that at once — POST /v1/doctor is a 400 with the code and why —
 * where the old agent said nothing and the caller waited out the collector's 5 s timeout to
 * report DOCTOR_NO_AGENT ("did not answer in time").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CollectorLink } from '../../agent/link/collector-link';
import { serveRequests } from '../../agent/requests';
import { createApi } from '../../collector/http';
import { createAgentHub } from '../../collector/hub';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { TOKEN, closeServer, hello, listen } from './transport-fixtures';
import { bodyText } from './api-body';

/** Well under the collector's timeout for agent requests (sessions.ts: 5 s). */
const AT_ONCE_MS = 2000;

async function rig(t: { teardown(fn: () => Promise<void> | void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-refusal-'));
  const { server, port } = await listen();
  const store = new CaptureStore({ dir, fsync: false });
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: store.collectorId,
    lastSeqStore: store.lastSeq,
  });
  const sessions = new SessionManager({ hub, store, logger: silentLogger() });
  sessions.start();
  const api = createApi({ sessions, tokens: [TOKEN], collectorId: 'c', logger: silentLogger() });
  let asked = 0;
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    hello: () => hello('agent-a'),
    backoff: { minMs: 10, maxMs: 50 },
  });
  link.onRequest(
    serveRequests({
      answer: () => {
        asked++;
        return Promise.reject(new Error('a request within bounds is not part of this test'));
      },
      frames: () => Promise.reject(new Error('no frames here')),
      reply: (body) => {
        link.reply(body);
      },
      agentId: () => 'agent-a',
      node: 'node-agent-a',
    }),
  );
  await new Promise<void>((resolve) => {
    link.onConnected(() => {
      resolve();
    });
  });
  t.teardown(async () => {
    await link.close();
    await sessions.close();
    await hub.close();
    await closeServer(server);
    rmSync(dir, { recursive: true, force: true });
  });
  return { api, sessions, asked: () => asked };
}

void t.test(
  'POST /v1/doctor with a target past the agent bound: 400 DOCTOR_BAD_REQUEST at once',
  async (t) => {
    const r = await rig(t);
    // A namespace path of 5,000 characters on the agent's node (the agent takes 4,096).
    const long = `node-agent-a/${'/x'.repeat(2500)}`;
    const started = performance.now();
    const res = await r.api.handle({
      method: 'POST',
      url: '/v1/doctor',
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ vpn: long, backend: 'node-agent-a//run/netns/web' }),
    });
    const took = performance.now() - started;
    t.ok(took < AT_ONCE_MS, `answered in ${took.toFixed(0)} ms`);
    t.equal(res.status, 400);
    const body = JSON.parse(bodyText(res.body)) as {
      error: { code: string; message: string; where: string };
    };
    t.equal(body.error.code, 'DOCTOR_BAD_REQUEST');
    t.equal(body.error.where, 'agent agent-a');
    t.match(
      body.error.message,
      /^DOCTOR_BAD_REQUEST: agent agent-a: refused the doctor request: node-agent-a: the doctorRequest was refused whole, nothing read: the doctorRequest body's target is 5000 long \(at most 4096\)/,
    );
    t.equal(r.asked(), 0, 'nothing was read');
  },
);

void t.test(
  'a conntrack query past the agent bound is refused at once (conntrack-remote.ts lists it among the errors)',
  async (t) => {
    const r = await rig(t);
    const tuple = { src: '10.90.0.42', dst: '10.244.2.5', sport: 40000, dport: 80 };
    const started = performance.now();
    const err = await r.sessions.requests
      .conntrack(
        'agent-a',
        'c1',
        [{ name: 'node', target: '', routeTo: [] }],
        Array.from({ length: 257 }, () => tuple),
      )
      .then(
        () => null,
        (e: unknown) => e,
      );
    t.ok(performance.now() - started < AT_ONCE_MS, 'at once');
    t.match(err, {
      code: 'DOCTOR_BAD_REQUEST',
      message: /refused the conntrack query: .*tuples is 257 long \(at most 256\)/,
    });
    t.equal(r.asked(), 0, 'nothing was read');
  },
);

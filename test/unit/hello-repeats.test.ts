/**
 * Hellos repeated on one connection (security review: 3,000 back-to-back hellos made a running
 * repro re-plan 3,000 times, 1,407 attachments and 3,025 capture commands). A real agent sends one
 * when its namespaces change (refreshHello): that still updates the collector at once; onAgent is
 * told only of a change, at most once a second.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import type { AgentHub, AgentInfo } from '../../collector/hub-types';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { REPEAT_HELLO_EMIT_MS } from '../../collector/hello-repeats';
import type { Hello, NamespaceInfo } from '../../common/wire';
import { RawAgent, Signal, TOKEN, closeServer, hello, listen } from './transport-fixtures';
import { NETNS_REPRO, twoNodeHub } from './collector-fixtures';

const pod = (ip: string, path = '/run/netns/vpn'): NamespaceInfo => ({
  path,
  inode: 7,
  addresses: [ip],
  interfaces: ['tun0', 'eth0'],
});

/** A hub on a fresh port whose onAgent calls are recorded. */
async function rig(t: { teardown(fn: () => Promise<void>): void }) {
  const { server, port } = await listen();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  hub.onMessage(() => Promise.resolve());
  const told: AgentInfo[] = [];
  const seen = new Signal();
  hub.onAgent((a) => {
    told.push(a);
    seen.notify();
  });
  t.teardown(async () => {
    await hub.close();
    await closeServer(server);
  });
  return { hub, port, told, seen };
}

/** Starts a collector's sessions on `hub` and POSTs REPRO to its API: the answer's status. */
async function startRepro(
  t: { teardown(fn: () => Promise<void>): void },
  hub: AgentHub,
): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-rehello-'));
  const store = new CaptureStore({ dir, fsync: false });
  const sessions = new SessionManager({ hub, store, logger: silentLogger() });
  sessions.start();
  t.teardown(async () => {
    await sessions.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const api = createApi({ sessions, tokens: [TOKEN], collectorId: 'c', logger: silentLogger() });
  const created = await api.handle({
    method: 'POST',
    url: '/v1/repros',
    headers: { authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(NETNS_REPRO),
  });
  return created.status;
}

/** Says `first`, then each of `more`, on one connection; resolves once every one is acknowledged. */
async function helloes(port: number, first: Hello, more: Hello[]): Promise<RawAgent> {
  const a = RawAgent.connect(port, TOKEN);
  await a.opened;
  for (const h of [first, ...more]) a.send({ seq: 0, kind: 'hello', hello: h });
  await a.signal.wait(
    () =>
      a.closeCode !== undefined ||
      a.received.filter((e) => e.kind === 'helloAck').length === more.length + 1,
  );
  return a;
}

void t.test('a hello repeated unchanged is acknowledged and not told again', async (t) => {
  const { port, told } = await rig(t);
  const h = { ...hello('agent-1'), namespaces: [pod('10.244.1.10')] };
  const same = Array.from({ length: 200 }, (_, i) => ({ ...h, spoolFirstSeq: i + 1 }));
  const a = await helloes(port, h, same);
  t.equal(a.closeCode, undefined, 'the connection stays');
  t.equal(told.length, 1, 'told once, at the first hello (each repeat was told before)');
  a.ws.close();
  await a.closed;
});

void t.test(
  'changed hellos: the collector knows at once, onAgent is told at most once a second',
  async (t) => {
    const { hub, port, told, seen } = await rig(t);
    const h = hello('agent-1');
    const changes = Array.from({ length: 200 }, (_, i) => ({
      ...h,
      namespaces: i % 2 === 0 ? [pod(`10.244.1.${(i % 250) + 2}`)] : [],
    }));
    const last = { ...h, namespaces: [pod('10.244.9.9')] };
    const started = Date.now();
    const a = await helloes(port, h, [...changes, last]);
    t.equal(a.closeCode, undefined, 'the connection stays');
    const addresses = (info: AgentInfo | undefined): string[] =>
      info?.hello.namespaces.flatMap((n) => n.addresses) ?? [];
    t.same(
      addresses(hub.agents().find((x) => x.agentId === 'agent-1')),
      ['10.244.9.9'],
      'GET /v1/agents and new captures see the last hello at once',
    );
    await seen.wait(() => addresses(told.at(-1)).includes('10.244.9.9'));
    const elapsed = Date.now() - started;
    t.ok(
      told.length <= 2 + Math.floor(elapsed / REPEAT_HELLO_EMIT_MS),
      `${told.length} tellings for 202 hellos in ${elapsed} ms`,
    );
    t.ok(told.length >= 2, 'the change is told');
    a.ws.close();
    await a.closed;
  },
);

void t.test("back-to-back changed hellos do not churn a running repro's attachments", async (t) => {
  const { hub, port } = await rig(t);
  const backendHello = {
    ...hello('agent-b'),
    namespaces: [pod('10.244.2.5', '/run/netns/web')],
  };
  const backend = await helloes(port, backendHello, []);
  const vpnHello = { ...hello('agent-v'), namespaces: [pod('10.244.1.10')] };
  const vpn = await helloes(port, vpnHello, []);
  t.equal(await startRepro(t, hub), 201, 'the repro runs');
  const captures = (): number => vpn.received.filter((e) => e.kind === 'capture').length;
  await vpn.signal.wait(() => captures() === 2);
  // The workload's pod comes and goes with a new IP each time, 200 times back to back: each
  // hello a new incarnation to attach to, as the review's agent sent.
  const started = Date.now();
  for (let i = 0; i < 200; i++) {
    const namespaces = i % 2 === 0 ? [] : [pod(`10.244.1.${(i % 250) + 2}`)];
    vpn.send({ seq: 0, kind: 'hello', hello: { ...vpnHello, namespaces } });
  }
  await vpn.signal.wait(() => vpn.received.filter((e) => e.kind === 'helloAck').length === 201);
  // Whatever a telling put in motion is sent by the next turns of the loop.
  await new Promise((r) => setTimeout(r, 50));
  const elapsed = Date.now() - started;
  // At most one telling a second plus the repro's own once-a-second check: each an attach.
  const most = 2 + 2 * (2 + 2 * Math.ceil(elapsed / REPEAT_HELLO_EMIT_MS));
  t.ok(
    captures() <= most,
    `${captures()} capture commands after 200 hellos in ${elapsed} ms (at most ${most})`,
  );
  vpn.ws.close();
  backend.ws.close();
  await Promise.all([vpn.closed, backend.closed]);
});

void t.test(
  'a repro re-planned with the same namespaces neither detaches nor attaches',
  async (t) => {
    const hub = twoNodeHub();
    t.equal(await startRepro(t, hub), 201, 'the repro runs');
    const sent = hub.sent.length;
    for (let i = 0; i < 100; i++) hub.setConnected('agent-vpn', true);
    t.same(hub.sent.slice(sent), [], 'no stop, no capture');
  },
);

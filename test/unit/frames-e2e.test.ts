/**
 * Evidence frames agent ↔ collector over loopback: two agents (CollectorLink + AgentRuntime with
 * a RetentionStore; each capture a replay of a real capture file that retains what it delivers,
 * frame for frame, as a live capture does), the real hub, sessions and data directory. The
 * capture resolves; the collector asks each point's agent for the matched connection's frames and
 * stores them; store.loadFrames gives the file's own bytes back. Then the bound: one agent's
 * retention fills after two frames, the other agent retains nothing — every frame it cannot give
 * is named with its reason, and none is invented.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { RetentionStoreOptions } from '../../agent/capture/retention-store';
import { createAgentHub } from '../../collector/hub';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore, type PointFrames } from '../../collector/store';
import { reportInputs } from '../../collector/capture-reports';
import { framesToFetch } from '../../collector/frames-fetch';
import { openCaptureFile } from '../../offline/pcap-file';
import { PCAPS } from './corpus';
import { startReplayAgent } from './replay-agent';
import { Signal, TOKEN, closeServer, listen } from './transport-fixtures';

const PCAP = join(PCAPS, 'zeek_http-get.pcap');
const POINTS = [
  { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
  { name: 'egress', target: '10.244.1.10', iface: 'eth0' },
  { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
];

function tempDir(t: { teardown(fn: () => void): void }, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `hoptrace-${name}-`));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** One agent: its link, its runtime; captures replay PCAP and retain as they go. */
function startAgent(
  t: { teardown(fn: () => Promise<void>): void },
  port: number,
  agentId: string,
  node: string,
  ns: { path: string; address: string },
  retention: (Partial<RetentionStoreOptions> & { dir: string }) | null,
): void {
  startReplayAgent(t, {
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    agentId,
    node,
    ns,
    pcap: PCAP,
    retention,
  });
}

/** A collector on loopback with its data directory; resolves once both agents are connected. */
async function collector(
  t: { teardown(fn: () => Promise<void>): void },
  dir: string,
): Promise<{
  sessions: SessionManager;
  store: CaptureStore;
  port: number;
  stored: Signal;
  frames: string[];
}> {
  const { server, port } = await listen();
  const store = new CaptureStore({ dir, fsync: false });
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: store.collectorId,
    lastSeqStore: store.lastSeq,
  });
  const sessions = new SessionManager({ hub, store, logger: silentLogger(), debounceMs: 0 });
  sessions.start();
  const stored = new Signal();
  const frames: string[] = [];
  sessions.onFrames((id, point) => {
    frames.push(`${id}/${point}`);
    stored.notify();
  });
  t.teardown(async () => {
    await sessions.close();
    await hub.close();
    await closeServer(server);
  });
  return { sessions, store, port, stored, frames };
}

async function waitAgents(sessions: SessionManager, n: number): Promise<void> {
  while (sessions.agents().filter((a) => a.connected).length < n)
    await new Promise((r) => setTimeout(r, 10));
}

const FILE = [...openCaptureFile(PCAP).frames()].map((f) => ({
  frame: f.index,
  tsNs: f.tsNs,
  origLen: f.wireLength,
  data: Buffer.from(f.data),
}));

/** The flow frames the final analysis names per point (what the collector asked for). */
function wanted(store: CaptureStore, id: string): Map<string, number[]> {
  const inputs = reportInputs(store.readReportInputs(id));
  if (inputs === null) throw new Error('no report inputs');
  return framesToFetch(inputs.result);
}

function framesOf(store: CaptureStore, id: string, point: string): PointFrames {
  const f = store.loadFrames(id, point);
  if (f === null) throw new Error(`no frames stored for ${point}`);
  return f;
}

async function capture(c: Awaited<ReturnType<typeof collector>>): Promise<string> {
  const view = await c.sessions.create({
    points: POINTS,
    client: '141.142.228.5',
    timeoutMs: 20_000,
    stopOnFirstMatch: true,
    settleMs: 300,
  });
  await c.stored.wait(() => POINTS.every((p) => c.frames.includes(`${view.id}/${p.name}`)));
  return view.id;
}

void t.test(
  'the verdict is final: every point’s matched frames are fetched and stored',
  async (t) => {
    const c = await collector(t, tempDir(t, 'frames-data'));
    const ret = tempDir(t, 'frames-ret');
    startAgent(
      t,
      c.port,
      'agent-vpn',
      'vpn-node',
      { path: '/run/netns/vpn', address: '10.244.1.10' },
      { dir: ret },
    );
    startAgent(
      t,
      c.port,
      'agent-backend',
      'backend-node',
      { path: '/run/netns/web', address: '10.244.2.5' },
      { dir: ret },
    );
    await waitAgents(c.sessions, 2);
    const id = await capture(c);
    const v = c.sessions.get(id);
    t.equal(v?.state, 'resolved');
    t.equal(v?.verdict?.layer, 'preserved');
    const want = wanted(c.store, id);
    for (const p of POINTS) {
      const f = framesOf(c.store, id, p.name);
      const frames = want.get(p.name) ?? [];
      t.ok(frames.length > 3, `${p.name}: the matched connection has packets (${frames.length})`);
      t.equal(f.linktype, 1, 'Ethernet, from the retention file');
      t.equal(f.snaplen, 256);
      t.same(f.missing, [], `${p.name}: nothing missing`);
      t.same(
        f.frames.map((x) => [x.frame, x.tsNs, x.origLen, Buffer.from(x.bytes)]),
        frames.map((n) => {
          const orig = FILE[n - 1];
          if (orig === undefined) throw new Error(`frame ${n} is not in the file`);
          return [n, orig.tsNs, orig.origLen, orig.data.subarray(0, 256)];
        }),
        `${p.name}: the file's own bytes (cut to 256), timestamps and lengths`,
      );
    }
    t.equal(c.store.loadFrames(id, 'nosuch'), null, 'no such point: nothing');

    // The bundle's evidence.pcapng, built from those frames, read back by tshark.
    const until = Date.now() + 10_000;
    while (c.sessions.bundleFile(id, 'evidence.pcapng') === null && Date.now() < until)
      await new Promise((r) => setTimeout(r, 20));
    const pcapng = c.sessions.bundleFile(id, 'evidence.pcapng');
    t.ok(pcapng !== null, 'evidence.pcapng written once the frames are stored');
    const file = join(tempDir(t, 'frames-ev'), 'evidence.pcapng');
    writeFileSync(file, pcapng ?? Buffer.alloc(0));
    const ts = spawnSync(
      'tshark',
      [
        '-r',
        file,
        '-T',
        'fields',
        '-e',
        'frame.interface_name',
        '-e',
        'frame.cap_len',
        '-e',
        'frame.len',
        '-e',
        'frame.comment',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(ts.status, 0, `tshark reads it (${ts.error?.message ?? ts.stderr})`);
    const rows = ts.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    const total = [...want.values()].reduce((n, f) => n + f.length, 0);
    t.equal(rows.length, total, 'every matched frame of every point');
    t.same(
      [...new Set(rows.map((r) => r[0]))].sort(),
      POINTS.map(
        (p) => `${p.name}@${p.name === 'backend' ? 'backend-node' : 'vpn-node'}/${p.iface}`,
      ).sort(),
      'one interface per point, point@node/iface',
    );
    t.ok(
      rows.every((r) => Number(r[1]) <= Number(r[2])),
      'headers only: never more than the frame',
    );
    t.ok(
      rows.every((r) => /^\w+ frame \d+: (request|reply) .*matched by/.test(r[3] ?? '')),
      'comments',
    );
    const doc = JSON.parse(c.sessions.bundleFile(id, 'report.json')?.toString() ?? '{}') as {
      evidence?: { packets: number; headersOnly: boolean; problems: unknown[] };
    };
    t.equal(doc.evidence?.packets, total, 'report.json says what the file holds');
    t.same(doc.evidence?.problems, []);
    t.match(c.sessions.bundleFile(id, 'report.md')?.toString(), /## Packets \(evidence\.pcapng\)/);
  },
);

void t.test(
  'retention full at one agent, none at the other: every missing frame is named',
  async (t) => {
    const c = await collector(t, tempDir(t, 'frames-data'));
    const ret = tempDir(t, 'frames-ret');
    // The pcap header (24 bytes) and two records of at most 16 + 256 bytes.
    startAgent(
      t,
      c.port,
      'agent-vpn',
      'vpn-node',
      { path: '/run/netns/vpn', address: '10.244.1.10' },
      { dir: ret, maxBytes: 24 + 2 * (16 + 256) },
    );
    startAgent(
      t,
      c.port,
      'agent-backend',
      'backend-node',
      { path: '/run/netns/web', address: '10.244.2.5' },
      null,
    );
    await waitAgents(c.sessions, 2);
    const id = await capture(c);
    const want = wanted(c.store, id);
    for (const name of ['decap', 'egress']) {
      const f = framesOf(c.store, id, name);
      const frames = want.get(name) ?? [];
      const retained = f.frames.map((x) => x.frame);
      const lost = f.missing.map((m) => m.frame);
      t.ok(
        Math.max(0, ...retained) < Math.min(...lost),
        `${name}: frames kept before the bound (${retained.join(',')}), none after (${lost.join(',')})`,
      );
      t.same(
        [...retained, ...lost].sort((a, b) => a - b),
        frames,
        `${name}: every frame asked for is either there or named`,
      );
      t.ok(f.missing.length > 0);
      t.ok(
        f.retained > 0 && f.retentionDropped > 0,
        `counted: ${f.retained} kept, ${f.retentionDropped} not`,
      );
      t.ok(
        f.missing.every((m) => m.reason === 'RETENTION_FULL'),
        `${name}: RETENTION_FULL (${[...new Set(f.missing.map((m) => m.reason))].join(',')})`,
      );
      for (const x of f.frames)
        t.same(Buffer.from(x.bytes), FILE[x.frame - 1]?.data.subarray(0, 256));
    }
    const b = framesOf(c.store, id, 'backend');
    t.same(b.frames, [], 'the backend agent retained nothing');
    t.equal(b.linktype, null, 'and claims no link type');
    t.same(
      b.missing,
      (want.get('backend') ?? []).map((frame) => ({ frame, reason: 'RETENTION_OFF' })),
    );
  },
);

/**
 * What a peer may claim, and what the store keeps once (issue 17, medium): a point is spoken for
 * only by the agent it was armed on; a batch resent after a crash is stored once (batch marks and
 * the points' applied seq); finished captures' events stay on disk until asked for; a pod IP that
 * the API knows is captured on the pod's node whatever other agents claim.
 */
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { encodeEventRecords, parseEventFile } from '../../collector/event-file';
import type { ApiInventory } from '../../collector/inventory-live';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import type { PacketEvent } from '../../common/event';
import { status, twoNodeHub, type FakeHub } from './collector-fixtures';
import { event } from './transport-fixtures';
import type { CaptureView } from '../../collector/capture-views';
import { replayCaptureFile } from '../../offline/replay';
import { PCAPS } from './corpus';

const replay = (point: string): Iterable<PacketEvent> =>
  replayCaptureFile(join(PCAPS, 'zeek_http-get.pcap'), {
    point,
    node: point === 'backend' ? 'backend-node' : 'vpn-node',
    iface: 'eth0',
  });

const POINTS = [
  { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
  { name: 'egress', target: '10.244.1.10', iface: 'eth0' },
  { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
];
/** A live capture of the three points that runs until the test is done with it. */
const LIVE = { points: POINTS, timeoutMs: 60_000, stopOnFirstMatch: false, settleMs: 60_000 };

function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-claims-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

const hubWithAgents = twoNodeHub;

function manager(
  t: { teardown(fn: () => Promise<void>): void },
  dir: string,
  hub: FakeHub,
  cluster?: ApiInventory,
  maxHeldEvents?: number,
): SessionManager {
  const store = new CaptureStore({ dir, fsync: false });
  const sessions = new SessionManager({
    hub,
    store,
    logger: silentLogger(),
    debounceMs: 0,
    ...(maxHeldEvents === undefined ? {} : { maxHeldEvents }),
    ...(cluster
      ? {
          cluster: {
            inventory: () => cluster,
            refresh: () => Promise.resolve(),
            resolvePodTarget: () => Promise.reject(new Error('not used')),
          },
        }
      : {}),
  });
  sessions.start();
  t.teardown(() => sessions.close());
  return sessions;
}

const evs = (first: number, n: number): PacketEvent[] =>
  Array.from({ length: n }, (_, i) => event(first + i));

void t.test(
  'a point that failed to arm accepts nothing from any agent (issue 17, medium)',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const sessions = manager(t, dir, hub);
    const c = await sessions.create({
      points: [...POINTS.slice(0, 2), { ...POINTS[2]!, node: 'gone-node' }],
      timeoutMs: 60_000,
      stopOnFirstMatch: false,
      settleMs: 60_000,
    });
    t.equal(c.points[2]?.state, 'failed', 'the backend point has no agent');
    // Another agent (connected, with the shared token) speaks for the failed point.
    for (const msg of [
      { kind: 'status', status: status(c.id, 'backend', 'capturing', { packets: 99 }) },
      { kind: 'lost', lost: { captureId: c.id, point: 'backend', count: 7, reason: 'x' } },
      { kind: 'events', batch: { captureId: c.id, point: 'backend', events: evs(1, 3) } },
    ] as const)
      await hub.deliver({ agentId: 'agent-backend', ...msg });
    const p = sessions.get(c.id)?.points[2];
    t.same([p?.state, p?.events, p?.packets, p?.lost], ['failed', 0, 0, 0], 'nothing applied');
    t.throws(
      () => readFileSync(join(dir, 'captures', c.id, 'events-backend.pb')),
      'nothing written',
    );
  },
);

void t.test(
  "an agent's events speak for the point it was armed on: another node, point or interface claimed is rewritten, in memory and on disk",
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const logged: string[] = [];
    const logger = {
      ...silentLogger(),
      warn: (fields: object, msg: string) => {
        logged.push(`${JSON.stringify(fields)} ${msg}`);
      },
    };
    const store = new CaptureStore({ dir, fsync: false });
    const sessions = new SessionManager({ hub, store, logger, debounceMs: 0 });
    sessions.start();
    t.teardown(() => sessions.close());
    const c = await sessions.create(LIVE);
    // The backend agent (backend-node) says its packets were seen on vpn-node's tun0 at decap: the
    // clock analysis would then take decap's and backend's clocks as one.
    const forged = evs(1, 3).map((e) => ({
      ...e,
      point: 'decap',
      node: 'vpn-node',
      iface: 'tun0',
    }));
    const honest = evs(4, 1).map((e) => ({
      ...e,
      point: 'backend',
      node: 'backend-node',
      iface: 'eth0',
    }));
    for (const events of [forged, honest, forged])
      await hub.deliver({
        kind: 'events',
        agentId: 'agent-backend',
        batch: { captureId: c.id, point: 'backend', events },
      });
    const file = parseEventFile(readFileSync(join(dir, 'captures', c.id, 'events-backend.pb')));
    t.same(
      [...new Set(file.events.map((e) => `${e.point}@${e.node}:${e.iface}`))],
      ['backend@backend-node:eth0'],
      'stored as the armed point on its node and interface',
    );
    t.equal(file.events.length, 7, 'every event kept');
    t.equal(sessions.get(c.id)?.points[2]?.events, 7);
    t.notOk(
      existsSync(join(dir, 'captures', c.id, 'events-decap.pb')),
      'nothing went to the point it claimed',
    );
    const warned = logged.filter((l) => l.includes('WIRE_UNEXPECTED'));
    t.equal(warned.length, 1, 'said once per point');
    t.match(warned[0] ?? '', /claim point "decap", node "vpn-node", interface "tun0"/);
  },
);

void t.test(
  "an agent's flow counters saturate: the capture's stored record still loads after a restart",
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const first = manager(t, dir, hub);
    const c = await first.create(LIVE);
    const huge = Number.MAX_SAFE_INTEGER;
    const folds = evs(1, 2).map((e) => ({
      ...e,
      fold: { packets: huge, bytes: huge, lastTsNs: e.tsNs, lastFrame: e.frame },
    }));
    await hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: c.id, point: 'decap', events: [...folds, ...evs(3, 2)] },
    });
    const p = first.get(c.id)?.points[0];
    t.equal(p?.packets, huge, 'the count saturates');
    await first.close();
    const second = manager(t, dir, hubWithAgents());
    const again = second.get(c.id);
    t.ok(again, 'the capture loads again, not quarantined');
    t.equal(again?.points[0]?.packets, huge);
  },
);

void t.test(
  'kill -9 between storing a batch and recording its seq: the resend is stored once',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const first = manager(t, dir, hub);
    const c = await first.create(LIVE);
    await hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      seq: 10,
      batch: { captureId: c.id, point: 'decap', events: evs(1, 5) },
    });
    await hub.deliver({
      kind: 'lost',
      agentId: 'agent-vpn',
      seq: 11,
      lost: { captureId: c.id, point: 'decap', count: 3, reason: 'queue' },
    });
    await first.close();
    // The hub's agents.json never got seqs 10 and 11 (the crash): the agent resends both, and more.
    const hub2 = hubWithAgents();
    const second = manager(t, dir, hub2);
    const batch = { captureId: c.id, point: 'decap', events: evs(1, 5) };
    await hub2.deliver({ kind: 'events', agentId: 'agent-vpn', seq: 10, batch });
    await hub2.deliver({
      kind: 'lost',
      agentId: 'agent-vpn',
      seq: 11,
      lost: { captureId: c.id, point: 'decap', count: 3, reason: 'queue' },
    });
    await hub2.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      seq: 12,
      batch: { ...batch, events: evs(6, 2) },
    });
    const p = second.get(c.id)?.points[0];
    t.equal(p?.events, 7, 'each event once');
    t.equal(p?.lost, 3, 'the lost count once');
    const file = parseEventFile(readFileSync(join(dir, 'captures', c.id, 'events-decap.pb')));
    t.same(
      file.events.map((e) => e.frame),
      [1, 2, 3, 4, 5, 6, 7],
      'and on disk',
    );
    t.equal(file.lastSeq, 12);
  },
);

void t.test('an event file holding a batch twice (older versions) is read with it once', (t) => {
  const bytes = Buffer.concat([
    encodeEventRecords(evs(1, 3), 7),
    encodeEventRecords(evs(1, 3), 7),
    encodeEventRecords(evs(4, 1), 8),
    encodeEventRecords(evs(9, 1)), // an unmarked batch (files before marks): kept
  ]);
  const parsed = parseEventFile(bytes);
  t.same(
    parsed.events.map((e) => e.frame),
    [1, 2, 3, 4, 9],
  );
  t.equal(parsed.duplicateEvents, 3);
  t.equal(parsed.lastSeq, 8);
  t.equal(parsed.corruptRecords, 0);
  t.end();
});

void t.test(
  "at start only unfinished captures' events are read; a finished one's on demand",
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const first = manager(t, dir, hub);
    const spec = { points: POINTS, timeoutMs: 60_000, stopOnFirstMatch: false, settleMs: 60_000 };
    const done = await first.create(spec);
    const open = await first.create(spec);
    for (const c of [done, open])
      await hub.deliver({
        kind: 'events',
        agentId: 'agent-vpn',
        batch: { captureId: c.id, point: 'decap', events: evs(1, 4) },
      });
    first.cancel(done.id);
    await first.close();
    // A torn tail on the finished capture's file: it is not even read, so not repaired either.
    const doneFile = join(dir, 'captures', done.id, 'events-decap.pb');
    appendFileSync(doneFile, Buffer.from([0x48, 0x54, 0x45]));
    const before = readFileSync(doneFile).length;

    const store = new CaptureStore({ dir, fsync: false });
    const loaded = store.loadSessions();
    const byId = new Map(loaded.map((l) => [l.record.id, l]));
    t.equal(byId.get(done.id)?.events.size, 0, 'the finished capture: no events in memory');
    t.equal(byId.get(done.id)?.record.points[0]?.events, 4, 'its counts from session.json');
    t.equal(byId.get(open.id)?.events.get('decap')?.length, 4, 'the unfinished one: loaded');
    t.equal(readFileSync(doneFile).length, before, 'the finished file is left as it is');
    t.equal(store.loadEvents(done.id, ['decap']).get('decap')?.length, 4, 'read when asked');
    await store.close();
  },
);

void t.test(
  'a pod IP the API knows is captured on its node, whatever another agent claims',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    // A third agent claims the backend pod's IP in its hello.
    hub.addAgent(
      'agent-liar',
      'other-node',
      ['192.168.50.3'],
      [{ path: '/run/netns/x', inode: 3, addresses: ['10.244.2.5'], interfaces: ['eth0'] }],
    );
    const without = manager(t, tmp(t), hub);
    const spec = { points: POINTS, timeoutMs: 60_000, stopOnFirstMatch: false, settleMs: 60_000 };
    const a = await without.create(spec);
    t.equal(a.points[2]?.error?.code, 'TARGET_AMBIGUOUS', 'without the API: ambiguous, honestly');
    const cluster: ApiInventory = {
      nodes: { 'backend-node': ['192.168.50.2'] },
      pods: {
        'web/web-1': { ip: '10.244.2.5', node: 'backend-node', role: 'backend', labeled: true },
      },
    };
    const withApi = manager(t, dir, hub, cluster);
    const b = await withApi.create(spec);
    t.equal(b.points[2]?.state, 'arming');
    t.equal(hub.captures().filter((x) => x.captureId === b.id && x.point === 'backend').length, 1);
    t.equal(
      hub.sent.find(
        (s) =>
          s.cmd.kind === 'capture' &&
          s.cmd.capture.captureId === b.id &&
          s.cmd.capture.point === 'backend',
      )?.agentId,
      'agent-backend',
      "the pod's node's agent",
    );
  },
);

void t.test(
  'an agent killed after its capture started: never a drop, the verdict says which agent went away',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const sessions = manager(t, dir, hub);
    const c = await sessions.create({
      points: POINTS,
      timeoutMs: 60_000,
      stopOnFirstMatch: true,
      settleMs: 60_000,
    });
    for (const p of POINTS)
      await hub.deliver({
        kind: 'status',
        agentId: p.name === 'backend' ? 'agent-backend' : 'agent-vpn',
        status: status(c.id, p.name, 'capturing'),
      });
    // The backend's agent dies; the request reached decap and egress only.
    hub.setConnected('agent-backend', false);
    for (const point of ['decap', 'egress'])
      await hub.deliver({
        kind: 'events',
        agentId: 'agent-vpn',
        batch: { captureId: c.id, point, events: [...replay(point)] },
      });
    const done = new Promise<CaptureView>((resolve) => {
      sessions.onChange((v) => {
        if (v.id === c.id && v.state === 'cancelled') resolve(v);
      });
    });
    sessions.cancel(c.id);
    const v = await done;
    t.equal(v.verdict?.layer, 'unknown', 'not "dropped": the backend could not see');
    t.match(
      v.verdict?.reason,
      /agent agent-backend disconnected at \d{4}-\d\d-\d\dT.*and did not come back/,
    );
  },
);

void t.test(
  'an agent that comes back during the capture vouches for its point again',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const sessions = manager(t, dir, hub);
    const c = await sessions.create({
      points: POINTS,
      timeoutMs: 60_000,
      stopOnFirstMatch: true,
      settleMs: 60_000,
    });
    hub.setConnected('agent-backend', false);
    hub.setConnected('agent-backend', true);
    for (const p of POINTS) {
      const agentId = p.name === 'backend' ? 'agent-backend' : 'agent-vpn';
      await hub.deliver({ kind: 'status', agentId, status: status(c.id, p.name, 'capturing') });
      await hub.deliver({
        kind: 'events',
        agentId,
        batch: { captureId: c.id, point: p.name, events: [...replay(p.name)] },
      });
    }
    await new Promise((r) => setTimeout(r, 50));
    const v = sessions.get(c.id);
    t.equal(v?.state, 'resolved');
    t.equal(v?.verdict?.layer, 'preserved');
  },
);

void t.test('a stored capture the store cannot read is moved aside; the others load', async (t) => {
  const dir = tmp(t);
  const hub = hubWithAgents();
  const first = manager(t, dir, hub);
  const spec = { points: POINTS, timeoutMs: 60_000, stopOnFirstMatch: false, settleMs: 60_000 };
  const bad = await first.create(spec);
  const good = await first.create(spec);
  await first.close();
  const evFile = join(dir, 'captures', bad.id, 'events-decap.pb');
  rmSync(evFile, { force: true });
  mkdirSync(evFile); // EISDIR when read
  const store = new CaptureStore({ dir, fsync: false });
  const ids = store.loadSessions().map((l) => l.record.id);
  t.same(ids, [good.id]);
  t.match(store.quarantined[0]?.reason, /EISDIR|directory/);
  await store.close();
});

void t.test(
  'an event file cut or emptied by hand is named at start, not silently shorter',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const first = manager(t, dir, hub);
    const c = await first.create(LIVE);
    await hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: c.id, point: 'decap', events: evs(1, 6) },
    });
    await first.close();
    writeFileSync(join(dir, 'captures', c.id, 'events-decap.pb'), '');
    const store = new CaptureStore({ dir, fsync: false });
    const [loaded] = store.loadSessions();
    t.same(loaded?.repaired, [
      { point: 'decap', tornBytes: 0, corruptRecords: 0, duplicateEvents: 0, missingEvents: 6 },
    ]);
    await store.close();
  },
);

void t.test(
  'live captures together hold a bounded number of events; the rest are stored, counted, named',
  async (t) => {
    const dir = tmp(t);
    const hub = hubWithAgents();
    const sessions = manager(t, dir, hub, undefined, 10);
    const spec = { points: POINTS, timeoutMs: 60_000, stopOnFirstMatch: false, settleMs: 60_000 };
    const a = await sessions.create(spec);
    const b = await sessions.create(spec);
    const batch = (id: string) => ({ captureId: id, point: 'decap', events: evs(1, 8) });
    await hub.deliver({ kind: 'events', agentId: 'agent-vpn', batch: batch(a.id) });
    await hub.deliver({ kind: 'events', agentId: 'agent-vpn', batch: batch(b.id) });
    const store = parseEventFile(readFileSync(join(dir, 'captures', b.id, 'events-decap.pb')));
    t.equal(store.events.length, 8, 'every event is stored');
    const done = new Promise<CaptureView>((resolve) => {
      sessions.onChange((v) => {
        if (v.id === b.id && v.state === 'cancelled') resolve(v);
      });
    });
    sessions.cancel(b.id);
    const v = await done;
    t.match(v.verdict?.reason, /not analysed: 6 at decap/, 'the 6 past the bound are named');
  },
);

/**
 * core/repro/probe-cache.ts against judging every probe afresh (repro-core analyzeProbeFlows, as
 * the view did before the cache): random interleavings of probes, their packets delivered in
 * pieces and late (inside old probes' windows, after a re-attachment), noise on the probes' ports
 * and times, loss spans, attachments and decap coverage that change, and the inventory; the rows
 * and flows must be the same (deep and as JSON) after every step. Events are bounded small, so
 * the oldest are let go as they are in a long repro.
 */
import { isDeepStrictEqual } from 'node:util';
import t from 'tap';
import type { PacketEvent } from '../../common/event';
import type { Inventory } from '../../common/inventory';
import { PointEventLog } from '../../core/repro/event-log';
import { addLossSpan } from '../../core/repro/loss-spans';
import { ProbeCache } from '../../core/repro/probe-cache';
import {
  analyzeProbeFlows,
  type LossSpan,
  type ProbeFlow,
  type ProbeReport,
  type ServedBy,
  type TaggedEvent,
  type TimelineRow,
} from '../../core/repro/repro-core';
import {
  ACK,
  ADDR,
  CLIENT,
  DIRECT,
  INVENTORY,
  MS,
  SYN,
  T0,
  exchange,
  tcp,
} from './fixtures-events';

/** mulberry32: the same interleavings for the same seed. */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return Math.floor((((x ^ (x >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const INVENTORIES: Inventory[] = [
  INVENTORY,
  {
    ...INVENTORY,
    pods: { 'web-1': { ip: ADDR.backendPod, node: 'backend-node', role: 'backend' } },
  },
  {
    ...INVENTORY,
    nodes: { ...INVENTORY.nodes, 'vpn-node': [ADDR.vpnNodeUplink, ADDR.vpnNodeBridge, CLIENT] },
  },
];

const POD = (epoch: number, node = 'vpn-node'): ServedBy => ({
  epoch,
  name: `vpn-pod-${epoch}`,
  ip: `10.244.1.${10 + epoch}`,
  node,
});

interface World {
  logs: PointEventLog[];
  probes: ProbeReport[];
  epochs: Map<number, ServedBy>;
  epoch: number;
  coverage: { fromMs: number; toMs: number | null }[];
  losses: LossSpan[];
  inventory: Inventory;
  /** Pieces of the probes' packets not delivered yet: [point index, events]. */
  pending: [number, TaggedEvent[]][];
}

function newWorld(max: number): World {
  return {
    logs: ['decap', 'egress', 'backend'].map((n) => new PointEventLog(n, max)),
    probes: [],
    epochs: new Map([[1, POD(1)]]),
    epoch: 1,
    coverage: [{ fromMs: Number(T0 / MS) - 1000, toMs: null }],
    losses: [],
    inventory: INVENTORY,
    pending: [],
  };
}

const PHASES = ['full', 'full', 'syn-synack', 'syn-only', 'none'] as const;
const msOf = (ns: bigint): number => Number(ns / MS);

/** A probe, its packets at each point (maybe none) cut into pieces for later delivery. */
function addProbe(w: World, rnd: (n: number) => number): void {
  const i = w.probes.length;
  const at = BigInt(i) * 1500n * MS + BigInt(rnd(400)) * MS;
  // Now and then a port comes round again: a second probe's SYN on an old probe's port.
  const again = w.probes[rnd(w.probes.length)];
  const sport = again !== undefined && rnd(6) === 0 ? again.sport : 40000 + rnd(400);
  const ep = { ...DIRECT, sport };
  const isn = 1000 + i;
  const phases = [0, 1, 2].map(() => PHASES[rnd(PHASES.length)] ?? 'full');
  phases.forEach((phase, p) => {
    if (phase === 'none') return;
    const name = w.logs[p]?.name ?? '';
    const epoch = p === 2 ? 0 : w.epoch;
    const evs = exchange(name, ep, { isn, at: at + BigInt(p) * MS, phase, synRetransmits: rnd(2) });
    const tagged = evs.map((event) => ({ epoch, event }));
    while (tagged.length > 0) w.pending.push([p, tagged.splice(0, 1 + rnd(4))]);
  });
  const ok = phases.every((p) => p === 'full') ? rnd(5) > 0 : rnd(4) === 0;
  const startedAtMs = msOf(T0 + at);
  w.probes.push({
    probeId: `p${i}`,
    sport,
    startedAtMs,
    endedAtMs: startedAtMs + 50 + rnd(3000),
    ok,
    httpCode: ok ? '200' : null,
    error: ok ? null : rnd(2) === 0 ? 'curl exit 7: could not connect' : 'curl exit 28: timeout',
  });
}

/** A stray packet on a probe's port or time, at any point, of any attachment. */
function noise(w: World, rnd: (n: number) => number): void {
  const p = rnd(3);
  const last = BigInt(w.probes.length) * 1500n * MS;
  const ts = T0 - 2000n * MS + BigInt(rnd(Number(last / MS) + 9000)) * MS;
  const ep = {
    src: rnd(3) === 0 ? '10.90.0.99' : CLIENT,
    sport: w.probes[rnd(w.probes.length)]?.sport ?? 40000,
    dst: ADDR.backendPod,
    dport: rnd(2) === 0 ? 8080 : 40000 + rnd(400),
  };
  const flags = rnd(3) === 0 ? SYN : ACK;
  const event = tcp(w.logs[p]?.name ?? '', ep, { flags, seq: rnd(1e6), ts, frame: 9000 + rnd(99) });
  w.logs[p]?.add([{ epoch: rnd(w.epoch + 1), event }]);
}

/** Packets a capture lost, some time in the run. */
function loss(w: World, rnd: (n: number) => number): void {
  const fromMs = msOf(T0) - 2000 + rnd(w.probes.length * 1500 + 4000);
  const epoch = rnd(w.epoch + 1);
  addLossSpan(
    w.losses,
    {
      capture: epoch === 0 ? 'backend' : `decap (vpn-pod-${epoch})`,
      epoch,
      fromMs,
      toMs: fromMs + rnd(2500),
      kernelDrops: rnd(3),
      queueDrops: rnd(2),
      lost: 1 + rnd(4),
    },
    6,
  );
}

/** The pod is rescheduled: decap/egress follow the next one, their coverage with them. */
function reattach(w: World, rnd: (n: number) => number): void {
  const nowMs = msOf(T0) + w.probes.length * 1500;
  const open = w.coverage.at(-1);
  if (open !== undefined && open.toMs === null) open.toMs = nowMs;
  w.epoch++;
  w.epochs.set(w.epoch, POD(w.epoch));
  if (rnd(3) > 0) w.coverage.push({ fromMs: nowMs + rnd(2000), toMs: null });
}

type View = { rows: TimelineRow[]; flows: ProbeFlow[] };

/** What the view served before the cache: every probe judged now. */
function uncached(w: World): View {
  const points = w.logs;
  const flows: ProbeFlow[] = [];
  const rows = w.probes.map((probe) => {
    const one = analyzeProbeFlows({
      probe,
      client: CLIENT,
      points,
      epochs: w.epochs,
      inventory: w.inventory,
      startMs: w.probes[0]?.startedAtMs ?? 0,
      decapCoverage: w.coverage,
      losses: w.losses,
    });
    flows.push(...one.flows);
    return one.row;
  });
  return { rows, flows };
}

/** As the collector asks: epochs, inventory and coverage built anew for each view. */
function cached(cache: ProbeCache, w: World): View {
  return cache.probes({
    probes: w.probes,
    client: CLIENT,
    points: w.logs,
    epochs: new Map(w.epochs),
    inventory: structuredClone(w.inventory),
    startMs: w.probes[0]?.startedAtMs ?? 0,
    decapCoverage: w.coverage.map((c) => ({ ...c })),
    losses: w.losses,
  });
}

void t.test('cached verdicts are the fresh ones after every step of random runs', (t) => {
  const seen = { verdicts: new Set<string>(), notYet: 0, lossRows: 0, judged: 0, rows: 0 };
  const failures: string[] = [];
  for (let seed = 1; seed <= 8; seed++) {
    const rnd = random(seed);
    const w = newWorld(20 + rnd(40));
    const cache = new ProbeCache();
    for (let step = 0; step < 160 && failures.length < 3; step++) {
      const dice = rnd(100);
      let what: string;
      if (dice < 18 && w.probes.length < 40) {
        what = 'probe';
        addProbe(w, rnd);
      } else if (dice < 50 && w.pending.length > 0) {
        // Any piece, not the oldest: a late one lands inside an old probe's window.
        const [piece] = w.pending.splice(rnd(w.pending.length), 1);
        what = 'packets';
        if (piece !== undefined) w.logs[piece[0]]?.add(piece[1]);
      } else if (dice < 64) {
        what = 'noise';
        noise(w, rnd);
      } else if (dice < 74) {
        what = 'loss';
        loss(w, rnd);
      } else if (dice < 80) {
        what = 'reattach';
        reattach(w, rnd);
      } else if (dice < 84) {
        what = 'coverage';
        const c = w.coverage[rnd(w.coverage.length)];
        if (c !== undefined) c.fromMs += rnd(2) === 0 ? -1500 : 1500;
      } else if (dice < 89) {
        what = 'inventory';
        w.inventory = INVENTORIES[rnd(INVENTORIES.length)] ?? INVENTORY;
      } else if (dice < 93) {
        what = 'pod';
        const e = 1 + rnd(w.epoch);
        w.epochs.set(e, POD(e, rnd(2) === 0 ? 'vpn-node' : 'vpn-node-2'));
      } else what = 'nothing';
      const got = cached(cache, w);
      const want = uncached(w);
      if (what === 'nothing' && cache.judgedLast !== 0)
        failures.push(`seed ${seed} step ${step}: nothing changed, ${cache.judgedLast} judged`);
      if (!isDeepStrictEqual(got, want) || JSON.stringify(got) !== JSON.stringify(want))
        failures.push(`seed ${seed} step ${step} (${what}): the cached view differs`);
      seen.judged += cache.judgedLast;
      seen.rows += got.rows.length;
      for (const r of got.rows) {
        seen.verdicts.add(r.verdict);
        if (r.detail.includes('was not capturing yet')) seen.notYet++;
        if (r.lossesInFlight.length > 0) seen.lossRows++;
      }
      if (cache.size > w.probes.length) failures.push(`seed ${seed}: ${cache.size} entries`);
    }
  }
  t.same(failures, [], 'the cached view is the fresh one at every step');
  // The runs reach what the cache must follow, and it saves work.
  for (const v of ['preserved', 'no-return', 'failed-to-connect', 'not-captured'])
    t.ok(seen.verdicts.has(v), `some probe judged ${v}`);
  t.ok(seen.notYet > 0, 'some probe met a capture not capturing yet');
  t.ok(seen.lossRows > 0, 'some probe had losses in flight');
  t.ok(seen.judged < seen.rows / 3, `judged ${seen.judged} of ${seen.rows} rows served`);
  t.end();
});

void t.test('a late packet inside an old window, and one let go, judge that probe again', (t) => {
  const w = newWorld(40);
  const cache = new ProbeCache();
  const T = msOf(T0);
  const tagged = (epoch: number, evs: PacketEvent[]): TaggedEvent[] =>
    evs.map((event) => ({ epoch, event }));
  // Three probes 10 s apart, through decap and egress; the backend's packets come later.
  for (let i = 0; i < 3; i++) {
    const ep = { ...DIRECT, sport: 40100 + i };
    const at = BigInt(i) * 10_000n * MS;
    w.logs[0]?.add(tagged(1, exchange('decap', ep, { isn: 5 + i, at })));
    w.logs[1]?.add(tagged(1, exchange('egress', ep, { isn: 5 + i, at: at + MS })));
    w.probes.push({
      probeId: `p${i}`,
      sport: ep.sport,
      startedAtMs: T + i * 10_000,
      endedAtMs: T + i * 10_000 + 100,
      ok: true,
      httpCode: '200',
      error: null,
    });
  }
  const before = cached(cache, w);
  t.same(before, uncached(w));
  t.equal(before.rows[1]?.verdict, 'not-captured', before.rows[1]?.detail ?? '');
  t.same(cached(cache, w), before);
  t.equal(cache.judgedLast, 0, 'nothing changed: nothing judged');
  const ep1 = { ...DIRECT, sport: 40101 };
  w.logs[2]?.add(tagged(0, exchange('backend', ep1, { isn: 6, at: 10_002n * MS })));
  const after = cached(cache, w);
  t.same(after, uncached(w));
  t.equal(after.rows[1]?.verdict, 'preserved', 'p1: the packets fell in its window');
  // p2 (SYN at +20 s) sees the backend capturing before its SYN now: no longer 'not capturing
  // yet'. p0 (SYN at 0) does not: as it was.
  t.not(after.rows[2]?.verdict, 'not-captured', after.rows[2]?.detail ?? '');
  t.equal(after.rows[0], before.rows[0], 'p0 as kept');
  t.equal(cache.judgedLast, 2, 'p1 and p2 judged again');
  // Far more than the log keeps: p1's backend packets are let go, its verdict with them.
  for (let i = 0; i < 40; i++)
    w.logs[2]?.add(
      tagged(0, [tcp('backend', DIRECT, { flags: ACK, seq: i, ts: T0 + 90_000n * MS })]),
    );
  const evicted = cached(cache, w);
  t.same(evicted, uncached(w), 'let go: judged again');
  t.equal(evicted.rows[1]?.verdict, 'not-captured');
  t.end();
});

/**
 * The cost of a repro's view (collector/repro-views.ts reproProbes), run by hand:
 * `node --expose-gc dist/bench/repro-view.js [--probes 200,1000] [--events 200000]`. For each count
 * of probes (one a second, each a full exchange at decap, egress and backend) among `--events`
 * events a point of other clients' connections: one view judging every probe afresh (as before
 * core/repro/probe-cache.ts), then through the cache: the first view, one with nothing new, the
 * next probe posted (its packets and a second of traffic with it), a late resend of 10 s of
 * traffic from the middle of the run, a loss span; and the heap the cache keeps. Prints a table.
 */
import { isDeepStrictEqual } from 'node:util';
import { performance } from 'node:perf_hooks';
import type { PacketEvent } from '../common/event';
import type { Inventory } from '../common/inventory';
import { PointEventLog } from '../core/repro/event-log';
import { addLossSpan } from '../core/repro/loss-spans';
import { ProbeCache, type ProbesInput } from '../core/repro/probe-cache';
import {
  analyzeProbeFlows,
  type LossSpan,
  type ProbeReport,
  type TaggedEvent,
} from '../core/repro/repro-core';

const CLIENT = '10.90.0.42';
const BACKEND = '10.244.2.5';
const T0 = 1_700_000_000_000_000_000n;
const MS = 1_000_000n;
const POINTS = ['decap', 'egress', 'backend'] as const;
const INVENTORY: Inventory = {
  nodes: { 'vpn-node': ['192.168.50.1'], 'backend-node': ['192.168.50.2'] },
  pods: {
    'vpn-0': { ip: '10.244.1.10', node: 'vpn-node', role: 'vpn' },
    'web-1': { ip: BACKEND, node: 'backend-node', role: 'backend' },
  },
};

let frame = 0;

/** One TCP connection as `point` sees it: handshake, request, answer, FIN; `ms` apart. */
function connection(point: string, src: string, sport: number, at: bigint): PacketEvent[] {
  const steps: [boolean, number, number][] = [
    [true, 0x02, 0],
    [false, 0x12, 0],
    [true, 0x10, 0],
    [true, 0x18, 78],
    [false, 0x10, 0],
    [false, 0x18, 120],
    [true, 0x11, 0],
  ];
  return steps.map(([out, flags, len], i) => ({
    point,
    node: `${point}-node`,
    iface: 'eth0',
    linktype: 'ethernet',
    tsNs: at + BigInt(i) * MS,
    frame: ++frame,
    outer: null,
    inner: out
      ? { proto: 'tcp', ipProto: 6, src, dst: BACKEND, sport, dport: 8080 }
      : { proto: 'tcp', ipProto: 6, src: BACKEND, dst: src, sport: 8080, dport: sport },
    tunnels: [],
    keys: {
      payloadLength: len,
      tcpFlags: flags,
      tcpSeq: out ? 1000 + sport + i : 5000 + i,
      tcpAck: i === 0 ? 0 : out ? 5001 : 1001 + sport,
      tsVal: 777000 + i,
      ipId: (sport + i) & 0xffff,
    },
    truncated: false,
    wireLength: 54 + len,
  }));
}

/** Other clients' connections in [fromMs, toMs) after T0, at every point, `perPoint` events each. */
function traffic(fromMs: number, toMs: number, perPoint: number, seed: number): TaggedEvent[][] {
  const out: TaggedEvent[][] = POINTS.map(() => []);
  const conns = Math.ceil(perPoint / 7);
  for (let c = 0; c < conns; c++) {
    const at = T0 + BigInt(Math.floor(fromMs + ((toMs - fromMs) * c) / conns)) * MS;
    const src = `10.90.${1 + ((c + seed) % 200)}.${1 + (c % 250)}`;
    const sport = 1024 + ((c * 7919 + seed) % 60000);
    POINTS.forEach((p, i) => {
      for (const event of connection(p, src, sport, at + BigInt(i) * MS))
        out[i]?.push({ epoch: p === 'backend' ? 0 : 1, event });
    });
  }
  return out;
}

interface Run {
  logs: PointEventLog[];
  probes: ProbeReport[];
  losses: LossSpan[];
}

/** Probe `i` (at i s, port 30000 + i) with its packets at every point. */
function postProbe(run: Run, i: number): void {
  const at = T0 + BigInt(i) * 1000n * MS;
  POINTS.forEach((p, k) => {
    const evs = connection(p, CLIENT, 30000 + i, at + BigInt(k) * MS);
    run.logs[k]?.add(evs.map((event) => ({ epoch: p === 'backend' ? 0 : 1, event })));
  });
  const ms = Number(at / MS);
  run.probes.push({
    probeId: `p${i}`,
    sport: 30000 + i,
    startedAtMs: ms,
    endedAtMs: ms + 20,
    ok: true,
    httpCode: '200',
    error: null,
  });
}

function input(run: Run): ProbesInput {
  return {
    probes: run.probes,
    client: CLIENT,
    points: run.logs,
    epochs: new Map([[1, { epoch: 1, name: 'vpn-0', ip: '10.244.1.10', node: 'vpn-node' }]]),
    inventory: INVENTORY,
    startMs: run.probes[0]?.startedAtMs ?? 0,
    decapCoverage: [{ fromMs: Number(T0 / MS) - 1000, toMs: null }],
    losses: run.losses,
  };
}

function uncached(i: ProbesInput): unknown {
  const points = i.points.map((l) => ({ name: l.name, events: l.events }));
  const flows: unknown[] = [];
  const rows = i.probes.map((probe) => {
    const one = analyzeProbeFlows({ ...i, probe, points });
    flows.push(...one.flows);
    return one.row;
  });
  return { rows, flows };
}

function timed<T>(f: () => T): { ms: number; value: T } {
  const t0 = performance.now();
  const value = f();
  return { ms: performance.now() - t0, value };
}

function heapMiB(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return (i < 0 ? undefined : process.argv[i + 1]) ?? fallback;
}

function benchOne(n: number, perPoint: number): string[] {
  const run: Run = {
    logs: POINTS.map((p) => new PointEventLog(p, 500_000)),
    probes: [],
    losses: [],
  };
  // A second of other traffic, then the probe of that second, as the agents would send them.
  const perSecond = Math.ceil(perPoint / n);
  for (let i = 0; i < n; i++) {
    const bg = traffic(i * 1000, (i + 1) * 1000, perSecond, i);
    bg.forEach((evs, k) => run.logs[k]?.add(evs));
    postProbe(run, i);
  }
  const cache = new ProbeCache();
  const lines: string[] = [];
  const row = (what: string, ms: number): void => {
    lines.push(`| ${n} | ${what} | ${ms.toFixed(0)} | ${cache.judgedLast} |`);
  };
  const view = (what: string): void => {
    row(what, timed(() => cache.probes(input(run))).ms);
  };
  lines.push(
    `| ${n} | afresh (before) | ${timed(() => uncached(input(run))).ms.toFixed(0)} | ${n} |`,
  );
  view('cached: first view');
  view('cached: nothing new');
  const bg = traffic(n * 1000, (n + 1) * 1000, perSecond, n);
  bg.forEach((evs, k) => run.logs[k]?.add(evs));
  postProbe(run, n);
  view('cached: next probe posted');
  const mid = Math.floor(n / 2) * 1000;
  traffic(mid, mid + 10_000, perSecond * 10, 7).forEach((evs, k) => run.logs[k]?.add(evs));
  view('cached: 10 s resent late (mid-run)');
  addLossSpan(run.losses, {
    capture: 'backend',
    epoch: 0,
    fromMs: Number(T0 / MS) + mid,
    toMs: Number(T0 / MS) + mid + 5000,
    kernelDrops: 3,
    queueDrops: 0,
    lost: 0,
  });
  view('cached: a loss span');
  // The last view is the one judged afresh (checked here, not timed); neither is kept.
  if (!isDeepStrictEqual(cache.probes(input(run)), uncached(input(run))))
    throw new Error('the cached view differs from the one judged afresh');
  const withCache = heapMiB();
  const entries = cache.size;
  cache.clear();
  const kept = withCache - heapMiB();
  lines.push(
    `| ${n} | heap the cache keeps | ${kept.toFixed(1)} MiB (${((kept * 2 ** 20) / entries / 1024).toFixed(1)} KiB a probe, ${entries} entries) | |`,
  );
  return lines;
}

const counts = arg('--probes', '200,1000').split(',').map(Number);
const perPoint = Number(arg('--events', '200000'));
console.log(`events a point: ${perPoint}`);
console.log('| probes | view | ms | probes judged |');
console.log('| --- | --- | --- | --- |');
for (const n of counts) for (const line of benchOne(n, perPoint)) console.log(line);

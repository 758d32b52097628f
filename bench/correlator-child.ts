/**
 * Correlator benchmark, run in its own process (`node --expose-gc correlator-child.js '<json>'`)
 * so its heap is not the parent's: synthetic PacketEvents — many background TCP flows at three
 * points plus one probe request every `requestEveryMs` — go through Correlator.add, and expire()
 * runs every `expireEveryMs` of simulated arrival time, as the shell's timer would. Prints one
 * JSON line (CorrelatorResult).
 *
 * The clock is simulated (arrival = event index × 1e9 / simulatedRate), so the window and expiry
 * behave as at that traffic rate while the loop runs as fast as one core allows.
 */
import type { PacketEvent } from '../common/event';
import { Correlator } from '../collector/correlate';

export interface CorrelatorArgs {
  /** Event counts at which heap and RSS are sampled (after a full GC); the last one ends the run. */
  checkpoints: number[];
  /** Simulated traffic rate (events per second of arrival time). */
  simulatedRate: number;
  windowMs: number;
  expireEveryMs: number;
  requestEveryMs: number;
}

export interface CorrelatorSample {
  events: number;
  heapUsedMiB: number;
  rssMiB: number;
  buffered: number;
}

export interface CorrelatorResult {
  args: CorrelatorArgs;
  /** Seconds in add+expire plus event creation (GC at checkpoints excluded). */
  totalS: number;
  /** Seconds to create the same events without the correlator (the generator's own cost). */
  generateS: number;
  eventsPerS: number;
  /** Events per second of the correlator alone (total minus generation). */
  correlatorEventsPerS: number;
  expireCalls: number;
  /** Slowest single expire() call, ms. */
  maxExpireMs: number;
  requests: number;
  journeys: number;
  /** Journeys matched at all three points. */
  complete: number;
  dropped: number;
  samples: CorrelatorSample[];
}

const POINTS = ['decap', 'egress', 'backend'] as const;
const CLIENT = '10.90.0.42';

/** Background event `i`: one of 4096 pod-to-pod flows, an ACK with 48 bytes of payload. */
function backgroundEvent(i: number, tsNs: bigint): PacketEvent {
  const flow = i & 4095;
  return {
    point: POINTS[i % 3] ?? 'decap',
    node: 'bench',
    iface: 'eth0',
    linktype: 'ethernet',
    tsNs,
    frame: i,
    outer: null,
    inner: {
      proto: 'tcp',
      ipProto: 6,
      src: `10.244.1.${flow & 0xff}`,
      dst: `10.244.2.${flow >> 8}`,
      sport: 30000 + flow,
      dport: 8080,
    },
    tunnels: [],
    keys: {
      ipId: i & 0xffff,
      tcpSeq: (flow * 7919 + i * 48) >>> 0,
      tcpAck: (flow * 104729) >>> 0,
      tcpFlags: 0x18,
      tcpWindow: 502,
      payloadLength: 48,
      payloadHash: (i * 2654435761) >>> 0,
    },
    truncated: false,
    wireLength: 102,
  };
}

/** The probe request's SYN and first data segment at `point` (the backend sees it masqueraded). */
function requestEvents(n: number, point: string, tsNs: bigint, frame: number): PacketEvent[] {
  const src = point === 'backend' ? '10.244.2.1' : CLIENT;
  const sport = 40000 + (n % 20000);
  const isn = (n * 2654435761 + 12345) >>> 0;
  const base = {
    point,
    node: 'bench',
    iface: 'eth0',
    linktype: 'ethernet',
    outer: null,
    tunnels: [],
    truncated: false,
  };
  const inner = { proto: 'tcp' as const, ipProto: 6, src, dst: '10.96.0.10', sport, dport: 80 };
  return [
    {
      ...base,
      tsNs,
      frame,
      inner,
      keys: { ipId: n & 0xffff, tcpSeq: isn, tcpAck: 0, tcpFlags: 0x02, payloadLength: 0 },
      wireLength: 74,
    },
    {
      ...base,
      tsNs: tsNs + 1000n,
      frame: frame + 1,
      inner,
      keys: {
        ipId: (n + 1) & 0xffff,
        tcpSeq: (isn + 1) >>> 0,
        tcpAck: 1,
        tcpFlags: 0x18,
        payloadLength: 60,
        payloadHash: n >>> 0,
        probeMarker: `bench${n}`,
      },
      wireLength: 134,
    },
  ];
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) g();
}

function run(args: CorrelatorArgs): CorrelatorResult {
  const last = args.checkpoints.at(-1) ?? 1_000_000;
  const nsPerEvent = 1e9 / args.simulatedRate;
  const expireEvery = Math.max(1, Math.round((args.expireEveryMs * 1e6) / nsPerEvent));
  const requestEvery = Math.max(1, Math.round((args.requestEveryMs * 1e6) / nsPerEvent));
  const baseNs = 1_700_000_000_000_000_000n;

  // The generator alone, for the same number of events (kept alive in a small ring, as the
  // correlator would keep them, so allocation costs are comparable).
  const ring: PacketEvent[] = new Array<PacketEvent>(1024);
  let t0 = process.hrtime.bigint();
  for (let i = 0; i < last; i++) {
    ring[i & 1023] = backgroundEvent(i, baseNs + BigInt(Math.round(i * nsPerEvent)));
  }
  const generateS = Number(process.hrtime.bigint() - t0) / 1e9;
  ring.length = 0;
  gc();

  const c = new Correlator({
    points: [...POINTS],
    selector: { client: CLIENT },
    windowNs: BigInt(args.windowMs) * 1_000_000n,
  });
  const samples: CorrelatorSample[] = [];
  let spentNs = 0n;
  let expireCalls = 0;
  let maxExpireNs = 0n;
  let requests = 0;
  let journeys = 0;
  let complete = 0;
  let next = 0;
  t0 = process.hrtime.bigint();
  for (let i = 1; i <= last; i++) {
    const now = baseNs + BigInt(Math.round(i * nsPerEvent));
    c.add(backgroundEvent(i, now), now);
    if (i % requestEvery === 0) {
      requests++;
      for (const p of POINTS) for (const ev of requestEvents(requests, p, now, i)) c.add(ev, now);
    }
    if (i % expireEvery === 0) {
      const e0 = process.hrtime.bigint();
      for (const j of c.expire(now)) {
        journeys++;
        if (j.points.every((p) => p.status === 'matched')) complete++;
      }
      const e = process.hrtime.bigint() - e0;
      if (e > maxExpireNs) maxExpireNs = e;
      expireCalls++;
    }
    if (i === args.checkpoints[next]) {
      next++;
      spentNs += process.hrtime.bigint() - t0;
      gc();
      const m = process.memoryUsage();
      samples.push({
        events: i,
        heapUsedMiB: m.heapUsed / 2 ** 20,
        rssMiB: m.rss / 2 ** 20,
        buffered: c.stats().buffered,
      });
      t0 = process.hrtime.bigint();
    }
  }
  const totalS = Number(spentNs) / 1e9;
  return {
    args,
    totalS,
    generateS,
    eventsPerS: last / totalS,
    correlatorEventsPerS: last / Math.max(1e-9, totalS - generateS),
    expireCalls,
    maxExpireMs: Number(maxExpireNs) / 1e6,
    requests,
    journeys,
    complete,
    dropped: c.stats().dropped,
    samples,
  };
}

process.stdout.write(
  `${JSON.stringify(run(JSON.parse(process.argv[2] ?? '{}') as CorrelatorArgs))}\n`,
);

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
import type { PacketEvent, PacketKeys, Tuple } from '../common/event';
import { Correlator } from '../core/correlate/correlate';

export interface CorrelatorArgs {
  /** Event counts at which heap and RSS are sampled (after a full GC); the last one ends the run. */
  checkpoints: number[];
  /** Simulated traffic rate (events per second of arrival time). */
  simulatedRate: number;
  windowMs: number;
  expireEveryMs: number;
  requestEveryMs: number;
  /** Format the background events' addresses per event instead of once per flow. */
  freshAddresses?: boolean;
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
  /** Seconds in expire() calls, all of them (part of totalS). */
  expireS: number;
  /**
   * CPU seconds of the process over the same timed span as totalS (JIT and GC threads included).
   * On a shared machine totalS also counts time spent waiting for the core; this does not.
   */
  cpuS: number;
  requests: number;
  journeys: number;
  /** Journeys matched at all three points. */
  complete: number;
  dropped: number;
  samples: CorrelatorSample[];
}

const POINTS = ['decap', 'egress', 'backend'] as const;
const CLIENT = '10.90.0.42';
const FLOWS = 4096;

/**
 * Events are built by these constructors, not object literals, because of two V8 effects that are
 * the generator's, not the correlator's. A literal's boilerplate keeps the hidden class it was
 * first built with, and the correlator rebuilds events with the same property order (so the same
 * hidden classes): once one of those stores a field in another representation (a double frame, a
 * 32-bit ISN), V8 migrates every later literal-built event on its first property read (~170 k
 * migrations per 1 M events, by --trace-migration), in Correlator.add. And the request events,
 * built by spreading a literal, got a new hidden class each, which made the event reads in `add`
 * megamorphic. A decoder (common/codec.ts) builds its events one way, and none like the
 * correlator's.
 */
class BenchTuple {
  readonly proto = 'tcp' as const;
  readonly ipProto = 6;
  constructor(
    readonly src: string,
    readonly dst: string,
    readonly sport: number,
    readonly dport: number,
  ) {}
}

class BenchKeys {
  readonly tcpFlags = 0x18;
  readonly tcpWindow = 502;
  readonly payloadLength = 48;
  constructor(
    readonly ipId: number,
    readonly tcpSeq: number,
    readonly tcpAck: number,
    readonly payloadHash: number,
  ) {}
}

class BenchEvent {
  readonly node = 'bench';
  readonly iface = 'eth0';
  readonly linktype = 'ethernet';
  readonly outer = null;
  readonly tunnels = [];
  readonly truncated = false;
  constructor(
    readonly point: string,
    readonly tsNs: bigint,
    readonly frame: number,
    readonly inner: Tuple,
    readonly keys: PacketKeys,
    readonly wireLength: number,
  ) {}
}

/**
 * The flows' address strings, formatted once: a decoded event arrives with its strings already
 * built, so formatting them is not the correlator's cost. `fresh` formats them per event instead,
 * so the correlator sees new string objects (equal by value, not by identity) as from a decoder.
 */
const SRC = Array.from({ length: FLOWS }, (_, f) => `10.244.1.${f & 0xff}`);
const DST = Array.from({ length: FLOWS }, (_, f) => `10.244.2.${f >> 8}`);

/** Background event `i`: one of 4096 pod-to-pod flows, an ACK with 48 bytes of payload. */
function backgroundEvent(i: number, tsNs: bigint, fresh: boolean): PacketEvent {
  const flow = i & (FLOWS - 1);
  const src = fresh ? `10.244.1.${flow & 0xff}` : (SRC[flow] ?? '');
  const dst = fresh ? `10.244.2.${flow >> 8}` : (DST[flow] ?? '');
  return new BenchEvent(
    POINTS[i % 3] ?? 'decap',
    tsNs,
    i,
    new BenchTuple(src, dst, 30000 + flow, 8080),
    new BenchKeys(
      i & 0xffff,
      (flow * 7919 + i * 48) >>> 0,
      (flow * 104729) >>> 0,
      (i * 2654435761) >>> 0,
    ),
    102,
  );
}

/**
 * Arrival times: event i arrives at baseNs + round(i × nsPerEvent). When the step is a whole number
 * of nanoseconds the clock adds it (one bigint per event instead of a double-to-bigint conversion
 * and an add); the values are the same either way.
 */
class ArrivalClock {
  private readonly step: bigint | null;
  /** Arrival of event `i`, the last one `tick` returned. */
  now: bigint;

  constructor(
    private readonly baseNs: bigint,
    private readonly nsPerEvent: number,
    private i: number,
  ) {
    this.step = Number.isInteger(nsPerEvent) ? BigInt(nsPerEvent) : null;
    this.now = this.at(i);
  }

  private at(i: number): bigint {
    return this.baseNs + BigInt(Math.round(i * this.nsPerEvent));
  }

  /** The next event's arrival. */
  tick(): bigint {
    this.i++;
    this.now = this.step === null ? this.at(this.i) : this.now + this.step;
    return this.now;
  }
}

/** The probe request's SYN and first data segment at `point` (the backend sees it masqueraded). */
function requestEvents(n: number, point: string, tsNs: bigint, frame: number): PacketEvent[] {
  const src = point === 'backend' ? '10.244.2.1' : CLIENT;
  const sport = 40000 + (n % 20000);
  const isn = (n * 2654435761 + 12345) >>> 0;
  const inner = new BenchTuple(src, '10.96.0.10', sport, 80);
  return [
    new BenchEvent(
      point,
      tsNs,
      frame,
      inner,
      { ipId: n & 0xffff, tcpSeq: isn, tcpAck: 0, tcpFlags: 0x02, payloadLength: 0 },
      74,
    ),
    new BenchEvent(
      point,
      tsNs + 1000n,
      frame + 1,
      inner,
      {
        ipId: (n + 1) & 0xffff,
        tcpSeq: (isn + 1) >>> 0,
        tcpAck: 1,
        tcpFlags: 0x18,
        payloadLength: 60,
        payloadHash: n >>> 0,
        probeMarker: `bench${n}`,
      },
      134,
    ),
  ];
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g !== undefined) g();
}

/**
 * Background events from..to (inclusive) into the correlator. The hot loop is its own small
 * function, so V8 optimizes it once; inside `run`, every rare path (a request, an expire, a
 * checkpoint) reached for the first time recompiled the whole loop with all it inlines.
 */
function feed(c: Correlator, clock: ArrivalClock, from: number, to: number, fresh: boolean): void {
  for (let i = from; i <= to; i++) {
    const now = clock.tick();
    c.add(backgroundEvent(i, now, fresh), now);
  }
}

/** The generator alone, the same way (events kept in a small ring, as `add` keeps them briefly). */
function generate(
  ring: PacketEvent[],
  clock: ArrivalClock,
  from: number,
  to: number,
  fresh: boolean,
): void {
  for (let i = from; i <= to; i++) ring[i & 1023] = backgroundEvent(i, clock.tick(), fresh);
}

function run(args: CorrelatorArgs): CorrelatorResult {
  const last = args.checkpoints.at(-1) ?? 1_000_000;
  const nsPerEvent = 1e9 / args.simulatedRate;
  const expireEvery = Math.max(1, Math.round((args.expireEveryMs * 1e6) / nsPerEvent));
  const requestEvery = Math.max(1, Math.round((args.requestEveryMs * 1e6) / nsPerEvent));
  const baseNs = 1_700_000_000_000_000_000n;
  const fresh = args.freshAddresses === true;
  /** The next event after `i` that a request, an expire or a checkpoint follows. */
  const nextStop = (i: number, checkpoint: number): number =>
    Math.max(
      i + 1,
      Math.min(
        (Math.floor(i / requestEvery) + 1) * requestEvery,
        (Math.floor(i / expireEvery) + 1) * expireEvery,
        checkpoint,
      ),
    );

  // The generator alone, for the same events in the same segments as below.
  const ring: PacketEvent[] = new Array<PacketEvent>(1024);
  const genClock = new ArrivalClock(baseNs, nsPerEvent, 0);
  let t0 = process.hrtime.bigint();
  for (let i = 0, k = 0; i < last;) {
    const stop = nextStop(i, args.checkpoints[k] ?? last);
    generate(ring, genClock, i + 1, stop, fresh);
    i = stop;
    if (i === args.checkpoints[k]) k++;
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
  let cpuUs = 0;
  let expireCalls = 0;
  let maxExpireNs = 0n;
  let expireNs = 0n;
  let requests = 0;
  let journeys = 0;
  let complete = 0;
  let next = 0;
  const clock = new ArrivalClock(baseNs, nsPerEvent, 0);
  let cpu0 = process.cpuUsage();
  t0 = process.hrtime.bigint();
  for (let i = 0; i < last;) {
    const stop = nextStop(i, args.checkpoints[next] ?? last);
    feed(c, clock, i + 1, stop, fresh);
    i = stop;
    const now = clock.now;
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
      expireNs += e;
      expireCalls++;
    }
    if (i === args.checkpoints[next]) {
      next++;
      spentNs += process.hrtime.bigint() - t0;
      const cpu = process.cpuUsage(cpu0);
      cpuUs += cpu.user + cpu.system;
      gc();
      const m = process.memoryUsage();
      samples.push({
        events: i,
        heapUsedMiB: m.heapUsed / 2 ** 20,
        rssMiB: m.rss / 2 ** 20,
        buffered: c.stats().buffered,
      });
      cpu0 = process.cpuUsage();
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
    expireS: Number(expireNs) / 1e9,
    cpuS: cpuUs / 1e6,
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

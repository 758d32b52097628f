/**
 * Correlation: follow one TCP request across ordered capture points with keys that survive NAT.
 *
 * Pure: no clock, timers or I/O. Time is passed in (`nowNs`), and the offline entry point
 * (`correlateRequest`) needs no time at all beyond the event timestamps.
 *
 * Why these keys: Linux NAT (nf_nat) rewrites addresses and ports and fixes up checksums, but it
 * never touches the TCP sequence space, the RFC 7323 timestamp option or the IPv4 ID. So the SYN's
 * sequence number (the ISN, 32 random bits, RFC 9293 §3.4.1) names a connection on both sides of any
 * masquerade, including `--random-fully` where the source port changes too. A terminating proxy
 * opens a new connection (new ISN, new ports); only the request bytes survive, so that case is
 * matched on the payload keys the decoder hashed (probe marker, request line, first bytes).
 */

import type { PacketEvent, PacketKeys } from '../common/event';
import type {
  CorrelationResult,
  Endpoint,
  Journey,
  PointEvents,
  RequestIdentity,
  RequestSelector,
} from './journey';
import { capturedCount, endpointKey, sameEndpoint } from './journey';
import {
  DEFAULT_WINDOW_NS,
  byTime,
  correlateIdentity,
  emptyPoint,
  findRequests,
  matchesSelector,
  tcpView,
  type TcpView,
} from './match-point';

export * from './journey';
export { DEFAULT_WINDOW_NS, correlateIdentity, findRequests } from './match-point';

/**
 * Offline correlation: select the request at the first point and follow it through the others.
 * Never throws; when no request is found, `request` is null and `reason` says why.
 */
export function correlateRequest(
  points: readonly PointEvents[],
  selector: RequestSelector,
  opts: { windowNs?: bigint | undefined } = {},
): CorrelationResult {
  const windowNs = opts.windowNs ?? DEFAULT_WINDOW_NS;
  const [first] = points;
  if (first === undefined)
    return { request: null, reason: 'no capture points were given', points: [], windowNs };
  const [id] = findRequests(first, selector, windowNs);
  if (id === undefined) {
    const what = [
      selector.client === undefined ? 'any client' : `client ${selector.client}`,
      selector.dst === undefined ? null : `dst ${selector.dst}`,
      selector.dport === undefined ? null : `dport ${selector.dport}`,
    ]
      .filter((s) => s !== null)
      .join(', ');
    return {
      request: null,
      reason: `no new TCP connection (SYN without ACK) from ${what} among ${capturedCount(first)} events at ${first.name}`,
      points: points.map((p) =>
        emptyPoint(
          p.name,
          capturedCount(p),
          capturedCount(p) === 0 ? 'no-capture' : 'not-seen',
          'no request selected',
        ),
      ),
      windowNs,
    };
  }
  return correlateIdentity(id, points, windowNs);
}

export interface CorrelatorOptions {
  /** Capture point names in path order; the first one selects requests. */
  points: readonly string[];
  selector?: RequestSelector | undefined;
  windowNs?: bigint | undefined;
  /** Buffer bound per point; beyond it events are dropped and counted, never blocking the reader. */
  maxEventsPerPoint?: number | undefined;
}

export interface CorrelatorStats {
  buffered: number;
  dropped: number;
  unknownPoint: number;
  emitted: number;
}

const NONE = Number.NaN;
const num = (v: number | undefined): number => (v === undefined ? NONE : v);
const opt = (v: number): number | undefined => (Number.isNaN(v) ? undefined : v);

const SAFE = 2 ** 53;

/**
 * A column of bigint nanoseconds without keeping a bigint per row: the offset from the first value
 * as a double (exact within ±2^53 ns, 104 days), the bigint itself only beyond that.
 */
class BigColumn {
  private base: bigint | null = null;
  off: Float64Array = new Float64Array(0);
  far: bigint[] = [];

  resize(cap: number, order: (i: number) => number, n: number): void {
    const off = new Float64Array(cap);
    const far: bigint[] = [];
    for (let i = 0; i < n; i++) {
      off[i] = this.off[order(i)] ?? 0;
      far.push(this.far[order(i)] ?? 0n);
    }
    for (let i = n; i < cap; i++) far.push(0n);
    this.off = off;
    this.far = far;
  }

  set(j: number, v: bigint): void {
    this.base ??= v;
    const d = Number(v - this.base);
    if (d < SAFE && d > -SAFE) {
      this.off[j] = d;
      this.far[j] = 0n;
    } else {
      this.off[j] = Number.NaN;
      this.far[j] = v;
    }
  }

  get(j: number): bigint {
    const d = this.off[j] ?? 0;
    return Number.isNaN(d) ? (this.far[j] ?? 0n) : (this.base ?? 0n) + BigInt(d);
  }

  copy(from: number, to: number): void {
    this.off[to] = this.off[from] ?? 0;
    this.far[to] = this.far[from] ?? 0n;
  }
}

/** Bounded string canonicalisation: stored addresses share one copy and the event's own die young. */
class Interner {
  private readonly map = new Map<string, string>();
  of(s: string): string {
    const c = this.map.get(s);
    if (c !== undefined) return c;
    if (this.map.size >= 262_144) this.map.clear();
    this.map.set(s, s);
    return s;
  }
}

/**
 * One point's buffer: what correlation reads of each event, in arrival order, in a ring of typed
 * arrays (struct of arrays). The events themselves are not kept, so they die young and the
 * collector does not pay to promote and mark a window of event objects; an event is rebuilt (with
 * the fields correlation reads) only when a journey needs it.
 */
class EventStore {
  cap = 0;
  head = 0;
  length = 0;
  /** Arrivals never went backwards, so expiry forgets a prefix. */
  monotonic = true;
  private lastArrival = 0n;
  readonly arrival = new BigColumn();
  readonly ts = new BigColumn();
  private readonly strings = new Interner();
  frame: Float64Array = new Float64Array(0);
  /** 1: a TCP packet with ports (all fields below are set); 0: anything else (counted only). */
  tcp: Uint8Array = new Uint8Array(0);
  sport: Float64Array = new Float64Array(0);
  dport: Float64Array = new Float64Array(0);
  flags: Float64Array = new Float64Array(0);
  seq: Float64Array = new Float64Array(0);
  ack: Float64Array = new Float64Array(0);
  tsVal: Float64Array = new Float64Array(0);
  ipId: Float64Array = new Float64Array(0);
  payloadLength: Float64Array = new Float64Array(0);
  payloadHash: Float64Array = new Float64Array(0);
  requestLineHash: Float64Array = new Float64Array(0);
  src: string[] = [];
  dst: string[] = [];
  node: string[] = [];
  iface: string[] = [];
  probeMarker: (string | undefined)[] = [];

  constructor(readonly name: string) {
    this.resize(1024);
  }

  private resize(cap: number): void {
    const order = (i: number): number => (this.head + i) & (this.cap - 1);
    const n = this.length;
    const grow64 = (old: Float64Array): Float64Array => {
      const a = new Float64Array(cap);
      for (let i = 0; i < n; i++) a[i] = old[order(i)] ?? NONE;
      return a;
    };
    // Filled by push, so V8 keeps fast (packed) elements; `new Array(cap)` of this size would not.
    const growArr = <T>(old: T[], fill: T): T[] => {
      const a: T[] = [];
      for (let i = 0; i < n; i++) a.push(old[order(i)] ?? fill);
      for (let i = n; i < cap; i++) a.push(fill);
      return a;
    };
    const tcp = new Uint8Array(cap);
    for (let i = 0; i < n; i++) tcp[i] = this.tcp[order(i)] ?? 0;
    this.arrival.resize(cap, order, n);
    this.ts.resize(cap, order, n);
    this.frame = grow64(this.frame);
    this.sport = grow64(this.sport);
    this.dport = grow64(this.dport);
    this.flags = grow64(this.flags);
    this.seq = grow64(this.seq);
    this.ack = grow64(this.ack);
    this.tsVal = grow64(this.tsVal);
    this.ipId = grow64(this.ipId);
    this.payloadLength = grow64(this.payloadLength);
    this.payloadHash = grow64(this.payloadHash);
    this.requestLineHash = grow64(this.requestLineHash);
    this.src = growArr(this.src, '');
    this.dst = growArr(this.dst, '');
    this.node = growArr(this.node, '');
    this.iface = growArr(this.iface, '');
    this.probeMarker = growArr<string | undefined>(this.probeMarker, undefined);
    this.tcp = tcp;
    this.cap = cap;
    this.head = 0;
  }

  /** Ring slot of the i-th live event (0 = oldest). */
  slot(i: number): number {
    return (this.head + i) & (this.cap - 1);
  }

  push(ev: PacketEvent, arrivalNs: bigint): void {
    if (this.length === this.cap) this.resize(this.cap * 2);
    if (this.length > 0 && arrivalNs < this.lastArrival) this.monotonic = false;
    this.lastArrival = arrivalNs;
    const j = (this.head + this.length) & (this.cap - 1);
    this.length++;
    this.arrival.set(j, arrivalNs);
    this.ts.set(j, ev.tsNs);
    this.frame[j] = ev.frame;
    const t = ev.inner;
    if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined) {
      this.tcp[j] = 0;
      this.src[j] = '';
      this.dst[j] = '';
      this.probeMarker[j] = undefined;
      return;
    }
    const k = ev.keys;
    this.tcp[j] = 1;
    this.src[j] = this.strings.of(t.src);
    this.dst[j] = this.strings.of(t.dst);
    this.sport[j] = t.sport;
    this.dport[j] = t.dport;
    this.node[j] = this.strings.of(ev.node);
    this.iface[j] = this.strings.of(ev.iface);
    this.flags[j] = num(k.tcpFlags);
    this.seq[j] = num(k.tcpSeq);
    this.ack[j] = num(k.tcpAck);
    this.tsVal[j] = num(k.tsVal);
    this.ipId[j] = num(k.ipId);
    this.payloadLength[j] = k.payloadLength;
    this.payloadHash[j] = num(k.payloadHash);
    this.requestLineHash[j] = num(k.requestLineHash);
    this.probeMarker[j] = k.probeMarker;
  }

  /** True when slot j is a TCP packet of connection `t` (either direction). */
  sameConnection(j: number, t: Endpoint): boolean {
    if (this.tcp[j] !== 1) return false;
    const src = this.src[j];
    const sp = this.sport[j];
    const dst = this.dst[j];
    const dp = this.dport[j];
    return (
      (sp === t.sport && dp === t.dport && src === t.src && dst === t.dst) ||
      (sp === t.dport && dp === t.sport && src === t.dst && dst === t.src)
    );
  }

  /** The event at slot j, rebuilt with every field correlation reads. */
  event(j: number): PacketEvent {
    const tsNs = this.ts.get(j);
    const frame = this.frame[j] ?? 0;
    if (this.tcp[j] !== 1) {
      return {
        point: this.name,
        node: '',
        iface: '',
        linktype: '',
        tsNs,
        frame,
        outer: null,
        inner: null,
        tunnels: [],
        keys: { payloadLength: 0 },
        truncated: false,
        wireLength: 0,
      };
    }
    const keys: PacketKeys = { payloadLength: this.payloadLength[j] ?? 0 };
    const set = (name: Exclude<keyof PacketKeys, 'probeMarker'>, v: number | undefined): void => {
      const x = opt(v ?? NONE);
      if (x !== undefined) keys[name] = x;
    };
    set('ipId', this.ipId[j]);
    set('tcpSeq', this.seq[j]);
    set('tcpAck', this.ack[j]);
    set('tcpFlags', this.flags[j]);
    set('tsVal', this.tsVal[j]);
    set('payloadHash', this.payloadHash[j]);
    set('requestLineHash', this.requestLineHash[j]);
    const marker = this.probeMarker[j];
    if (marker !== undefined) keys.probeMarker = marker;
    return {
      point: this.name,
      node: this.node[j] ?? '',
      iface: this.iface[j] ?? '',
      linktype: '',
      tsNs,
      frame,
      outer: null,
      inner: {
        proto: 'tcp',
        ipProto: 6,
        src: this.src[j] ?? '',
        dst: this.dst[j] ?? '',
        sport: this.sport[j] ?? 0,
        dport: this.dport[j] ?? 0,
      },
      tunnels: [],
      keys,
      truncated: false,
      wireLength: 0,
    };
  }

  live(): PacketEvent[] {
    const out: PacketEvent[] = [];
    for (let i = 0; i < this.length; i++) out.push(this.event(this.slot(i)));
    return out;
  }

  private dropOldest(): void {
    const j = this.head;
    this.src[j] = '';
    this.dst[j] = '';
    this.probeMarker[j] = undefined;
    this.head = (this.head + 1) & (this.cap - 1);
    this.length--;
  }

  /** Forget events that arrived at or before `horizon`: O(forgotten) while arrivals are ordered. */
  expire(horizon: bigint): void {
    if (this.monotonic) {
      while (this.length > 0 && this.arrival.get(this.head) <= horizon) this.dropOldest();
      return;
    }
    // Arrivals went backwards at some point: keep the survivors in order, as a filter would.
    const n = this.length;
    let w = 0;
    for (let i = 0; i < n; i++) {
      const j = this.slot(i);
      if (this.arrival.get(j) <= horizon) continue;
      const to = this.slot(w++);
      if (to !== j) this.copySlot(j, to);
    }
    for (let i = w; i < n; i++) {
      const j = this.slot(i);
      this.src[j] = '';
      this.dst[j] = '';
      this.probeMarker[j] = undefined;
    }
    this.length = w;
    this.monotonic = true;
    for (let i = 1; i < w; i++)
      if (this.arrival.get(this.slot(i - 1)) > this.arrival.get(this.slot(i)))
        this.monotonic = false;
    if (w > 0) this.lastArrival = this.arrival.get(this.slot(w - 1));
  }

  private copySlot(from: number, to: number): void {
    this.arrival.copy(from, to);
    this.ts.copy(from, to);
    for (const a of [
      this.frame,
      this.sport,
      this.dport,
      this.flags,
      this.seq,
      this.ack,
      this.tsVal,
      this.ipId,
      this.payloadLength,
      this.payloadHash,
      this.requestLineHash,
    ])
      a[to] = a[from] ?? NONE;
    this.tcp[to] = this.tcp[from] ?? 0;
    this.src[to] = this.src[from] ?? '';
    this.dst[to] = this.dst[from] ?? '';
    this.node[to] = this.node[from] ?? '';
    this.iface[to] = this.iface[from] ?? '';
    this.probeMarker[to] = this.probeMarker[from];
  }
}

/** A SYN at the first point that fits the selector, as buffered. */
interface SynCandidate {
  view: TcpView;
  arrivalNs: bigint;
}

const SYN_FLAG = 0x02;
const ACK_FLAG = 0x10;

function sameTuple(ev: PacketEvent, t: Endpoint): boolean {
  const i = ev.inner;
  return (
    i !== null && i.src === t.src && i.sport === t.sport && i.dst === t.dst && i.dport === t.dport
  );
}

/**
 * Streaming correlation for live agents. `add` buffers, `expire` returns the journeys whose
 * window closed and forgets old events. Arrival time (`nowNs`, the shell's clock) drives expiry;
 * event timestamps (each node's kernel clock) drive matching, so node clock skew cannot expire a
 * journey early.
 *
 * Cost: `add` is a push (plus one for a first-point SYN that fits the selector); `expire` forgets
 * a prefix of each arrival-ordered buffer (O(expired)) and looks only at the buffered selector
 * SYNs; each emitted journey scans the buffers once with cheap field tests and hands correlation
 * only the events that can matter (the request's connection, and at later points every connection
 * carrying one of its keys), which correlates exactly as all events would.
 */
export class Correlator {
  private readonly names: readonly string[];
  private readonly selector: RequestSelector;
  private readonly windowNs: bigint;
  private readonly max: number;
  private readonly buf = new Map<string, EventStore>();
  private readonly firstName: string | undefined;
  private syns: SynCandidate[] = [];
  private readonly emitted = new Map<string, bigint>();
  private counters: CorrelatorStats = { buffered: 0, dropped: 0, unknownPoint: 0, emitted: 0 };

  constructor(opts: CorrelatorOptions) {
    this.names = [...opts.points];
    this.selector = opts.selector ?? {};
    this.windowNs = opts.windowNs ?? DEFAULT_WINDOW_NS;
    this.max = opts.maxEventsPerPoint ?? 100_000;
    for (const n of this.names) this.buf.set(n, new EventStore(n));
    this.firstName = this.names[0];
  }

  /** Buffer one event; false when it was dropped (unknown point or full buffer). */
  add(event: PacketEvent, nowNs: bigint): boolean {
    const list = this.buf.get(event.point);
    if (list === undefined) {
      this.counters.unknownPoint++;
      return false;
    }
    if (list.length >= this.max) {
      this.counters.dropped++;
      return false;
    }
    list.push(event, nowNs);
    if (event.point === this.firstName) {
      const f = event.keys.tcpFlags ?? 0;
      if ((f & SYN_FLAG) !== 0 && (f & ACK_FLAG) === 0) {
        const v = tcpView(event);
        if (v !== null && v.seq !== null && matchesSelector(v.tuple, this.selector))
          this.syns.push({ view: v, arrivalNs: nowNs });
      }
    }
    return true;
  }

  private pointEvents(): PointEvents[] {
    return this.names.map((name) => ({
      name,
      events: this.buf.get(name)?.live() ?? [],
    }));
  }

  /** Every request currently buffered at the first point, correlated with what is buffered now. */
  journeys(): Journey[] {
    const points = this.pointEvents();
    const [first] = points;
    if (first === undefined) return [];
    return findRequests(first, this.selector, this.windowNs).map((id) =>
      correlateIdentity(id, points, this.windowNs),
    );
  }

  /** The request at the first point: its connection's buffered events and its identity. */
  private firstPoint(syn: TcpView): { point: PointEvents; id: RequestIdentity | null } {
    const name = this.firstName ?? '';
    const b = this.buf.get(name);
    const events: PacketEvent[] = [];
    if (b !== undefined) {
      for (let i = 0; i < b.length; i++) {
        const j = b.slot(i);
        if (b.sameConnection(j, syn.tuple)) events.push(b.event(j));
      }
    }
    const point: PointEvents = { name, events, capturedEvents: b?.length ?? 0 };
    const id =
      findRequests(point, this.selector, this.windowNs).find(
        (r) => r.isn === syn.seq && sameEndpoint(r.tuple, syn.tuple),
      ) ?? null;
    return { point, id };
  }

  /**
   * A later point's events that can matter to request `id`: every connection with a packet that
   * carries one of its keys (ISN, a client seq, the SYN-ACK's ack, a payload key), plus one TCP
   * event within the window so "nothing TCP in the window" stays decidable.
   */
  private laterPoint(name: string, id: RequestIdentity, clientSeqs: Set<number>): PointEvents {
    const b = this.buf.get(name);
    if (b === undefined) return { name, events: [] };
    const isn = id.isn;
    const synAckAck = (isn + 1) >>> 0;
    const data = id.data;
    const marker = data?.probeMarker ?? null;
    const lineHash = data?.requestLineHash ?? null;
    const hash = data?.payloadHash ?? null;
    const tuples: Endpoint[] = [];
    let sentinel = -1;
    for (let i = 0; i < b.length; i++) {
      const j = b.slot(i);
      if (b.tcp[j] !== 1) continue;
      const f = b.flags[j] ?? NONE;
      const seq = b.seq[j] ?? NONE;
      const flags = Number.isNaN(f) ? 0 : f;
      const isSyn = (flags & SYN_FLAG) !== 0;
      let trigger: boolean;
      if (isSyn) {
        trigger = (flags & ACK_FLAG) === 0 ? seq === isn : b.ack[j] === synAckAck;
      } else {
        trigger =
          clientSeqs.has(seq) ||
          (data !== null &&
            (b.payloadLength[j] ?? 0) > 0 &&
            ((marker !== null && b.probeMarker[j] === marker) ||
              (lineHash !== null && b.requestLineHash[j] === lineHash) ||
              (hash !== null && b.payloadHash[j] === hash)));
      }
      if (trigger) {
        if (!tuples.some((u) => b.sameConnection(j, u))) {
          tuples.push({
            src: b.src[j] ?? '',
            sport: b.sport[j] ?? 0,
            dst: b.dst[j] ?? '',
            dport: b.dport[j] ?? 0,
          });
        }
      } else if (sentinel < 0) {
        const d = b.ts.get(j) - id.synTsNs;
        if (d <= this.windowNs && -d <= this.windowNs) sentinel = j;
      }
    }
    const events: PacketEvent[] = [];
    let sentinelKept = false;
    if (tuples.length > 0) {
      for (let i = 0; i < b.length; i++) {
        const j = b.slot(i);
        if (tuples.some((u) => b.sameConnection(j, u))) {
          events.push(b.event(j));
          if (j === sentinel) sentinelKept = true;
        }
      }
    }
    if (sentinel >= 0 && !sentinelKept) events.push(b.event(sentinel));
    return { name, events, capturedEvents: b.length };
  }

  private journeyFor(syn: TcpView): Journey | null {
    const { point: first, id } = this.firstPoint(syn);
    if (id === null) return null;
    const clientSeqs = new Set<number>();
    for (const ev of first.events) {
      const seq = ev.keys.tcpSeq;
      if (seq !== undefined && sameTuple(ev, id.tuple)) clientSeqs.add(seq);
    }
    const points = [first, ...this.names.slice(1).map((n) => this.laterPoint(n, id, clientSeqs))];
    return correlateIdentity(id, points, this.windowNs);
  }

  /**
   * Journeys whose window closed by `nowNs` (each returned once), then drop events that no open
   * journey can still need: an event may precede its SYN by up to one window (clock skew), and a
   * journey closes one window after its SYN arrived, so two windows of history suffice.
   */
  expire(nowNs: bigint): Journey[] {
    const out: Journey[] = [];
    if (this.syns.length === 0) {
      this.forget(nowNs);
      return out;
    }
    // The buffered selector SYNs: first arrival per request, requests in time order.
    const arrival = new Map<string, bigint>();
    for (const s of this.syns) {
      const k = `${endpointKey(s.view.tuple)}#${s.view.seq ?? 'x'}`;
      if (!arrival.has(k)) arrival.set(k, s.arrivalNs);
    }
    const ordered = this.syns.map((s) => s.view).sort(byTime);
    const seen = new Set<string>();
    for (const v of ordered) {
      const k = `${endpointKey(v.tuple)}#${v.seq ?? 'x'}`;
      if (seen.has(k)) continue;
      seen.add(k);
      const at = arrival.get(k);
      if (at === undefined || this.emitted.has(k) || at + this.windowNs > nowNs) continue;
      const j = this.journeyFor(v);
      if (j === null) continue;
      this.emitted.set(k, at);
      this.counters.emitted++;
      out.push(j);
    }
    this.forget(nowNs);
    return out;
  }

  private forget(nowNs: bigint): void {
    const horizon = nowNs - 2n * this.windowNs;
    for (const b of this.buf.values()) b.expire(horizon);
    if (this.syns.some((s) => s.arrivalNs <= horizon))
      this.syns = this.syns.filter((s) => s.arrivalNs > horizon);
    for (const [k, at] of this.emitted) if (at <= horizon) this.emitted.delete(k);
  }

  stats(): CorrelatorStats {
    let buffered = 0;
    for (const b of this.buf.values()) buffered += b.length;
    return { ...this.counters, buffered };
  }
}

/**
 * Correlation: follow one request (a new or already-open TCP connection, a UDP datagram) across
 * ordered capture points with keys that survive NAT.
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

import type { PacketEvent, PacketKeys } from '../../common/event';
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
  const [id] = findRequests(first, selector, windowNs, 1);
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
      reason:
        `no new TCP connection (SYN without ACK), TCP data segment or UDP datagram from ${what} among ${capturedCount(first)} events at ${first.name}` +
        (selector.client === undefined && selector.dst === undefined
          ? ' (without --client or --dst, a request on an already-open connection or over UDP is selected only by a probe marker in its payload)'
          : ''),
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

/**
 * Canonical copies of the strings each buffered event keeps (addresses, node, interface): the
 * buffer holds one copy of each, and every event's own strings die young with the event.
 *
 * A Map lookup hashes the whole string, and a decoded event's strings are new, so that happens on
 * every event. Addresses go through a small direct-mapped cache first, keyed by the length and the
 * last characters (where addresses differ: the host part), whose hit costs one string comparison;
 * a miss, or two addresses sharing an entry, falls back to the Map. The Map is cleared when it
 * reaches `limit` strings, so memory stays bounded. Strings compare by value everywhere, so a
 * canonical copy saves memory and never changes a result.
 */
export class StringPool {
  private static readonly CACHE_BITS = 10;
  private readonly map = new Map<string, string>();
  private readonly cache: string[] = [];

  constructor(private readonly limit = 262_144) {
    // Filled by push so V8 keeps packed elements; 1024 entries stay in the L1 cache.
    for (let i = 0; i < 1 << StringPool.CACHE_BITS; i++) this.cache.push('');
  }

  /** Distinct strings in the Map (at most `limit`). */
  get size(): number {
    return this.map.size;
  }

  of(s: string): string {
    const c = this.map.get(s);
    if (c !== undefined) return c;
    if (this.map.size >= this.limit) this.map.clear();
    this.map.set(s, s);
    return s;
  }

  /** `of` for strings that repeat often (addresses). */
  addr(s: string): string {
    const n = s.length;
    if (n < 6) return this.of(s);
    // The cache key: the last six characters (as two words) and the length, mixed by multiplying
    // with odd constants; the top bits pick the entry.
    const w1 =
      s.charCodeAt(n - 1) |
      (s.charCodeAt(n - 2) << 8) |
      (s.charCodeAt(n - 3) << 16) |
      (s.charCodeAt(n - 4) << 24);
    const w2 = s.charCodeAt(n - 5) | (s.charCodeAt(n - 6) << 8) | (n << 16);
    const k =
      Math.imul(w1 ^ Math.imul(w2, 0x85ebca6b), 0x9e3779b1) >>> (32 - StringPool.CACHE_BITS);
    const c = this.cache[k];
    if (c === s) return c;
    const v = this.of(s);
    this.cache[k] = v;
    return v;
  }
}

/**
 * Record layout. An event is one record of 8-byte slots (Field) in one ArrayBuffer, read through
 * a BigInt64Array view (the two times) and a Float64Array view (the rest; NaN = absent), plus
 * slots (Ref) in one array for its strings. A record is contiguous, so a push writes two or three
 * cache lines. With an array per field, each push wrote to a cache line of each of them: 63 write
 * streams over three points, ~100 ns per event more than records in a micro-benchmark.
 */
const enum Field {
  Arrival,
  Ts,
  Frame,
  /** 1: a TCP packet with ports (all fields below are set); 0: anything else (counted only). */
  Tcp,
  Sport,
  Dport,
  Flags,
  Seq,
  Ack,
  TsVal,
  IpId,
  PayloadLength,
  PayloadHash,
  RequestLineHash,
  Count,
}

const enum Ref {
  Src,
  Dst,
  Node,
  Iface,
  Marker,
  Count,
}

/** Slots per record, as plain numbers for index arithmetic. */
const FIELDS: number = Field.Count;
const REFS: number = Ref.Count;

/** n unset string slots, as a packed array (`new Array(n)` of this size would be a dictionary). */
function unset(n: number): (string | undefined)[] {
  let a: (string | undefined)[] = [undefined];
  while (a.length < n) a = a.concat(a);
  a.length = n;
  return a;
}

/**
 * One point's buffer: what correlation reads of each event, in arrival order, in a ring of
 * records (see Field). The events themselves are not kept, so they die young and the collector
 * does not pay to promote and mark a window of event objects; an event is rebuilt (with the
 * fields correlation reads) only when a journey needs it.
 *
 * Times are bigint nanoseconds kept without a heap bigint per event: V8 writes a BigInt64Array
 * and compares its elements without allocating. A time outside int64 (no clock gives one, but
 * results must not depend on that) wraps when written, which reading it back detects; it is then
 * kept exactly in `far`, by its index in `big`.
 */
class EventStore {
  cap = 0;
  head = 0;
  length = 0;
  /** Arrivals never went backwards, so expiry forgets a prefix. */
  monotonic = true;
  private lastArrival = 0n;
  private big: BigInt64Array = new BigInt64Array(0);
  private num: Float64Array = new Float64Array(0);
  private far = new Map<number, bigint>();
  private refs: (string | undefined)[] = [];
  /** The last node and interface pushed: they rarely change at a point. */
  private lastNode = '';
  private lastIface = '';

  constructor(
    readonly name: string,
    private readonly strings: StringPool,
  ) {
    this.resize(1024);
  }

  private resize(cap: number): void {
    const n = this.length;
    const buf = new ArrayBuffer(cap * FIELDS * 8);
    // The live records in order: [head, cap) then [0, head + n - cap) of the old ring.
    const bytes = new Uint8Array(buf);
    const old = new Uint8Array(this.num.buffer);
    const first = Math.min(n, this.cap - this.head);
    bytes.set(old.subarray(this.head * FIELDS * 8, (this.head + first) * FIELDS * 8), 0);
    bytes.set(old.subarray(0, (n - first) * FIELDS * 8), first * FIELDS * 8);
    const far = new Map<number, bigint>();
    for (const [k, v] of this.far) {
      const i = (Math.floor(k / FIELDS) - this.head + this.cap) % this.cap;
      if (i < n) far.set(i * FIELDS + (k % FIELDS), v);
    }
    // Builtins, not loops: resize runs too rarely for V8 to optimize it.
    const refs = this.refs
      .slice(this.head * REFS, (this.head + first) * REFS)
      .concat(this.refs.slice(0, (n - first) * REFS));
    this.refs = refs.concat(unset(cap * REFS - refs.length));
    this.big = new BigInt64Array(buf);
    this.num = new Float64Array(buf);
    this.far = far;
    this.cap = cap;
    this.head = 0;
  }

  /** Ring slot of the i-th live event (0 = oldest). */
  slot(i: number): number {
    return (this.head + i) & (this.cap - 1);
  }

  private setTime(k: number, x: bigint): void {
    this.big[k] = x;
    if (this.big[k] !== x) this.far.set(k, x);
    else if (this.far.size !== 0) this.far.delete(k);
  }

  private time(k: number): bigint {
    const x = this.big[k] ?? 0n;
    return this.far.size === 0 ? x : (this.far.get(k) ?? x);
  }

  arrival(j: number): bigint {
    return this.time(j * FIELDS + Field.Arrival);
  }

  ts(j: number): bigint {
    return this.time(j * FIELDS + Field.Ts);
  }

  /** arrival(j) <= h, without allocating a bigint while no time is outside int64. */
  private arrivedBy(j: number, h: bigint): boolean {
    const k = j * FIELDS + Field.Arrival;
    return this.far.size === 0 ? (this.big[k] ?? 0n) <= h : this.time(k) <= h;
  }

  tcp(j: number): boolean {
    return this.num[j * FIELDS + Field.Tcp] === 1;
  }

  /** A numeric field of slot j (NaN when the event did not carry it). */
  field(j: number, f: number): number {
    return this.num[j * FIELDS + f] ?? NONE;
  }

  src(j: number): string {
    return this.refs[j * REFS + Ref.Src] ?? '';
  }

  dst(j: number): string {
    return this.refs[j * REFS + Ref.Dst] ?? '';
  }

  probeMarker(j: number): string | undefined {
    return this.refs[j * REFS + Ref.Marker];
  }

  push(ev: PacketEvent, arrivalNs: bigint): void {
    if (this.length === this.cap) this.resize(this.cap * 2);
    if (this.length > 0 && arrivalNs < this.lastArrival) this.monotonic = false;
    this.lastArrival = arrivalNs;
    const j = (this.head + this.length) & (this.cap - 1);
    this.length++;
    const r = j * FIELDS;
    const s = j * REFS;
    const a = this.num;
    const refs = this.refs;
    this.setTime(r + Field.Arrival, arrivalNs);
    this.setTime(r + Field.Ts, ev.tsNs);
    a[r + Field.Frame] = ev.frame;
    const t = ev.inner;
    if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined) {
      a[r + Field.Tcp] = 0;
      refs[s + Ref.Src] = '';
      refs[s + Ref.Dst] = '';
      refs[s + Ref.Marker] = undefined;
      return;
    }
    const k = ev.keys;
    a[r + Field.Tcp] = 1;
    a[r + Field.Sport] = t.sport;
    a[r + Field.Dport] = t.dport;
    a[r + Field.Flags] = num(k.tcpFlags);
    a[r + Field.Seq] = num(k.tcpSeq);
    a[r + Field.Ack] = num(k.tcpAck);
    a[r + Field.TsVal] = num(k.tsVal);
    a[r + Field.IpId] = num(k.ipId);
    a[r + Field.PayloadLength] = k.payloadLength;
    a[r + Field.PayloadHash] = num(k.payloadHash);
    a[r + Field.RequestLineHash] = num(k.requestLineHash);
    refs[s + Ref.Src] = this.strings.addr(t.src);
    refs[s + Ref.Dst] = this.strings.addr(t.dst);
    const node = ev.node;
    if (node !== this.lastNode) this.lastNode = this.strings.of(node);
    refs[s + Ref.Node] = this.lastNode;
    const iface = ev.iface;
    if (iface !== this.lastIface) this.lastIface = this.strings.of(iface);
    refs[s + Ref.Iface] = this.lastIface;
    refs[s + Ref.Marker] = k.probeMarker;
  }

  /** True when slot j is a TCP packet of connection `t` (either direction). */
  sameConnection(j: number, t: Endpoint): boolean {
    const r = j * FIELDS;
    const a = this.num;
    if (a[r + Field.Tcp] !== 1) return false;
    const sp = a[r + Field.Sport];
    const dp = a[r + Field.Dport];
    const src = this.src(j);
    const dst = this.dst(j);
    return (
      (sp === t.sport && dp === t.dport && src === t.src && dst === t.dst) ||
      (sp === t.dport && dp === t.sport && src === t.dst && dst === t.src)
    );
  }

  /** The event at slot j, rebuilt with every field correlation reads. */
  event(j: number): PacketEvent {
    const tsNs = this.ts(j);
    const frame = this.field(j, Field.Frame);
    if (!this.tcp(j)) {
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
    const keys: PacketKeys = { payloadLength: this.field(j, Field.PayloadLength) };
    const set = (name: Exclude<keyof PacketKeys, 'probeMarker'>, f: number): void => {
      const x = opt(this.field(j, f));
      if (x !== undefined) keys[name] = x;
    };
    set('ipId', Field.IpId);
    set('tcpSeq', Field.Seq);
    set('tcpAck', Field.Ack);
    set('tcpFlags', Field.Flags);
    set('tsVal', Field.TsVal);
    set('payloadHash', Field.PayloadHash);
    set('requestLineHash', Field.RequestLineHash);
    const marker = this.probeMarker(j);
    if (marker !== undefined) keys.probeMarker = marker;
    return {
      point: this.name,
      node: this.refs[j * REFS + Ref.Node] ?? '',
      iface: this.refs[j * REFS + Ref.Iface] ?? '',
      linktype: '',
      tsNs,
      frame,
      outer: null,
      inner: {
        proto: 'tcp',
        ipProto: 6,
        src: this.src(j),
        dst: this.dst(j),
        sport: this.field(j, Field.Sport),
        dport: this.field(j, Field.Dport),
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

  /**
   * Forget the probe markers of the k live events from the i-th on, so expired events keep none
   * alive. Their other strings are the pool's shared copies, at most one per slot until reused.
   */
  private clearMarkers(i: number, k: number): void {
    for (let n = 0; n < k; n++) this.refs[this.slot(i + n) * REFS + Ref.Marker] = undefined;
  }

  /** Forget events that arrived at or before `horizon`. */
  expire(horizon: bigint): void {
    if (this.monotonic) {
      // Arrivals are ordered: find how many arrived by the horizon, and drop that prefix.
      let lo = 0;
      let hi = this.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.arrivedBy(this.slot(mid), horizon)) lo = mid + 1;
        else hi = mid;
      }
      this.clearMarkers(0, lo);
      this.head = this.slot(lo);
      this.length -= lo;
      return;
    }
    // Arrivals went backwards at some point: keep the survivors in order, as a filter would.
    const n = this.length;
    let w = 0;
    for (let i = 0; i < n; i++) {
      const j = this.slot(i);
      if (this.arrivedBy(j, horizon)) continue;
      const to = this.slot(w++);
      if (to !== j) this.copySlot(j, to);
    }
    this.clearMarkers(w, n - w);
    this.length = w;
    this.monotonic = true;
    for (let i = 1; i < w; i++)
      if (this.arrival(this.slot(i - 1)) > this.arrival(this.slot(i))) this.monotonic = false;
    if (w > 0) this.lastArrival = this.arrival(this.slot(w - 1));
  }

  private copySlot(from: number, to: number): void {
    // copyWithin moves bytes, so the bigint and NaN slots stay exact.
    this.big.copyWithin(to * FIELDS, from * FIELDS, (from + 1) * FIELDS);
    if (this.far.size !== 0) {
      for (let f = 0; f < FIELDS; f++) {
        const x = this.far.get(from * FIELDS + f);
        if (x === undefined) this.far.delete(to * FIELDS + f);
        else this.far.set(to * FIELDS + f, x);
      }
    }
    for (let f = 0; f < REFS; f++) this.refs[to * REFS + f] = this.refs[from * REFS + f];
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
 * Streaming correlation of new TCP connections (requests that start with a SYN at the first point;
 * the shapes without one are correlated by `correlateRequest`). `add` buffers, `expire` returns the journeys whose
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
  /** One pool for all points: an address is often seen at several. */
  private readonly strings = new StringPool();
  /** buf's stores, scanned by name in `add` while there are few (see storeOf). */
  private readonly stores: readonly EventStore[];
  private readonly firstName: string | undefined;
  private readonly first: EventStore | undefined;
  private syns: SynCandidate[] = [];
  private readonly emitted = new Map<string, bigint>();
  private counters: CorrelatorStats = { buffered: 0, dropped: 0, unknownPoint: 0, emitted: 0 };

  constructor(opts: CorrelatorOptions) {
    this.names = [...opts.points];
    this.selector = opts.selector ?? {};
    this.windowNs = opts.windowNs ?? DEFAULT_WINDOW_NS;
    this.max = opts.maxEventsPerPoint ?? 100_000;
    for (const n of this.names) this.buf.set(n, new EventStore(n, this.strings));
    this.stores = [...this.buf.values()];
    this.firstName = this.names[0];
    this.first = this.firstName === undefined ? undefined : this.buf.get(this.firstName);
  }

  /**
   * The store of `point`. A decoded event's point name is a new string, which a Map lookup hashes
   * in full; comparing it with a few names is cheaper (and usually stops at the length).
   */
  private storeOf(point: string): EventStore | undefined {
    const stores = this.stores;
    if (stores.length > 8) return this.buf.get(point);
    for (const s of stores) if (s.name === point) return s;
    return undefined;
  }

  /**
   * Buffer one event; false when it was dropped (unknown point or full buffer) or is a flow
   * counter (PacketEvent.fold: no packet to correlate, core/correlate/folds.ts).
   */
  add(event: PacketEvent, nowNs: bigint): boolean {
    if (event.fold !== undefined) return false;
    const list = this.storeOf(event.point);
    if (list === undefined) {
      this.counters.unknownPoint++;
      return false;
    }
    if (list.length >= this.max) {
      this.counters.dropped++;
      return false;
    }
    list.push(event, nowNs);
    if (list === this.first) {
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
    // The Correlator follows new connections only (its candidates are SYNs), so isn is set.
    const isn = id.isn ?? Number.NaN;
    const synAckAck = (isn + 1) >>> 0;
    const data = id.data;
    const marker = data?.probeMarker ?? null;
    const lineHash = data?.requestLineHash ?? null;
    const hash = data?.payloadHash ?? null;
    const tuples: Endpoint[] = [];
    let sentinel = -1;
    for (let i = 0; i < b.length; i++) {
      const j = b.slot(i);
      if (!b.tcp(j)) continue;
      const f = b.field(j, Field.Flags);
      const seq = b.field(j, Field.Seq);
      const flags = Number.isNaN(f) ? 0 : f;
      const isSyn = (flags & SYN_FLAG) !== 0;
      let trigger: boolean;
      if (isSyn) {
        trigger = (flags & ACK_FLAG) === 0 ? seq === isn : b.field(j, Field.Ack) === synAckAck;
      } else {
        trigger =
          clientSeqs.has(seq) ||
          (data !== null &&
            b.field(j, Field.PayloadLength) > 0 &&
            ((marker !== null && b.probeMarker(j) === marker) ||
              (lineHash !== null && b.field(j, Field.RequestLineHash) === lineHash) ||
              (hash !== null && b.field(j, Field.PayloadHash) === hash)));
      }
      if (trigger) {
        if (!tuples.some((u) => b.sameConnection(j, u))) {
          tuples.push({
            src: b.src(j),
            sport: b.field(j, Field.Sport),
            dst: b.dst(j),
            dport: b.field(j, Field.Dport),
          });
        }
      } else if (sentinel < 0) {
        const d = b.ts(j) - id.startTsNs;
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

/**
 * Offline analysis: events from ordered points → correlate → attribute, as one JSON-safe result
 * (what `hoptrace analyze --json` prints). Pure: the events are already in memory.
 */

import { HoptraceError } from '../../common/errors';
import type { PacketEvent, PacketKeys } from '../../common/event';
import type { Inventory } from '../../common/inventory';
import type { TimeSpan } from '../../common/time-span';
import { attributeSourceRewrite } from '../attribute/attribute';
import {
  absDiff,
  reverseEndpoint,
  sameEndpoint,
  type DataIdentity,
  type RequestShape,
} from '../correlate/journey';
import {
  correlateRequest,
  type Endpoint,
  type Journey,
  type PointEvents,
} from '../correlate/correlate';
import { foldedPackets } from '../correlate/folds';
import { outsideWindowText, synOutsideWindow } from '../correlate/far-syn';
import { inOpaqueLead, opaqueTunnel } from '../correlate/outer';
import {
  DEFAULT_WINDOW_NS,
  findRequests,
  flowView,
  isFlowCandidate,
  matchesSelector,
  type FlowProto,
} from '../correlate/match-point';
import type { AnalysisResult, FlowPacketSummary, PointSummary } from './analysis-result';
import { estimateClockOffsets, hopLatencies } from './times';
import { NO_REQUEST_HINT, noRequestResult, type NoRequest } from './no-request';

export type { AnalysisResult, FlowPacketSummary, PointSummary };

export interface AnalyzeInput {
  points: { name: string; events: PacketEvent[] }[];
  inventory: Inventory;
  selector: { client?: string | undefined; dst?: string | undefined; dport?: number | undefined };
  windowNs?: bigint | undefined;
  /** No request at the first point: CLI_NO_REQUEST (the default; live) or the verdict (offline). */
  noRequest?: NoRequest | undefined;
}

/** Only what correlation can use is kept in memory (the store keeps everything). */
export function isUsefulEvent(e: PacketEvent): boolean {
  return (
    e.related !== undefined ||
    e.inner?.proto === 'tcp' ||
    e.inner?.proto === 'udp' ||
    e.keys.icmpId !== undefined
  );
}

/** Summaries of a journey's points, with bigints turned into strings. */
export function summarizePoints(journey: Journey): PointSummary[] {
  return journey.points.map((p) => ({
    name: p.point,
    status: p.status,
    packets: p.requestPackets + p.replyPackets,
    requestPackets: p.requestPackets,
    replyPackets: p.replyPackets,
    retransmits: p.retransmits,
    capturedEvents: p.capturedEvents,
    seenRequest: p.seenRequest,
    seenSyn: p.seenSyn,
    seenReply: p.seenReply,
    proxied: p.proxied,
    observed: p.observed,
    matchedBy: p.matchedBy,
    replyMatchedBy: p.replyMatchedBy,
    frame: p.packet?.frame ?? null,
    firstTsNs: p.firstTsNs === null ? null : p.firstTsNs.toString(),
    lastTsNs: p.lastTsNs === null ? null : p.lastTsNs.toString(),
    detail: p.detail,
    // A file's packets carry no node (''): null, as captureHealth and clockOffsets say it.
    node: p.packet === null || p.packet.node === '' ? null : p.packet.node,
    iface: p.packet?.iface ?? null,
    flow: p.flow.map((f) => ({ ...f, tsNs: f.tsNs.toString() })),
    flowOmitted: p.flowOmitted,
    ...(p.outsideWindowNs === undefined ? {} : { outsideWindowNs: p.outsideWindowNs.toString() }),
  }));
}

/**
 * Correlate the selected request and attribute its source rewrite. When the first point holds no
 * request that fits the selector there is nothing to attribute: with `noRequest: 'verdict'`
 * (offline) the result is the verdict unknown saying so (no-request.ts); by default (live, where
 * the request may still come) HoptraceError CLI_NO_REQUEST is thrown. Every other outcome, however
 * incomplete, is a verdict.
 */
export function analyzeEvents(input: AnalyzeInput): AnalysisResult {
  const journey = correlateRequest(input.points, input.selector, { windowNs: input.windowNs });
  const proto = journey.request?.proto;
  if (journey.request === null) {
    if (input.noRequest === 'verdict') {
      const v = attributeSourceRewrite(journey, input.inventory, {
        clientIp: input.selector.client,
      });
      return noRequestResult(v, summarizePoints(journey));
    }
    throw new HoptraceError('CLI_NO_REQUEST', journey.reason ?? 'no request found', {
      where: input.points[0]?.name ?? 'first point',
      hint: NO_REQUEST_HINT,
    });
  }
  const verdict = attributeSourceRewrite(journey, input.inventory, {
    clientIp: input.selector.client,
  });
  const points = summarizePoints(journey);
  journey.points.forEach((p, i) => {
    const events = input.points.find((q) => q.name === p.point)?.events ?? [];
    const f = proto === undefined ? null : foldedPackets(p, events, proto, journey.windowNs);
    const s = points[i];
    if (f !== null && s !== undefined) s.folded = { ...f, lastTsNs: f.lastTsNs.toString() };
  });
  const clock = estimateClockOffsets(points);
  const caveats = journey.points.flatMap((p) =>
    p.outsideWindowNs === undefined
      ? []
      : [
          `${p.point}: ${outsideWindowText(p.outsideWindowNs, journey.windowNs, journey.request?.point ?? 'the first point')}; ` +
            `the verdict follows it there, and times between ${p.point} and the other points are only as good as the clock offset estimated from these packets`,
        ],
  );
  return {
    verdict,
    points,
    clock,
    hops: hopLatencies(points, clock),
    ...(caveats.length === 0 ? {} : { caveats }),
  };
}

/** Pass 1 at the first point: only new TCP connections (SYN without ACK) fitting `selector` matter. */
export interface SelectPass {
  kind: 'select';
  selector: AnalyzeInput['selector'];
  /** The window pass 2 will apply around the selected SYN. */
  windowNs: bigint;
}

/**
 * Pass 1b at the first point, only when pass 1 found no SYN: TCP data segments and UDP datagrams
 * that can be a request without one (isFlowCandidate), of which the earliest is chosen.
 */
export interface SelectFlowPass {
  kind: 'select-flow';
  selector: AnalyzeInput['selector'];
  windowNs: bigint;
}

/** Pass 2 at the first point: only the request's flow (either direction) within the window. */
export interface RequestPass {
  kind: 'request';
  /** The packet pass 1 (or 1b) selected: the SYN, the data segment or the datagram. */
  start: PacketEvent;
  proto: FlowProto;
  tuple: Endpoint;
  startTsNs: bigint;
  windowNs: bigint;
}

/**
 * A later point: only the request's transport within the window matters, and of that only what a
 * LaterPointSelection with these keys (the request's, from the first point) keeps.
 */
export interface LaterPass {
  kind: 'later';
  shape: RequestShape;
  proto: FlowProto;
  startTsNs: bigint;
  windowNs: bigint;
  /** The SYN's seq; null without a SYN. */
  isn: number | null;
  /** What the SYN-ACK acknowledges (ISN + 1); null without a SYN. */
  synAckAck: number | null;
  /** Client seqs (what later request packets carry) and what replies acknowledge (TCP). */
  clientSeqs: ReadonlySet<number>;
  acked: ReadonlySet<number>;
  data: DataIdentity | null;
}

/**
 * What one pass over a point will keep. A stream may leave out any event the pass cannot keep
 * (and then report the true total with `capturedEvents`); handing over every event is always right.
 */
export type PassPlan = SelectPass | SelectFlowPass | RequestPass | LaterPass;

/** One point whose events can be read (again) from the start, e.g. a capture file replay. */
export interface PointStream {
  name: string;
  /** A fresh pass over the point's events; called once or twice. */
  events: (plan: PassPlan) => Iterable<PacketEvent>;
  /**
   * Events captured at this point, read after a pass: needed when `events` leaves some out.
   * Without it the events handed over are counted.
   */
  capturedEvents?: () => number;
  /** Every frame the point holds, whatever it is, read after a pass (a file's frames), if known. */
  capturedFrames?: () => number | undefined;
  /** When those frames were captured (null: none), read after a pass, if known. */
  capturedSpan?: () => TimeSpan | null | undefined;
  /** True when the point can be read only once (a stream): no pass after its first. */
  readOnce?: boolean;
  /**
   * A hint that `events(plan)` will be asked soon, given for every later point but the first
   * before the first is read: a stream may start the pass elsewhere (another thread) meanwhile.
   */
  prepare?: (plan: PassPlan) => void;
}

export interface AnalyzeStreamInput {
  points: PointStream[];
  inventory: Inventory;
  selector: AnalyzeInput['selector'];
  windowNs?: bigint | undefined;
  noRequest?: NoRequest | undefined;
}

const SYN = 0x02;
const FIN = 0x01;
const ACK = 0x10;

/** Bounds of the per-connection buffers of not-yet-related connections at a later point. */
const PENDING_PER_CONNECTION = 16;
const PENDING_TOTAL = 65_536;

function earlier(a: PacketEvent, b: PacketEvent): boolean {
  return a.tsNs !== b.tsNs ? a.tsNs < b.tsNs : a.frame < b.frame;
}

/** Direction-free key of a TCP connection. */
export function connectionKey(src: string, sport: number, dst: string, dport: number): string {
  const a = `${src}:${sport}`;
  const b = `${dst}:${dport}`;
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

/** Pass 1: the request's SYN is the selector's first new TCP connection, by time. */
export class RequestSynChoice {
  best: PacketEvent | null = null;

  constructor(private readonly selector: AnalyzeInput['selector']) {}

  /** Considers one event of the first point; true when it is the best so far. */
  offer(ev: PacketEvent): boolean {
    const t = ev.inner;
    if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined)
      return false;
    const f = ev.keys.tcpFlags ?? 0;
    if ((f & SYN) === 0 || (f & ACK) !== 0 || ev.keys.tcpSeq === undefined) return false;
    const tuple = { src: t.src, sport: t.sport, dst: t.dst, dport: t.dport };
    if (!matchesSelector(tuple, this.selector)) return false;
    if (this.best !== null && !earlier(ev, this.best)) return false;
    this.best = ev;
    return true;
  }
}

/**
 * Pass 1b: the earliest packet that can be a request without a SYN (a TCP data segment of an open
 * connection, a UDP datagram), the same choice findRequests makes.
 */
export class RequestFlowChoice {
  best: PacketEvent | null = null;

  constructor(private readonly selector: AnalyzeInput['selector']) {}

  /** Considers one event of the first point; true when it is the best so far. */
  offer(ev: PacketEvent): boolean {
    const v = flowView(ev);
    if (v === null || !isFlowCandidate(v, this.selector)) return false;
    if (this.best !== null && !earlier(ev, this.best)) return false;
    this.best = ev;
    return true;
  }
}

/**
 * Whether a later point's TCP packet (or UDP datagram) carries a key of the request: its ISN, a client seq, the
 * SYN-ACK's ack, an acknowledged client seq, or a payload key of its first data segment.
 * (cli/analyze.ts asks this only of records whose seq, ack or a payload key is one of the
 * request's numbers: a new clause that needs none of them must be added to its pre-check too.)
 */
/** isTrigger for a built event's keys. */
export function isKeysTrigger(plan: LaterPass, k: PacketKeys): boolean {
  // A DNS query (only ever a SLOW record: the DNS ports are the reference decoder's) with the
  // request's question: the request itself, or a forwarder's re-sent one.
  const q = plan.data?.dnsQuestion ?? null;
  if (q !== null && k.dnsQuestion === q) return true;
  return isTrigger(
    plan,
    k.tcpFlags ?? 0,
    k.tcpSeq,
    k.tcpAck,
    k.payloadLength,
    k.probeMarker,
    k.payloadHash,
    k.requestLineHash,
  );
}

export function isTrigger(
  plan: LaterPass,
  flags: number,
  seq: number | undefined,
  ack: number | undefined,
  payloadLength: number,
  probeMarker: string | undefined,
  payloadHash: number | undefined,
  requestLineHash: number | undefined,
): boolean {
  const isSyn = (flags & SYN) !== 0;
  const data = plan.data;
  return (
    (isSyn && (flags & ACK) === 0 && seq === plan.isn) ||
    (!isSyn && seq !== undefined && plan.clientSeqs.has(seq)) ||
    (isSyn && (flags & ACK) !== 0 && ack === plan.synAckAck) ||
    ((flags & ACK) !== 0 && ack !== undefined && plan.acked.has(ack)) ||
    (!isSyn &&
      payloadLength > 0 &&
      data !== null &&
      ((data.probeMarker !== null && probeMarker === data.probeMarker) ||
        (data.requestLineHash !== null && requestLineHash === data.requestLineHash) ||
        (data.payloadHash !== null && payloadHash === data.payloadHash)))
  );
}

/** The packet LaterPointSelection is offered, read lazily. */
export interface SelectionCursor<T> {
  /** `connectionKey` of the packet. */
  key(): string;
  /** The packet as kept (a copy when the cursor's storage is reused). */
  take(): T;
}

/**
 * Which of a later point's TCP packets within the window are kept: every connection that carries
 * a key of the request (isTrigger). A connection that is not (yet) related is buffered, up to
 * PENDING_PER_CONNECTION packets since its last data segment (PENDING_TOTAL in all), so a proxy's
 * new connection keeps its SYN until its first data segment decides. When nothing is related, the
 * first packet offered is kept, so "TCP seen within the window" stays true for the not-seen detail.
 *
 * Packets are offered in capture order. `hash`, when given, is an integer that must be equal for
 * equal connection keys (e.g. a flow hash of the tuple): a packet whose hash no buffered or related
 * connection shares is then decided without computing its key. Generic in what is kept, so a caller can run the
 * same selection over cheaper records and materialize only what it keeps.
 */
export class LaterPointSelection<T> {
  private readonly kept: T[] = [];
  private readonly related = new Set<string>();
  private readonly pending = new Map<string, { items: T[]; hash: number | undefined }>();
  private pendingTotal = 0;
  private sentinel: T | null = null;
  /**
   * How many related or pending connections each hash bucket (hash & 0x3fff) holds, and how many
   * came without a hash: a packet whose bucket is empty (and no connection lacks a hash) is of a
   * connection neither related nor buffered. A shared bucket only costs computing the key.
   */
  private readonly hot: Uint32Array; // 64 KiB: stays in cache
  private unhashed = 0;

  /**
   * `hot`: where to keep the bucket counts (1 << 14 zeroed words), e.g. memory a prefilter reads
   * too (offline/summary-gate.ts QUIET); a fresh array without it.
   */
  constructor(hot?: Uint32Array) {
    if (hot !== undefined && hot.length !== 1 << 14)
      throw new RangeError('LaterPointSelection: the hot map holds 1 << 14 words');
    this.hot = hot ?? new Uint32Array(1 << 14);
  }

  /**
   * True when the selection may pass over a data segment without a key (ignoresData can be true):
   * what a prefilter that reads `hot` itself must ask before it leaves any out.
   */
  ignoresAnyData(): boolean {
    return this.sentinel !== null && this.unhashed === 0;
  }

  private mark(hash: number | undefined, d: 1 | -1): void {
    if (hash === undefined) this.unhashed += d;
    else this.hot[hash & 0x3fff] = (this.hot[hash & 0x3fff] ?? 0) + d;
  }

  private drop(key: string, entry: { items: T[]; hash: number | undefined }): void {
    this.pendingTotal -= entry.items.length;
    this.pending.delete(key);
    this.mark(entry.hash, -1);
  }

  /**
   * True when offering a data segment that is not a trigger would change nothing: its connection
   * is neither related nor buffered, and the sentinel is set. The caller may skip offering it.
   */
  ignoresData(hash: number): boolean {
    return this.sentinel !== null && this.unhashed === 0 && this.hot[hash & 0x3fff] === 0;
  }

  offer(
    c: SelectionCursor<T>,
    hash: number | undefined,
    trigger: boolean,
    payloadLength: number,
  ): void {
    // False: this connection is neither related nor buffered.
    const known = hash === undefined || this.unhashed > 0 || this.hot[hash & 0x3fff] !== 0;
    let key: string | undefined;
    if (known && this.related.size > 0) {
      key = c.key();
      if (this.related.has(key)) {
        this.kept.push(c.take());
        return;
      }
    }
    if (trigger) {
      key ??= c.key();
      this.related.add(key);
      this.mark(hash, 1);
      const buf = known ? this.pending.get(key) : undefined;
      if (buf !== undefined) {
        for (const b of buf.items) this.kept.push(b);
        this.drop(key, buf);
      }
      this.kept.push(c.take());
      return;
    }
    this.sentinel ??= c.take();
    if (payloadLength > 0) {
      // A data segment without the request's keys: this connection's start is decided.
      if (known && this.pending.size > 0) {
        key ??= c.key();
        const buf = this.pending.get(key);
        if (buf !== undefined) this.drop(key, buf);
      }
      return;
    }
    key ??= c.key();
    const buf = known ? this.pending.get(key) : undefined;
    if (buf === undefined) {
      this.pending.set(key, { items: [c.take()], hash });
      this.mark(hash, 1);
    } else if (buf.items.length < PENDING_PER_CONNECTION) buf.items.push(c.take());
    else return;
    this.pendingTotal++;
    while (this.pendingTotal > PENDING_TOTAL) {
      const oldest = this.pending.entries().next();
      if (oldest.done === true) break;
      this.drop(oldest.value[0], oldest.value[1]);
    }
  }

  /** The kept packets, in the order they were kept. */
  result(): T[] {
    if (this.kept.length === 0 && this.sentinel !== null) this.kept.push(this.sentinel);
    return this.kept;
  }
}

/** Opaque tunnel flows kept per point (their last packet in the lead before the request). */
const MAX_OUTER_FLOWS = 64;

/**
 * Keeps a point's opaque tunnel packets (WireGuard, ESP) in the lead before the request
 * (core/correlate/outer.ts): per outer flow the last one, for at most MAX_OUTER_FLOWS flows.
 */
class OuterKeeper {
  private readonly flows = new Map<string, PacketEvent>();

  constructor(private readonly startTsNs: bigint) {}

  /** True when `ev` is an opaque tunnel packet (kept or not): the caller is done with it. */
  offer(ev: PacketEvent): boolean {
    if (opaqueTunnel(ev) === null) return false;
    const o = ev.outer;
    if (o === null || !inOpaqueLead(ev, this.startTsNs)) return true;
    const k = `${o.src}|${o.sport ?? ''}|${o.dst}|${o.dport ?? ''}`;
    const had = this.flows.get(k);
    if (had === undefined && this.flows.size >= MAX_OUTER_FLOWS) return true;
    if (had === undefined || !earlier(ev, had)) this.flows.set(k, ev);
    return true;
  }

  get kept(): PacketEvent[] {
    return [...this.flows.values()];
  }
}

/** ICMP errors kept per point (they may quote the request); beyond this they are not kept. */
const MAX_ICMP_ERRORS = 256;

/** Keeps a point's ICMP errors within the window, up to MAX_ICMP_ERRORS. */
class ErrorKeeper {
  readonly kept: PacketEvent[] = [];

  constructor(private readonly inWindow: (ev: PacketEvent) => boolean) {}

  /** True when `ev` is an ICMP error (kept or not): the caller is done with it. */
  offer(ev: PacketEvent): boolean {
    if (ev.related === undefined) return false;
    if (this.kept.length < MAX_ICMP_ERRORS && this.inWindow(ev)) this.kept.push(ev);
    return true;
  }
}

/** An event as a SelectionCursor (events are kept as they are). */
class EventCursor implements SelectionCursor<PacketEvent> {
  ev: PacketEvent | null = null;
  src = '';
  sport = 0;
  dst = '';
  dport = 0;

  key(): string {
    return connectionKey(this.src, this.sport, this.dst, this.dport);
  }

  take(): PacketEvent {
    if (this.ev === null) throw new Error('EventCursor: no event');
    return this.ev;
  }
}

/**
 * Streaming `analyzeEvents` with memory bounded by the request, not by the files: pass 1 streams
 * the first point to select the request (the selector's first SYN, by time); pass 2 streams every
 * point and keeps only events within the window around that SYN that can matter to correlation —
 * the request's connection at the first point; at later points what LaterPointSelection keeps.
 * Correlating the kept events gives the same result as correlating all of them (counts stay the
 * totals captured). Each pass tells the stream its PassPlan, so a stream that can skip events
 * cheaply (cli/analyze.ts on classic pcap) need not materialize the rest.
 */
export function analyzeEventStreams(input: AnalyzeStreamInput): AnalysisResult {
  const windowNs = input.windowNs ?? DEFAULT_WINDOW_NS;
  const sel = input.selector;
  const analyze = (points: PointEvents[]): AnalysisResult =>
    analyzeEvents({
      points,
      inventory: input.inventory,
      selector: sel,
      windowNs: input.windowNs,
      noRequest: input.noRequest,
    });
  const [first, ...rest] = input.points;
  if (first === undefined) return analyze([]);

  // Pass 1: the request's SYN at the first point; 1b, only without one: its first data segment or
  // datagram.
  const choice = new RequestSynChoice(sel);
  let firstCount = 0;
  for (const ev of first.events({ kind: 'select', selector: sel, windowNs })) {
    firstCount++;
    choice.offer(ev);
  }
  firstCount = first.capturedEvents?.() ?? firstCount;
  let start = choice.best;
  if (start === null) {
    const flows = new RequestFlowChoice(sel);
    firstCount = 0;
    for (const ev of first.events({ kind: 'select-flow', selector: sel, windowNs })) {
      firstCount++;
      flows.offer(ev);
    }
    firstCount = first.capturedEvents?.() ?? firstCount;
    start = flows.best;
  }
  const startView = start === null ? null : flowView(start);
  if (start === null || startView === null) {
    // Nothing selected: the same outcome (and error) as with every event in memory, but the later
    // points were not read, which their summaries say.
    const r = analyze(
      input.points.map((p, i) => ({
        name: p.name,
        events: [],
        capturedEvents: i === 0 ? firstCount : 0,
      })),
    );
    return noRequestResult(r.verdict, r.points, new Set(rest.map((p) => p.name)));
  }
  const startTs = start.tsNs;
  const inWindow = (ev: PacketEvent): boolean => absDiff(ev.tsNs, startTs) <= windowNs;
  const tuple = startView.tuple;
  const back = reverseEndpoint(tuple);
  const proto = startView.proto;

  // Pass 2, first point: the request's flow (both directions) within the window.
  const firstKept: PacketEvent[] = [];
  firstCount = 0;
  const requestPass: RequestPass = {
    kind: 'request',
    start,
    proto,
    tuple,
    startTsNs: startTs,
    windowNs,
  };
  const firstErrors = new ErrorKeeper(inWindow);
  const firstOuter = new OuterKeeper(startTs);
  for (const ev of first.events(requestPass)) {
    firstCount++;
    if (firstErrors.offer(ev) || firstOuter.offer(ev)) continue;
    const v = flowView(ev);
    if (v === null || v.proto !== proto) continue;
    const t = v.tuple;
    if ((sameEndpoint(t, tuple) || sameEndpoint(t, back)) && inWindow(ev)) firstKept.push(ev);
  }
  firstKept.push(...firstErrors.kept, ...firstOuter.kept);
  const firstPoint: PointEvents = {
    name: first.name,
    events: firstKept,
    capturedEvents: first.capturedEvents?.() ?? firstCount,
    capturedFrames: first.capturedFrames?.(),
  };
  const [id] = findRequests(firstPoint, sel, windowNs, 1);
  // Client seqs (what later request packets carry) and what replies acknowledge.
  const clientSeqs = new Set<number>();
  const acked = new Set<number>();
  for (const ev of firstKept) {
    const t = ev.inner;
    const seq = ev.keys.tcpSeq;
    if (t === null || seq === undefined || t.src !== tuple.src || t.sport !== tuple.sport) continue;
    clientSeqs.add(seq);
    const f = ev.keys.tcpFlags ?? 0;
    acked.add((seq + ev.keys.payloadLength + ((f & (SYN | FIN)) !== 0 ? 1 : 0)) >>> 0);
  }
  const shape: RequestShape = id?.shape ?? (proto === 'udp' ? 'udp' : 'tcp-established');
  const isn = id?.isn ?? null;
  const plan: LaterPass = {
    kind: 'later',
    shape,
    proto: id?.proto ?? proto,
    startTsNs: startTs,
    windowNs,
    isn,
    synAckAck: isn === null ? null : (isn + 1) >>> 0,
    clientSeqs,
    acked,
    data: id?.data ?? null,
  };

  // Every later point has this plan: those after the first may start reading while it is read.
  for (const p of rest.slice(1)) p.prepare?.(plan);
  const later = rest.map((p) => laterPoint(p, plan));
  const result = analyze([firstPoint, ...later.map((l) => l.point)]);
  // A later point without the request in the window may hold its SYN further away (its clock is
  // off: core/correlate/far-syn.ts). Read it again over all of its time for that SYN only
  // (bounded), and if there is one, once more for the request's connections around it; then
  // correlate once more. Not a stream: it cannot be read again.
  const notSeen = rest.filter(
    (_, i) => id?.shape === 'tcp-syn' && result.points[i + 1]?.status === 'not-seen',
  );
  const far = notSeen.filter((p) => p.readOnce !== true);
  const once = notSeen.filter((p) => p.readOnce === true);
  const withOnce = (r: AnalysisResult): AnalysisResult =>
    once.length === 0
      ? r
      : {
          ...r,
          caveats: [
            ...(r.caveats ?? []),
            `${once.map((p) => p.name).join(', ')}: the request was not seen within ±${Number(windowNs) / 1e9} s ` +
              `of its time at ${first.name}, and a stream is read once, so it was not looked for further away ` +
              '(where a clock that is off puts it): save that capture to a file to have it looked for over all of its time',
          ],
        };
  if (far.length === 0 || id === undefined) return withOnce(result);
  // The pass keeps only the nearest such SYN's time (synOutsideWindow), however long the file.
  const wide: LaterPass = { ...plan, windowNs: ALL_TIME_NS };
  const farAt = rest.map((p) =>
    far.includes(p) ? synOutsideWindow(id, p.events(wide), windowNs) : null,
  );
  if (farAt.every((at) => at === null)) return withOnce(result);
  const again = rest.map((p, i) => {
    const before = later[i];
    if (before === undefined) throw new Error('unreachable: one pass per later point');
    const at = farAt[i] ?? null;
    return at === null
      ? before.point
      : laterPoint(p, { ...plan, startTsNs: at }, before.near).point;
  });
  return withOnce(analyze([firstPoint, ...again]));
}

/** A window that holds every timestamp a capture can carry (u64 nanoseconds). */
const ALL_TIME_NS = 1n << 64n;

/**
 * One later point's pass under `plan`: what LaterPointSelection keeps of the request's transport
 * within the plan's window, and the ICMP errors and tunnel packets near the request (`near`: those
 * of an earlier pass, which a wide pass keeps instead of looking for them again).
 */
function laterPoint(
  p: PointStream,
  plan: LaterPass,
  near?: readonly PacketEvent[],
): { point: PointEvents; near: readonly PacketEvent[] } {
  const inWindow = (ev: PacketEvent): boolean => absDiff(ev.tsNs, plan.startTsNs) <= plan.windowNs;
  const selection = new LaterPointSelection<PacketEvent>();
  const cursor = new EventCursor();
  const errors = new ErrorKeeper(inWindow);
  const outer = new OuterKeeper(plan.startTsNs);
  let count = 0;
  for (const ev of p.events(plan)) {
    count++;
    if (near === undefined && (errors.offer(ev) || outer.offer(ev))) continue;
    const v = flowView(ev);
    if (v === null || v.proto !== plan.proto || !inWindow(ev)) continue;
    const t = v.tuple;
    const k = ev.keys;
    cursor.ev = ev;
    cursor.src = t.src;
    cursor.sport = t.sport;
    cursor.dst = t.dst;
    cursor.dport = t.dport;
    selection.offer(cursor, undefined, isKeysTrigger(plan, k), k.payloadLength);
  }
  const kept = near ?? [...errors.kept, ...outer.kept];
  return {
    point: {
      name: p.name,
      events: [...selection.result(), ...kept],
      capturedEvents: p.capturedEvents?.() ?? count,
      capturedFrames: p.capturedFrames?.(),
      capturedSpan: p.capturedSpan?.(),
    },
    near: kept,
  };
}

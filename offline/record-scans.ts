/**
 * The record-level prefilters of the offline fast path, one per analysis pass (select the request,
 * keep its packets at the first point, keep the later points' candidates): each counts the useful
 * events and builds PacketEvents only for the records the pass can keep.
 */
import { PF, markerOf, summaryEvent } from '../core/decode/summary';
import { inOpaqueLead, opaqueTunnel } from '../core/correlate/outer';
import {
  BLOCK_RECORDS,
  frameAt,
  ifaceAt,
  linktypeAt,
  SUMMARY_WORDS,
  type SummaryBlock,
} from './summary-file';
import { GATE_PROTO, SummaryGate } from './summary-gate';
import type { EventContext } from '../core/decode/event';
import {
  isKeysTrigger,
  isTrigger,
  LaterPointSelection,
  RequestFlowChoice,
  RequestSynChoice,
  type LaterPass,
  type RequestPass,
  type SelectFlowPass,
  type SelectPass,
  isUsefulEvent,
} from '../core/report/analyze';
import type { PacketEvent } from '../common/event';
import type { FlowProto } from '../core/correlate/match-point';
import {
  W_HEAD,
  W_TRANSPORT,
  W_TS_LO,
  W_TS_HI,
  W_FLOW,
  W_PORTS,
  W_SEQ,
  W_ACK,
  W_TCP,
  W_PAYLOAD,
  W_PAYLOAD_HASH,
  W_LINE_HASH,
  SF_PAYLOAD,
  SF_MARKER,
  HEAD_PAYLOAD,
  HEAD_MARKER,
  TR_TCP,
  TR_UDP,
  SYN,
  ACK,
  type Kept,
  Window,
  U32Set,
  RecordCursor,
  EventCursor,
  flowTuple,
  tcpTuple,
} from './record-fields';

/**
 * The FAST records' transport code for a request transport; ICMP is never a FAST record (the
 * reference decoder reads it), so its code matches none.
 */
function fastTransport(proto: FlowProto): number {
  return proto === 'tcp' ? TR_TCP : proto === 'udp' ? TR_UDP : 0x100;
}

/** The inner IP protocol of a request transport's FAST records, for a gate (ICMP: none). */
function gateProto(proto: FlowProto): number {
  return proto === 'tcp' ? GATE_PROTO.tcp : proto === 'udp' ? GATE_PROTO.udp : GATE_PROTO.none;
}

// Opaque tunnel packets (WireGuard, ESP), which may have carried the request (core/correlate/
// outer.ts), are never FAST records: the summarizer names only VXLAN, Geneve and IP-in-IP tunnels
// (native/pcap-batch/src/summary.c), so the SLOW branches below are where they are handed over.

/** What pass 2 at the first point would hand over for one SYN, gathered during pass 1. */
export interface EarlyRequest {
  syn: PacketEvent;
  /** The SYN's ports (sport | dport << 16) and the reverse. */
  fwd: number;
  back: number;
  win: Window;
  events: PacketEvent[];
  /** False when a record on these ports may have come before the SYN. */
  valid: boolean;
}

/**
 * One pass's prefilter over summary blocks. `block` is a plain method (V8 optimizes it after a few
 * blocks; a generator's own loop would run unoptimized for the whole file) that counts the useful
 * events and leaves the events to hand over in `out`; `finish` gives the rest at the end.
 */
export abstract class Scan {
  count = 0;
  readonly out: PacketEvent[] = [];
  /**
   * Which frames the summarizer gives a record (summary-gate.ts), null for all: the records a
   * gate leaves out are those `block` would only count (the reader counts them in b.skipped).
   */
  readonly gate: SummaryGate | null = null;

  constructor(protected readonly ctx: EventContext) {}

  abstract block(b: SummaryBlock): void;

  finish(): PacketEvent[] {
    return [];
  }

  /** The event of record `i` (FAST: from the record; SLOW: the reference decoder). */
  protected event(b: SummaryBlock, i: number): PacketEvent {
    return summaryEvent(b.recs, i, b.src, linktypeAt(b, i), frameAt(b, i), this.ctxOf(b, i));
  }

  /** Record i's event context: the file's interface name, when it gives one (pcapng if_name). */
  protected ctxOf(b: SummaryBlock, i: number): EventContext {
    const iface = ifaceAt(b, i);
    return iface === undefined ? this.ctx : { ...this.ctx, iface };
  }

  /** A SLOW record: its event, counted, when it is useful (isUsefulEvent), else null. */
  protected usefulSlow(b: SummaryBlock, i: number): PacketEvent | null {
    const ev = this.event(b, i);
    if (!isUsefulEvent(ev)) return null;
    this.count++;
    return ev;
  }

  /** A FAST record's transport, counted, when it is useful (TCP or UDP), else -1. */
  protected usefulTransport(words: Uint32Array, w: number): number {
    const tr = (words[w + W_TRANSPORT] ?? 0) & 0xff;
    if (tr !== TR_TCP && tr !== TR_UDP) return -1;
    this.count++;
    return tr;
  }
}

/**
 * Pass 1: new TCP connections (SYN without ACK), and every decoded (SLOW) useful event.
 *
 * It also answers pass 2 when it can, saving a read of the file: it follows analyze's own choice
 * of SYN (RequestSynChoice over the same events) and, from the moment a SYN becomes the best,
 * keeps what pass 2 would hand over for it (TCP on its ports, within the window). That is all of
 * it unless a record on those ports came before the SYN, which a bitmap of the port pairs seen so
 * far rules out (a collision only costs the second read).
 *
 * Its gate gives a record to new TCP connections and, once a SYN is the best, to TCP on its ports
 * within its window: other FAST frames are counted in C, and a TCP frame's ports marked in the
 * gate's seen map (the same slots). The summarizer stops after a SYN that may become the best (or
 * a SLOW frame, which may be one), so the gate follows the best before any later frame is decided.
 */
export class SelectScan extends Scan {
  private readonly choice: RequestSynChoice;
  private readonly seen: Uint32Array; // 2^20 bits
  override readonly gate: SummaryGate | null;
  /**
   * ICMP errors and opaque tunnel packets seen so far: pass 2 keeps those (in the window; in the
   * lead before the request), so one before the SYN voids `best`.
   */
  private errors = 0;
  best: EarlyRequest | null = null;

  constructor(
    ctx: EventContext,
    private readonly plan: SelectPass,
    gated: boolean,
  ) {
    super(ctx);
    this.choice = new RequestSynChoice(plan.selector);
    this.gate = gated
      ? new SummaryGate(BLOCK_RECORDS, true).proto(GATE_PROTO.tcp).ports([]).syn(null)
      : null;
    this.seen = this.gate?.seen ?? new Uint32Array(1 << 15);
  }

  private slot(ports: number): number {
    const a = ports & 0xffff;
    const b = ports >>> 16;
    return Math.imul(a < b ? (a << 16) | b : (b << 16) | a, 0x9e3779b1) >>> 12;
  }

  private markSeen(ports: number): void {
    const k = this.slot(ports);
    this.seen[k >>> 5] = (this.seen[k >>> 5] ?? 0) | (1 << (k & 31));
  }

  /** A TCP event handed over: offered to the choice, kept when on the best SYN's ports. */
  private offer(ev: PacketEvent, ports: number): void {
    const spec = this.best;
    if (this.choice.offer(ev)) {
      const k = this.slot(ports);
      this.best = {
        syn: ev,
        fwd: ports,
        back: ((ports >>> 16) | ((ports & 0xffff) << 16)) >>> 0,
        win: new Window(ev.tsNs, this.plan.windowNs),
        events: [ev],
        valid: ((this.seen[k >>> 5] ?? 0) & (1 << (k & 31))) === 0 && this.errors === 0,
      };
      this.gate
        ?.ports([this.best.fwd, this.best.back])
        .window(ev.tsNs, this.plan.windowNs)
        .syn(ev.tsNs);
    } else if (
      spec !== null &&
      (ports === spec.fwd || ports === spec.back) &&
      spec.win.hasEvent(ev)
    )
      spec.events.push(ev);
    this.markSeen(ports);
  }

  block(b: SummaryBlock): void {
    const words = b.words;
    for (let i = 0, w = 0; i < b.count; i++, w += SUMMARY_WORDS) {
      if (((words[w + W_HEAD] ?? 0) & 0xff) !== 1) {
        const ev = this.usefulSlow(b, i);
        if (ev === null) continue;
        if (ev.related !== undefined) {
          this.errors++;
          if (this.best?.win.hasEvent(ev) === true) this.best.events.push(ev);
        } else if (opaqueTunnel(ev) !== null) {
          this.errors++;
          const s = this.best;
          if (s !== null && inOpaqueLead(ev, s.syn.tsNs)) s.events.push(ev);
        }
        const t = tcpTuple(ev);
        if (t !== null) this.offer(ev, (t.sport | (t.dport << 16)) >>> 0);
        this.out.push(ev);
        continue;
      }
      if (this.usefulTransport(words, w) !== TR_TCP) continue;
      const ports = words[w + W_PORTS] ?? 0;
      if (((words[w + W_TCP] ?? 0) & (SYN | ACK)) === SYN) {
        const ev = this.event(b, i);
        this.offer(ev, ports);
        this.out.push(ev);
        continue;
      }
      const s = this.best;
      if (
        s !== null &&
        (ports === s.fwd || ports === s.back) &&
        s.win.has(words[w + W_TS_HI] ?? 0, words[w + W_TS_LO] ?? 0)
      )
        s.events.push(this.event(b, i));
      this.markSeen(ports);
    }
  }
}

/**
 * Pass 1b (only when no SYN fits): the first point's TCP data segments and UDP datagrams that can
 * be a request without a SYN. Only those that become the earliest so far are handed over, which
 * leaves analyze's own RequestFlowChoice with the same best.
 */
export class SelectFlowScan extends Scan {
  private readonly choice: RequestFlowChoice;
  private readonly dport: number | undefined;

  constructor(ctx: EventContext, plan: SelectFlowPass) {
    super(ctx);
    this.choice = new RequestFlowChoice(plan.selector);
    this.dport = plan.selector.dport;
  }

  block(b: SummaryBlock): void {
    const words = b.words;
    for (let i = 0, w = 0; i < b.count; i++, w += SUMMARY_WORDS) {
      const head = words[w + W_HEAD] ?? 0;
      if ((head & 0xff) !== 1) {
        const ev = this.usefulSlow(b, i);
        if (ev !== null && this.choice.offer(ev)) this.out.push(ev);
        continue;
      }
      if (this.usefulTransport(words, w) < 0 || (head & HEAD_PAYLOAD) === 0) continue;
      if (this.dport !== undefined && (words[w + W_PORTS] ?? 0) >>> 16 !== this.dport) continue;
      const ev = this.event(b, i);
      if (this.choice.offer(ev)) this.out.push(ev);
    }
  }
}

/** Pass 2 at the first point: the request transport's records on its ports (either direction). */
export class RequestScan extends Scan {
  private readonly fwd: number;
  private readonly back: number;
  private readonly transport: number;
  override readonly gate: SummaryGate | null;

  constructor(
    ctx: EventContext,
    private readonly plan: RequestPass,
    gated: boolean,
  ) {
    super(ctx);
    this.fwd = (plan.tuple.sport | (plan.tuple.dport << 16)) >>> 0;
    this.back = (plan.tuple.dport | (plan.tuple.sport << 16)) >>> 0;
    this.transport = fastTransport(plan.proto);
    // analyze keeps only the window's FAST records of these (analyzeEventStreams, pass 2).
    this.gate = gated
      ? new SummaryGate(BLOCK_RECORDS, false)
          .window(plan.startTsNs, plan.windowNs)
          .proto(gateProto(plan.proto))
          .ports([this.fwd, this.back])
      : null;
  }

  block(b: SummaryBlock): void {
    const words = b.words;
    for (let i = 0, w = 0; i < b.count; i++, w += SUMMARY_WORDS) {
      if (((words[w + W_HEAD] ?? 0) & 0xff) !== 1) {
        const ev = this.usefulSlow(b, i);
        // The request's transport, ICMP errors (which may quote it), opaque tunnel packets in the
        // lead (which may have carried it).
        if (
          ev !== null &&
          (ev.related !== undefined ||
            flowTuple(ev, this.plan.proto) !== null ||
            (opaqueTunnel(ev) !== null && inOpaqueLead(ev, this.plan.startTsNs)))
        )
          this.out.push(ev);
        continue;
      }
      if (this.usefulTransport(words, w) !== this.transport) continue;
      const ports = words[w + W_PORTS] ?? 0;
      if (ports === this.fwd || ports === this.back) this.out.push(this.event(b, i));
    }
  }
}

/**
 * A later point: runs analyze's own LaterPointSelection over the records (in-window TCP, in
 * capture order), then builds events for what it kept. analyzeEventStreams, selecting again over
 * those, keeps them all: a kept pending packet comes right before its connection's trigger.
 */
export class LaterScan extends Scan {
  private readonly win: Window;
  private readonly selection: LaterPointSelection<Kept>;
  private readonly cursor = new RecordCursor();
  private readonly wantMarker: boolean;
  /** The numbers a trigger carries (see record()). */
  private readonly seqKeys: U32Set;
  private readonly ackKeys: U32Set;
  private readonly dataKeys: U32Set;
  private readonly transport: number;
  override readonly gate: SummaryGate | null;

  constructor(
    ctx: EventContext,
    private readonly plan: LaterPass,
    gated: boolean,
  ) {
    super(ctx);
    this.win = new Window(plan.startTsNs, plan.windowNs);
    const data = plan.data;
    this.wantMarker = data !== null && data.probeMarker !== null;
    this.transport = fastTransport(plan.proto);
    const known = (xs: (number | null)[]): number[] => xs.filter((x): x is number => x !== null);
    const seqs = known([plan.isn, ...plan.clientSeqs]);
    const acks = known([plan.synAckAck, ...plan.acked]);
    const hashes =
      data === null
        ? []
        : [data.payloadHash, data.requestLineHash].filter((h): h is number => h !== null);
    this.seqKeys = new U32Set(seqs);
    this.ackKeys = new U32Set(acks);
    this.dataKeys = new U32Set(hashes);
    // FAST records of another transport or outside the window are only counted (block()); so are
    // the data segments the loop below would pass over (QUIET), while the selection allows it.
    const gate = gated
      ? new SummaryGate(BLOCK_RECORDS, false, true)
          .window(plan.startTsNs, plan.windowNs)
          .proto(gateProto(plan.proto))
      : null;
    if (gate !== null && !gate.quietKeys(seqs, acks, hashes)) gate.quietOn(false);
    this.gate = gate;
    this.selection = new LaterPointSelection<Kept>(gate?.hot ?? undefined);
  }

  /** A record the fast path left to the reference decoder. */
  private slow(b: SummaryBlock, i: number): void {
    const ev = this.usefulSlow(b, i);
    if (ev === null) return;
    if (ev.related !== undefined) {
      // An ICMP error may quote the request: analyze keeps those within the window.
      if (this.win.hasEvent(ev)) this.out.push(ev);
      return;
    }
    if (opaqueTunnel(ev) !== null) {
      // An opaque tunnel packet may have carried it: analyze keeps those in the lead.
      if (inOpaqueLead(ev, this.plan.startTsNs)) this.out.push(ev);
      return;
    }
    const t = flowTuple(ev, this.plan.proto);
    if (t === null || !this.win.hasEvent(ev)) return;
    const k = ev.keys;
    const trigger = isKeysTrigger(this.plan, k);
    this.selection.offer(new EventCursor(ev, t), undefined, trigger, k.payloadLength);
  }

  /**
   * The loop every record of a later point goes through: kept small, since it runs before V8 has
   * optimized it too. The usual record — a data segment with none of the request's keys, of a
   * connection the selection neither relates nor buffers — is counted and passed over here.
   */
  block(b: SummaryBlock): void {
    const words = b.words;
    const win = this.win;
    const seqKeys = this.seqKeys;
    const ackKeys = this.ackKeys;
    const dataKeys = this.dataKeys;
    const selection = this.selection;
    for (let i = 0, w = 0; i < b.count; i++, w += SUMMARY_WORDS) {
      const head = words[w + W_HEAD] ?? 0;
      if ((head & 0xff) !== 1) {
        this.slow(b, i);
        continue;
      }
      if (this.usefulTransport(words, w) !== this.transport) continue;
      if (!win.has(words[w + W_TS_HI] ?? 0, words[w + W_TS_LO] ?? 0)) continue;
      if (
        (head & HEAD_PAYLOAD) !== 0 &&
        (head & HEAD_MARKER) === 0 &&
        !seqKeys.has(words[w + W_SEQ] ?? 0) &&
        !ackKeys.has(words[w + W_ACK] ?? 0) &&
        !dataKeys.has(words[w + W_PAYLOAD_HASH] ?? 0) &&
        !dataKeys.has(words[w + W_LINE_HASH] ?? 0) &&
        selection.ignoresData((words[w + W_FLOW] ?? 0) & 0xffff)
      )
        continue;
      this.record(b, i, w);
    }
    // The next call may leave such segments out itself once the selection allows it.
    this.gate?.quietOn(selection.ignoresAnyData());
  }

  /** A FAST in-window TCP record the loop could not pass over: offered to the selection. */
  private record(b: SummaryBlock, i: number, w: number): void {
    const { recs, words } = b;
    const head = words[w + W_HEAD] ?? 0;
    const fl = (head >>> 8) & 0xff;
    const payloadLength = (fl & SF_PAYLOAD) !== 0 ? (words[w + W_PAYLOAD] ?? 0) : 0;
    const portFlags = ((words[w + W_TRANSPORT] ?? 0) >>> 16) & 0xff;
    const hashed = payloadLength > 0 && (portFlags & PF.hashes) !== 0;
    const seq = words[w + W_SEQ] ?? 0;
    const ack = words[w + W_ACK] ?? 0;
    const payloadHash = words[w + W_PAYLOAD_HASH] ?? 0;
    const lineHash = words[w + W_LINE_HASH] ?? 0;
    const marker = hashed && (fl & SF_MARKER) !== 0;
    // Every clause of isTrigger needs one of these: seq = ISN or a client seq; ack = ISN + 1 or
    // an acknowledged seq; a payload hash, request-line hash or probe marker of the request. A
    // record with none of them is not a trigger, and isTrigger (the authority) is not asked.
    const trigger =
      (this.seqKeys.has(seq) ||
        this.ackKeys.has(ack) ||
        (hashed && (this.dataKeys.has(payloadHash) || this.dataKeys.has(lineHash))) ||
        (this.wantMarker && marker)) &&
      isTrigger(
        this.plan,
        (words[w + W_TCP] ?? 0) & 0xff,
        seq,
        ack,
        payloadLength,
        marker ? markerOf(recs, i) : undefined,
        hashed ? payloadHash : undefined,
        hashed ? lineHash : undefined,
      );
    const cursor = this.cursor;
    cursor.recs = recs;
    cursor.words = words;
    cursor.i = i;
    cursor.frame = frameAt(b, i);
    cursor.linktype = linktypeAt(b, i);
    cursor.ctx = this.ctxOf(b, i);
    // The low 16 bits of the flow hash: equal for equal connections (direction-free), a small integer.
    this.selection.offer(cursor, (words[w + W_FLOW] ?? 0) & 0xffff, trigger, payloadLength);
  }

  override finish(): PacketEvent[] {
    return this.selection
      .result()
      .map((k) => ('rec' in k ? summaryEvent(k.rec, 0, k.rec, k.linktype, k.frame, k.ctx) : k));
  }
}

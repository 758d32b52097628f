/**
 * Offline analysis of capture files: one PointStream per file for core/report/analyze.ts. Capture
 * files (pcap and pcapng) go through the native decoder's summary records
 * (offline/summary-file.ts) and a record-level prefilter that keeps a superset of what the
 * streaming analysis keeps, so events are built only for the frames the request can need; on hosts
 * without the addon every frame is replayed through the TypeScript decoder (the reference the fast
 * path is tested against).
 */
import { PF, R, SF, SUMMARY_BYTES, markerOf, summaryEvent } from '../core/decode/summary';
import {
  ifaceAt,
  linktypeAt,
  openSummaryPcap,
  SUMMARY_WORDS,
  type SummaryBlock,
} from './summary-file';
import type { EventContext } from '../core/decode/event';
import { formatIPv4, formatIPv6 } from '../core/decode/address';
import type { CaptureFileStats } from './pcap-file';
import { replayCaptureFile } from './replay';
import {
  analyzeEventStreams,
  connectionKey,
  isKeysTrigger,
  isTrigger,
  LaterPointSelection,
  RequestSynChoice,
  type AnalysisResult,
  type LaterPass,
  type PassPlan,
  type PointStream,
  type RequestPass,
  type SelectPass,
  type SelectionCursor,
  isUsefulEvent,
} from '../core/report/analyze';
import { withCaptureHealth, type CaptureHealth } from '../core/report/capture-health';
import type { PacketEvent } from '../common/event';
import type { Inventory } from '../common/inventory';

export interface PointFile {
  name: string;
  file: string;
}

export interface RequestSelector {
  client?: string;
  dst?: string;
  dport?: number;
}

export interface AnalyzeFilesInput {
  points: PointFile[];
  inventory: Inventory;
  selector: RequestSelector;
  /**
   * Packets each point's capture dropped, by point name, as its tool printed them when it stopped
   * (tcpdump: "N packets dropped by kernel"): used where the file records no count of its own.
   */
  drops?: ReadonlyMap<string, number>;
}

function* usefulEvents(
  file: string,
  point: string,
  onEnd: (format: 'pcap' | 'pcapng', stats: CaptureFileStats) => void,
): Generator<PacketEvent> {
  for (const ev of replayCaptureFile(file, { point, node: '', iface: 'file' }, undefined, onEnd)) {
    if (isUsefulEvent(ev)) yield ev;
  }
}

// Summary record fields as 32-bit word indexes (core/decode/summary.ts R; all 4-aligned).
const W_HEAD = 0; // status | flags | inner proto | outer proto
const W_TRANSPORT = R.innerTransport / 4; // inner transport | outer transport | port flags | tunnels
const W_TS_LO = R.tsLo / 4;
const W_TS_HI = R.tsHi / 4;
const W_FLOW = R.flowHash / 4;
const W_PORTS = R.sport / 4; // sport | dport << 16
const W_SEQ = R.seq / 4;
const W_ACK = R.ack / 4;
const W_TCP = R.tcpFlags / 4; // TCP flags | marker length | window
const W_PAYLOAD = R.payloadLength / 4;
const W_PAYLOAD_HASH = R.payloadHash / 4;
const W_LINE_HASH = R.requestLineHash / 4;
const SF_PAYLOAD = SF.payload;
const SF_MARKER = SF.marker;
/** SF bits as they sit in the record's first word (flags is byte 1). */
const HEAD_PAYLOAD = SF.payload << 8;
const HEAD_MARKER = SF.marker << 8;
const TR_TCP = 0;
const TR_UDP = 1;
const SYN = 0x02;
const ACK = 0x10;

/** A later point's record kept for now: a copy of its summary record, or its decoded event. */
type Kept = PacketEvent | { rec: Buffer; frame: number; linktype: number; ctx: EventContext };

/** Exact `|ts - synTs| <= windowNs` for a record's ts words, mostly without bigints. */
class Window {
  private readonly synHi: number;
  private readonly synLo: number;
  private readonly span: number;
  private readonly exact: boolean;

  constructor(
    private readonly synTsNs: bigint,
    private readonly windowNs: bigint,
  ) {
    this.synHi = Number(synTsNs >> 32n);
    this.synLo = Number(synTsNs & 0xffffffffn);
    this.span = Number(windowNs);
    this.exact = windowNs <= BigInt(Number.MAX_SAFE_INTEGER);
  }

  has(hi: number, lo: number): boolean {
    const dHi = hi - this.synHi;
    // |d| < 2^52 + 2^32: a double holds it exactly.
    if (this.exact && dHi > -0x100000 && dHi < 0x100000)
      return Math.abs(dHi * 4294967296 + (lo - this.synLo)) <= this.span;
    const ts = (BigInt(hi) << 32n) | BigInt(lo);
    return (ts > this.synTsNs ? ts - this.synTsNs : this.synTsNs - ts) <= this.windowNs;
  }

  hasEvent(ev: PacketEvent): boolean {
    const d = ev.tsNs - this.synTsNs;
    return (d < 0n ? -d : d) <= this.windowNs;
  }
}

/** A set of u32 values whose lookup allocates nothing: a 4096-bit filter, then open addressing. */
class U32Set {
  private readonly filter = new Uint8Array(4096);
  private readonly slots: Uint32Array;
  private readonly used: Uint8Array;
  private readonly shift: number;
  private readonly mask: number;

  constructor(values: Iterable<number>) {
    const list = [...new Set([...values].map((v) => v >>> 0))];
    let bits = 3;
    while (1 << bits < list.length * 2) bits++;
    this.slots = new Uint32Array(1 << bits);
    this.used = new Uint8Array(1 << bits);
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
    for (const v of list) {
      this.filter[(v ^ (v >>> 12) ^ (v >>> 24)) & 4095] = 1;
      let i = Math.imul(v, 0x9e3779b1) >>> this.shift;
      while (this.used[i] === 1) i = (i + 1) & this.mask;
      this.slots[i] = v;
      this.used[i] = 1;
    }
  }

  has(v: number): boolean {
    if (this.filter[(v ^ (v >>> 12) ^ (v >>> 24)) & 4095] === 0) return false;
    let i = Math.imul(v, 0x9e3779b1) >>> this.shift;
    while (this.used[i] === 1) {
      if (this.slots[i] === v) return true;
      i = (i + 1) & this.mask;
    }
    return false;
  }
}

/** A FAST summary record as a LaterPointSelection cursor. */
class RecordCursor implements SelectionCursor<Kept> {
  recs: Buffer = Buffer.alloc(0);
  words: Uint32Array = new Uint32Array(0);
  i = 0;
  frame = 0;
  linktype = 0;
  ctx: EventContext = { point: '', node: '', iface: '' };

  key(): string {
    const o = this.i * SUMMARY_BYTES;
    const v6 = ((this.recs[o + R.flags] ?? 0) & SF.innerV6) !== 0;
    const fmt = v6 ? formatIPv6 : formatIPv4;
    const ports = this.words[this.i * SUMMARY_WORDS + W_PORTS] ?? 0;
    return connectionKey(
      fmt(this.recs, o + R.src),
      ports & 0xffff,
      fmt(this.recs, o + R.dst),
      ports >>> 16,
    );
  }

  take(): Kept {
    const o = this.i * SUMMARY_BYTES;
    return {
      rec: Buffer.from(this.recs.subarray(o, o + SUMMARY_BYTES)),
      frame: this.frame,
      linktype: this.linktype,
      ctx: this.ctx,
    };
  }
}

/** A decoded (SLOW) TCP event as a LaterPointSelection cursor. */
class EventCursor implements SelectionCursor<Kept> {
  constructor(
    readonly ev: PacketEvent,
    private readonly tuple: { src: string; sport: number; dst: string; dport: number },
  ) {}

  key(): string {
    const t = this.tuple;
    return connectionKey(t.src, t.sport, t.dst, t.dport);
  }

  take(): Kept {
    return this.ev;
  }
}

function tcpTuple(
  ev: PacketEvent,
): { src: string; sport: number; dst: string; dport: number } | null {
  const t = ev.inner;
  if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined)
    return null;
  return { src: t.src, sport: t.sport, dst: t.dst, dport: t.dport };
}

/** What pass 2 at the first point would hand over for one SYN, gathered during pass 1. */
interface EarlyRequest {
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
abstract class Scan {
  count = 0;
  readonly out: PacketEvent[] = [];

  constructor(protected readonly ctx: EventContext) {}

  abstract block(b: SummaryBlock): void;

  finish(): PacketEvent[] {
    return [];
  }

  /** The event of record `i` (FAST: from the record; SLOW: the reference decoder). */
  protected event(b: SummaryBlock, i: number): PacketEvent {
    return summaryEvent(b.recs, i, b.src, linktypeAt(b, i), b.firstFrame + i, this.ctxOf(b, i));
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
 */
class SelectScan extends Scan {
  private readonly choice: RequestSynChoice;
  private readonly seen = new Uint32Array(1 << 15); // 2^20 bits
  best: EarlyRequest | null = null;

  constructor(
    ctx: EventContext,
    private readonly plan: SelectPass,
  ) {
    super(ctx);
    this.choice = new RequestSynChoice(plan.selector);
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
        valid: ((this.seen[k >>> 5] ?? 0) & (1 << (k & 31))) === 0,
      };
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

/** Pass 2 at the first point: TCP records on the request's ports (either direction). */
class RequestScan extends Scan {
  private readonly fwd: number;
  private readonly back: number;

  constructor(ctx: EventContext, plan: RequestPass) {
    super(ctx);
    this.fwd = (plan.tuple.sport | (plan.tuple.dport << 16)) >>> 0;
    this.back = (plan.tuple.dport | (plan.tuple.sport << 16)) >>> 0;
  }

  block(b: SummaryBlock): void {
    const words = b.words;
    for (let i = 0, w = 0; i < b.count; i++, w += SUMMARY_WORDS) {
      if (((words[w + W_HEAD] ?? 0) & 0xff) !== 1) {
        const ev = this.usefulSlow(b, i);
        if (ev?.inner?.proto === 'tcp') this.out.push(ev);
        continue;
      }
      if (this.usefulTransport(words, w) !== TR_TCP) continue;
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
class LaterScan extends Scan {
  private readonly win: Window;
  private readonly selection = new LaterPointSelection<Kept>();
  private readonly cursor = new RecordCursor();
  private readonly wantMarker: boolean;
  /** The numbers a trigger carries (see record()). */
  private readonly seqKeys: U32Set;
  private readonly ackKeys: U32Set;
  private readonly dataKeys: U32Set;

  constructor(
    ctx: EventContext,
    private readonly plan: LaterPass,
  ) {
    super(ctx);
    this.win = new Window(plan.synTsNs, plan.windowNs);
    const data = plan.data;
    this.wantMarker = data !== null && data.probeMarker !== null;
    this.seqKeys = new U32Set([plan.isn, ...plan.clientSeqs]);
    this.ackKeys = new U32Set([plan.synAckAck, ...plan.acked]);
    this.dataKeys = new U32Set(
      data === null
        ? []
        : [data.payloadHash, data.requestLineHash].filter((h): h is number => h !== null),
    );
  }

  /** A record the fast path left to the reference decoder. */
  private slow(b: SummaryBlock, i: number): void {
    const ev = this.usefulSlow(b, i);
    if (ev === null) return;
    const t = tcpTuple(ev);
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
      if (this.usefulTransport(words, w) !== TR_TCP) continue;
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
    cursor.frame = b.firstFrame + i;
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

/**
 * One point's capture file as a PointStream. A pcap or pcapng file goes through the native decoder
 * fast path (offline/summary-file.ts): every frame is summarized in C, and a prefilter on
 * the summary records (the Scan classes above) builds PacketEvents only for the frames the pass
 * can keep (PassPlan) — a superset of what analyzeEventStreams keeps, which still decides — while
 * counting every useful event. Hosts without the addon (and `fast: false`) take the JS reader +
 * decoder for every frame.
 */
class FilePointStream implements PointStream {
  private count = 0;
  private readonly ctx: EventContext;
  /** What the file recorded about its capture, from the last pass that read it to the end. */
  private recorded: { format: 'pcap' | 'pcapng'; stats: CaptureFileStats } | null = null;
  /** Pass 2 at the first point, answered by pass 1 (see SelectScan). */
  private early: {
    syn: PacketEvent;
    windowNs: bigint;
    events: PacketEvent[];
    count: number;
  } | null = null;

  constructor(
    readonly name: string,
    private readonly file: string,
    /** false: the JS reader + decoder for every frame, even where the addon loads. */
    private readonly fast: boolean,
    /** Drops the user gave for this file (`--drops`), used when the file records none. */
    private readonly givenDrops: number | undefined,
  ) {
    this.ctx = { point: name, node: '', iface: 'file' };
  }

  readonly capturedEvents = (): number => this.count;

  /** The file as a capture (capture-health.ts); null when no pass read it to the end. */
  health(): CaptureHealth | null {
    if (this.recorded === null) return null;
    const recorded = this.recorded.stats.dropped;
    const given = recorded === null ? this.givenDrops : undefined;
    return {
      point: this.name,
      node: null,
      iface: this.file,
      state: 'read',
      confirmed: true,
      packets: this.recorded.stats.frames,
      kernelDrops: given ?? recorded,
      queueDrops: 0,
      lost: 0,
      file: this.recorded.format,
      ...(given === undefined ? {} : { dropsGiven: true }),
    };
  }

  /** A note when the user gave a drop count for a file that records its own (which wins). */
  givenNote(): string | null {
    const recorded = this.recorded?.stats.dropped ?? null;
    if (this.givenDrops === undefined || recorded === null) return null;
    return `${this.name}: --drops ${this.givenDrops} not used: ${this.file} records its own count (${recorded} dropped)`;
  }

  readonly events = (plan: PassPlan): Iterable<PacketEvent> => this.pass(plan);

  private *pass(plan: PassPlan): Generator<PacketEvent> {
    this.count = 0;
    const early = this.early;
    this.early = null;
    if (
      plan.kind === 'request' &&
      early !== null &&
      early.syn === plan.syn &&
      early.windowNs === plan.windowNs
    ) {
      this.count = early.count;
      yield* early.events;
      return;
    }
    const reader = this.fast ? openSummaryPcap(this.file) : null;
    if (reader === null) {
      const onEnd = (format: 'pcap' | 'pcapng', stats: CaptureFileStats): void => {
        this.recorded = { format, stats };
      };
      for (const ev of usefulEvents(this.file, this.name, onEnd)) {
        this.count++;
        yield ev;
      }
      return;
    }
    let scan: Scan;
    switch (plan.kind) {
      case 'select':
        scan = new SelectScan(this.ctx, plan);
        break;
      case 'request':
        scan = new RequestScan(this.ctx, plan);
        break;
      case 'later':
        scan = new LaterScan(this.ctx, plan);
        break;
    }
    try {
      for (let b = reader.next(); b !== null; b = reader.next()) {
        scan.block(b);
        this.count = scan.count;
        if (scan.out.length > 0) {
          yield* scan.out;
          scan.out.length = 0;
        }
      }
      yield* scan.finish();
      this.recorded = { format: reader.format, stats: reader.stats() };
    } finally {
      reader.close();
    }
    if (scan instanceof SelectScan && scan.best?.valid === true) {
      const s = scan.best;
      this.early = { syn: s.syn, windowNs: plan.windowNs, events: s.events, count: this.count };
    }
  }
}

/**
 * Reads every point's capture file and analyses the selected request, streaming: the first file is
 * read twice (select the request, then keep its packets), the others once, and only the events that
 * can matter to the request are kept, so memory does not grow with the files. Capture files
 * take the native fast path when the addon loads (FilePointStream); `fast: false` forces the JS
 * reader + decoder for every frame (the reference the fast path is tested against).
 */
export function analyzeFiles(
  input: AnalyzeFilesInput,
  opts: { fast?: boolean } = {},
): AnalysisResult {
  const streams = input.points.map(
    ({ name, file }) =>
      new FilePointStream(name, file, opts.fast !== false, input.drops?.get(name)),
  );
  const result = analyzeEventStreams({
    points: streams,
    inventory: input.inventory,
    selector: input.selector,
  });
  // What each file recorded about its own capture (drop counts: pcapng statistics blocks), and
  // the cautions it gives rise to. A file no pass read to the end (the analysis stopped before
  // it) has nothing to say.
  const health = streams.map((s) => s.health()).filter((h) => h !== null);
  const withHealth = withCaptureHealth(result, health);
  const notes = streams.map((s) => s.givenNote()).filter((n) => n !== null);
  if (notes.length === 0) return withHealth;
  return { ...withHealth, caveats: [...(withHealth.caveats ?? []), ...notes] };
}

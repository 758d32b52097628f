/**
 * Summary records straight to protobuf: the agent process turns each type-4 frame from the capture
 * worker (worker-frames.ts) into EventBatch `events` entries (common/events-wire.ts) without
 * building a PacketEvent per packet. A FAST record is written field by field from the record, in
 * the order and with the presence rules of writeEvent; a SLOW one is decoded by the reference
 * decoder (summaryEvent) and written by writeEvent. FAST records are written in C when the addon
 * loads (wireRun, native/pcap-batch/src/summary_wire.c), else by fast() below, its TypeScript
 * twin. Both give the bytes of writeEvent(summaryEvent(…)) for every record
 * (test/unit/summary-parity.test.ts), so the collector cannot tell the paths apart.
 *
 * Why: building an object per packet and encoding it again cost the agent ~1.6 µs per packet at
 * a busy backend (BENCHMARKS.md, "+parent"), most of it allocation, property access and GC.
 */
import { TRANSPORT_NAMES, TUNNEL_KINDS, type PacketEvent } from '../../common/event';
import {
  linktypeValue,
  Out,
  transportValue,
  tunnelValue,
  writeEvent,
} from '../../common/events-wire';
import type { EncodedEvents } from '../../common/wire';
import { formatIPv6 } from '../../common/address';
import { linktypeName, type DecodeOptions } from '../../core/decode/frame';
import type { EventContext } from '../../core/decode/event';
import { loadNativeAddon, type PcapBatchAddon } from '../../native/loader';
import { FOLD, markerOf, PF, R, SF, SUMMARY_BYTES, summaryEvent } from '../../core/decode/summary';

/** Wire value of each transport index of a record (out of range: 'other', as summaryEvent). */
const TRANSPORT_WIRE = Array.from({ length: 256 }, (_, i) =>
  transportValue(TRANSPORT_NAMES[i] ?? 'other'),
);
/** Wire value of each tunnel kind index of a record (out of range: 'vxlan', as summaryEvent). */
const TUNNEL_WIRE = Array.from({ length: 256 }, (_, i) => tunnelValue(TUNNEL_KINDS[i] ?? 'vxlan'));

/** wireRun's tables: 256 transport then 256 tunnel-kind wire values (summary_wire.c). */
const WIRE_TABLES = Buffer.from([...TRANSPORT_WIRE, ...TUNNEL_WIRE]);
/** SUMMARY_WIRE_MAX in summary.h: most bytes one entry takes besides the context. */
const WIRE_MAX = 512;

/** The parts of a type-4 frame body (layout: worker-frames.ts); throws Error when inconsistent. */
export interface SummaryFrame {
  count: number;
  linktype: number;
  firstFrame: number;
  ctx: EventContext;
  recs: Buffer;
  raw: Buffer;
}

export function parseSummaryFrame(body: Buffer): SummaryFrame {
  if (body.length < 22) throw new Error('summary frame shorter than its header');
  const count = body.readUInt32LE(0);
  const linktype = body.readUInt32LE(4);
  const firstFrame = body.readDoubleLE(8);
  const rawBytes = body.readUInt32LE(16);
  const ctxLen = body.readUInt16LE(20);
  const head = (22 + ctxLen + 7) & ~7;
  if (head + count * SUMMARY_BYTES + rawBytes !== body.length) {
    throw new Error(
      `summary frame of ${body.length} bytes does not hold ${count} records + ${rawBytes}`,
    );
  }
  const ctx = JSON.parse(body.toString('utf8', 22, 22 + ctxLen)) as EventContext;
  return {
    count,
    linktype,
    firstFrame,
    ctx,
    recs: body.subarray(head, head + count * SUMMARY_BYTES),
    raw: body.subarray(head + count * SUMMARY_BYTES),
  };
}

/**
 * The event of SLOW record i of f, decoded from its bytes in the raw area; throws Error when the
 * record points past that area. (Checked here, where SLOW records are read, not in
 * parseSummaryFrame: a loop over every record of every frame in JavaScript showed as ~5 % of the
 * agent process, and FAST records never look at the raw area.)
 */
export function slowSummaryEvent(
  f: SummaryFrame,
  i: number,
  opts?: DecodeOptions,
): ReturnType<typeof summaryEvent> {
  const o = i * SUMMARY_BYTES;
  if (f.recs.readUInt32LE(o + R.dataOffset) + f.recs.readUInt32LE(o + R.caplen) > f.raw.length) {
    throw new Error(`summary record ${i} points past the raw area`);
  }
  return summaryEvent(f.recs, i, f.raw, f.linktype, frameOf(f, i), f.ctx, opts);
}

/** Record i's frame number: the frame's first plus the record's offset (the capture skips the
 * frames it counted into a flow's counter record). */
export function frameOf(f: SummaryFrame, i: number): number {
  return f.firstFrame + f.recs.readUInt32LE(i * SUMMARY_BYTES + R.frameOffset);
}

/** Writes the events entries of records and event lists, in chunks of at most maxBatch events. */
export class EventsWireEncoder {
  private readonly o = new Out();
  private n = 0;
  private errors = 0;
  private ctxKey = '';
  private ctxBytes: Buffer = Buffer.alloc(0);

  /** The addon's wireRun (summary_wire.c), when it loads: FAST records are then written in C. */
  private readonly wireRun: PcapBatchAddon['wireRun'] | undefined;

  constructor(
    private readonly deliver: (chunk: EncodedEvents) => void,
    private readonly maxBatch = 256,
    private readonly opts?: DecodeOptions,
    /** 'js': the TypeScript writer even when the addon loads (its reference, in tests). */
    writer: 'native' | 'js' = 'native',
  ) {
    const load = writer === 'native' ? loadNativeAddon() : undefined;
    this.wireRun = load?.ok === true ? load.addon.wireRun : undefined;
  }

  /** Flow counter events written so far, and the packets they count. */
  foldEvents = 0;
  foldedPackets = 0;

  /** Decode errors among the events written so far (SLOW records the reference could not decode). */
  get decodeErrors(): number {
    return this.errors;
  }

  /** The events of one type-4 frame. */
  summaries(f: SummaryFrame): void {
    const { recs, linktype, ctx } = f;
    const lt = linktypeValue(linktypeName(linktype));
    this.context(ctx);
    const wireRun = this.wireRun;
    const o = this.o;
    for (let i = 0; i < f.count;) {
      const status = recs[i * SUMMARY_BYTES];
      const fast = status === 1;
      if (fast && wireRun !== undefined) {
        // A run of FAST records up to the chunk's end, in C (room for all of them reserved).
        const room = this.maxBatch - this.n;
        o.ensure(room * (this.ctxBytes.length + WIRE_MAX));
        const end = Math.min(f.count, i + room);
        const [next, at] = wireRun(
          recs,
          i,
          end,
          this.ctxBytes,
          lt,
          f.firstFrame,
          WIRE_TABLES,
          o.buf,
          o.at,
        );
        if (next > i) {
          o.at = at;
          this.n += next - i;
          i = next;
          if (this.n >= this.maxBatch) this.flush();
          continue;
        }
        // No progress (cannot happen: room for the run is reserved): write this one record
        // below, so the loop always advances.
      }
      if (fast) this.fast(recs, i, lt, frameOf(f, i));
      else if (status === FOLD)
        this.event(summaryEvent(recs, i, f.raw, f.linktype, frameOf(f, i), ctx, this.opts));
      else this.event(slowSummaryEvent(f, i, this.opts));
      i++;
      if (++this.n >= this.maxBatch) this.flush();
    }
  }

  /** Events already built (the cap fallback's frames). */
  events(evs: readonly PacketEvent[]): void {
    for (const ev of evs) {
      this.event(ev);
      if (++this.n >= this.maxBatch) this.flush();
    }
  }

  /** Hands over what is written (nothing when empty). */
  flush(): void {
    if (this.n === 0) return;
    const o = this.o;
    // allocUnsafe: every byte is written, so no zero-fill (it showed in profiles).
    const bytes = Buffer.allocUnsafe(o.at);
    bytes.set(o.buf.subarray(0, o.at));
    const count = this.n;
    o.at = 0;
    this.n = 0;
    this.deliver({ bytes, count });
  }

  private event(ev: PacketEvent): void {
    if (ev.error !== undefined) this.errors++;
    if (ev.fold !== undefined) {
      this.foldEvents++;
      this.foldedPackets += ev.fold.packets;
    }
    writeEvent(this.o, ev);
  }

  /** point, node and iface, encoded once per context (fields 1–3 of every event). */
  private context(ctx: EventContext): void {
    const key = `${ctx.point}\u0000${ctx.node}\u0000${ctx.iface}`;
    if (key === this.ctxKey) return;
    const t = new Out();
    if (ctx.point !== '') t.string(1, ctx.point);
    if (ctx.node !== '') t.string(2, ctx.node);
    if (ctx.iface !== '') t.string(3, ctx.iface);
    this.ctxBytes = Buffer.from(t.buf.subarray(0, t.at));
    this.ctxKey = key;
  }

  /**
   * A FAST record as writeEvent writes summaryEvent's PacketEvent of it. Straight-line writes into
   * a local buffer and position (module functions small enough to inline): through Out's methods,
   * which TurboFan did not inline into a function this size, it cost ~0.7 µs per event.
   */
  private fast(recs: Buffer, i: number, linktype: number, frame: number): void {
    const o = this.o;
    const r = i * SUMMARY_BYTES;
    const cb = this.ctxBytes;
    // Bound: context + two tuples of IPv6 text + tunnels + keys with a 32-byte marker.
    o.ensure(cb.length + 512);
    const buf = o.buf;
    let at = o.at;
    buf[at] = (3 << 3) | 2;
    const m = at + 1;
    at += 4;
    for (let k = 0; k < cb.length; k++) buf[at++] = cb[k] ?? 0;
    buf[at++] = 4 << 3;
    at = varint(buf, at, linktype);
    // fixed64 tsNs: the record holds it little-endian, as the wire does.
    buf[at++] = (5 << 3) | 1;
    for (let k = 0; k < 8; k++) buf[at++] = recs[r + R.tsLo + k] ?? 0;
    if (frame !== 0) {
      buf[at++] = 6 << 3;
      at = varint(buf, at, frame);
    }
    const fl = recs[r + R.flags] ?? 0;
    const pf = recs[r + R.portFlags] ?? 0;
    if ((fl & SF.outer) !== 0) {
      at = tuple(buf, at, 7, recs, r, (fl & SF.outerV6) !== 0, (pf & 2) !== 0, OUTER);
    }
    at = tuple(buf, at, 8, recs, r, (fl & SF.innerV6) !== 0, (pf & 1) !== 0, INNER);
    const nt = Math.min(2, recs[r + R.tunnels] ?? 0); // a record has room for two
    for (let k = 0; k < nt; k++) {
      buf[at] = (10 << 3) | 2;
      const tm = at + 1;
      at += 4;
      buf[at++] = 1 << 3;
      at = varint(buf, at, TUNNEL_WIRE[recs[r + R.tunnel0 + 2 * k] ?? 0] ?? 1);
      if (recs[r + R.tunnel0 + 2 * k + 1] === 1) {
        buf[at++] = 2 << 3;
        at = varint(buf, at, u32(recs, r + R.tunnelId0 + 4 * k));
      }
      len3(buf, tm, at);
    }
    buf[at] = (11 << 3) | 2;
    const km = at + 1;
    at += 4;
    if ((fl & SF.ipId) !== 0) at = field(buf, at, 1, u32(recs, r + R.ipId));
    if ((fl & SF.tcp) !== 0) {
      at = field(buf, at, 2, u32(recs, r + R.seq));
      at = field(buf, at, 3, u32(recs, r + R.ack));
      at = field(buf, at, 4, recs[r + R.tcpFlags] ?? 0);
      at = field(buf, at, 5, (recs[r + R.window] ?? 0) | ((recs[r + R.window + 1] ?? 0) << 8));
    }
    if ((fl & SF.tsOpt) !== 0) {
      at = field(buf, at, 6, u32(recs, r + R.tsVal));
      at = field(buf, at, 7, u32(recs, r + R.tsEcr));
    }
    if ((fl & SF.payload) !== 0) {
      const len = u32(recs, r + R.payloadLength);
      if (len !== 0) at = field(buf, at, 8, len);
      if ((pf & PF.hashes) !== 0) {
        at = field(buf, at, 9, u32(recs, r + R.payloadHash));
        at = field(buf, at, 10, u32(recs, r + R.requestLineHash));
        if ((fl & SF.marker) !== 0) at = ascii(buf, at, 11, markerOf(recs, i));
      }
    }
    len3(buf, km, at);
    const wire = u32(recs, r + R.wireLength);
    if (wire !== 0) at = field(buf, at, 14, wire);
    len3(buf, m, at);
    o.at = at;
  }
}

/** Where a tuple's fields sit in a record. */
interface TupleAt {
  proto: number;
  transport: number;
  src: number;
  dst: number;
  sport: number;
}
const INNER: TupleAt = {
  proto: R.innerProto,
  transport: R.innerTransport,
  src: R.src,
  dst: R.dst,
  sport: R.sport,
};
const OUTER: TupleAt = {
  proto: R.outerProto,
  transport: R.outerTransport,
  src: R.outerSrc,
  dst: R.outerDst,
  sport: R.outerSport,
};

/** A record's tuple as writeTuple writes summaryEvent's Tuple of it. */
function tuple(
  buf: Buffer,
  at: number,
  fieldNo: number,
  recs: Buffer,
  r: number,
  v6: boolean,
  hasPorts: boolean,
  w: TupleAt,
): number {
  buf[at] = (fieldNo << 3) | 2;
  const m = at + 1;
  at += 4;
  at = field(buf, at, 1, TRANSPORT_WIRE[recs[r + w.transport] ?? 7] ?? 0);
  const ipProto = recs[r + w.proto] ?? 0;
  if (ipProto !== 0) at = field(buf, at, 2, ipProto);
  if (v6) {
    at = ascii(buf, at, 3, formatIPv6(recs, r + w.src));
    at = ascii(buf, at, 4, formatIPv6(recs, r + w.dst));
  } else {
    at = ipv4(buf, at, 3, recs, r + w.src);
    at = ipv4(buf, at, 4, recs, r + w.dst);
  }
  if (hasPorts) {
    const p = r + w.sport;
    at = field(buf, at, 5, (recs[p] ?? 0) | ((recs[p + 1] ?? 0) << 8));
    at = field(buf, at, 6, (recs[p + 2] ?? 0) | ((recs[p + 3] ?? 0) << 8));
  }
  len3(buf, m, at);
  return at;
}

/** u32 little-endian at `at`. */
function u32(b: Buffer, at: number): number {
  return (
    ((b[at] ?? 0) |
      ((b[at + 1] ?? 0) << 8) |
      ((b[at + 2] ?? 0) << 16) |
      ((b[at + 3] ?? 0) << 24)) >>>
    0
  );
}

/** A varint (values up to 2^53) at buf[at]; returns the next position. */
function varint(buf: Buffer, at: number, v: number): number {
  if (v <= 0xffffffff) {
    while (v >= 0x80) {
      buf[at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
  } else {
    while (v >= 0x80) {
      buf[at++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
  }
  buf[at] = v;
  return at + 1;
}

/** A varint field (number 1..15). */
function field(buf: Buffer, at: number, no: number, v: number): number {
  buf[at] = no << 3;
  return varint(buf, at + 1, v);
}

/** A string field of ASCII text shorter than 128 bytes (addresses, markers). */
function ascii(buf: Buffer, at: number, no: number, s: string): number {
  buf[at] = (no << 3) | 2;
  buf[at + 1] = s.length;
  at += 2;
  for (let k = 0; k < s.length; k++) buf[at++] = s.charCodeAt(k);
  return at;
}

/** Decimal digits of each byte value: DEC[4v] = digit count, then the digits' ASCII codes. */
const DEC = new Uint8Array(256 * 4);
for (let v = 0; v < 256; v++) {
  const t = String(v);
  DEC[4 * v] = t.length;
  for (let k = 0; k < t.length; k++) DEC[4 * v + 1 + k] = t.charCodeAt(k);
}

/** An IPv4 address field as formatIPv4's dotted quad, written from the 4 bytes directly. */
function ipv4(buf: Buffer, at: number, no: number, recs: Buffer, a: number): number {
  buf[at] = (no << 3) | 2;
  const lenAt = at + 1;
  at += 2;
  const start = at;
  for (let k = 0; k < 4; k++) {
    if (k !== 0) buf[at++] = 0x2e;
    const d = 4 * (recs[a + k] ?? 0);
    const n = DEC[d] ?? 0;
    for (let j = 1; j <= n; j++) buf[at++] = DEC[d + j] ?? 0;
  }
  buf[lenAt] = at - start;
  return at;
}

/** A nested message's length in Out.end's 3-byte form (its body runs from mark + 3 to end). */
function len3(buf: Buffer, mark: number, end: number): void {
  const len = end - mark - 3;
  buf[mark] = (len & 0x7f) | 0x80;
  buf[mark + 1] = ((len >>> 7) & 0x7f) | 0x80;
  buf[mark + 2] = len >>> 14;
}

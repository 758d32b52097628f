/**
 * Framing between the capture worker (worker.ts, inside the target namespace) and its parent
 * (ns-capture.ts), over the worker's stdout:
 *
 *   length (u32 BE, counts type + body) | type (u8) | body
 *   type 1: one hoptrace.v1.PacketEvent (common/codec.ts); still parsed, no longer sent
 *   type 2: one UTF-8 JSON control message (WorkerControl)
 *   type 3: a batch of events in the compact binary layout below (the cap fallback sends these)
 *   type 4: a capture batch as C summary records (summary.ts; what the native worker sends, written
 *           by the addon itself: pcap_batch.c deliver_frame; encodeSummaryFrame is the reference):
 *           u32 count | u32 linktype | f64 first frame number | u32 raw bytes | u16 n | n bytes of
 *           UTF-8 JSON EventContext | pad to 8 | count × 192-byte records | raw area (the bytes of
 *           the SLOW frames only; their records' data offsets point into it). The parent builds
 *           the events (summaryEvent): the worker does no per-packet JavaScript at all.
 *   type 5: a frame in the shared ring (native/pcap-batch/src/frame_ring.c), when the parent gave
 *           the worker one: u32 offset | u32 length | u64 end (LE). ring[offset, offset + length)
 *           holds one whole frame of another type, parsed as if it had come inline; `end` is what
 *           the parent releases once it has consumed that frame.
 *
 * Batch body (little-endian):
 *   u32 count | u32 tableOffset (from the body start) | count event records | string table
 *   string table: u32 n | n × (u16 byteLength | UTF-8 bytes)
 *   event record:
 *     u16 flags (EV_*) | u16 point | u16 node | u16 iface | u16 linktype (string indexes)
 *     u64 tsNs | f64 frame | u32 wireLength
 *     [outer tuple] [inner tuple] [related tuple]   (as flags say)
 *     u8 tunnel count | tunnels: u8 kind | u8 flags (1 id, 2 messageType) | u32 id | u32 msgType
 *     keys: u16 presence mask (KEY_FIELDS order, then probeMarker, then the ICMP and DNS keys) |
 *           u32 payloadLength | u32 per present numeric key | [u16 probeMarker] |
 *           u32 per present ICMP / DNS key
 *     [u16 error]
 *   tuple: u8 proto (TRANSPORTS index) | u8 ipProto | u8 flags (1 sport, 2 dport) | u16 src |
 *          u16 dst | u32 sport | u32 dport
 *
 * Strings (point, addresses, ...) repeat across a batch, so each is written once per frame and the
 * decoder hands out the same string for every use. One frame carries a whole capture batch: one
 * write, one parse, no per-event protobuf work on either side.
 */
import { decodePacketEvent, encodePacketEvent } from '../../common/codec';
import type {
  PacketEvent,
  PacketKeys,
  TransportName,
  Tuple,
  TunnelInfo,
  TunnelKind,
} from '../../common/event';
import { NUMERIC_KEYS, TRANSPORT_NAMES, TUNNEL_KINDS } from '../../common/event';
import type { CaptureStats } from './source';
import { FOLD, R, SUMMARY_BYTES, summaryEvent } from '../../core/decode/summary';
import { frameOf, parseSummaryFrame, slowSummaryEvent } from './summary-wire';

export const FRAME_EVENT = 1;
export const FRAME_CONTROL = 2;
export const FRAME_EVENTS = 3;
export const FRAME_SUMMARIES = 4;
export const FRAME_RING = 5;
/** Largest frame accepted: a batch frame is split well below this; it only stops runaway lengths. */
export const MAX_FRAME = 16 * 1024 * 1024;
/** A batch frame is closed once its body reaches this many bytes (or its string table 60 k). */
const BATCH_SPLIT_BYTES = 1024 * 1024;
const MAX_STRINGS = 60_000;

/** An error as it crosses the process boundary. */
export interface WireError {
  code: string;
  message: string;
  where?: string;
  hint?: string;
}

/** Control messages from the worker. */
export type WorkerControl =
  | { kind: 'ready'; linktype: string; pid: number; source?: 'native' | 'cap' }
  | { kind: 'warning'; message: string }
  | { kind: 'stats'; stats: CaptureStats }
  | { kind: 'error'; error: WireError }
  | { kind: 'end' };

function frame(type: number, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out.writeUInt32BE(body.length + 1, 0);
  out[4] = type;
  out.set(body, 5);
  return out;
}

/** One event frame (type 1, protobuf; kept for compatibility and tests). */
export function encodeEventFrame(ev: PacketEvent): Buffer {
  return frame(FRAME_EVENT, encodePacketEvent(ev));
}

/** One control frame. */
export function encodeControlFrame(msg: WorkerControl): Buffer {
  return frame(FRAME_CONTROL, Buffer.from(JSON.stringify(msg), 'utf8'));
}

// ---- batch codec ----------------------------------------------------------------------------

const TRANSPORTS: readonly TransportName[] = TRANSPORT_NAMES;
const TUNNELS: readonly TunnelKind[] = TUNNEL_KINDS;
const TRANSPORT_INDEX = new Map<string, number>(TRANSPORTS.map((n, i) => [n, i]));
const TUNNEL_INDEX = new Map<string, number>(TUNNELS.map((n, i) => [n, i]));
/** The optional numeric keys (all but payloadLength, which is always sent), in mask-bit order. */
const KEY_FIELDS = NUMERIC_KEYS.filter((k) => k !== 'payloadLength');
const KEY_PROBE = 1 << KEY_FIELDS.length;
/** Mask bit of EXTRA_KEYS[0] (icmpType); the others follow, up to bit 15. */
const KEY_ICMP = KEY_PROBE << 1;

const EV_OUTER = 1;
const EV_INNER = 2;
const EV_RELATED = 4;
const EV_TRUNCATED = 8;
const EV_ERROR = 16;

/** Worst-case bytes of one record without its tunnels. */
const MAX_RECORD = 2 + 8 + 8 + 8 + 4 + 3 * 15 + 1 + 2 + 4 + 4 * KEY_FIELDS.length + 2 + 4 * 6 + 2;
const TUNNEL_BYTES = 10;

/** Encodes event batches into type-3 frames, reusing its scratch buffer across calls. */
export class EventBatchEncoder {
  private buf = Buffer.allocUnsafe(256 * 1024);
  private view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  private at = 0;
  private strings = new Map<string, number>();
  private table: string[] = [];

  /** The frames for `events` (usually one; split when large). */
  encode(events: readonly PacketEvent[]): Buffer[] {
    const out: Buffer[] = [];
    let count = 0;
    this.reset();
    for (const ev of events) {
      this.record(ev);
      count++;
      if (this.at >= BATCH_SPLIT_BYTES || this.table.length >= MAX_STRINGS) {
        out.push(this.finish(count));
        this.reset();
        count = 0;
      }
    }
    if (count > 0) out.push(this.finish(count));
    return out;
  }

  private reset(): void {
    // 5 bytes of frame header + count + table offset.
    this.at = 13;
    this.strings.clear();
    this.table = [];
  }

  private ensure(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.byteLength);
  }

  private str(s: string): number {
    let i = this.strings.get(s);
    if (i === undefined) {
      i = this.table.length;
      this.table.push(s);
      this.strings.set(s, i);
    }
    return i;
  }

  private tuple(t: Tuple): void {
    const v = this.view;
    let at = this.at;
    v.setUint8(at, TRANSPORT_INDEX.get(t.proto) ?? TRANSPORTS.length - 1);
    v.setUint8(at + 1, t.ipProto);
    v.setUint8(at + 2, (t.sport !== undefined ? 1 : 0) | (t.dport !== undefined ? 2 : 0));
    v.setUint16(at + 3, this.str(t.src), true);
    v.setUint16(at + 5, this.str(t.dst), true);
    at += 7;
    if (t.sport !== undefined) {
      v.setUint32(at, t.sport, true);
      at += 4;
    }
    if (t.dport !== undefined) {
      v.setUint32(at, t.dport, true);
      at += 4;
    }
    this.at = at;
  }

  private record(ev: PacketEvent): void {
    this.ensure(MAX_RECORD + ev.tunnels.length * TUNNEL_BYTES);
    const v = this.view;
    let flags = 0;
    if (ev.outer) flags |= EV_OUTER;
    if (ev.inner) flags |= EV_INNER;
    if (ev.related) flags |= EV_RELATED;
    if (ev.truncated) flags |= EV_TRUNCATED;
    if (ev.error !== undefined) flags |= EV_ERROR;
    let at = this.at;
    v.setUint16(at, flags, true);
    v.setUint16(at + 2, this.str(ev.point), true);
    v.setUint16(at + 4, this.str(ev.node), true);
    v.setUint16(at + 6, this.str(ev.iface), true);
    v.setUint16(at + 8, this.str(ev.linktype), true);
    v.setBigUint64(at + 10, ev.tsNs, true);
    v.setFloat64(at + 18, ev.frame, true);
    v.setUint32(at + 26, ev.wireLength, true);
    this.at = at + 30;
    if (ev.outer) this.tuple(ev.outer);
    if (ev.inner) this.tuple(ev.inner);
    if (ev.related) this.tuple(ev.related);
    at = this.at;
    v.setUint8(at++, ev.tunnels.length);
    for (const t of ev.tunnels) {
      v.setUint8(at, TUNNEL_INDEX.get(t.kind) ?? 0);
      v.setUint8(at + 1, (t.id !== undefined ? 1 : 0) | (t.messageType !== undefined ? 2 : 0));
      at += 2;
      if (t.id !== undefined) {
        v.setUint32(at, t.id, true);
        at += 4;
      }
      if (t.messageType !== undefined) {
        v.setUint32(at, t.messageType, true);
        at += 4;
      }
    }
    const k = ev.keys;
    const maskAt = at;
    at += 2;
    v.setUint32(at, k.payloadLength, true);
    at += 4;
    // Unrolled: a keyed lookup per field (k[name]) is megamorphic and costs more than the rest.
    let mask = 0;
    const put = (bit: number, val: number | undefined): void => {
      if (val === undefined) return;
      mask |= bit;
      v.setUint32(at, val, true);
      at += 4;
    };
    put(1, k.ipId);
    put(2, k.tcpSeq);
    put(4, k.tcpAck);
    put(8, k.tcpFlags);
    put(16, k.tcpWindow);
    put(32, k.tsVal);
    put(64, k.tsEcr);
    put(128, k.payloadHash);
    put(256, k.requestLineHash);
    if (k.probeMarker !== undefined) {
      mask |= KEY_PROBE;
      v.setUint16(at, this.str(k.probeMarker), true);
      at += 2;
    }
    if (k.icmpType !== undefined) {
      put(KEY_ICMP, k.icmpType);
      put(KEY_ICMP << 1, k.icmpCode);
      put(KEY_ICMP << 2, k.icmpId);
      put(KEY_ICMP << 3, k.icmpSeq);
    }
    put(KEY_ICMP << 4, k.dnsId);
    put(KEY_ICMP << 5, k.dnsQuestion);
    v.setUint16(maskAt, mask, true);
    if (ev.error !== undefined) {
      v.setUint16(at, this.str(ev.error), true);
      at += 2;
    }
    this.at = at;
  }

  /** The frame for what is in the scratch buffer: header, records, string table. */
  private finish(count: number): Buffer {
    let tableBytes = 4;
    const enc: Buffer[] = [];
    for (const s of this.table) {
      const b = Buffer.from(s, 'utf8');
      if (b.length > 0xffff) throw new Error('worker frame string longer than 65535 bytes');
      enc.push(b);
      tableBytes += 2 + b.length;
    }
    const recordsEnd = this.at;
    const total = recordsEnd + tableBytes;
    const out = Buffer.allocUnsafe(total);
    this.buf.copy(out, 0, 0, recordsEnd);
    out.writeUInt32BE(total - 4, 0);
    out[4] = FRAME_EVENTS;
    out.writeUInt32LE(count, 5);
    out.writeUInt32LE(recordsEnd - 5, 9);
    let at = recordsEnd;
    out.writeUInt32LE(enc.length, at);
    at += 4;
    for (const b of enc) {
      out.writeUInt16LE(b.length, at);
      b.copy(out, at + 2);
      at += 2 + b.length;
    }
    return out;
  }
}

/** Decodes the body of a type-3 frame (throws Error on a malformed body). */
export function decodeEventBatch(body: Buffer): PacketEvent[] {
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const count = v.getUint32(0, true);
  const tableAt = v.getUint32(4, true);
  if (tableAt < 8 || tableAt + 4 > body.length)
    throw new Error(`bad batch table offset ${tableAt}`);
  const n = v.getUint32(tableAt, true);
  const table: string[] = new Array<string>(n);
  let at = tableAt + 4;
  for (let i = 0; i < n; i++) {
    const len = v.getUint16(at, true);
    if (at + 2 + len > body.length) throw new Error('batch string table overruns the frame');
    table[i] = body.toString('utf8', at + 2, at + 2 + len);
    at += 2 + len;
  }
  const str = (i: number): string => {
    const s = table[i];
    if (s === undefined) throw new Error(`bad string index ${i}`);
    return s;
  };
  at = 8;
  const tuple = (): Tuple => {
    const fl = v.getUint8(at + 2);
    const t: Tuple = {
      proto: TRANSPORTS[v.getUint8(at)] ?? 'other',
      ipProto: v.getUint8(at + 1),
      src: str(v.getUint16(at + 3, true)),
      dst: str(v.getUint16(at + 5, true)),
    };
    at += 7;
    if (fl & 1) {
      t.sport = v.getUint32(at, true);
      at += 4;
    }
    if (fl & 2) {
      t.dport = v.getUint32(at, true);
      at += 4;
    }
    return t;
  };
  const u32 = (): number => {
    const x = v.getUint32(at, true);
    at += 4;
    return x;
  };
  const events: PacketEvent[] = new Array<PacketEvent>(count);
  for (let e = 0; e < count; e++) {
    if (at + 30 > tableAt) throw new Error('batch records overrun their area');
    const flags = v.getUint16(at, true);
    const point = str(v.getUint16(at + 2, true));
    const node = str(v.getUint16(at + 4, true));
    const iface = str(v.getUint16(at + 6, true));
    const linktype = str(v.getUint16(at + 8, true));
    const tsNs = v.getBigUint64(at + 10, true);
    const frameNo = v.getFloat64(at + 18, true);
    const wireLength = v.getUint32(at + 26, true);
    at += 30;
    const outer = flags & EV_OUTER ? tuple() : null;
    const inner = flags & EV_INNER ? tuple() : null;
    const related = flags & EV_RELATED ? tuple() : undefined;
    const nt = v.getUint8(at++);
    const tunnels: TunnelInfo[] = [];
    for (let i = 0; i < nt; i++) {
      const kind = TUNNELS[v.getUint8(at)] ?? 'vxlan';
      const fl = v.getUint8(at + 1);
      at += 2;
      const t: TunnelInfo = { kind };
      if (fl & 1) {
        t.id = v.getUint32(at, true);
        at += 4;
      }
      if (fl & 2) {
        t.messageType = v.getUint32(at, true);
        at += 4;
      }
      tunnels.push(t);
    }
    const mask = v.getUint16(at, true);
    const keys: PacketKeys = { payloadLength: v.getUint32(at + 2, true) };
    at += 6;
    // Unrolled, as in the encoder (same bit order as KEY_FIELDS).
    if (mask & 1) keys.ipId = u32();
    if (mask & 2) keys.tcpSeq = u32();
    if (mask & 4) keys.tcpAck = u32();
    if (mask & 8) keys.tcpFlags = u32();
    if (mask & 16) keys.tcpWindow = u32();
    if (mask & 32) keys.tsVal = u32();
    if (mask & 64) keys.tsEcr = u32();
    if (mask & 128) keys.payloadHash = u32();
    if (mask & 256) keys.requestLineHash = u32();
    if (mask & KEY_PROBE) {
      keys.probeMarker = str(v.getUint16(at, true));
      at += 2;
    }
    if (mask & KEY_ICMP) keys.icmpType = u32();
    if (mask & (KEY_ICMP << 1)) keys.icmpCode = u32();
    if (mask & (KEY_ICMP << 2)) keys.icmpId = u32();
    if (mask & (KEY_ICMP << 3)) keys.icmpSeq = u32();
    if (mask & (KEY_ICMP << 4)) keys.dnsId = u32();
    if (mask & (KEY_ICMP << 5)) keys.dnsQuestion = u32();
    const ev: PacketEvent = {
      point,
      node,
      iface,
      linktype,
      tsNs,
      frame: frameNo,
      outer,
      inner,
      tunnels,
      keys,
      truncated: (flags & EV_TRUNCATED) !== 0,
      wireLength,
    };
    if (related !== undefined) ev.related = related;
    if (flags & EV_ERROR) {
      ev.error = str(v.getUint16(at, true));
      at += 2;
    }
    events[e] = ev;
  }
  if (at > tableAt) throw new Error('batch records overrun their area');
  return events;
}

// ---- summary frames ---------------------------------------------------------------------------

/**
 * One type-4 frame for a capture batch: the summary records as they are, plus the bytes of the
 * frames the C fast path left to the reference decoder (`raw[0, rawBytes)`; the records' data
 * offsets already point into it). The records are taken as consecutive frames from firstFrame:
 * each gets its offset (R.frameOffset), as the capture writes it (which skips the frames folding
 * counted). Returns a view of `into` (or of a new buffer when too small).
 */
export function encodeSummaryFrame(
  recs: Buffer,
  count: number,
  raw: Buffer,
  rawBytes: number,
  linktype: number,
  firstFrame: number,
  /** JSON of the EventContext (serialized once per capture, not per batch). */
  ctxJson: string,
  into?: Buffer,
): Buffer {
  const ctxLen = Buffer.byteLength(ctxJson, 'utf8');
  const head = (22 + ctxLen + 7) & ~7;
  const body = head + count * SUMMARY_BYTES + rawBytes;
  const out =
    into !== undefined && into.length >= 5 + body
      ? into.subarray(0, 5 + body)
      : Buffer.allocUnsafe(5 + body);
  out.writeUInt32BE(body + 1, 0);
  out[4] = FRAME_SUMMARIES;
  const b = 5;
  out.writeUInt32LE(count, b);
  out.writeUInt32LE(linktype >>> 0, b + 4);
  out.writeDoubleLE(firstFrame, b + 8);
  out.writeUInt32LE(rawBytes, b + 16);
  out.writeUInt16LE(ctxLen, b + 20);
  out.write(ctxJson, b + 22, 'utf8');
  out.fill(0, b + 22 + ctxLen, b + head);
  recs.copy(out, b + head, 0, count * SUMMARY_BYTES);
  for (let i = 0; i < count; i++)
    out.writeUInt32LE(i, b + head + i * SUMMARY_BYTES + R.frameOffset);
  if (rawBytes > 0) raw.copy(out, b + head + count * SUMMARY_BYTES, 0, rawBytes);
  return out;
}

/** The events of a type-4 frame body. Throws Error when the body is inconsistent. */
export function decodeSummaryFrame(body: Buffer): PacketEvent[] {
  const f = parseSummaryFrame(body);
  const events = new Array<PacketEvent>(f.count);
  for (let i = 0; i < f.count; i++) {
    const status = f.recs[i * SUMMARY_BYTES];
    events[i] =
      status === 1 || status === FOLD
        ? summaryEvent(f.recs, i, f.raw, f.linktype, frameOf(f, i), f.ctx)
        : slowSummaryEvent(f, i);
  }
  return events;
}

/** What the parser hands on. */
export type WorkerFrame =
  | { type: 'event'; event: PacketEvent }
  | { type: 'events'; events: PacketEvent[] }
  /**
   * A type-4 body, unparsed (WorkerFrameParser with rawSummaries): a view of the read chunk, or of
   * the ring until the parser's release().
   */
  | { type: 'summaries'; body: Buffer }
  | { type: 'control'; msg: WorkerControl };

/** The parent's view of a frame ring (native/loader.ts PcapSharedRing). */
export interface FrameRingView {
  buffer: Buffer;
  release(end: number): void;
}

/**
 * Incremental parser: feed it stdout chunks as they come (a frame may span several chunks, a chunk
 * may hold many frames). Throws Error on a malformed stream (then the stream is unusable).
 *
 * With a ring, FRAME_RING notices are replaced by the frames they point at. Those frames' bodies
 * (`summaries`) view the ring: they are valid until release(), which the consumer calls once it
 * has handled what push() returned (push() also releases what the previous call handed out).
 */
export class WorkerFrameParser {
  /**
   * rawSummaries: hand type-4 bodies over as they are (`summaries` frames), for a consumer that
   * encodes them without building events (summary-wire.ts); else they become `events`.
   */
  constructor(private readonly opts: { rawSummaries?: boolean; ring?: FrameRingView } = {}) {}

  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes the frame at the head of `pending` needs in all (0 = not known yet). */
  private need = 0;
  /** The ring's end of the last frame handed out, and what was released. */
  private ringEnd = 0;
  private ringReleased = 0;
  /** Frames that came through the ring. */
  ringFrames = 0;

  /** Parses `chunk` and returns every frame it completes. */
  push(chunk: Buffer): WorkerFrame[] {
    this.release();
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    // A large frame spans many chunks: do not re-join them until it is complete.
    if (this.pendingBytes < 5 || this.pendingBytes < this.need) return [];
    let buf = this.pending.length === 1 ? chunk : Buffer.concat(this.pending, this.pendingBytes);
    const out: WorkerFrame[] = [];
    let at = 0;
    this.need = 0;
    while (buf.length - at >= 5) {
      const len = buf.readUInt32BE(at);
      if (len < 1 || len > MAX_FRAME) throw new Error(`bad frame length ${len} at byte ${at}`);
      if (buf.length - at < 4 + len) {
        this.need = 4 + len;
        break;
      }
      const type = buf[at + 4] ?? 0;
      const body = buf.subarray(at + 5, at + 4 + len);
      if (type === FRAME_RING) out.push(this.ringFrame(body, at));
      else out.push(this.frame(type, body, at));
      at += 4 + len;
    }
    buf = buf.subarray(at);
    // Copy the remainder: the chunk it views may be large and is otherwise released.
    this.pending = buf.length > 0 ? [Buffer.from(buf)] : [];
    this.pendingBytes = buf.length;
    return out;
  }

  /** Lets the worker reuse the ring bytes of every frame handed out so far. */
  release(): void {
    if (this.ringEnd > this.ringReleased && this.opts.ring !== undefined) {
      this.opts.ring.release(this.ringEnd);
      this.ringReleased = this.ringEnd;
    }
  }

  private frame(type: number, body: Buffer, at: number): WorkerFrame {
    if (type === FRAME_SUMMARIES) {
      return this.opts.rawSummaries === true
        ? { type: 'summaries', body }
        : { type: 'events', events: decodeSummaryFrame(body) };
    }
    if (type === FRAME_EVENTS) return { type: 'events', events: decodeEventBatch(body) };
    if (type === FRAME_EVENT) return { type: 'event', event: decodePacketEvent(body) };
    if (type === FRAME_CONTROL) {
      return { type: 'control', msg: JSON.parse(body.toString('utf8')) as WorkerControl };
    }
    throw new Error(`unknown frame type ${String(type)} at byte ${at}`);
  }

  /** The frame a FRAME_RING notice points at, checked against the ring before it is read. */
  private ringFrame(body: Buffer, at: number): WorkerFrame {
    const ring = this.opts.ring;
    if (ring === undefined) throw new Error(`ring frame at byte ${at}, but no ring was set up`);
    if (body.length !== 16) throw new Error(`ring notice of ${body.length} bytes at byte ${at}`);
    const offset = body.readUInt32LE(0);
    const length = body.readUInt32LE(4);
    const end = body.readUInt32LE(8) + body.readUInt32LE(12) * 2 ** 32;
    const size = ring.buffer.length;
    if (length < 5 || offset + length > size || end < this.ringEnd) {
      throw new Error(
        `ring notice at byte ${at} points outside the ${size}-byte ring or back (offset ${offset}, length ${length}, end ${end})`,
      );
    }
    const inner = ring.buffer.subarray(offset, offset + length);
    const type = inner[4] ?? 0;
    if (inner.readUInt32BE(0) !== length - 4 || type === FRAME_RING) {
      throw new Error(`ring frame at offset ${offset} is not one whole frame of ${length} bytes`);
    }
    const f = this.frame(type, inner.subarray(5), at);
    this.ringEnd = end;
    this.ringFrames++;
    return f;
  }

  /** Bytes received that do not yet form a whole frame. */
  get buffered(): number {
    return this.pendingBytes;
  }
}

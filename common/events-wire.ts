/**
 * The hot message, hand-written: an Envelope whose body is an EventBatch (proto/hoptrace.proto),
 * encoded and decoded without protobufjs reflection. Reflection (fromObject → encode, decode →
 * toObject → our types) cost ~9 µs to encode and ~11 µs to decode per event; an agent at a busy
 * backend sends hundreds of thousands of events per second. This is what protobuf code generators
 * emit — one function per message, fields in declaration order — with the 64-bit values read and
 * written as two 32-bit halves (no Long, no decimal strings).
 *
 * Same wire format, so both directions interoperate with the reflection codec in envelope.ts
 * (test/unit/events-wire.test.ts checks both ways on generated and edge-case events). Every other
 * Envelope kind stays on reflection: they are rare.
 */
import { HoptraceError } from './errors';
import type { FlowFold, PacketEvent, PacketKeys, Tuple, TunnelInfo } from './event';
import { EXTRA_KEYS, NUMERIC_KEYS, TRANSPORT_NAMES, TUNNEL_KINDS } from './event';
import type { Envelope, EventBatch } from './wire';
import { LINKTYPE_NAMES } from './codec';

// ---- encode ----------------------------------------------------------------------------------

/**
 * A growable byte buffer with protobuf primitives; nested messages are length-prefixed in place.
 * The caller reserves room once per event (`ensure`) with an upper bound, so the primitives write
 * without checks.
 */
export class Out {
  buf = Buffer.allocUnsafe(64 * 1024);
  view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  at = 0;

  ensure(n: number): void {
    if (this.at + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.at + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.length);
  }

  varint(v: number): void {
    const b = this.buf;
    let at = this.at;
    if (v < 0x80) {
      b[at] = v;
      this.at = at + 1;
      return;
    }
    if (v <= 0xffffffff) {
      while (v >= 0x80) {
        b[at++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
    } else {
      // Above 2^32 (frame numbers, seq): division keeps the value exact up to 2^53.
      while (v >= 0x80) {
        b[at++] = (v % 0x80) | 0x80;
        v = Math.floor(v / 0x80);
      }
    }
    b[at++] = v;
    this.at = at;
  }

  /** A tag of field 1..15 (one byte). */
  tag(field: number, wire: number): void {
    this.buf[this.at++] = (field << 3) | wire;
  }

  uint(field: number, v: number): void {
    // Fields 16 and up need a two-byte tag (PacketKeys.dns_id, dns_question).
    if (field < 16) this.buf[this.at++] = field << 3;
    else this.varint(field << 3);
    this.varint(v);
  }

  string(field: number, s: string): void {
    this.buf[this.at++] = (field << 3) | 2;
    const n = s.length;
    if (n < 128) {
      // ASCII (addresses, names, codes): one length byte and a byte per char, no native call.
      const b = this.buf;
      const at = this.at;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        b[at + 1 + i] = c;
      }
      if (i === n) {
        b[at] = n;
        this.at = at + 1 + n;
        return;
      }
    }
    const len = Buffer.byteLength(s, 'utf8');
    this.varint(len);
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  fixed64(field: number, v: bigint): void {
    this.buf[this.at++] = (field << 3) | 1;
    // setBigUint64 takes the value modulo 2^64, as protobuf's fixed64 does.
    this.view.setBigUint64(this.at, v, true);
    this.at += 8;
  }

  /** Starts a length-delimited field; returns the mark for end(). Reserves 3 length bytes. */
  begin(field: number): number {
    this.buf[this.at] = (field << 3) | 2;
    const mark = this.at + 1;
    this.at += 4;
    return mark;
  }

  /**
   * `len` (< 2^21) as the 3-byte varint at `mark`, the room begin() reserved. A non-minimal
   * 3-byte varint is valid protobuf (parsers accept padded varints).
   */
  len3(mark: number, len: number): void {
    this.buf[mark] = (len & 0x7f) | 0x80;
    this.buf[mark + 1] = ((len >>> 7) & 0x7f) | 0x80;
    this.buf[mark + 2] = len >>> 14;
  }

  /** Writes the length of the field begun at `mark` (moving the body if it needs > 3 bytes). */
  end(mark: number): void {
    const len = this.at - mark - 3;
    if (len < 0x200000) {
      this.len3(mark, len);
      return;
    }
    const body = Buffer.from(this.buf.subarray(mark + 3, this.at));
    this.at = mark;
    this.ensure(10 + body.length);
    this.varint(len);
    body.copy(this.buf, this.at);
    this.at += body.length;
  }
}

function enumMap(list: readonly string[]): Map<string, number> {
  return new Map(list.map((n, i) => [n, i + 1]));
}
const TRANSPORT_VALUE = enumMap(TRANSPORT_NAMES);
const TUNNEL_VALUE = enumMap(TUNNEL_KINDS);
const LINKTYPE_VALUE = enumMap(LINKTYPE_NAMES);

/** Enum value of a name; an unknown name becomes the list's last value + 1 (as codec.ts does). */
function enumValue(map: Map<string, number>, name: string): number {
  return map.get(name) ?? map.size + 1;
}

/** The wire values of a transport, tunnel kind and link type name (for encoders of their own). */
export const transportValue = (name: string): number => enumValue(TRANSPORT_VALUE, name);
export const tunnelValue = (kind: string): number => enumValue(TUNNEL_VALUE, kind);
export const linktypeValue = (name: string): number => enumValue(LINKTYPE_VALUE, name);

/** Bytes a tuple can take at most (strings counted at 3 bytes per UTF-16 unit). */
function tupleBound(t: Tuple | null | undefined): number {
  return t === null || t === undefined ? 0 : 40 + 3 * (t.src.length + t.dst.length);
}

function writeTuple(o: Out, field: number, t: Tuple): void {
  const m = o.begin(field);
  o.uint(1, enumValue(TRANSPORT_VALUE, t.proto));
  if (t.ipProto !== 0) o.uint(2, t.ipProto);
  if (t.src !== '') o.string(3, t.src);
  if (t.dst !== '') o.string(4, t.dst);
  if (t.sport !== undefined) o.uint(5, t.sport);
  if (t.dport !== undefined) o.uint(6, t.dport);
  o.end(m);
}

/** One PacketEvent as an entry of EventBatch's repeated `events` field (tag, length, message). */
export function writeEvent(o: Out, e: PacketEvent): void {
  const k = e.keys;
  o.ensure(
    160 +
      3 * (e.point.length + e.node.length + e.iface.length) +
      tupleBound(e.outer) +
      tupleBound(e.inner) +
      tupleBound(e.related) +
      20 * e.tunnels.length +
      3 * ((k.probeMarker?.length ?? 0) + (e.error?.length ?? 0)) +
      (k.icmpType === undefined && k.dnsId === undefined ? 0 : 36),
  );
  const m = o.begin(3);
  if (e.point !== '') o.string(1, e.point);
  if (e.node !== '') o.string(2, e.node);
  if (e.iface !== '') o.string(3, e.iface);
  o.uint(4, enumValue(LINKTYPE_VALUE, e.linktype));
  o.fixed64(5, e.tsNs);
  if (e.frame !== 0) o.uint(6, e.frame);
  if (e.outer !== null) writeTuple(o, 7, e.outer);
  if (e.inner !== null) writeTuple(o, 8, e.inner);
  if (e.related !== undefined) writeTuple(o, 9, e.related);
  for (const t of e.tunnels) {
    const tm = o.begin(10);
    o.uint(1, enumValue(TUNNEL_VALUE, t.kind));
    if (t.id !== undefined) o.uint(2, t.id);
    if (t.messageType !== undefined) o.uint(3, t.messageType);
    o.end(tm);
  }
  const km = o.begin(11);
  if (k.ipId !== undefined) o.uint(1, k.ipId);
  if (k.tcpSeq !== undefined) o.uint(2, k.tcpSeq);
  if (k.tcpAck !== undefined) o.uint(3, k.tcpAck);
  if (k.tcpFlags !== undefined) o.uint(4, k.tcpFlags);
  if (k.tcpWindow !== undefined) o.uint(5, k.tcpWindow);
  if (k.tsVal !== undefined) o.uint(6, k.tsVal);
  if (k.tsEcr !== undefined) o.uint(7, k.tsEcr);
  if (k.payloadLength !== 0) o.uint(8, k.payloadLength);
  if (k.payloadHash !== undefined) o.uint(9, k.payloadHash);
  if (k.requestLineHash !== undefined) o.uint(10, k.requestLineHash);
  if (k.probeMarker !== undefined) o.string(11, k.probeMarker);
  if (k.icmpType !== undefined) o.uint(12, k.icmpType);
  if (k.icmpCode !== undefined) o.uint(13, k.icmpCode);
  if (k.icmpId !== undefined) o.uint(14, k.icmpId);
  if (k.icmpSeq !== undefined) o.uint(15, k.icmpSeq);
  if (k.dnsId !== undefined) o.uint(16, k.dnsId);
  if (k.dnsQuestion !== undefined) o.uint(17, k.dnsQuestion);
  o.end(km);
  if (e.truncated) o.uint(12, 1);
  if (e.error !== undefined && e.error !== '') o.string(13, e.error);
  if (e.wireLength !== 0) o.uint(14, e.wireLength);
  if (e.fold !== undefined) {
    const fm = o.begin(15);
    if (e.fold.packets !== 0) o.uint(1, e.fold.packets);
    if (e.fold.bytes !== 0) o.uint(2, e.fold.bytes);
    if (e.fold.lastTsNs !== 0n) o.fixed64(3, e.fold.lastTsNs);
    if (e.fold.lastFrame !== 0) o.uint(4, e.fold.lastFrame);
    o.end(fm);
  }
  o.end(m);
}

const shared = new Out();

/** An Envelope { seq, events } as protobuf bytes (a fresh copy; the scratch buffer is reused). */
export function encodeEventsEnvelope(seq: number, batch: EventBatch): Uint8Array {
  const o = shared;
  o.at = 0;
  o.ensure(32 + 3 * (batch.captureId.length + batch.point.length));
  if (seq !== 0) o.uint(1, Math.trunc(seq));
  const m = o.begin(14);
  if (batch.captureId !== '') o.string(1, batch.captureId);
  if (batch.point !== '') o.string(2, batch.point);
  for (const e of batch.events) writeEvent(o, e);
  const enc = batch.encoded;
  if (enc !== undefined && enc.bytes.length > 0) {
    const body = o.at - m - 3 + enc.bytes.length;
    if (body < 0x200000) {
      // The pre-encoded entries go straight from their chunk to the output: one copy, and no
      // zero-fill (allocUnsafe; every byte is written). The length counts the entries that follow.
      o.len3(m, body);
      const out = Buffer.allocUnsafe(o.at + enc.bytes.length);
      out.set(o.buf.subarray(0, o.at));
      out.set(enc.bytes, o.at);
      return out;
    }
    o.ensure(enc.bytes.length);
    o.buf.set(enc.bytes, o.at);
    o.at += enc.bytes.length;
  }
  o.end(m);
  // TypedArray.set is one memcpy (Buffer.copy goes through more JavaScript in Node 20).
  const out = new Uint8Array(o.at);
  out.set(o.buf.subarray(0, o.at));
  if (o.buf.length > 16 * 1024 * 1024) {
    o.buf = Buffer.allocUnsafe(64 * 1024);
    o.view = new DataView(o.buf.buffer, o.buf.byteOffset, o.buf.length);
  }
  return out;
}

// ---- decode ----------------------------------------------------------------------------------

/** The error every undecodable Envelope gets (envelope.ts uses it too). */
export function malformed(detail: string): HoptraceError {
  return new HoptraceError('WIRE_MALFORMED', detail, { where: 'envelope' });
}

/** Thrown inside the decoder when the bytes are not what this fast path handles. */
class NotFast extends Error {}

/** A bounds-checked protobuf reader over one message's bytes. */
class In {
  at: number;

  constructor(
    readonly b: Buffer,
    from: number,
    readonly end: number,
  ) {
    this.at = from;
  }

  /** A varint up to 2^53 (larger, or longer than 10 bytes, is malformed). */
  varint(): number {
    const b = this.b;
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.at >= this.end) throw malformed('a varint runs past the end of its message');
      const c = b[this.at++] ?? 0;
      v += (c & 0x7f) * mul;
      if (c < 0x80) {
        if (v > Number.MAX_SAFE_INTEGER) throw malformed('a 64-bit value beyond 2^53');
        return v;
      }
      mul *= 0x80;
    }
    throw malformed('a varint longer than 10 bytes');
  }

  /** uint32 fields: the low 32 bits of the varint, as protobuf says. */
  u32(): number {
    const b = this.b;
    let v = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.at >= this.end) throw malformed('a varint runs past the end of its message');
      const c = b[this.at++] ?? 0;
      if (shift < 32) v |= (c & 0x7f) << shift;
      shift += 7;
      if (c < 0x80) return v >>> 0;
    }
    throw malformed('a varint longer than 10 bytes');
  }

  /** The end of a length-delimited field's body (and moves past its length). */
  sub(): number {
    const len = this.varint();
    const end = this.at + len;
    if (end > this.end) throw malformed('a length-delimited field runs past its message');
    return end;
  }

  fixed64(): bigint {
    const at = this.at;
    if (at + 8 > this.end) throw malformed('a fixed64 runs past the end of its message');
    const b = this.b;
    const lo =
      ((b[at] ?? 0) | ((b[at + 1] ?? 0) << 8) | ((b[at + 2] ?? 0) << 16)) +
      (b[at + 3] ?? 0) * 0x1000000;
    const hi =
      ((b[at + 4] ?? 0) | ((b[at + 5] ?? 0) << 8) | ((b[at + 6] ?? 0) << 16)) +
      (b[at + 7] ?? 0) * 0x1000000;
    this.at = at + 8;
    // Below 2^53 (every real timestamp) one Number→BigInt; above, two halves.
    return hi < 0x200000 ? BigInt(hi * 0x100000000 + lo) : (BigInt(hi) << 32n) | BigInt(lo);
  }

  skip(wire: number): void {
    switch (wire) {
      case 0:
        this.varint();
        return;
      case 1:
        this.at += 8;
        break;
      case 2:
        this.at = this.sub();
        return;
      case 5:
        this.at += 4;
        break;
      default:
        throw malformed(`wire type ${wire}`);
    }
    if (this.at > this.end) throw malformed('a field runs past the end of its message');
  }
}

interface Interned {
  bytes: Uint8Array;
  text: string;
}

/**
 * Strings that repeat from event to event (point, node, iface, addresses) are looked up by a hash
 * of their bytes, checked byte for byte, and reused instead of decoded again. Bounded.
 */
class StringSlots {
  private table = new Map<number, Interned>();

  read(r: In): string {
    const end = r.sub();
    const from = r.at;
    r.at = end;
    const len = end - from;
    if (len > 64) return r.b.toString('utf8', from, end);
    const b = r.b;
    let h = 0x811c9dc5 ^ len;
    let ascii = true;
    for (let i = from; i < end; i++) {
      const c = b[i] ?? 0;
      if (c >= 0x80) ascii = false;
      h = Math.imul(h ^ c, 0x01000193);
    }
    const hit = this.table.get(h);
    if (hit?.bytes.length === len) {
      const hb = hit.bytes;
      let i = 0;
      while (i < len && hb[i] === b[from + i]) i++;
      if (i === len) return hit.text;
    }
    const text = b.toString(ascii ? 'latin1' : 'utf8', from, end);
    if (hit === undefined) {
      if (this.table.size >= 4096) this.table.clear();
      const bytes = new Uint8Array(len);
      for (let i = 0; i < len; i++) bytes[i] = b[from + i] ?? 0;
      this.table.set(h, { bytes, text });
    }
    return text;
  }
}

/** One table for all decodes: the same agents send the same strings batch after batch. */
const STRINGS = new StringSlots();

function expectWire(wire: number, want: number, what: string): void {
  if (wire !== want) throw malformed(`${what} has wire type ${wire}, expected ${want}`);
}

function readTuple(r: In, end: number, slots: StringSlots): Tuple {
  const t: Tuple = { proto: 'other', ipProto: 0, src: '', dst: '' };
  const sub = r;
  while (sub.at < end) {
    const tag = sub.u32();
    const f = tag >>> 3;
    const w = tag & 7;
    switch (f) {
      case 1:
        expectWire(w, 0, 'Tuple.proto');
        t.proto = TRANSPORT_NAMES[sub.u32() - 1] ?? 'other';
        break;
      case 2:
        expectWire(w, 0, 'Tuple.ip_proto');
        t.ipProto = sub.u32();
        break;
      case 3:
        expectWire(w, 2, 'Tuple.src');
        t.src = slots.read(sub);
        break;
      case 4:
        expectWire(w, 2, 'Tuple.dst');
        t.dst = slots.read(sub);
        break;
      case 5:
        expectWire(w, 0, 'Tuple.sport');
        t.sport = sub.u32();
        break;
      case 6:
        expectWire(w, 0, 'Tuple.dport');
        t.dport = sub.u32();
        break;
      default:
        sub.skip(w);
    }
  }
  if (r.at !== end) throw malformed('a Tuple runs past its length');
  // Key order as the reflection path builds it (ports last, only when present).
  if (t.sport === undefined && t.dport === undefined) return t;
  const out: Tuple = { proto: t.proto, ipProto: t.ipProto, src: t.src, dst: t.dst };
  if (t.sport !== undefined) out.sport = t.sport;
  if (t.dport !== undefined) out.dport = t.dport;
  return out;
}

function readKeys(r: In, end: number): PacketKeys {
  let ipId: number | undefined;
  let tcpSeq: number | undefined;
  let tcpAck: number | undefined;
  let tcpFlags: number | undefined;
  let tcpWindow: number | undefined;
  let tsVal: number | undefined;
  let tsEcr: number | undefined;
  let payloadLength = 0;
  let payloadHash: number | undefined;
  let requestLineHash: number | undefined;
  let marker: string | undefined;
  const extra: (number | undefined)[] = [];
  while (r.at < end) {
    const tag = r.u32();
    const f = tag >>> 3;
    const w = tag & 7;
    if (f >= 1 && f <= NUMERIC_KEYS.length && w !== 0)
      expectWire(w, 0, `PacketKeys.${NUMERIC_KEYS[f - 1] ?? f}`);
    if (f >= 12 && f < 12 + EXTRA_KEYS.length) {
      expectWire(w, 0, `PacketKeys.${EXTRA_KEYS[f - 12] ?? f}`);
      extra[f - 12] = r.u32();
      continue;
    }
    switch (f) {
      case 1:
        ipId = r.u32();
        break;
      case 2:
        tcpSeq = r.u32();
        break;
      case 3:
        tcpAck = r.u32();
        break;
      case 4:
        tcpFlags = r.u32();
        break;
      case 5:
        tcpWindow = r.u32();
        break;
      case 6:
        tsVal = r.u32();
        break;
      case 7:
        tsEcr = r.u32();
        break;
      case 8:
        payloadLength = r.u32();
        break;
      case 9:
        payloadHash = r.u32();
        break;
      case 10:
        requestLineHash = r.u32();
        break;
      case 11: {
        expectWire(w, 2, 'PacketKeys.probe_marker');
        const e = r.sub();
        marker = r.b.toString('utf8', r.at, e);
        r.at = e;
        break;
      }
      default:
        r.skip(w);
    }
  }
  // Key order as the reflection path builds it: payloadLength first, then fields in order.
  const keys: PacketKeys = { payloadLength };
  if (ipId !== undefined) keys.ipId = ipId;
  if (tcpSeq !== undefined) keys.tcpSeq = tcpSeq;
  if (tcpAck !== undefined) keys.tcpAck = tcpAck;
  if (tcpFlags !== undefined) keys.tcpFlags = tcpFlags;
  if (tcpWindow !== undefined) keys.tcpWindow = tcpWindow;
  if (tsVal !== undefined) keys.tsVal = tsVal;
  if (tsEcr !== undefined) keys.tsEcr = tsEcr;
  if (payloadHash !== undefined) keys.payloadHash = payloadHash;
  if (requestLineHash !== undefined) keys.requestLineHash = requestLineHash;
  if (marker !== undefined) keys.probeMarker = marker;
  EXTRA_KEYS.forEach((name, i) => {
    const v = extra[i];
    if (v !== undefined) keys[name] = v;
  });
  return keys;
}

function readEvent(r: In, end: number, slots: StringSlots): PacketEvent {
  let point = '';
  let node = '';
  let iface = '';
  let linkType = 0;
  let tsNs = 0n;
  let frame = 0;
  let outer: Tuple | null = null;
  let inner: Tuple | null = null;
  let related: Tuple | undefined;
  const tunnels: TunnelInfo[] = [];
  let keys: PacketKeys | undefined;
  let truncated = false;
  let error = '';
  let wireLength = 0;
  let fold: FlowFold | undefined;
  while (r.at < end) {
    const tag = r.u32();
    const f = tag >>> 3;
    const w = tag & 7;
    switch (f) {
      case 1:
        expectWire(w, 2, 'PacketEvent.point');
        point = slots.read(r);
        break;
      case 2:
        expectWire(w, 2, 'PacketEvent.node');
        node = slots.read(r);
        break;
      case 3:
        expectWire(w, 2, 'PacketEvent.iface');
        iface = slots.read(r);
        break;
      case 4:
        expectWire(w, 0, 'PacketEvent.link_type');
        linkType = r.u32();
        break;
      case 5:
        expectWire(w, 1, 'PacketEvent.ts_ns');
        tsNs = r.fixed64();
        break;
      case 6:
        expectWire(w, 0, 'PacketEvent.frame');
        frame = r.varint();
        break;
      case 7:
        expectWire(w, 2, 'PacketEvent.outer');
        outer = readTuple(r, r.sub(), slots);
        break;
      case 8:
        expectWire(w, 2, 'PacketEvent.inner');
        inner = readTuple(r, r.sub(), slots);
        break;
      case 9:
        expectWire(w, 2, 'PacketEvent.related');
        related = readTuple(r, r.sub(), slots);
        break;
      case 10: {
        expectWire(w, 2, 'PacketEvent.tunnels');
        const te = r.sub();
        let kind = 0;
        let id: number | undefined;
        let messageType: number | undefined;
        while (r.at < te) {
          const tt = r.u32();
          const tw = tt & 7;
          switch (tt >>> 3) {
            case 1:
              expectWire(tw, 0, 'Tunnel.kind');
              kind = r.u32();
              break;
            case 2:
              expectWire(tw, 0, 'Tunnel.id');
              id = r.u32();
              break;
            case 3:
              expectWire(tw, 0, 'Tunnel.message_type');
              messageType = r.u32();
              break;
            default:
              r.skip(tw);
          }
        }
        r.at = te;
        const info: TunnelInfo = { kind: TUNNEL_KINDS[kind - 1] ?? 'vxlan' };
        if (id !== undefined) info.id = id;
        if (messageType !== undefined) info.messageType = messageType;
        tunnels.push(info);
        break;
      }
      case 11: {
        expectWire(w, 2, 'PacketEvent.keys');
        const ke = r.sub();
        keys = readKeys(r, ke);
        r.at = ke;
        break;
      }
      case 12:
        expectWire(w, 0, 'PacketEvent.truncated');
        truncated = r.varint() !== 0;
        break;
      case 13: {
        expectWire(w, 2, 'PacketEvent.error');
        const ee = r.sub();
        error = r.b.toString('utf8', r.at, ee);
        r.at = ee;
        break;
      }
      case 14:
        expectWire(w, 0, 'PacketEvent.wire_length');
        wireLength = r.u32();
        break;
      case 15: {
        expectWire(w, 2, 'PacketEvent.fold');
        const fe = r.sub();
        fold = readFold(r, fe);
        r.at = fe;
        break;
      }
      default:
        r.skip(w);
    }
  }
  if (r.at !== end) throw malformed('a PacketEvent runs past its length');
  const ev: PacketEvent = {
    point,
    node,
    iface,
    linktype: LINKTYPE_NAMES[linkType - 1] ?? 'other',
    tsNs,
    frame,
    outer,
    inner,
    tunnels,
    keys: keys ?? { payloadLength: 0 },
    truncated,
    wireLength,
  };
  if (related !== undefined) ev.related = related;
  if (error !== '') ev.error = error;
  if (fold !== undefined) ev.fold = fold;
  return ev;
}

function readFold(r: In, end: number): FlowFold {
  const fold: FlowFold = { packets: 0, bytes: 0, lastTsNs: 0n, lastFrame: 0 };
  while (r.at < end) {
    const tag = r.u32();
    const w = tag & 7;
    switch (tag >>> 3) {
      case 1:
        expectWire(w, 0, 'FlowFold.packets');
        fold.packets = r.varint();
        break;
      case 2:
        expectWire(w, 0, 'FlowFold.bytes');
        fold.bytes = r.varint();
        break;
      case 3:
        expectWire(w, 1, 'FlowFold.last_ts_ns');
        fold.lastTsNs = r.fixed64();
        break;
      case 4:
        expectWire(w, 0, 'FlowFold.last_frame');
        fold.lastFrame = r.varint();
        break;
      default:
        r.skip(w);
    }
  }
  return fold;
}

/**
 * The Envelope when `bytes` is exactly an events Envelope (fields seq and events only); null when
 * it is any other Envelope (the caller then uses the reflection decoder). Throws WIRE_MALFORMED on
 * bytes that are not valid protobuf of these messages.
 */
export function decodeEventsEnvelope(bytes: Uint8Array): Envelope | null {
  const b = Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const r = new In(b, 0, b.length);
  let seq = 0;
  let body: { from: number; end: number } | null = null;
  try {
    while (r.at < r.end) {
      const tag = r.u32();
      const f = tag >>> 3;
      const w = tag & 7;
      if (f === 1 && w === 0) seq = r.varint();
      else if (f === 14 && w === 2) {
        // A repeated oneof member: the last one wins, as in protobuf.
        const end = r.sub();
        body = { from: r.at, end };
        r.at = end;
      } else throw new NotFast();
    }
  } catch (e) {
    if (e instanceof NotFast) return null;
    throw e;
  }
  if (body === null) return null;
  const raw: Uint8Array[] = [];
  const batch: EventBatch = { captureId: '', point: '', events: [] };
  // Not enumerable: views into the frame are for the store only, never compared, cloned or logged.
  Object.defineProperty(batch, 'raw', { value: raw, enumerable: false });
  const slots = STRINGS;
  const br = new In(b, body.from, body.end);
  while (br.at < body.end) {
    const tag = br.u32();
    const f = tag >>> 3;
    const w = tag & 7;
    if (f === 1) {
      expectWire(w, 2, 'EventBatch.capture_id');
      batch.captureId = slots.read(br);
    } else if (f === 2) {
      expectWire(w, 2, 'EventBatch.point');
      batch.point = slots.read(br);
    } else if (f === 3) {
      expectWire(w, 2, 'EventBatch.events');
      const end = br.sub();
      raw.push(b.subarray(br.at, end));
      batch.events.push(readEvent(br, end, slots));
    } else br.skip(w);
  }
  return { seq, kind: 'events', events: batch };
}

/**
 * Reading a native summary record without building its event: the record's 32-bit words by name,
 * the time window test, a set of u32 port pairs that allocates nothing on lookup, and the cursors
 * LaterPointSelection walks (a FAST record or a decoded SLOW event). The layout is
 * core/decode/summary.ts's (native/pcap-batch/src/summary.c documents it).
 */
import { R, SF, SUMMARY_BYTES } from '../core/decode/summary';
import { SUMMARY_WORDS } from './summary-file';
import type { EventContext } from '../core/decode/event';
import { formatIPv4, formatIPv6 } from '../common/address';
import { connectionKey, type SelectionCursor } from '../core/report/analyze';
import { flowView, type FlowProto } from '../core/correlate/match-point';
import type { PacketEvent } from '../common/event';

// Summary record fields as 32-bit word indexes (core/decode/summary.ts R; all 4-aligned).
export const W_HEAD = 0; // status | flags | inner proto | outer proto
export const W_TRANSPORT = R.innerTransport / 4; // inner transport | outer transport | port flags | tunnels
export const W_TS_LO = R.tsLo / 4;
export const W_TS_HI = R.tsHi / 4;
export const W_FLOW = R.flowHash / 4;
export const W_PORTS = R.sport / 4; // sport | dport << 16
export const W_SEQ = R.seq / 4;
export const W_ACK = R.ack / 4;
export const W_TCP = R.tcpFlags / 4; // TCP flags | marker length | window
export const W_PAYLOAD = R.payloadLength / 4;
export const W_PAYLOAD_HASH = R.payloadHash / 4;
export const W_LINE_HASH = R.requestLineHash / 4;
export const SF_PAYLOAD = SF.payload;
export const SF_MARKER = SF.marker;
/** SF bits as they sit in the record's first word (flags is byte 1). */
export const HEAD_PAYLOAD = SF.payload << 8;
export const HEAD_MARKER = SF.marker << 8;
export const TR_TCP = 0;
export const TR_UDP = 1;
export const SYN = 0x02;
export const ACK = 0x10;

/** A later point's record kept for now: a copy of its summary record, or its decoded event. */
export type Kept =
  PacketEvent | { rec: Buffer; frame: number; linktype: number; ctx: EventContext };

/** Exact `|ts - startTs| <= windowNs` for a record's ts words, mostly without bigints. */
export class Window {
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
export class U32Set {
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
export class RecordCursor implements SelectionCursor<Kept> {
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
export class EventCursor implements SelectionCursor<Kept> {
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

export function tcpTuple(
  ev: PacketEvent,
): { src: string; sport: number; dst: string; dport: number } | null {
  return flowTuple(ev, 'tcp');
}

/** The ports and addresses of an event of transport `proto` (ICMP echo: see flowView), else null. */
export function flowTuple(
  ev: PacketEvent,
  proto: FlowProto,
): { src: string; sport: number; dst: string; dport: number } | null {
  const v = flowView(ev);
  return v === null || v.proto !== proto ? null : v.tuple;
}

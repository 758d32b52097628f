/**
 * The one bounds-checked reader and the per-frame decode state. Every header byte is read through
 * u8/u16/u32, which return -1 and set `truncated` when the read would pass the end of the readable
 * window: this is the single place where "ran out of bytes" is handled.
 */
import type { ErrorCode } from '../../common/errors';
import type { Tuple, TunnelInfo, TransportName } from '../../common/event';
import { IPPROTO, Next } from './tables';
import type { Layer } from './types';

const PROTO_NAMES: Record<number, TransportName> = {
  6: 'tcp',
  17: 'udp',
  1: 'icmp',
  58: 'icmpv6',
  132: 'sctp',
  47: 'gre',
  50: 'esp',
};

/** Transport name of an IP protocol number ('other' when not one we name). */
export function transportName(ipProto: number): TransportName {
  return PROTO_NAMES[ipProto] ?? 'other';
}

export class DecodeState {
  readonly bytes: Uint8Array;
  /** End of the readable window: the captured length, narrowed to each IP datagram's length. */
  len: number;
  /** Offset of the next header to decode. */
  off = 0;
  truncated = false;
  error: ErrorCode | undefined = undefined;
  readonly layers: Layer[] = [];
  readonly tunnels: TunnelInfo[] = [];
  readonly udpPorts: Map<number, Next>;

  /** First and last IP tuples seen (outer / inner). */
  firstIP: Tuple | null = null;
  lastIP: Tuple | null = null;
  ipCount = 0;
  /** The tuple the next transport header fills, cleared once filled. */
  pending: Tuple | null = null;
  related: Tuple | undefined = undefined;
  /** Wire end of the current IP datagram (from its length fields; may pass the captured end). */
  ipWireEnd = -1;
  /** The IP length field was 0 (TSO/GSO/BIG TCP): the wire end is only the captured end. */
  lengthUnknown = false;
  /** IP protocol / next header the current IP chain is about to decode (IPv6 extension walk). */
  ipProto = -1;
  /** The current IP layer is IPv6 (names IP-in-IP tunnels: 6in4 vs 6in6). */
  curV6 = false;
  /** GRE sequence-number flag, read by ERSPAN to tell type I from type II. */
  greSeq = false;

  // Keys of the innermost packet; -1 = absent.
  ipId = -1;
  tcpSeq = -1;
  tcpAck = -1;
  tcpFlags = -1;
  tcpWindow = -1;
  tsVal = -1;
  tsEcr = -1;
  icmpType = -1;
  icmpCode = -1;
  icmpId = -1;
  icmpSeq = -1;
  dnsId = -1;
  dnsQuestion = -1;
  /** Payload of the innermost packet: start offset and wire end (from IP/UDP lengths). */
  payOff = -1;
  payWireEnd = -1;

  constructor(bytes: Uint8Array, udpPorts: Map<number, Next>) {
    this.bytes = bytes;
    this.len = bytes.length;
    this.udpPorts = udpPorts;
  }

  /** True when `n` bytes at `at` are readable; otherwise marks the frame truncated. */
  need(at: number, n: number): boolean {
    if (at < 0 || at + n > this.len) {
      this.truncated = true;
      return false;
    }
    return true;
  }

  u8(at: number): number {
    if (at < 0 || at + 1 > this.len) {
      this.truncated = true;
      return -1;
    }
    return this.bytes[at] ?? -1;
  }

  u16(at: number): number {
    if (at < 0 || at + 2 > this.len) {
      this.truncated = true;
      return -1;
    }
    const b = this.bytes;
    return ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);
  }

  u32(at: number): number {
    if (at < 0 || at + 4 > this.len) {
      this.truncated = true;
      return -1;
    }
    const b = this.bytes;
    return (
      (((b[at] ?? 0) << 24) |
        ((b[at + 1] ?? 0) << 16) |
        ((b[at + 2] ?? 0) << 8) |
        (b[at + 3] ?? 0)) >>>
      0
    );
  }

  /** Ends the chain with a malformed-input code (the first code wins). */
  fail(code: ErrorCode): Next {
    if (this.error === undefined) this.error = code;
    return Next.None;
  }

  /** Called by each IP decoder: a new innermost packet starts, so its keys start afresh. */
  beginIP(t: Tuple): void {
    if (this.firstIP === null) this.firstIP = t;
    this.lastIP = t;
    this.pending = t;
    this.ipCount++;
    this.lengthUnknown = false;
    this.ipId = -1;
    this.tcpSeq = -1;
    this.tcpAck = -1;
    this.tcpFlags = -1;
    this.tcpWindow = -1;
    this.tsVal = -1;
    this.tsEcr = -1;
    this.icmpType = -1;
    this.icmpCode = -1;
    this.icmpId = -1;
    this.icmpSeq = -1;
    this.dnsId = -1;
    this.dnsQuestion = -1;
    this.payOff = -1;
    this.payWireEnd = -1;
  }

  /**
   * Moves on to IP protocol `proto` after the current IP header (or extension header at `at`):
   * updates the tuple's protocol and payload start, and names IP-in-IP tunnels.
   */
  ipNext(proto: number, at: number, follow = true): Next {
    this.ipProto = proto;
    this.off = at;
    const t = this.lastIP;
    if (t !== null && t === this.pending) {
      t.proto = transportName(proto);
      t.ipProto = proto;
    }
    this.setPayload(at, this.ipWireEnd);
    if (!follow) return Next.None;
    if (proto === 4) this.tunnels.push({ kind: this.curV6 ? '4in6' : 'ipip' });
    else if (proto === 41) this.tunnels.push({ kind: this.curV6 ? '6in6' : '6in4' });
    return IPPROTO.get(proto) ?? Next.None;
  }

  /** A transport header directly after the innermost IP layer fills that layer's ports. */
  setPorts(sport: number, dport: number): void {
    const t = this.pending;
    if (t === null) return;
    t.sport = sport;
    t.dport = dport;
    this.pending = null;
  }

  /** Marks the bytes from `at` to `wireEnd` as the innermost packet's payload. */
  setPayload(at: number, wireEnd: number): void {
    this.payOff = at;
    this.payWireEnd = wireEnd;
  }
}

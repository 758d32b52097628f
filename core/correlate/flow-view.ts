/**
 * What matching reads of one captured packet (match-point.ts): a TCP segment or UDP datagram with
 * its tuple, flags and sequence numbers, or an ICMP echo with its identifier as both ports.
 */
import type { PacketEvent } from '../../common/event';
import type { Endpoint, FlowProto } from './journey';

const SYN = 0x02;
const ACK = 0x10;

/** One TCP segment or UDP datagram, with what matching reads of it. */
export interface FlowView {
  ev: PacketEvent;
  proto: FlowProto;
  tuple: Endpoint;
  /** TCP flags (0 for UDP). */
  flags: number;
  seq: number | null;
  ack: number | null;
}

/** Kept for the TCP-only callers: a FlowView whose proto is 'tcp'. */
export type TcpView = FlowView;

/**
 * The FlowView of a TCP or UDP event with ports, or of an ICMP/ICMPv6 echo request or reply (its
 * identifier as both ports), else null — also for a flow counter (PacketEvent.fold, folds.ts):
 * it stands for packets whose keys were never sent, so nothing is matched by it.
 */
export function flowView(ev: PacketEvent): FlowView | null {
  const t = ev.inner;
  if (t === null || ev.fold !== undefined) return null;
  if (t.proto === 'icmp' || t.proto === 'icmpv6') {
    const id = ev.keys.icmpId;
    if (id === undefined) return null;
    return {
      ev,
      proto: t.proto,
      tuple: { src: t.src, sport: id, dst: t.dst, dport: id },
      flags: 0,
      seq: null,
      ack: null,
    };
  }
  if (t.proto !== 'tcp' && t.proto !== 'udp') return null;
  if (t.sport === undefined || t.dport === undefined) return null;
  return {
    ev,
    proto: t.proto,
    tuple: { src: t.src, sport: t.sport, dst: t.dst, dport: t.dport },
    flags: ev.keys.tcpFlags ?? 0,
    seq: ev.keys.tcpSeq ?? null,
    ack: ev.keys.tcpAck ?? null,
  };
}

/** The FlowView of a TCP event, else null. */
export function tcpView(ev: PacketEvent): TcpView | null {
  const v = flowView(ev);
  return v?.proto === 'tcp' ? v : null;
}

/** A TCP SYN without ACK: a new connection's first packet. */
export const isSynOnly = (v: TcpView): boolean => (v.flags & SYN) !== 0 && (v.flags & ACK) === 0;

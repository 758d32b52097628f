/*
 * TCP header (RFC 9293 §3.1) and the options hoptrace keys on (RFC 9293 §3.2, RFC 7323, RFC 2018).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |          Source Port          |       Destination Port        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                        Sequence Number                        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Acknowledgment Number                      |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Data |       |C|E|U|A|P|R|S|F|                               |
 * | Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |           Checksum            |         Urgent Pointer        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Options: kind 0 EOL, 1 NOP, 2 MSS(4), 3 WScale(3), 4 SACK-perm(2), 5 SACK, 8 TS(10)  |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Ports are taken as soon as they are captured, so a snaplen cut inside the header still yields a
 * tuple (marked truncated).
 */
import type { DecodeState } from './reader';
import { Next } from './tables';
import type { Layer } from './types';

type TCPLayer = Extract<Layer, { kind: 'tcp' }>;

function parseOptions(s: DecodeState, l: TCPLayer, from: number, to: number): void {
  const b = s.bytes;
  let o = from;
  while (o < to) {
    const kind = b[o] ?? 0;
    if (kind === 0) return;
    if (kind === 1) {
      o++;
      continue;
    }
    const len = b[o + 1] ?? 0;
    // A length below 2 or past the header is malformed: stop reading options, keep the packet.
    if (len < 2 || o + len > to) return;
    if (kind === 2 && len === 4) l.mss = ((b[o + 2] ?? 0) << 8) | (b[o + 3] ?? 0);
    else if (kind === 3 && len === 3) l.wscale = b[o + 2] ?? 0;
    else if (kind === 8 && len === 10) {
      const tsVal = readU32(b, o + 2);
      const tsEcr = readU32(b, o + 6);
      l.tsVal = tsVal;
      l.tsEcr = tsEcr;
      s.tsVal = tsVal;
      s.tsEcr = tsEcr;
    }
    o += len;
  }
}

function readU32(b: Uint8Array, at: number): number {
  return (
    (((b[at] ?? 0) << 24) |
      ((b[at + 1] ?? 0) << 16) |
      ((b[at + 2] ?? 0) << 8) |
      (b[at + 3] ?? 0)) >>>
    0
  );
}

export function decodeTCP(s: DecodeState): Next {
  const at = s.off;
  const sport = s.u16(at);
  const dport = s.u16(at + 2);
  if (dport < 0) return Next.None;
  s.setPorts(sport, dport);
  if (!s.need(at, 20)) return Next.None;
  const seq = s.u32(at + 4);
  const ack = s.u32(at + 8);
  const offFlags = s.u16(at + 12);
  const window = s.u16(at + 14);
  const flags = offFlags & 0xff;
  const l: TCPLayer = { kind: 'tcp', sport, dport, seq, ack, flags, window };
  s.layers.push(l);
  s.tcpSeq = seq;
  s.tcpAck = ack;
  s.tcpFlags = flags;
  s.tcpWindow = window;
  const hlen = (offFlags >>> 12) * 4;
  if (hlen < 20) return s.fail('DECODE_BAD_TCP_OFFSET');
  s.setPayload(at + hlen, s.ipWireEnd);
  if (!s.need(at, hlen)) return Next.None;
  if (hlen > 20) parseOptions(s, l, at + 20, at + hlen);
  return Next.None;
}

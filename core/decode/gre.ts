/*
 * GRE (RFC 2784 with RFC 2890 key and sequence; RFC 1701 routing) and enhanced GRE v1 (RFC 2637
 * §4.1, PPTP).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |C|R|K|S|s|Recur|A| Flags | Ver |         Protocol Type         |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |      Checksum (optional)      |       Offset (optional)       |   C or R
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                         Key (optional)                        |   K (v1: payload len | call id)
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Sequence Number (optional)                    |   S
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Acknowledgment Number (v1, optional)          |   A
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Routing (optional, RFC 1701 SRE list)          |   R
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * The protocol type is an EtherType (0x6558 bridged Ethernet, 0x880b PPP for v1, 0x88be/0x22eb
 * ERSPAN). The tunnel id is the key (v0) or the call id (v1).
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';
import type { Layer } from './types';

/** RFC 1701 source-route entries are bounded so a hostile list cannot spin. */
const MAX_SRE = 16;

export function decodeGRE(s: DecodeState): Next {
  const at = s.off;
  const flags = s.u16(at);
  const protocol = s.u16(at + 2);
  if (protocol < 0) return Next.None;
  const version = flags & 7;
  if (version > 1) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const l: Extract<Layer, { kind: 'gre' }> = { kind: 'gre', version, protocol };
  s.layers.push(l);
  let o = at + 4;
  if ((flags & 0xc000) !== 0) o += 4;
  let id = -1;
  if ((flags & 0x2000) !== 0) {
    const key = s.u32(o);
    if (key < 0) return Next.None;
    l.key = key;
    id = version === 1 ? key & 0xffff : key;
    o += 4;
  }
  s.greSeq = (flags & 0x1000) !== 0;
  if (s.greSeq) {
    const seq = s.u32(o);
    if (seq < 0) return Next.None;
    l.seq = seq;
    o += 4;
  }
  if (version === 1 && (flags & 0x0080) !== 0) o += 4;
  if (version === 0 && (flags & 0x4000) !== 0) {
    let n = 0;
    for (;;) {
      const len = s.u8(o + 3);
      if (len < 0) return Next.None;
      o += 4 + len;
      if (len === 0) break;
      if (++n > MAX_SRE) return s.fail('DECODE_BAD_TUNNEL_HEADER');
    }
  }
  s.tunnels.push(id >= 0 ? { kind: 'gre', id } : { kind: 'gre' });
  if (!s.need(at, o - at)) return Next.None;
  s.off = o;
  return ETHERTYPE.get(protocol) ?? Next.None;
}

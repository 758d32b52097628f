/*
 * Geneve (RFC 8926 §3.4), UDP 6081.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |        Virtual Network Identifier (VNI)       |    Reserved   |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Variable-Length Options (Opt Len * 4)      |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Options are skipped by length; the protocol type is an EtherType (0x6558 = Ethernet).
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';

export function decodeGeneve(s: DecodeState): Next {
  const at = s.off;
  const first = s.u8(at);
  const protocol = s.u16(at + 2);
  const w = s.u32(at + 4);
  if (w < 0) return Next.None;
  if (first >>> 6 !== 0) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const optionsLength = (first & 0x3f) * 4;
  const vni = w >>> 8;
  s.layers.push({ kind: 'geneve', vni, protocol, optionsLength });
  s.tunnels.push({ kind: 'geneve', id: vni });
  const o = at + 8 + optionsLength;
  if (!s.need(at, o - at)) return Next.None;
  s.off = o;
  return ETHERTYPE.get(protocol) ?? Next.None;
}

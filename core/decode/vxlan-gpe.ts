/*
 * VXLAN Generic Protocol Extension (draft-ietf-nvo3-vxlan-gpe §3.2), UDP 4790.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |R|R|Ver|I|P|B|O|       Reserved                |Next Protocol  |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                VXLAN Network Identifier (VNI) |   Reserved    |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Next protocol: 1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH, 5 MPLS.
 */
import type { DecodeState } from './reader';
import { Next, NSH_PROTOCOL } from './tables';

export function decodeVXLANGPE(s: DecodeState): Next {
  const at = s.off;
  const flags = s.u8(at);
  const nextProtocol = s.u8(at + 3);
  const w = s.u32(at + 4);
  if (w < 0) return Next.None;
  if (((flags >>> 4) & 3) !== 0) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const vni = w >>> 8;
  s.layers.push({ kind: 'vxlan-gpe', flags, vni, nextProtocol });
  s.tunnels.push({ kind: 'vxlan-gpe', id: vni });
  s.off = at + 8;
  return NSH_PROTOCOL.get(nextProtocol) ?? Next.None;
}

/*
 * VXLAN (RFC 7348 §5), on the UDP ports of the `vxlanPorts` option (4789 and Linux's 8472).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |R|R|R|R|I|R|R|R|            Reserved                           |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                VXLAN Network Identifier (VNI) |   Reserved    |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * An Ethernet frame follows. The I flag is not enforced (Wireshark and tcpdump do not either).
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeVXLAN(s: DecodeState): Next {
  const at = s.off;
  const flags = s.u8(at);
  const w = s.u32(at + 4);
  if (w < 0) return Next.None;
  const vni = w >>> 8;
  s.layers.push({ kind: 'vxlan', flags, vni });
  s.tunnels.push({ kind: 'vxlan', id: vni });
  s.off = at + 8;
  return Next.Ethernet;
}

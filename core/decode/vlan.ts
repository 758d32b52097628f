/*
 * IEEE 802.1Q / 802.1ad tag (after TPID 0x8100, 0x88a8, 0x9100 or 0x9200; stacks repeat).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * | PCP |D|        VLAN ID        |      EtherType / Length       |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';

export function decodeVLAN(s: DecodeState): Next {
  const at = s.off;
  const tci = s.u16(at);
  const type = s.u16(at + 2);
  if (type < 0) return Next.None;
  s.layers.push({ kind: 'vlan', id: tci & 0x0fff, pcp: tci >>> 13, etherType: type });
  s.off = at + 4;
  if (type <= 1500) return Next.LLC;
  return ETHERTYPE.get(type) ?? Next.None;
}

/*
 * Ethernet II (RFC 894) / IEEE 802.3 MAC header.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Destination MAC (48)                       |
 * +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                               |                               |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+       Source MAC (48)         +
 * |                                                               |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |     EtherType / Length        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * A value <= 1500 is an IEEE 802.3 length: an LLC header follows (IEEE 802.3 §3.2.6).
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';

export function decodeEthernet(s: DecodeState): Next {
  const at = s.off;
  const type = s.u16(at + 12);
  if (type < 0) return Next.None;
  s.layers.push({ kind: 'ethernet', etherType: type });
  s.off = at + 14;
  if (type <= 1500) return Next.LLC;
  return ETHERTYPE.get(type) ?? Next.None;
}

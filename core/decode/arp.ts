/*
 * ARP (RFC 826). Only the operation is kept: ARP has no tuple.
 *
 * +---------------+---------------+---------------+---------------+
 * |     Hardware type (16)        |     Protocol type (16)        |
 * +---------------+---------------+---------------+---------------+
 * |  HW addr len  | Proto addr len|       Operation (16)          |
 * +---------------+---------------+---------------+---------------+
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeARP(s: DecodeState): Next {
  const operation = s.u16(s.off + 6);
  if (operation < 0) return Next.None;
  s.layers.push({ kind: 'arp', operation });
  return Next.None;
}

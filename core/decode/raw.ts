/*
 * Raw IP (LINKTYPE_RAW, DLT_RAW 12/14): no link header; the IP version nibble picks the decoder.
 *
 * +-+-+-+-+-+-+-+-
 * |Version|  ...     4 => IPv4, 6 => IPv6
 * +-+-+-+-+-+-+-+-
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeRaw(s: DecodeState): Next {
  const v = s.u8(s.off);
  if (v < 0) return Next.None;
  const version = v >>> 4;
  if (version === 4) return Next.IPv4;
  if (version === 6) return Next.IPv6;
  return s.fail('DECODE_BAD_IP_VERSION');
}

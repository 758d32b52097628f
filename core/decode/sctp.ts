/*
 * SCTP common header (RFC 9260 §3.1). Chunks are not decoded: the ports are the tuple.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |     Source Port Number        |     Destination Port Number   |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                      Verification Tag                         |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                           Checksum                            |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeSCTP(s: DecodeState): Next {
  const at = s.off;
  const sport = s.u16(at);
  const dport = s.u16(at + 2);
  if (dport < 0) return Next.None;
  s.setPorts(sport, dport);
  const vtag = s.u32(at + 4);
  if (!s.need(at, 12)) return Next.None;
  s.layers.push({ kind: 'sctp', sport, dport, vtag });
  s.setPayload(at + 12, s.ipWireEnd);
  return Next.None;
}

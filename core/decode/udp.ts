/*
 * UDP header (RFC 768).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |          Source Port          |       Destination Port        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |            Length             |           Checksum            |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * UDP knows no tunnel: the payload decoder comes from the `udp.port` table built from options
 * (destination port first, then source port). Length 0 is allowed for jumbograms (RFC 2675 §4).
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeUDP(s: DecodeState): Next {
  const at = s.off;
  const sport = s.u16(at);
  const dport = s.u16(at + 2);
  if (dport < 0) return Next.None;
  s.setPorts(sport, dport);
  const length = s.u16(at + 4);
  if (!s.need(at, 8)) return Next.None;
  s.layers.push({ kind: 'udp', sport, dport, length });
  s.setPayload(at + 8, s.ipWireEnd);
  if (length !== 0 && length < 8) return s.fail('DECODE_BAD_UDP_LENGTH');
  s.off = at + 8;
  // No payload on the wire: nothing for a port-table decoder. A payload that was not captured is
  // still handed on, so the tunnel decoder reports the frame truncated. With TSO/BIG TCP lengths
  // (IP and UDP length 0) the wire size is unknown, so the port alone decides.
  if (s.ipWireEnd <= at + 8 && !(s.lengthUnknown && length === 0)) return Next.None;
  return s.udpPorts.get(dport) ?? s.udpPorts.get(sport) ?? Next.None;
}

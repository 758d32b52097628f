/*
 * MPLS label stack entry (RFC 3032 §2.1), repeated until the bottom-of-stack bit S is set.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                Label                  | TC  |S|      TTL      |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * MPLS does not name its payload; like tcpdump we look at the first nibble after the stack:
 * 4 => IPv4, 6 => IPv6, 0 => pseudowire control word (RFC 4385) then Ethernet.
 * MPLS-in-UDP (RFC 7510) is the same stack after a UDP header on port 6635.
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

/** Label stacks deeper than this are treated as hostile. */
const MAX_LABELS = 16;

export function decodeMPLS(s: DecodeState): Next {
  let at = s.off;
  for (let n = 0; n < MAX_LABELS; n++) {
    const e = s.u32(at);
    if (e < 0) return Next.None;
    const bottom = (e & 0x100) !== 0;
    s.layers.push({ kind: 'mpls', label: e >>> 12, tc: (e >>> 9) & 7, bottom, ttl: e & 0xff });
    at += 4;
    if (bottom) {
      s.off = at;
      const v = s.u8(at);
      if (v < 0) return Next.None;
      const nibble = v >>> 4;
      if (nibble === 4) return Next.IPv4;
      if (nibble === 6) return Next.IPv6;
      if (nibble === 0) {
        s.off = at + 4;
        return Next.Ethernet;
      }
      return Next.None;
    }
  }
  return s.fail('DECODE_TOO_DEEP');
}

/** RFC 7510: a UDP port announced the MPLS stack; record the tunnel (id = top label). */
export function decodeMPLSUDP(s: DecodeState): Next {
  const e = s.u32(s.off);
  if (e < 0) return Next.None;
  s.tunnels.push({ kind: 'mpls-udp', id: e >>> 12 });
  return Next.MPLS;
}

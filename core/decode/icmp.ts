/*
 * ICMP (RFC 792) and ICMPv6 (RFC 4443 §2.1).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |     Type      |     Code      |          Checksum             |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |        Rest of header (identifier/sequence, MTU, pointer ...) |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Error messages: as much of the offending IP packet as fits   |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Echo request/reply (v4 types 8/0, v6 128/129): the rest of the header is the identifier and the
 * sequence number (RFC 792 p. 14, RFC 4443 §4.1), kept as keys; the echo data is the payload.
 * The quoted packet of an error (v4 types 3, 4, 5, 11, 12; v6 types 1-4) is reported as `related`:
 * it names the flow the error is about, never the frame's own tuple. It is read best-effort (its
 * length fields describe the original packet, which is cut), so it never marks the frame truncated.
 */
import type { Tuple } from '../../common/event';
import { formatIPv4, formatIPv6 } from '../../common/address';
import type { DecodeState } from './reader';
import { transportName } from './reader';
import { Next } from './tables';

const V4_ERRORS = new Set([3, 4, 5, 11, 12]);
const V6_ERRORS = new Set([1, 2, 3, 4]);
const V4_ECHO = new Set([0, 8]);
const V6_ECHO = new Set([128, 129]);

/** The tuple of the IP packet quoted at `at`, or undefined when too little of it was captured. */
function quotedTuple(s: DecodeState, at: number): Tuple | undefined {
  const b = s.bytes;
  const end = s.len;
  if (at >= end) return undefined;
  const version = (b[at] ?? 0) >>> 4;
  let proto: number;
  let src: string;
  let dst: string;
  let l4: number;
  if (version === 4) {
    if (at + 20 > end) return undefined;
    const ihl = ((b[at] ?? 0) & 0x0f) * 4;
    proto = b[at + 9] ?? 0;
    src = formatIPv4(b, at + 12);
    dst = formatIPv4(b, at + 16);
    l4 = at + ihl;
    // A non-first fragment carries no ports.
    if (((((b[at + 6] ?? 0) << 8) | (b[at + 7] ?? 0)) & 0x1fff) !== 0) l4 = end;
  } else if (version === 6) {
    if (at + 40 > end) return undefined;
    proto = b[at + 6] ?? 0;
    src = formatIPv6(b, at + 8);
    dst = formatIPv6(b, at + 24);
    l4 = at + 40;
  } else {
    return undefined;
  }
  const t: Tuple = { proto: transportName(proto), ipProto: proto, src, dst };
  if ((proto === 6 || proto === 17 || proto === 132) && l4 + 4 <= end) {
    t.sport = ((b[l4] ?? 0) << 8) | (b[l4 + 1] ?? 0);
    t.dport = ((b[l4 + 2] ?? 0) << 8) | (b[l4 + 3] ?? 0);
  }
  return t;
}

function decode(s: DecodeState, v6: boolean): Next {
  const at = s.off;
  const type = s.u8(at);
  const code = s.u8(at + 1);
  if (code < 0) return Next.None;
  s.pending = null;
  s.layers.push({ kind: v6 ? 'icmpv6' : 'icmp', type, code });
  s.icmpType = type;
  s.icmpCode = code;
  if (!s.need(at, 8)) return Next.None;
  if ((v6 ? V6_ECHO : V4_ECHO).has(type)) {
    s.icmpId = s.u16(at + 4);
    s.icmpSeq = s.u16(at + 6);
  }
  s.setPayload(at + 8, s.ipWireEnd);
  if ((v6 ? V6_ERRORS : V4_ERRORS).has(type)) {
    const related = quotedTuple(s, at + 8);
    if (related !== undefined) s.related = related;
  }
  return Next.None;
}

export function decodeICMP(s: DecodeState): Next {
  return decode(s, false);
}

export function decodeICMPv6(s: DecodeState): Next {
  return decode(s, true);
}

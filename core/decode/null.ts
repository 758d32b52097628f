/*
 * BSD loopback encapsulation (LINKTYPE_NULL and LINKTYPE_LOOP).
 *
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Address family (32 bits)                      |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * NULL stores it in the capturing host's byte order (either), LOOP in network order. AF_INET is
 * 2; AF_INET6 is 24 (NetBSD/OpenBSD), 28 (FreeBSD) or 30 (macOS).
 */
import type { DecodeState } from './reader';
import { BSD_AF, Next } from './tables';

function finish(s: DecodeState, family: number): Next {
  s.layers.push({ kind: 'null', family });
  s.off += 4;
  return BSD_AF.get(family) ?? Next.None;
}

export function decodeNull(s: DecodeState): Next {
  const be = s.u32(s.off);
  if (be < 0) return Next.None;
  // Same test as tcpdump's print-null.c: a family never needs the upper 16 bits, so if they are
  // set the value was written little-endian.
  const family = (be & 0xffff0000) !== 0 ? ((be >>> 24) | ((be >>> 8) & 0xff00)) & 0xffff : be;
  return finish(s, family);
}

export function decodeLoop(s: DecodeState): Next {
  const family = s.u32(s.off);
  if (family < 0) return Next.None;
  return finish(s, family);
}

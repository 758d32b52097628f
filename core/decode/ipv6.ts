/*
 * IPv6 header (RFC 8200 §3) and extension headers (§4).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |Version| Traffic Class |           Flow Label                  |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |         Payload Length        |  Next Header  |   Hop Limit   |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Source Address (128)                       |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Destination Address (128)                     |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *
 * Hop-by-hop (0), Routing (43), Destination options (60):   Fragment (44):
 * +---------------+---------------+-------------------+     +-------+-------+---------------+-+-+
 * |  Next Header  |  Hdr Ext Len  | (len+1)*8 bytes   |     |  NH   | Rsvd  |Frag Offset|Res|M|
 * +---------------+---------------+-------------------+     +-------+-------+---------------+-+-+
 *                                                           |        Identification (32)        |
 * Payload length 0 with a hop-by-hop Jumbo Payload option (type 0xC2, RFC 2675) is a jumbogram
 * (BIG TCP); without that option it is a GSO super-packet: the captured length is used then.
 */
import { formatIPv6 } from '../../common/address';
import type { DecodeState } from './reader';
import { transportName } from './reader';
import { Next } from './tables';

const JUMBO_OPTION = 0xc2;

/** The RFC 2675 jumbo payload length from a hop-by-hop header at `at`, or -1. */
function jumboLength(s: DecodeState, at: number): number {
  const len = s.u8(at + 1);
  if (len < 0) return -1;
  const end = at + (len + 1) * 8;
  let o = at + 2;
  while (o < end) {
    const type = s.u8(o);
    if (type < 0) return -1;
    if (type === 0) {
      o++; // Pad1
      continue;
    }
    const olen = s.u8(o + 1);
    if (olen < 0) return -1;
    if (type === JUMBO_OPTION && olen === 4) return s.u32(o + 2);
    o += 2 + olen;
  }
  return -1;
}

export function decodeIPv6(s: DecodeState): Next {
  const at = s.off;
  const v = s.u8(at);
  if (v < 0) return Next.None;
  if (v >>> 4 !== 6) return s.fail('DECODE_BAD_IP_VERSION');
  if (!s.need(at, 40)) return Next.None;
  const flowLabel = s.u32(at) & 0xfffff;
  const payloadLength = s.u16(at + 4);
  const nextHeader = s.u8(at + 6);
  const hopLimit = s.u8(at + 7);
  const src = formatIPv6(s.bytes, at + 8);
  const dst = formatIPv6(s.bytes, at + 24);
  s.layers.push({ kind: 'ipv6', src, dst, nextHeader, hopLimit, flowLabel });
  s.beginIP({ proto: transportName(nextHeader), ipProto: nextHeader, src, dst });
  s.curV6 = true;
  let wireEnd = at + 40 + payloadLength;
  if (payloadLength === 0) {
    const jumbo = nextHeader === 0 ? jumboLength(s, at + 40) : -1;
    wireEnd = jumbo > 0 ? at + 40 + jumbo : s.len;
    s.lengthUnknown = jumbo <= 0;
  }
  s.ipWireEnd = wireEnd;
  if (wireEnd < s.len) s.len = wireEnd;
  return s.ipNext(nextHeader, at + 40);
}

const EXT_KIND = { 0: 'ipv6-hopopts', 43: 'ipv6-route', 60: 'ipv6-dstopts' } as const;

/** Hop-by-hop, routing and destination options headers: skipped by their length. */
export function decodeIPv6Ext(s: DecodeState): Next {
  const at = s.off;
  const p = s.ipProto;
  const kind = p === 0 ? EXT_KIND[0] : p === 43 ? EXT_KIND[43] : EXT_KIND[60];
  const nextHeader = s.u8(at);
  const hlen = s.u8(at + 1);
  if (hlen < 0) return Next.None;
  const length = (hlen + 1) * 8;
  s.layers.push({ kind, nextHeader, length });
  if (!s.need(at, length)) return Next.None;
  return s.ipNext(nextHeader, at + length);
}

/** Fragment header: only the first fragment (offset 0) carries the upper-layer header. */
export function decodeIPv6Frag(s: DecodeState): Next {
  const at = s.off;
  const nextHeader = s.u8(at);
  const fo = s.u16(at + 2);
  const id = s.u32(at + 4);
  if (id < 0) return Next.None;
  const fragOffset = fo & 0xfff8;
  const moreFragments = (fo & 1) !== 0;
  s.layers.push({ kind: 'ipv6-frag', nextHeader, id, fragOffset, moreFragments });
  return s.ipNext(nextHeader, at + 8, fragOffset === 0);
}

/*
 * Authentication Header (RFC 4302 §2), in IPv4 or IPv6: skipped by its length, (len + 2) * 4.
 * +---------------+---------------+-------------------------------+
 * |  Next Header  |  Payload Len  |          RESERVED             |
 * +---------------+---------------+-------------------------------+
 * |                 Security Parameters Index (SPI)               |
 * +---------------+---------------+-------------------------------+
 */
export function decodeAH(s: DecodeState): Next {
  const at = s.off;
  const nextHeader = s.u8(at);
  const plen = s.u8(at + 1);
  const spi = s.u32(at + 4);
  if (spi < 0) return Next.None;
  s.layers.push({ kind: 'ah', nextHeader, spi });
  const length = (plen + 2) * 4;
  if (length < 12) return s.fail('DECODE_BAD_EXT_HEADER');
  if (!s.need(at, length)) return Next.None;
  return s.ipNext(nextHeader, at + length);
}

/*
 * IPv4 header (RFC 791 §3.1).
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |Version|  IHL  |Type of Service|          Total Length         |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |         Identification        |Flags|      Fragment Offset    |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Time to Live |    Protocol   |         Header Checksum       |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                       Source Address                          |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Destination Address                        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                    Options (IHL > 5)                          |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Only the first fragment (offset 0) carries the transport header. Total length 0 is what Linux
 * TSO/GSO and BIG TCP (> 64 KiB) put in captured super-packets: the captured length is used then.
 */
import { formatIPv4 } from '../../common/address';
import type { DecodeState } from './reader';
import { transportName } from './reader';
import { Next } from './tables';

export function decodeIPv4(s: DecodeState): Next {
  const at = s.off;
  const v = s.u8(at);
  if (v < 0) return Next.None;
  if (v >>> 4 !== 4) return s.fail('DECODE_BAD_IP_VERSION');
  const hlen = (v & 0x0f) * 4;
  if (hlen < 20) return s.fail('DECODE_BAD_IPV4_IHL');
  if (!s.need(at, 20)) return Next.None;
  const totalLength = s.u16(at + 2);
  const id = s.u16(at + 4);
  const frag = s.u16(at + 6);
  const ttl = s.u8(at + 8);
  const proto = s.u8(at + 9);
  const b = s.bytes;
  const src = formatIPv4(b, at + 12);
  const dst = formatIPv4(b, at + 16);
  const fragOffset = (frag & 0x1fff) * 8;
  const moreFragments = (frag & 0x2000) !== 0;
  s.layers.push({ kind: 'ipv4', src, dst, id, ttl, proto, fragOffset, moreFragments });
  s.beginIP({ proto: transportName(proto), ipProto: proto, src, dst });
  s.ipId = id;
  if (totalLength !== 0 && totalLength < hlen) return s.fail('DECODE_BAD_IPV4_LENGTH');
  s.lengthUnknown = totalLength === 0;
  const wireEnd = totalLength === 0 ? s.len : at + totalLength;
  s.ipWireEnd = wireEnd;
  if (wireEnd < s.len) s.len = wireEnd;
  s.setPayload(at + hlen, wireEnd);
  s.curV6 = false;
  if (!s.need(at, hlen)) return Next.None;
  if (fragOffset !== 0) return Next.None;
  return s.ipNext(proto, at + hlen);
}

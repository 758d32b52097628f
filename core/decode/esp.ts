/*
 * ESP (RFC 4303 §2), IP protocol 50 or UDP 4500 (RFC 3948 NAT-T). Opaque: SPI and sequence only.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |               Security Parameters Index (SPI)                 |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                      Sequence Number                          |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                  Encrypted payload ...                        |
 * On UDP 4500 (RFC 3948 §2.2) a zero first word is the non-ESP marker (IKE follows) and a single
 * 0xff byte is a NAT-keepalive: neither is ESP.
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeESP(s: DecodeState): Next {
  const at = s.off;
  const spi = s.u32(at);
  const seq = s.u32(at + 4);
  if (seq < 0) return Next.None;
  s.layers.push({ kind: 'esp', spi, seq });
  s.tunnels.push({ kind: 'esp', id: spi });
  return Next.None;
}

export function decodeESPUDP(s: DecodeState): Next {
  const at = s.off;
  if (s.ipWireEnd - at < 8) return Next.None; // keepalive or too short to be ESP
  const first = s.u32(at);
  if (first === 0) return Next.None; // non-ESP marker: IKE
  return decodeESP(s);
}

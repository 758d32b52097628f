/*
 * Network Service Header (RFC 8300 §2.2-2.3), after VXLAN-GPE, GRE (0x894f) or Ethernet.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |Ver|O|U|    TTL    |   Length  |U|U|U|U|MD Type| Next Protocol |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |          Service Path Identifier (SPI)        | Service Index |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                 Context headers (Length * 4 - 8 bytes)        |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 */
import type { DecodeState } from './reader';
import { Next, NSH_PROTOCOL } from './tables';

export function decodeNSH(s: DecodeState): Next {
  const at = s.off;
  const base = s.u32(at);
  const sp = s.u32(at + 4);
  if (sp < 0) return Next.None;
  if (base >>> 30 !== 0) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const length = ((base >>> 16) & 0x3f) * 4;
  if (length < 8) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const nextProtocol = base & 0xff;
  s.layers.push({ kind: 'nsh', spi: sp >>> 8, si: sp & 0xff, nextProtocol });
  if (!s.need(at, length)) return Next.None;
  s.off = at + length;
  return NSH_PROTOCOL.get(nextProtocol) ?? Next.None;
}

/*
 * PPP in HDLC-like framing (RFC 1662 §3) as captured (LINKTYPE_PPP, and GREv1/PPTP payloads).
 *
 * +----------+----------+----------+
 * | Address  | Control  | Protocol |   Address 0xff / Control 0x03 may be omitted (ACFC),
 * |   0xff   |   0x03   | 8 or 16  |   Protocol may be one byte (PFC, RFC 1661 §6.5): odd low byte.
 * +----------+----------+----------+
 */
import type { DecodeState } from './reader';
import { Next, PPP_PROTOCOL } from './tables';

export function decodePPP(s: DecodeState): Next {
  let at = s.off;
  const a = s.u8(at);
  if (a < 0) return Next.None;
  if (a === 0xff && s.u8(at + 1) === 0x03) at += 2;
  const first = s.u8(at);
  if (first < 0) return Next.None;
  let protocol = first;
  if ((first & 1) === 0) {
    protocol = s.u16(at);
    if (protocol < 0) return Next.None;
    at += 2;
  } else {
    at += 1;
  }
  s.layers.push({ kind: 'ppp', protocol });
  s.off = at;
  return PPP_PROTOCOL.get(protocol) ?? Next.None;
}

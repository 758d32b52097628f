/*
 * ERSPAN (draft-foschiano-erspan) inside GRE.
 *
 * Type I: GRE protocol 0x88be without a sequence number; no ERSPAN header, Ethernet follows.
 * Type II (GRE 0x88be with S), 8 bytes:
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Ver  |          VLAN         | COS | En|T|    Session ID     |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |      Reserved         |                 Index                 |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Type III (GRE 0x22eb), 12 bytes (+ 8-byte platform sub-header when O is set):
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Ver  |          VLAN         | COS |BSO|T|     Session ID    |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |                          Timestamp                            |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |             SGT               |P|    FT   |   Hw ID   |D|Gra|O|
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * Frame type (FT) 0 is Ethernet; other frame types are not decoded.
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeERSPAN2(s: DecodeState): Next {
  const at = s.off;
  if (!s.greSeq) {
    s.layers.push({ kind: 'erspan', type: 1, sessionId: 0, vlan: 0 });
    s.tunnels.push({ kind: 'erspan' });
    return Next.Ethernet;
  }
  const w = s.u32(at);
  if (!s.need(at, 8)) return Next.None;
  const ver = w >>> 28;
  if (ver !== 1) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const sessionId = w & 0x3ff;
  s.layers.push({ kind: 'erspan', type: 2, sessionId, vlan: (w >>> 16) & 0xfff });
  s.tunnels.push({ kind: 'erspan', id: sessionId });
  s.off = at + 8;
  return Next.Ethernet;
}

export function decodeERSPAN3(s: DecodeState): Next {
  const at = s.off;
  const w = s.u32(at);
  const last = s.u16(at + 10);
  if (last < 0) return Next.None;
  const ver = w >>> 28;
  if (ver !== 2) return s.fail('DECODE_BAD_TUNNEL_HEADER');
  const sessionId = w & 0x3ff;
  s.layers.push({ kind: 'erspan', type: 3, sessionId, vlan: (w >>> 16) & 0xfff });
  s.tunnels.push({ kind: 'erspan', id: sessionId });
  const frameType = (last >>> 10) & 0x1f;
  let o = at + 12;
  if ((last & 1) !== 0) o += 8;
  if (!s.need(at, o - at)) return Next.None;
  s.off = o;
  return frameType === 0 ? Next.Ethernet : Next.None;
}

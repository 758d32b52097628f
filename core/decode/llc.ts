/*
 * IEEE 802.2 LLC, and SNAP (RFC 1042) when DSAP = SSAP = 0xAA and control = 0x03 (UI).
 *
 * +--------+--------+--------+
 * |  DSAP  |  SSAP  | Control|   (control is 2 bytes for I/S frames)
 * +--------+--------+--------+--------+--------+
 * |  SNAP OUI (24)           |  Protocol (16)  |   OUI 0 => Protocol is an EtherType
 * +--------+--------+--------+--------+--------+
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';

export function decodeLLC(s: DecodeState): Next {
  const at = s.off;
  const dsap = s.u8(at);
  const ssap = s.u8(at + 1);
  const control = s.u8(at + 2);
  if (control < 0) return Next.None;
  s.layers.push({ kind: 'llc', dsap, ssap, control });
  if (dsap !== 0xaa || ssap !== 0xaa || control !== 0x03) return Next.None;
  const oui = (s.u16(at + 3) << 8) | s.u8(at + 5);
  const protocol = s.u16(at + 6);
  if (protocol < 0 || oui < 0) return Next.None;
  s.layers.push({ kind: 'snap', oui, protocol });
  s.off = at + 8;
  // OUI 0 is "EtherType follows"; Cisco's 0x00000c uses EtherTypes too for the protocols we know.
  if (oui !== 0 && oui !== 0x0c) return Next.None;
  return ETHERTYPE.get(protocol) ?? Next.None;
}

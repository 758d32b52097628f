/*
 * Linux "cooked" capture headers (tcpdump.org LINKTYPE_LINUX_SLL / LINKTYPE_LINUX_SLL2).
 *
 * SLL (v1), 16 bytes:                 SLL2, 20 bytes:
 * +---------------+---------------+   +---------------+---------------+
 * |  Packet type  |  ARPHRD type  |   | Protocol type |   Reserved    |
 * +---------------+---------------+   +---------------+---------------+
 * | Addr length   |               |   |        Interface index        |
 * +---------------+  Link-layer   +   +---------------+-------+-------+
 * |    address (8 bytes)          |   |  ARPHRD type  |PktType|AddrLen|
 * +               +---------------+   +---------------+-------+-------+
 * |               | Protocol type |   |   Link-layer address (8)      |
 * +---------------+---------------+   +-------------------------------+
 * Protocol 0x0004 means an 802.2 LLC frame follows (ETH_P_802_2), 0x0001 Novell 802.3 (not decoded).
 */
import type { DecodeState } from './reader';
import { ETHERTYPE, Next } from './tables';

function next(protocol: number): Next {
  if (protocol === 0x0004) return Next.LLC;
  return ETHERTYPE.get(protocol) ?? Next.None;
}

export function decodeLinuxSLL(s: DecodeState): Next {
  const at = s.off;
  const packetType = s.u16(at);
  const arphrd = s.u16(at + 2);
  const protocol = s.u16(at + 14);
  if (protocol < 0) return Next.None;
  s.layers.push({ kind: 'linux-sll', packetType, arphrd, protocol });
  s.off = at + 16;
  return next(protocol);
}

export function decodeLinuxSLL2(s: DecodeState): Next {
  const at = s.off;
  const protocol = s.u16(at);
  const ifindex = s.u32(at + 4);
  const arphrd = s.u16(at + 8);
  const packetType = s.u8(at + 10);
  if (!s.need(at, 20)) return Next.None;
  s.layers.push({ kind: 'linux-sll2', packetType, arphrd, ifindex, protocol });
  s.off = at + 20;
  return next(protocol);
}

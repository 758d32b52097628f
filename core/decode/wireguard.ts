/*
 * WireGuard message header (WireGuard whitepaper §5.4), UDP 51820. Opaque: recognised, never
 * decrypted.
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |     Type      |               Reserved (zero)                 |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Type 1: sender index | Types 3, 4: receiver index            |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * |  Type 2: receiver index (after the sender index)              |
 * +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * A payload that is not a valid message (type 1-4, reserved zero) stays plain UDP payload. The
 * tunnel id is the receiver index; an initiation (type 1) has none, so its sender index is used.
 */
import type { DecodeState } from './reader';
import { Next } from './tables';

export function decodeWireGuard(s: DecodeState): Next {
  const at = s.off;
  // Every WireGuard message is at least 32 bytes on the wire; shorter datagrams are not WireGuard.
  if (s.ipWireEnd - at < 32) return Next.None;
  const head = s.u32(at);
  if (head < 0) return Next.None;
  const messageType = head >>> 24;
  if (messageType < 1 || messageType > 4 || (head & 0xffffff) !== 0) return Next.None;
  const receiver = s.u32(messageType === 2 ? at + 8 : at + 4);
  if (receiver < 0) return Next.None;
  s.layers.push({ kind: 'wireguard', messageType, receiver });
  s.tunnels.push({ kind: 'wireguard', id: receiver, messageType });
  return Next.None;
}

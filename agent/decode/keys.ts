/**
 * NAT-invariant payload fingerprints, computed over the captured bytes in place (no copies, no
 * strings except when a probe marker is actually found).
 */
import type { PacketKeys } from '../../common/event';
import type { DecodeState } from './reader';

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a 32 of b[from, to). */
export function fnv1a32(b: Uint8Array, from: number, to: number): number {
  let h = FNV_OFFSET;
  for (let i = from; i < to; i++) {
    h ^= b[i] ?? 0;
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

const CR = 0x0d;
const LF = 0x0a;
// " HTTP/1." — the request line minus its version digit, compared byte by byte.
const HTTP_SUFFIX = [0x20, 0x48, 0x54, 0x54, 0x50, 0x2f, 0x31, 0x2e];

/**
 * FNV-1a 32 of the first line (up to CR/LF or 128 bytes), without a trailing " HTTP/1.0" or
 * " HTTP/1.1": a proxy that upgrades the HTTP version still produces the same hash.
 */
export function requestLineHash(b: Uint8Array, from: number, to: number): number {
  let end = Math.min(to, from + 128);
  for (let i = from; i < end; i++) {
    const c = b[i];
    if (c === CR || c === LF) {
      end = i;
      break;
    }
  }
  if (end - from >= 9) {
    const v = b[end - 1];
    let match = v === 0x30 || v === 0x31;
    for (let k = 0; match && k < 8; k++) match = b[end - 9 + k] === HTTP_SUFFIX[k];
    if (match) end -= 9;
  }
  return fnv1a32(b, from, end);
}

// "hoptrace-probe-"
const MARKER = [
  0x68, 0x6f, 0x70, 0x74, 0x72, 0x61, 0x63, 0x65, 0x2d, 0x70, 0x72, 0x6f, 0x62, 0x65, 0x2d,
];

function isIdChar(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a));
}

/** The id of the first `hoptrace-probe-<id>` token (id = [0-9a-z]{1,32}) in b[from, to), or undefined. */
export function findProbeMarker(b: Uint8Array, from: number, to: number): string | undefined {
  const last = to - MARKER.length;
  for (let i = from; i < last; i++) {
    if (b[i] !== 0x68) continue;
    let k = 1;
    while (k < MARKER.length && b[i + k] === MARKER[k]) k++;
    if (k < MARKER.length) continue;
    const idStart = i + MARKER.length;
    let j = idStart;
    while (j < to && j - idStart < 32 && isIdChar(b[j])) j++;
    if (j === idStart) continue;
    let id = '';
    for (let x = idStart; x < j; x++) id += String.fromCharCode(b[x] ?? 0);
    return id;
  }
  return undefined;
}

/** Assembles the PacketKeys of the innermost packet from the decode state. */
export function buildKeys(s: DecodeState): PacketKeys {
  let payloadLength = 0;
  const capEnd = Math.min(s.payWireEnd, s.bytes.length);
  const keys: PacketKeys = { payloadLength };
  if (s.ipId >= 0) keys.ipId = s.ipId;
  if (s.tcpSeq >= 0) {
    keys.tcpSeq = s.tcpSeq;
    keys.tcpAck = s.tcpAck;
    keys.tcpFlags = s.tcpFlags;
    keys.tcpWindow = s.tcpWindow;
  }
  if (s.tsVal >= 0) {
    keys.tsVal = s.tsVal;
    keys.tsEcr = s.tsEcr;
  }
  if (s.payOff >= 0 && s.payWireEnd > s.payOff) {
    payloadLength = s.payWireEnd - s.payOff;
    keys.payloadLength = payloadLength;
    if (capEnd > s.payOff) {
      const b = s.bytes;
      keys.payloadHash = fnv1a32(b, s.payOff, Math.min(capEnd, s.payOff + 64));
      keys.requestLineHash = requestLineHash(b, s.payOff, capEnd);
      const marker = findProbeMarker(b, s.payOff, Math.min(capEnd, s.payOff + 512));
      if (marker !== undefined) keys.probeMarker = marker;
    }
  }
  return keys;
}

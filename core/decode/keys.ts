/**
 * NAT-invariant payload fingerprints, computed over the captured bytes in place (no copies, no
 * strings except when a probe marker is actually found). The hash is xxHash32 (seed 0): the same
 * function in native/pcap-batch/src/summary.c, where it runs for every captured packet — it mixes
 * 16 bytes per step where FNV-1a (used before) was one serial multiply per byte.
 */
import type { PacketKeys } from '../../common/event';
import type { DecodeState } from './reader';

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

const P1 = 0x9e3779b1;
const P2 = 0x85ebca77;
const P3 = 0xc2b2ae3d;
const P4 = 0x27d4eb2f;
const P5 = 0x165667b1;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function le32(b: Uint8Array, i: number): number {
  return (b[i] ?? 0) | ((b[i + 1] ?? 0) << 8) | ((b[i + 2] ?? 0) << 16) | ((b[i + 3] ?? 0) << 24);
}

function round(v: number, lane: number): number {
  return Math.imul(rotl((v + Math.imul(lane, P2)) | 0, 13), P1);
}

/** xxHash32 (seed 0) of b[from, to): https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md */
export function xxh32(b: Uint8Array, from: number, to: number): number {
  const len = to - from;
  let i = from;
  let h: number;
  if (len >= 16) {
    let v1 = (P1 + P2) | 0;
    let v2 = P2 | 0;
    let v3 = 0;
    let v4 = -P1 | 0;
    const limit = to - 16;
    while (i <= limit) {
      v1 = round(v1, le32(b, i));
      v2 = round(v2, le32(b, i + 4));
      v3 = round(v3, le32(b, i + 8));
      v4 = round(v4, le32(b, i + 12));
      i += 16;
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    h = P5 | 0;
  }
  h = (h + len) | 0;
  while (i + 4 <= to) {
    h = Math.imul(rotl((h + Math.imul(le32(b, i), P3)) | 0, 17), P4);
    i += 4;
  }
  while (i < to) {
    h = Math.imul(rotl((h + Math.imul(b[i] ?? 0, P5)) | 0, 11), P1);
    i++;
  }
  h ^= h >>> 15;
  h = Math.imul(h, P2);
  h ^= h >>> 13;
  h = Math.imul(h, P3);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a 32 of b[from, to) (kept for reference and tests; the keys use xxh32). */
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
 * xxHash32 of the first line (up to CR/LF or 128 bytes), without a trailing " HTTP/1.0" or
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
  return xxh32(b, from, end);
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
  if (s.icmpType >= 0) {
    keys.icmpType = s.icmpType;
    keys.icmpCode = s.icmpCode;
  }
  if (s.icmpId >= 0) {
    keys.icmpId = s.icmpId;
    keys.icmpSeq = s.icmpSeq;
  }
  if (s.dnsId >= 0) keys.dnsId = s.dnsId;
  if (s.dnsQuestion >= 0) keys.dnsQuestion = s.dnsQuestion;
  if (s.payOff >= 0 && s.payWireEnd > s.payOff) {
    payloadLength = s.payWireEnd - s.payOff;
    keys.payloadLength = payloadLength;
    if (capEnd > s.payOff) {
      const b = s.bytes;
      keys.payloadHash = xxh32(b, s.payOff, Math.min(capEnd, s.payOff + 64));
      keys.requestLineHash = requestLineHash(b, s.payOff, capEnd);
      const marker = findProbeMarker(b, s.payOff, Math.min(capEnd, s.payOff + 512));
      if (marker !== undefined) keys.probeMarker = marker;
    }
  }
  return keys;
}

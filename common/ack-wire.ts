/**
 * A hand-written decoder (and encoder) for the Ack Envelope, the one message an agent receives
 * for every batch it sends: `Envelope{seq = 1 (varint), ack = 19 {seq = 1 (varint)}}`, a few
 * bytes. Through decodeEnvelope an ack used to cost ~11 µs here (the event-batch decoder throws
 * and catches on it, then protobufjs decodes and converts it, 2–3 µs alone); this takes ~0.1 µs.
 * Anything it does not recognise exactly — another field, a second body, a varint of more than
 * 8 bytes, bytes out of bounds — returns null, and the caller takes the reflection decoder, which
 * accepts or refuses it with its own errors. The seqs are checked against 2^52 by the caller
 * (common/envelope.ts decodeEnvelope), as the reflection's are.
 *
 *   Envelope: [0x08 varint]? 0x9a 0x01 len Ack
 *   Ack:      [0x08 varint]?
 */
import type { Envelope } from './wire';

/** A varint at `at` below `end`: [value, next offset], or null (more than 8 bytes, out of bounds). */
function varint(b: Uint8Array, at: number, end: number): [number, number] | null {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 8; i++) {
    if (at >= end) return null;
    const byte = b[at++] ?? 0;
    value += (byte & 0x7f) * scale;
    if ((byte & 0x80) === 0) return [value, at];
    scale *= 128;
  }
  return null;
}

/** The Ack Envelope in `b`, or null when `b` is anything else (see the top of this file). */
export function decodeAckEnvelope(b: Uint8Array): (Envelope & { kind: 'ack' }) | null {
  let at = 0;
  const end = b.length;
  let seq = 0;
  if (b[at] === 0x08) {
    const v = varint(b, at + 1, end);
    if (v === null) return null;
    [seq, at] = v;
  }
  // Field 19, wire type 2: tag 154 = varint 0x9a 0x01; its length fits one byte (≤ 11 bytes).
  if (b[at] !== 0x9a || b[at + 1] !== 0x01 || at + 2 >= end) return null;
  const len = b[at + 2] ?? 0;
  at += 3;
  if (len > 0x7f || at + len !== end) return null;
  let ackSeq = 0;
  if (len > 0) {
    if (b[at] !== 0x08) return null;
    const v = varint(b, at + 1, end);
    if (v === null || v[1] !== end) return null;
    ackSeq = v[0];
  }
  return { seq, kind: 'ack', ack: { seq: ackSeq } };
}

/** `v` (an integer 0 … 2^53) as a varint into `out` at `at`; the next offset. */
function putVarint(out: Uint8Array, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}

/**
 * The Ack Envelope's bytes, the same bytes protobufjs writes for it (it writes the zero seq too),
 * without reflection: the collector sends one per message it stores.
 */
export function encodeAckEnvelope(seq: number, ackSeq: number): Uint8Array {
  const tmp = new Uint8Array(32);
  tmp[0] = 0x08;
  let at = putVarint(tmp, 1, seq);
  tmp[at++] = 0x9a;
  tmp[at++] = 0x01;
  const lenAt = at++;
  tmp[at++] = 0x08;
  at = putVarint(tmp, at, ackSeq);
  tmp[lenAt] = at - lenAt - 1;
  return tmp.slice(0, at);
}

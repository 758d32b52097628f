/**
 * The events-<point>.pb files of the data directory: one record per PacketEvent, appended.
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |              magic 0x48544531 ("HTE1")                         |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |              body length (bytes, big-endian)                   |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |              CRC-32C of the body                               |
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *   |              body: hoptrace.v1.PacketEvent (protobuf) ...      |
 *
 * The magic and the checksum let a reader resynchronise: a damaged record (a flipped length, a
 * stray byte from a short write) costs that record, counted, and the reader finds the next
 * magic whose record checks out. Only bytes after the last good record with no good record
 * behind them are a torn tail (a crash mid-append), which the store cuts off. Files written
 * before this format (a bare 4-byte length per record) are read as such up to the first magic.
 */
import { decodePacketEvent, encodePacketEvent } from '../common/codec';
import { crc32c } from '../common/crc32c';
import type { PacketEvent } from '../common/event';

const MAGIC = 0x48544531;
const MAGIC_BYTES = Buffer.from([0x48, 0x54, 0x45, 0x31]);
const HEAD = 12;
/** No PacketEvent comes near this; a longer length is damage. */
const MAX_BODY = 1 << 20;

export interface ParsedEventFile {
  events: PacketEvent[];
  /** Where the torn tail starts (the file's length when there is none). */
  goodBytes: number;
  /** Damaged records (or runs of stray bytes) skipped between good ones. */
  corruptRecords: number;
}

/** The body of a v2 record at `at` when it is whole and checks out; else null. */
function goodRecord(bytes: Buffer, at: number): Buffer | null {
  if (at + HEAD > bytes.length || bytes.readUInt32BE(at) !== MAGIC) return null;
  const len = bytes.readUInt32BE(at + 4);
  if (len > MAX_BODY || at + HEAD + len > bytes.length) return null;
  const body = bytes.subarray(at + HEAD, at + HEAD + len);
  return crc32c(body) === bytes.readUInt32BE(at + 8) ? body : null;
}

/** The next offset after `from` where a good v2 record starts, or -1. */
function resync(bytes: Buffer, from: number): number {
  for (let at = bytes.indexOf(MAGIC_BYTES, from); at >= 0; at = bytes.indexOf(MAGIC_BYTES, at + 1))
    if (goodRecord(bytes, at) !== null) return at;
  return -1;
}

/** Reads an event file: every good record, damaged ones counted, the torn tail located. */
export function parseEventFile(bytes: Buffer): ParsedEventFile {
  const events: PacketEvent[] = [];
  let corruptRecords = 0;
  let at = 0;
  // Records of the earlier format: a bare length each, until the first magic.
  while (at + 4 <= bytes.length && bytes.readUInt32BE(at) !== MAGIC) {
    const len = bytes.readUInt32BE(at);
    if (len > MAX_BODY || at + 4 + len > bytes.length) break;
    try {
      events.push(decodePacketEvent(bytes.subarray(at + 4, at + 4 + len)));
    } catch {
      corruptRecords++;
    }
    at += 4 + len;
  }
  while (at < bytes.length) {
    const body = goodRecord(bytes, at);
    if (body === null) {
      const next = resync(bytes, at + 1);
      if (next < 0) break; // nothing good behind it: the torn tail
      corruptRecords++;
      at = next;
      continue;
    }
    try {
      events.push(decodePacketEvent(body));
    } catch {
      // The checksum matched: written so by a peer's bad event. Only this record is lost.
      corruptRecords++;
    }
    at += HEAD + body.length;
  }
  return { events, goodBytes: at, corruptRecords };
}

/** Encodes events as records (one buffer, one write). */
export function encodeEventRecords(events: readonly PacketEvent[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of events) {
    const enc = encodePacketEvent(e);
    const body = Buffer.from(enc.buffer, enc.byteOffset, enc.byteLength);
    const head = Buffer.alloc(HEAD);
    head.writeUInt32BE(MAGIC, 0);
    head.writeUInt32BE(body.length, 4);
    head.writeUInt32BE(crc32c(body), 8);
    parts.push(head, body);
  }
  return Buffer.concat(parts);
}

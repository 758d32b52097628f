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
 * Each appended batch starts with a batch mark: the same header with magic 0x48544231 ("HTB1")
 * and a 12-byte body, the agent's spool seq of the batch (u64 big-endian) and its event count
 * (u32). A collector killed after the append was flushed but before it recorded the seq as stored
 * gets the same batch again from the agent; the mark says it is already here. Reading keeps the
 * first copy of every seq (a later mark with a seq at or below one seen before marks a duplicate
 * batch, skipped and counted) and reports the highest seq, so the collector never appends it twice.
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
const MARK_MAGIC = 0x48544231;
/** "HT": both magics start so; resynchronising looks for it and checks the rest. */
const MAGIC_PREFIX = Buffer.from([0x48, 0x54]);
const HEAD = 12;
const MARK_BODY = 12;
/** No PacketEvent comes near this; a longer length is damage. */
const MAX_BODY = 1 << 20;

export interface ParsedEventFile {
  events: PacketEvent[];
  /** Where the torn tail starts (the file's length when there is none). */
  goodBytes: number;
  /** Damaged records (or runs of stray bytes) skipped between good ones. */
  corruptRecords: number;
  /** The highest batch seq marked in the file (0: none). */
  lastSeq: number;
  /** Events of batches stored twice (a seq marked again), skipped. */
  duplicateEvents: number;
}

type FileRecord = { kind: 'event' | 'mark'; body: Buffer };

/** The v2 record at `at` when it is whole and checks out; else null. */
function goodRecord(bytes: Buffer, at: number): FileRecord | null {
  if (at + HEAD > bytes.length) return null;
  const magic = bytes.readUInt32BE(at);
  if (magic !== MAGIC && magic !== MARK_MAGIC) return null;
  const len = bytes.readUInt32BE(at + 4);
  if (len > MAX_BODY || at + HEAD + len > bytes.length) return null;
  if (magic === MARK_MAGIC && len !== MARK_BODY) return null;
  const body = bytes.subarray(at + HEAD, at + HEAD + len);
  if (crc32c(body) !== bytes.readUInt32BE(at + 8)) return null;
  return { kind: magic === MAGIC ? 'event' : 'mark', body };
}

/** The next offset after `from` where a good v2 record starts, or -1. */
function resync(bytes: Buffer, from: number): number {
  for (
    let at = bytes.indexOf(MAGIC_PREFIX, from);
    at >= 0;
    at = bytes.indexOf(MAGIC_PREFIX, at + 1)
  )
    if (goodRecord(bytes, at) !== null) return at;
  return -1;
}

function isMagic(bytes: Buffer, at: number): boolean {
  const m = bytes.readUInt32BE(at);
  return m === MAGIC || m === MARK_MAGIC;
}

/** Reads an event file: every good record, damaged ones counted, the torn tail located. */
export function parseEventFile(bytes: Buffer): ParsedEventFile {
  const events: PacketEvent[] = [];
  let corruptRecords = 0;
  let lastSeq = 0;
  let duplicateEvents = 0;
  /** Events still to skip of a batch marked a second time. */
  let skipping = 0;
  let at = 0;
  // Records of the earlier format: a bare length each, until the first magic.
  while (at + 4 <= bytes.length && !isMagic(bytes, at)) {
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
    const rec = goodRecord(bytes, at);
    if (rec === null) {
      const next = resync(bytes, at + 1);
      if (next < 0) break; // nothing good behind it: the torn tail
      corruptRecords++;
      at = next;
      continue;
    }
    at += HEAD + rec.body.length;
    if (rec.kind === 'mark') {
      const seq = Number(rec.body.readBigUInt64BE(0));
      const count = rec.body.readUInt32BE(8);
      skipping = seq <= lastSeq ? count : 0;
      lastSeq = Math.max(lastSeq, seq);
      continue;
    }
    if (skipping > 0) {
      skipping--;
      duplicateEvents++;
      continue;
    }
    try {
      events.push(decodePacketEvent(rec.body));
    } catch {
      // The checksum matched: written so by a peer's bad event. Only this record is lost.
      corruptRecords++;
    }
  }
  return { events, goodBytes: at, corruptRecords, lastSeq, duplicateEvents };
}

function header(magic: number, body: Buffer): Buffer {
  const head = Buffer.alloc(HEAD);
  head.writeUInt32BE(magic, 0);
  head.writeUInt32BE(body.length, 4);
  head.writeUInt32BE(crc32c(body), 8);
  return head;
}

/**
 * Encodes events as records (one buffer, one write), after a batch mark when the batch has an
 * agent seq (> 0). `raw`: the events' protobuf bytes as they arrived (EventBatch.raw), written
 * as they are instead of encoding the events again (one per event, else ignored).
 */
export function encodeEventRecords(
  events: readonly PacketEvent[],
  seq = 0,
  raw?: readonly Uint8Array[],
): Buffer {
  const parts: Buffer[] = [];
  if (seq > 0) {
    const mark = Buffer.alloc(MARK_BODY);
    mark.writeBigUInt64BE(BigInt(seq), 0);
    mark.writeUInt32BE(events.length, 8);
    parts.push(header(MARK_MAGIC, mark), mark);
  }
  const bodies = raw !== undefined && raw.length === events.length ? raw : null;
  for (const [i, e] of events.entries()) {
    const enc = bodies?.[i] ?? encodePacketEvent(e);
    const body = Buffer.from(enc.buffer, enc.byteOffset, enc.byteLength);
    parts.push(header(MAGIC, body), body);
  }
  return Buffer.concat(parts);
}

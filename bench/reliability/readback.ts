/**
 * The events a collector stored, read back from its data directory: how many times each (node,
 * frame) is there. With stream events unique by node and frame (sim-events.ts), that tells
 * acknowledged events lost (0 times) and duplicates (2 or more) exactly.
 *
 * The files are `captures/<id>/events-<point>.pb`, records as collector/event-file.ts writes and
 * documents them: [u32 magic "HTE1"][u32 body length][u32 CRC-32C of the body][PacketEvent], each
 * batch after a mark record (magic "HTB1", 12-byte body: the agent's seq and the event count).
 * Marks are skipped here, never used to hide a copy: every event record on disk is counted, so a
 * batch stored twice shows as duplicates even though the collector would read it once.
 * bench/ may not import the collector's insides, so this is a second reader of that format
 * (which also checks it). Bytes that are not a whole record whose checksum holds are counted as
 * unreadable, never guessed at: a changed format shows up as unreadable bytes, not as lost events.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { CAPTURE_ID_RE } from '../../collector/index';
import { join } from 'node:path';
import { decodePacketEvent } from '../../common/codec';
import { crc32c } from '../../common/crc32c';

const MAGIC = 0x48544531;
const MARK_MAGIC = 0x48544231;
const HEAD = 12;

export interface StoredEvents {
  files: number;
  records: number;
  /** Bytes outside whole records with a good checksum (damage, or an unknown format). */
  unreadableBytes: number;
  /** Per node: how many times each frame was stored (index = frame, saturating at 255). */
  byNode: Map<string, Uint8Array>;
}

/** What was stored of one node's acknowledged frames. */
export interface StreamCheck {
  /** Frames the agent had acknowledged. */
  acked: number;
  /** Acknowledged frames not stored. */
  missing: number;
  /** Extra copies of stored frames (a frame stored twice counts 1). */
  duplicates: number;
  /** Frames stored that were never acknowledged (an unacknowledged batch the collector kept). */
  unacked: number;
}

function bump(byNode: Map<string, Uint8Array>, node: string, frame: number): void {
  let counts = byNode.get(node);
  if (counts === undefined || frame >= counts.length) {
    const grown = new Uint8Array(Math.max(1024, (frame + 1) * 2));
    if (counts !== undefined) grown.set(counts);
    counts = grown;
    byNode.set(node, counts);
  }
  if ((counts[frame] ?? 0) < 255) counts[frame] = (counts[frame] ?? 0) + 1;
}

/** Every event file of the captures the collector would load (not quarantined ones). */
export function readStoredEvents(dataDir: string): StoredEvents {
  const out: StoredEvents = { files: 0, records: 0, unreadableBytes: 0, byNode: new Map() };
  const root = join(dataDir, 'captures');
  for (const id of readdirSync(root)) {
    // Capture directories only: not quarantined ones, nor the finished index (finished.idx).
    if (!CAPTURE_ID_RE.test(id)) continue;
    for (const name of readdirSync(join(root, id))) {
      if (!/^events-.+\.pb$/.test(name)) continue;
      out.files++;
      const b = readFileSync(join(root, id, name));
      let at = 0;
      while (at + HEAD <= b.length) {
        const len = b.readUInt32BE(at + 4);
        const end = at + HEAD + len;
        const magic = b.readUInt32BE(at);
        if ((magic !== MAGIC && magic !== MARK_MAGIC) || end > b.length) break;
        const body = b.subarray(at + HEAD, end);
        if (crc32c(body) !== b.readUInt32BE(at + 8)) break;
        if (magic === MARK_MAGIC) {
          at = end;
          continue;
        }
        const e = decodePacketEvent(body);
        bump(out.byNode, e.node, e.frame);
        out.records++;
        at = end;
      }
      out.unreadableBytes += b.length - at;
    }
  }
  return out;
}

/** Compares the frames a node's agent had acknowledged with what was stored. */
export function checkStream(
  stored: StoredEvents,
  node: string,
  ackedRuns: readonly (readonly [number, number])[],
): StreamCheck {
  const counts = stored.byNode.get(node) ?? new Uint8Array(0);
  const inRun = new Uint8Array(counts.length);
  let acked = 0;
  let missing = 0;
  for (const [first, last] of ackedRuns) {
    for (let f = first; f <= last; f++) {
      acked++;
      if ((counts[f] ?? 0) === 0) missing++;
      if (f < inRun.length) inRun[f] = 1;
    }
  }
  let duplicates = 0;
  let unacked = 0;
  for (let f = 0; f < counts.length; f++) {
    const n = counts[f] ?? 0;
    if (n > 1) duplicates += n - 1;
    if (n > 0 && inRun[f] === 0) unacked++;
  }
  return { acked, missing, duplicates, unacked };
}

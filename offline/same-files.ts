/**
 * Points whose capture files hold the same bytes. checkPointInputs (point-inputs.ts) refuses one
 * path or inode given for two points; a copy under another name passes it, and then the points
 * compare a capture with itself: every key matches, the source never changes, and the verdict
 * (`preserved`, most often) says nothing about the path between them. The analysis still runs;
 * a caution says so.
 *
 * Files are compared only when their sizes match, byte for byte, stopping at the first difference:
 * two captures of one request at two points differ in their first records (times, addresses),
 * so a difference costs one chunk, and equality is exact rather than a hash's near-certainty.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { countText } from '../common/counters';
import { isStreamInput } from './point-inputs';

/** Bytes read from each file at a time. */
const CHUNK = 1 << 20;

/** Points whose files are byte-identical, in path order: each group has two points or more. */
export interface SameFiles {
  points: { name: string; file: string }[];
  bytes: number;
}

/** The size of a regular file, or null (a stream, a file that cannot be read: the pass says why). */
function sizeOf(file: string): number | null {
  if (isStreamInput(file)) return null;
  try {
    const s = statSync(file);
    return s.isFile() ? s.size : null;
  } catch {
    return null;
  }
}

/** Whether two files of `bytes` bytes each hold the same bytes; false when either cannot be read. */
function sameBytes(a: string, b: string, bytes: number): boolean {
  let fa: number | null = null;
  let fb: number | null = null;
  try {
    fa = openSync(a, 'r');
    fb = openSync(b, 'r');
    const ba = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(bytes, 1)));
    const bb = Buffer.allocUnsafe(ba.length);
    for (let at = 0; at < bytes;) {
      const want = Math.min(ba.length, bytes - at);
      const na = readSync(fa, ba, 0, want, at);
      const nb = readSync(fb, bb, 0, want, at);
      // A file that changed size meanwhile is not "the same": nothing is claimed.
      if (na !== want || nb !== want) return false;
      if (!ba.subarray(0, na).equals(bb.subarray(0, nb))) return false;
      at += na;
    }
    return true;
  } catch {
    return false;
  } finally {
    if (fa !== null) closeSync(fa);
    if (fb !== null) closeSync(fb);
  }
}

/** The groups of points whose files are byte-identical (empty when every file differs). */
export function findSameFiles(points: readonly { name: string; file: string }[]): SameFiles[] {
  const groups: SameFiles[] = [];
  for (const p of points) {
    const bytes = sizeOf(p.file);
    if (bytes === null) continue;
    const first = (g: SameFiles): { name: string; file: string } | undefined => g.points[0];
    const same = groups.find((g) => {
      const q = first(g);
      return g.bytes === bytes && q !== undefined && sameBytes(q.file, p.file, bytes);
    });
    if (same === undefined) groups.push({ points: [{ name: p.name, file: p.file }], bytes });
    else same.points.push({ name: p.name, file: p.file });
  }
  return groups.filter((g) => g.points.length > 1);
}

/** `a and b`, `a, b and c`. */
function listText(items: readonly string[]): string {
  return items.length <= 1
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1] ?? ''}`;
}

/** The caution for one group of identical files. */
export function sameFilesCaveat(g: SameFiles): string {
  const names = listText(g.points.map((p) => p.name));
  const files = listText(g.points.map((p) => p.file));
  return (
    `${names} read byte-identical files (${files}: ${countText(g.bytes)} bytes each): one ` +
    'capture given for several points is no second witness, so what the verdict says of the ' +
    `path between ${names} proves nothing about a rewrite there; give each point the capture ` +
    'taken at it'
  );
}

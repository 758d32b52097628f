/**
 * Where a capture file can be read again from the middle: the resume points one pass over it
 * gathered, so that reading a few frames again afterwards — the request's segments for the
 * identity headers (identity-scan.ts), the matched connection for evidence.pcapng (evidence.ts) —
 * starts next to them instead of walking every frame before them: a request 3 million frames into
 * each of three 518 MiB files took the identity scan 1.5–1.7 s from the files' starts (the whole
 * analysis before it ~0.3 s), 32–34 ms from the points.
 *
 * The fast path's readers (summary-file.ts) take a point where one of their summarize calls
 * starts, at a record or block boundary, once SEEK_SPACING bytes lie behind the last one. With a
 * gate a call covers a whole read (SUMMARY_CHUNK_SIZE, 2 MiB), so points are about 2 MiB apart
 * and a re-read walks at most that (~15,000 frames of 143 B, a few ms); without one a call stops
 * after BLOCK_RECORDS records.
 *
 * Memory is bounded whatever the file's size: past MAX_SEEK_POINTS every other point is dropped
 * and the spacing doubled, so a re-read walks at most about the spacing's worth of frames.
 * A point also holds the bytes found there (pcap-file.ts ResumePoint.head): a reader resumes only
 * when the file still holds them, and otherwise reads from the start as it did without one.
 */
import type { ResumePoint } from './pcap-file';

/** Bytes between two resume points while the file is small enough (~1,800 frames of 143 B). */
export const SEEK_SPACING = 256 << 10;
/** Resume points kept per file at most (each ~100 bytes; a pcapng section's interfaces shared). */
export const MAX_SEEK_POINTS = 4096;

/** The resume points of one pass over one file, in file order. */
export class SeekPoints {
  private list: ResumePoint[] = [];
  private spacing = SEEK_SPACING;

  /** True when a point at `offset` is to be kept: build it (and add it) only then. */
  wants(offset: number): boolean {
    return offset - (this.list.at(-1)?.offset ?? 0) >= this.spacing;
  }

  add(p: ResumePoint): void {
    this.list.push(p);
    if (this.list.length <= MAX_SEEK_POINTS) return;
    this.list = this.list.filter((_, i) => i % 2 === 1);
    this.spacing *= 2;
  }

  points(): readonly ResumePoint[] {
    return this.list;
  }
}

/**
 * The last of `points` (in file order) with frame `frame` (1-based) at or after it, or undefined
 * when the frame comes before all of them: where a reader starts to reach that frame soonest.
 */
export function resumeFor(
  points: readonly ResumePoint[] | undefined,
  frame: number,
): ResumePoint | undefined {
  if (points === undefined) return undefined;
  let lo = 0;
  let hi = points.length; // points[lo, hi) are not yet known to start after the frame
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((points[mid]?.framesBefore ?? Infinity) < frame) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? undefined : points[lo - 1];
}

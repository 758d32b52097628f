/**
 * The earliest and latest of a set of times (ns since 1970): the span a capture's frames cover.
 * An analysis that did not see the request at a point says so only where that point's capture
 * covers the request's time (core/attribute/coverage.ts); this is what it reads.
 */
export interface TimeSpan {
  earliestNs: bigint;
  latestNs: bigint;
}

/** Widens as times are added; `span()` is null until the first one. */
export class TimeSpanTracker {
  private lo: bigint | null = null;
  private hi = 0n;

  add(ns: bigint): void {
    this.addRange(ns, ns);
  }

  /** Adds every time from `lo` to `hi` (lo <= hi). */
  addRange(lo: bigint, hi: bigint): void {
    if (this.lo === null) {
      this.lo = lo;
      this.hi = hi;
      return;
    }
    if (lo < this.lo) this.lo = lo;
    if (hi > this.hi) this.hi = hi;
  }

  span(): TimeSpan | null {
    return this.lo === null ? null : { earliestNs: this.lo, latestNs: this.hi };
  }
}

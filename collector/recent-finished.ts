/**
 * Which finished captures (or repros) the collector holds in memory: the most recent `max` by
 * the order they finished in; an older one is let go (`evict`) and read from the data directory
 * when it is asked for by id. Without it every capture ever made stayed in memory for the
 * collector's life (~27 KB each; an API token holder can make and cancel ~1 M a day).
 *
 * `pinned` ids are never let go (a repro whose bundle could not be written lives in memory
 * only); they count toward `max`, so a collector that cannot write holds more, and says so.
 */
export class RecentFinished {
  private readonly order = new Set<string>();
  /** Finished ones let go since the collector started, or found older at its start. */
  private olderCount = 0;

  constructor(
    readonly max: number,
    private readonly evict: (id: string) => void,
    private readonly pinned: (id: string) => boolean = () => false,
  ) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`max ${max} is not a count ≥ 1`);
  }

  /** `id` finished now (again: moved to the newest); older ones beyond `max` are let go. */
  add(id: string): void {
    this.order.delete(id);
    this.order.add(id);
    if (this.order.size <= this.max) return;
    for (const old of this.order) {
      if (this.order.size <= this.max) break;
      if (old === id || this.pinned(old)) continue;
      this.order.delete(old);
      this.olderCount++;
      this.evict(old);
    }
  }

  /**
   * `id` was removed from the data directory (retention): no longer held, or no longer counted
   * among the older ones when it was not held.
   */
  forget(id: string): void {
    if (!this.order.delete(id)) this.olderCount = Math.max(0, this.olderCount - 1);
  }

  /** Counts finished ones found in the data directory and not held (a collector's start). */
  countOlder(n: number): void {
    this.olderCount += n;
  }

  /** Finished ones not held in memory: let go, or left in the data directory at the start. */
  older(): number {
    return this.olderCount;
  }

  held(): number {
    return this.order.size;
  }

  /** Held ones that are pinned now: they live in memory only, and are never let go. */
  pinnedCount(): number {
    let n = 0;
    for (const id of this.order) if (this.pinned(id)) n++;
    return n;
  }
}

/** The `max` newest of `items` by `at` (ties: the later in the list), oldest first. */
export function newestFinished<T>(items: readonly T[], max: number, at: (x: T) => number): T[] {
  const sorted = items.map((x, i) => ({ x, i })).sort((a, b) => at(a.x) - at(b.x) || a.i - b.i);
  return sorted.slice(Math.max(0, sorted.length - max)).map((e) => e.x);
}

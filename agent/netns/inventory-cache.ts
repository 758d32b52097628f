/**
 * When the agent reads a namespace's addresses again (each read is an `nsenter … ip` child: a
 * fork and exec, ~1.5 ms of the agent's CPU, every 5 s for every namespace in scope — measured as
 * the largest cost of an agent capturing a busy link once its per-packet work was gone, issue 20).
 * The namespace set itself is scanned every refresh (readdir and stat, no child): a new
 * namespace is read at once. A young one (first seen < YOUNG_MS ago: a pod whose CNI may still be setting up its
 * interfaces) is read at every refresh, an older one every STALE_MS. Pure: the caller passes the
 * clock.
 */
export const YOUNG_MS = 10_000;
export const STALE_MS = 60_000;

/** What was read of one namespace (keyed by path and inode: a new namespace at a reused path is new). */
export interface CachedRead<T> {
  value: T;
  firstSeenMs: number;
  readMs: number;
}

export class InventoryCache<T> {
  private readonly entries = new Map<string, CachedRead<T>>();

  /** The cached value of `key` when it need not be read again at `nowMs`, else undefined. */
  fresh(key: string, nowMs: number): T | undefined {
    const c = this.entries.get(key);
    if (c === undefined) return undefined;
    if (nowMs - c.firstSeenMs < YOUNG_MS || nowMs - c.readMs >= STALE_MS) return undefined;
    return c.value;
  }

  /** Records a read of `key` at `nowMs`. */
  put(key: string, value: T, nowMs: number): void {
    const c = this.entries.get(key);
    this.entries.set(key, { value, firstSeenMs: c?.firstSeenMs ?? nowMs, readMs: nowMs });
  }

  /** Forgets every key not in `keep` (namespaces gone): the cache never outgrows the scope. */
  retain(keep: ReadonlySet<string>): void {
    for (const k of this.entries.keys()) if (!keep.has(k)) this.entries.delete(k);
  }

  get size(): number {
    return this.entries.size;
  }
}

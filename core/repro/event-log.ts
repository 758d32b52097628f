/**
 * One capture point's events of a repro, in arrival order and bounded (the oldest arrivals go
 * first), with what a cached probe verdict needs to see that they changed where it looked
 * (core/repro/probe-cache.ts): a version per second of capture time and per TCP port, and the
 * earliest event of each attachment.
 *
 * A version is the number of the last add() that put in or let go an event there; a key with no
 * event left is forgotten (version 0). So equal versions mean the same events there, in the same
 * order (events are only ever appended, and let go from the front): a version is never reused,
 * and 0 is only ever read for no event. Only add() changes the events.
 */
import type { TaggedEvent } from './repro-core';

/** Width of a time bucket: a probe's window (6 s) spans 7 of them. */
const BUCKET_NS = 1_000_000_000n;

/** Events and the last change per key (a bucket, a port); keys with no event are not kept. */
class KeyVersions {
  private readonly keys = new Map<number, { count: number; version: number }>();

  change(key: number, delta: 1 | -1, version: number): void {
    const k = this.keys.get(key);
    const count = (k?.count ?? 0) + delta;
    if (count <= 0) this.keys.delete(key);
    else if (k === undefined) this.keys.set(key, { count, version });
    else {
      k.count = count;
      k.version = version;
    }
  }

  version(key: number): number {
    return this.keys.get(key)?.version ?? 0;
  }

  get size(): number {
    return this.keys.size;
  }
}

// Truncation toward zero is monotone: lo ≤ t ≤ hi puts t's bucket between lo's and hi's. Past
// 2^53 s two buckets may share a key: then a change in either changes both (never too few).
const bucketOf = (tsNs: bigint): number => Number(tsNs / BUCKET_NS);

/** A point's events and their change versions (see the file's comment). */
export class PointEventLog {
  private readonly list: TaggedEvent[] = [];
  private adds = 0;
  private readonly buckets = new KeyVersions();
  private readonly ports = new KeyVersions();
  /** Earliest capture time per attachment epoch; recomputed when one of them was let go. */
  private readonly first = new Map<number, bigint>();
  private firstStale = false;
  /** The latest capture time of an event let go, per attachment epoch. */
  private readonly letGo = new Map<number, bigint>();

  constructor(
    readonly name: string,
    private readonly max: number,
  ) {}

  /** The events, oldest arrival first. */
  get events(): readonly TaggedEvent[] {
    return this.list;
  }

  /**
   * Appends `tagged`; past `max` events (or `cap`, when lower: the collector's share for this
   * point, collector/repro-hold.ts) the oldest arrivals are let go, and returned.
   */
  add(tagged: readonly TaggedEvent[], cap = this.max): TaggedEvent[] {
    const over = this.list.length + tagged.length - Math.min(this.max, cap);
    if (tagged.length === 0 && over <= 0) return [];
    const v = ++this.adds;
    for (const x of tagged) {
      this.list.push(x);
      this.index(x, 1, v);
      const f = this.first.get(x.epoch);
      if (f === undefined || x.event.tsNs < f) this.first.set(x.epoch, x.event.tsNs);
    }
    if (over <= 0) return [];
    const gone = this.list.splice(0, over);
    for (const x of gone) {
      this.index(x, -1, v);
      const l = this.letGo.get(x.epoch);
      if (l === undefined || x.event.tsNs > l) this.letGo.set(x.epoch, x.event.tsNs);
      if (this.first.get(x.epoch) === x.event.tsNs) this.firstStale = true;
    }
    return gone;
  }

  /** Version of the source or destination port `port` of the TCP events (repro-core's `mine`). */
  portVersion(port: number): number {
    return this.ports.version(port);
  }

  /** Appends to `out` the versions of the time buckets that hold [loNs, hiNs] (one a second). */
  versionsBetween(loNs: bigint, hiNs: bigint, out: { push(v: number): unknown }): void {
    const lo = bucketOf(loNs);
    const hi = bucketOf(hiNs);
    // Counted in numbers while they are exact (always, for times of this era).
    if (Number.isSafeInteger(lo) && Number.isSafeInteger(hi))
      for (let b = lo; b <= hi; b++) out.push(this.buckets.version(b));
    else
      for (let b = loNs / BUCKET_NS; b <= hiNs / BUCKET_NS; b++)
        out.push(this.buckets.version(Number(b)));
  }

  /**
   * The latest capture time of an event this log let go — of attachment `epoch`, or of any when
   * none is given; null when it let none go.
   */
  letGoUntilNs(epoch?: number): bigint | null {
    if (epoch !== undefined) return this.letGo.get(epoch) ?? null;
    let max: bigint | null = null;
    for (const t of this.letGo.values()) if (max === null || t > max) max = t;
    return max;
  }

  /** The earliest capture time of an event of attachment `epoch`, null for none. */
  firstNs(epoch: number): bigint | null {
    if (this.firstStale) {
      this.first.clear();
      for (const x of this.list) {
        const f = this.first.get(x.epoch);
        if (f === undefined || x.event.tsNs < f) this.first.set(x.epoch, x.event.tsNs);
      }
      this.firstStale = false;
    }
    return this.first.get(epoch) ?? null;
  }

  /** Keys the versions are kept for (each holds an event: at most 3 per event held). */
  indexSize(): number {
    return this.buckets.size + this.ports.size + this.first.size;
  }

  private index(x: TaggedEvent, delta: 1 | -1, v: number): void {
    this.buckets.change(bucketOf(x.event.tsNs), delta, v);
    const t = x.event.inner;
    if (t === null || t.proto !== 'tcp') return;
    if (t.sport !== undefined) this.ports.change(t.sport, delta, v);
    if (t.dport !== undefined && t.dport !== t.sport) this.ports.change(t.dport, delta, v);
  }
}

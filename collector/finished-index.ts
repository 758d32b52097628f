/**
 * `<data-dir>/captures/finished.idx`: which captures are finished, and when — so a collector's
 * start reads the session.json of the unfinished ones and of the newest finished ones it holds,
 * not of every capture ever kept (20,000 finished captures took 1.5 s warm and 8.1 s from a cold
 * page cache to start, all of it reading their records), and retention knows their order without
 * reading them.
 *
 * One line per change, appended: `<capture id> <finished at, ms>` when a capture's final record
 * is saved, `<capture id> -` when it is removed. The file is a cache of what the session.json
 * files say: a line that is not one is skipped (a torn last line after a crash), a capture missing
 * from it is read at start and added, an entry whose directory is gone is dropped; a last line
 * without its newline (cut by a crash) is not taken. It is rewritten
 * (atomically) when it holds twice the lines it needs.
 */

import { appendFileSync, readFileSync } from 'node:fs';
import type { FinishedEntry } from './disk-retention';

const LINE_RE = /^(c-[a-z0-9]{1,16}-[a-f0-9]{8}) (-|[0-9]{1,16})$/;

export class FinishedIndex {
  private readonly times = new Map<string, number>();
  private lines = 0;
  /** The latest finish time added; `unsorted` once one earlier than it was added after it. */
  private lastAt = -Infinity;
  private unsorted = false;
  /** Lines of the file that were not one (counted at load). */
  skipped = 0;

  /**
   * @param path the index file
   * @param rewrite writes the whole file atomically (the store's writeAtomic)
   */
  constructor(
    readonly path: string,
    private readonly rewrite: (path: string, text: string) => void,
  ) {}

  /** Reads the file (missing: empty). Throws what reading throws other than ENOENT. */
  load(): void {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    const lines = text.split('\n');
    // The part after the last newline is a line a crash cut: it may still look like one
    // ("… 12" of "… 1234"), so it is not taken, and the file is rewritten so that the next line
    // does not continue it.
    const torn = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') continue;
      this.lines++;
      const m = LINE_RE.exec(line);
      if (m === null) {
        this.skipped++;
        continue;
      }
      const id = m[1] as string;
      if (m[2] === '-') this.times.delete(id);
      else this.times.set(id, Number(m[2]));
    }
    this.sortByTime();
    if (torn !== '') {
      this.skipped++;
      this.compact();
    }
  }

  /** Puts the map in the order of finish times (retention walks it oldest first). */
  private sortByTime(): void {
    const sorted = [...this.times].sort((a, b) => a[1] - b[1]);
    this.times.clear();
    for (const [id, ms] of sorted) this.times.set(id, ms);
    this.lastAt = sorted.at(-1)?.[1] ?? -Infinity;
    this.unsorted = false;
  }

  /** When `id` finished, undefined when the index does not know it as finished. */
  at(id: string): number | undefined {
    return this.times.get(id);
  }

  has(id: string): boolean {
    return this.times.has(id);
  }

  get size(): number {
    return this.times.size;
  }

  /** Oldest first (by when each finished). */
  entries(): FinishedEntry[] {
    if (this.unsorted) this.sortByTime();
    return [...this.times].map(([id, atMs]) => ({ id, atMs }));
  }

  /** `id` finished at `atMs` (already known: nothing written). */
  add(id: string, atMs: number): void {
    this.addMany([{ id, atMs }]);
  }

  /** Several finished captures, in one append (a start indexing the records it read). */
  addMany(entries: readonly FinishedEntry[]): void {
    let text = '';
    for (const { id, atMs } of entries) {
      const at = Math.max(0, Math.floor(atMs));
      if (this.times.get(id) === at) continue;
      this.times.delete(id);
      this.times.set(id, at);
      // Finishes come in time order; one that does not (a record read at start) is sorted in
      // when the entries are next asked for.
      if (at < this.lastAt) this.unsorted = true;
      else this.lastAt = at;
      text += `${id} ${at}\n`;
    }
    if (text !== '') this.append(text);
  }

  /** `ids` are gone (removed by retention, or their directory was found missing). */
  remove(ids: readonly string[]): void {
    const gone = ids.filter((id) => this.times.delete(id));
    if (gone.length === 0) return;
    if (this.lines + gone.length >= 2 * Math.max(64, this.times.size)) this.compact();
    else this.append(gone.map((id) => `${id} -\n`).join(''));
  }

  private append(text: string): void {
    appendFileSync(this.path, text);
    this.lines += text.split('\n').length - 1;
  }

  private compact(): void {
    const text = [...this.times].map(([id, ms]) => `${id} ${ms}\n`).join('');
    this.rewrite(this.path, text);
    this.lines = this.times.size;
  }
}

/**
 * When to look again at a capture's namespace file (a deleted or restarted pod: ns-capture.ts's
 * identity check). A namespace file in a directory — `/run/netns/NAME`, CNI's `cni-…` files — is
 * unlinked when its namespace is deleted (`ip netns del`, the CNI plugin's DEL): an inotify watch on
 * the directory (fs.watch; one per directory, shared) calls the check at once, and costs nothing
 * while nothing changes. A backstop tick of BACKSTOP_MS, shared with every other callback of that
 * period (agent/ticker.ts: the status reports'), catches what inotify does not see — a namespace
 * unmounted but not unlinked. `/proc/PID/ns/net` has no directory events: it is polled every
 * PROC_POLL_MS, as is any path whose directory cannot be watched.
 *
 * Before, every capture's check ran 4 times a second whatever happened; on the machines measured a
 * Node wake-up costs ~200 µs of CPU before any work (BENCHMARKS.md, "What limits the whole agent at
 * this budget"), and detection took up to 250 ms instead of the moment of the unlink.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { joinTicker } from '../ticker';

/** The backstop for watched paths (the status reports' period: no wake-up of its own). */
export const BACKSTOP_MS = 1000;
/** The poll for paths without directory events (/proc, or a watch that failed). */
export const PROC_POLL_MS = 250;

type Check = () => void;

/** One watched path's check: on its directory's watch, or polled once that watch failed. */
interface Entry {
  check: Check;
  /** The poll that replaced a failed directory watch. */
  fallback: (() => void) | undefined;
}

interface DirWatch {
  watcher: FSWatcher;
  /** Entries by the file name they watch. */
  entries: Map<string, Set<Entry>>;
}

const dirs = new Map<string, DirWatch>();

/** Directory watches open now, and how many checks each (tests). */
export function watchedDirs(): Map<string, number> {
  return new Map(
    [...dirs].map(([d, w]) => [d, [...w.entries.values()].reduce((n, s) => n + s.size, 0)]),
  );
}

/**
 * Calls `check` whenever the namespace file `path` may have changed; returns the function that
 * stops (idempotent). `pollMs` polls at that period instead (tests: a check every few ms);
 * `backstopMs` replaces BACKSTOP_MS (tests: none within the test's time).
 */
export function watchNamespaceFile(
  path: string,
  check: Check,
  opts: { pollMs?: number | undefined; backstopMs?: number } = {},
): () => void {
  if (opts.pollMs !== undefined || path.startsWith('/proc/')) {
    return joinTicker(opts.pollMs ?? PROC_POLL_MS, check);
  }
  const dir = dirname(path);
  const name = basename(path);
  const w = dirs.get(dir) ?? open(dir);
  if (w === undefined) return joinTicker(PROC_POLL_MS, check);
  const entry: Entry = { check, fallback: undefined };
  let set = w.entries.get(name);
  if (set === undefined) {
    set = new Set();
    w.entries.set(name, set);
  }
  set.add(entry);
  const leaveTick = joinTicker(opts.backstopMs ?? BACKSTOP_MS, check);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    leaveTick();
    entry.fallback?.();
    const s = w.entries.get(name);
    s?.delete(entry);
    if (s?.size === 0) w.entries.delete(name);
    if (w.entries.size === 0 && dirs.get(dir) === w) {
      w.watcher.close();
      dirs.delete(dir);
    }
  };
}

function open(dir: string): DirWatch | undefined {
  const entries = new Map<string, Set<Entry>>();
  const run = (set: Set<Entry> | undefined): void => {
    for (const e of [...(set ?? [])]) e.check();
  };
  let watcher: FSWatcher;
  try {
    // Not persistent: a watch never keeps the agent up (as the ticker's timers are unref'd).
    watcher = watch(dir, { persistent: false }, (_event, file) => {
      if (file === null) for (const set of [...entries.values()]) run(set);
      else run(entries.get(file));
    });
  } catch {
    return undefined;
  }
  const w: DirWatch = { watcher, entries };
  // The watch failed (its directory went away, say): every check looks now, then is polled.
  watcher.on('error', () => {
    watcher.close();
    if (dirs.get(dir) === w) dirs.delete(dir);
    for (const set of [...entries.values()])
      for (const e of [...set]) {
        e.fallback ??= joinTicker(PROC_POLL_MS, e.check);
        e.check();
      }
  });
  dirs.set(dir, w);
  return w;
}

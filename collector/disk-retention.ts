/**
 * What the data directory keeps of finished captures and repros (`--retain-finished`,
 * `--retain-finished-repros`, `--retain-age`). Without it nothing was ever removed: every capture
 * left ~75 KB (and a repro its bundle, evidence frames included) for good, and an API token holder
 * who made and cancelled captures in a loop (~1 M a day) filled the disk; a restart also read
 * every one of them.
 *
 * Pure: which of the finished ones (oldest first) are past the policy at `nowMs`. The store
 * removes them (collector/store.ts); the managers decide when (after a finish, at start, hourly).
 */

export interface RetentionPolicy {
  /** Finished ones kept, the most recent; null keeps every one. */
  maxCount: number | null;
  /** Finished ones older than this (by when they finished) are removed; null: no age limit. */
  maxAgeMs: number | null;
}

/** The defaults: 10,000 finished captures (~750 MB) and 1,000 finished repros; no age limit. */
export const DEFAULT_RETAIN_FINISHED = 10_000;
export const DEFAULT_RETAIN_FINISHED_REPROS = 1_000;

/**
 * A capture that finished this recently is never removed, whatever the policy: its evidence
 * (conntrack, doctor facts, frames, the events files' digests) and its agents' late counters are
 * still being written into its directory.
 */
export const RETAIN_SETTLE_MS = 60_000;

export interface FinishedEntry {
  readonly id: string;
  /** When it finished (ms since the epoch). */
  readonly atMs: number;
}

/**
 * The ids past the policy: beyond the `maxCount` most recent, or finished before
 * `nowMs - maxAgeMs` — but none finished within RETAIN_SETTLE_MS of `nowMs`, and none that
 * `keep` names (e.g. a repro's view that exists only in memory). `entries` in any order; oldest
 * first costs no sort.
 */
export function expiredFinished(
  entries: readonly FinishedEntry[],
  nowMs: number,
  policy: RetentionPolicy,
  keep: (id: string) => boolean = () => false,
): string[] {
  if (policy.maxCount === null && policy.maxAgeMs === null) return [];
  // Given oldest first as a rule (the finished index keeps that order): sorted only when not,
  // so a check after every finish costs one pass.
  const inOrder = entries.every((e, i) => i === 0 || (entries[i - 1]?.atMs ?? 0) <= e.atMs);
  const sorted = inOrder ? entries : [...entries].sort((a, b) => a.atMs - b.atMs);
  const overCount = policy.maxCount === null ? 0 : Math.max(0, sorted.length - policy.maxCount);
  const before = policy.maxAgeMs === null ? -Infinity : nowMs - policy.maxAgeMs;
  const out: string[] = [];
  sorted.forEach((e, i) => {
    if (e.atMs > nowMs - RETAIN_SETTLE_MS || keep(e.id)) return;
    if (i < overCount || e.atMs < before) out.push(e.id);
  });
  return out;
}

/** The policy in words, for logs ("the 10,000 most recent", "finished in the last 30 d"). */
export function retentionText(policy: RetentionPolicy, what: string): string {
  const parts: string[] = [];
  if (policy.maxCount !== null)
    parts.push(`the ${policy.maxCount.toLocaleString('en-US')} most recent finished ${what}`);
  if (policy.maxAgeMs !== null)
    parts.push(`finished ${what} younger than ${ageText(policy.maxAgeMs)}`);
  return parts.length === 0 ? `all finished ${what}` : parts.join(' and ');
}

function ageText(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1_000, 's'],
  ];
  for (const [u, name] of units) if (ms % u === 0) return `${ms / u} ${name}`;
  return `${ms} ms`;
}

/**
 * Removing what retention let go (collector/disk-retention.ts): each id removed from the data
 * directory, then from memory; one that cannot be removed is skipped (up to 8 a sweep) and named
 * in one warning, tried again at the next sweep; what was removed is logged once. Shared by
 * captures and repros.
 */
import type { CollectorLogger } from './logger';
import { retentionText, type RetentionPolicy } from './disk-retention';

/** Failures one sweep tolerates before it stops (a directory that cannot be removed is skipped). */
const MAX_FAILURES = 8;

export function sweepExpired(
  expired: readonly string[],
  what: { one: 'capture' | 'repro'; policy: RetentionPolicy },
  remove: (id: string) => void,
  forget: (id: string) => void,
  log: CollectorLogger,
): number {
  let removed = 0;
  const failed: string[] = [];
  let lastError = '';
  for (const id of expired) {
    try {
      remove(id);
    } catch (e) {
      // Skipped, not stopped at: one directory that cannot be removed (a file of another owner,
      // EACCES) must not end retention for good — the next sweep tries it again.
      failed.push(id);
      lastError = e instanceof Error ? e.message : String(e);
      if (failed.length >= MAX_FAILURES) break;
      continue;
    }
    forget(id);
    removed++;
  }
  if (failed.length > 0)
    log.warn(
      { captureId: failed[0] ?? '', count: failed.length, code: 'STORE_IO', err: lastError },
      `cannot remove ${failed.length} finished ${what.one}${failed.length === 1 ? '' : 's'} past the retention (${failed.join(', ')}): tried again at the next sweep`,
    );
  if (removed > 0)
    log.info(
      { count: removed },
      `removed ${removed} finished ${what.one}${removed === 1 ? '' : 's'} from the data directory: it keeps ${retentionText(what.policy, `${what.one}s`)}`,
    );
  return removed;
}

/**
 * Removing what retention let go (collector/disk-retention.ts): each id removed from the data
 * directory, then from memory; the first that cannot be removed is logged and the sweep stops
 * (the next one tries again); what was removed is logged once. Shared by captures and repros.
 */
import type { CollectorLogger } from './logger';
import { retentionText, type RetentionPolicy } from './disk-retention';

export function sweepExpired(
  expired: readonly string[],
  what: { one: 'capture' | 'repro'; policy: RetentionPolicy },
  remove: (id: string) => void,
  forget: (id: string) => void,
  log: CollectorLogger,
): number {
  let removed = 0;
  for (const id of expired) {
    try {
      remove(id);
    } catch (e) {
      log.warn(
        { captureId: id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        `cannot remove a finished ${what.one} past the retention`,
      );
      break;
    }
    forget(id);
    removed++;
  }
  if (removed > 0)
    log.info(
      { count: removed },
      `removed ${removed} finished ${what.one}${removed === 1 ? '' : 's'} from the data directory: it keeps ${retentionText(what.policy, `${what.one}s`)}`,
    );
  return removed;
}

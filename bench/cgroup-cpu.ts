/**
 * A CPU budget for one benchmark trial: a cgroup of its own with a CFS quota (cgroup v1's
 * `cpu.cfs_quota_us`/`cpu.cfs_period_us`, or v2's `cpu.max`), into which the capturing processes
 * are moved once they run. Both tools of a comparison get the same budget, so the highest rate
 * each takes without loss is decided by the capture's own cost per packet, not by how fast one
 * core can send (the sender runs outside the budget, on the other core).
 *
 * Only the bench's own processes are ever moved, and the cgroup is removed afterwards (its
 * processes moved back to the cgroup they came from). Nothing here touches the network.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';

export interface CpuBudget {
  /** The budget as a share of one core, in percent (quota / period × 100). */
  readonly percent: number;
  /** Which interface the kernel offered: 'v1' (cpu controller) or 'v2' (unified cpu.max). */
  readonly version: 'v1' | 'v2';
  /** Moves a process (all its threads) into the budget. */
  add(pid: number): void;
  /** Throttling counters so far (cpu.stat). */
  stat(): CpuStat;
  /** Moves what is left back and removes the cgroup; safe to call twice. */
  remove(): void;
}

export interface CpuStat {
  /** Periods in which a process of the cgroup could run. */
  periods: number;
  /** Periods in which the quota ran out. */
  throttled: number;
}

/** The CFS period used (100 ms, the kernel's default). */
export const PERIOD_US = 100_000;

/** Quota in µs per period for a share of one core; the kernel's minimum is 1 ms. */
export function quotaUs(percent: number): number {
  if (!Number.isFinite(percent) || percent <= 0 || percent > 100)
    throw new Error(`a CPU budget is a share of one core in (0, 100] percent, not ${percent}`);
  return Math.max(1000, Math.round((PERIOD_US * percent) / 100));
}

/** cpu.stat of either version: v1 `nr_periods`/`nr_throttled`, v2 the same keys. */
export function parseCpuStat(text: string): CpuStat {
  const get = (k: string): number => Number(new RegExp(`^${k} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  return { periods: get('nr_periods'), throttled: get('nr_throttled') };
}

/** The root of the cpu hierarchy this kernel offers, or why there is none. */
export function cpuControllerRoot(
  fsRoot = '/sys/fs/cgroup',
): { version: 'v1' | 'v2'; dir: string } | { why: string } {
  const v1 = join(fsRoot, 'cpu');
  if (existsSync(join(v1, 'cpu.cfs_quota_us'))) return { version: 'v1', dir: v1 };
  const controllers = join(fsRoot, 'cgroup.controllers');
  if (existsSync(controllers) && /\bcpu\b/.test(readFileSync(controllers, 'utf8')))
    return { version: 'v2', dir: fsRoot };
  return {
    why: `no CPU controller under ${fsRoot} (neither cgroup v1's cpu/cpu.cfs_quota_us nor v2's cpu in cgroup.controllers)`,
  };
}

/** The cgroup path (relative to the hierarchy) a process is in now, for moving it back. */
function currentCgroup(pid: number, version: 'v1' | 'v2'): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  for (const l of lines) {
    const [, ctrls, path] = l.split(':');
    if (path === undefined) continue;
    if (version === 'v2' ? ctrls === '' : (ctrls ?? '').split(',').includes('cpu')) return path;
  }
  return '/';
}

/**
 * Creates the budget `name` (a fresh directory under the cpu hierarchy). Throws with the reason
 * when the kernel offers no CPU controller or refuses the quota.
 */
export function createCpuBudget(name: string, percent: number): CpuBudget {
  const root = cpuControllerRoot();
  if ('why' in root) throw new Error(root.why);
  const quota = quotaUs(percent);
  const dir = join(root.dir, name);
  mkdirSync(dir);
  const { version } = root;
  const back = new Map<number, string>();
  try {
    if (version === 'v1') {
      appendFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      appendFileSync(join(dir, 'cpu.cfs_quota_us'), String(quota));
    } else {
      appendFileSync(join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
    }
  } catch (e) {
    rmdirSync(dir);
    throw e;
  }
  let removed = false;
  return {
    percent: (100 * quota) / PERIOD_US,
    version,
    add(pid) {
      if (!back.has(pid)) back.set(pid, currentCgroup(pid, version));
      appendFileSync(join(dir, 'cgroup.procs'), String(pid));
    },
    stat() {
      return parseCpuStat(readFileSync(join(dir, 'cpu.stat'), 'utf8'));
    },
    remove() {
      if (removed) return;
      removed = true;
      const left = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
      for (const p of left) {
        const to = join(root.dir, back.get(Number(p)) ?? '/');
        try {
          appendFileSync(join(to, 'cgroup.procs'), p);
        } catch {
          appendFileSync(join(root.dir, 'cgroup.procs'), p);
        }
      }
      rmdirSync(dir);
    },
  };
}

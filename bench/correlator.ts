/**
 * Runs correlator-child.js in a fresh process pinned to one core (taskset when available) for
 * each expire cadence, and collects its results.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CorrelatorArgs, CorrelatorResult } from './correlator-child';

function runChild(args: CorrelatorArgs): Promise<CorrelatorResult> {
  const script = join(__dirname, 'correlator-child.js');
  const node = ['--expose-gc', '--max-old-space-size=4096', script, JSON.stringify(args)];
  // One core: the last CPU, as taskset names it (the flood and the lab are not running now).
  const pinned = existsSync('/usr/bin/taskset');
  const file = pinned ? '/usr/bin/taskset' : process.execPath;
  const argv = pinned ? ['-c', '1', process.execPath, ...node] : node;
  return new Promise((resolve, reject) => {
    execFile(file, argv, { maxBuffer: 1 << 20, timeout: 180_000 }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`correlator benchmark failed: ${stderr.trim() || err.message}`));
        return;
      }
      resolve(JSON.parse(stdout) as CorrelatorResult);
    });
  });
}

/** The correlator at one simulated traffic rate, with a frequent and a lazy expire cadence. */
export async function benchCorrelator(
  quick: boolean,
  log: (s: string) => void,
): Promise<CorrelatorResult[]> {
  const long = quick ? [500_000, 1_000_000, 2_000_000] : [1_000_000, 2_000_000, 4_000_000];
  const out: CorrelatorResult[] = [];
  // A busy backend point (100 k events/s), a 500 ms window, one probe request every 2 s; expire()
  // on a 100 ms timer for the long run, on a 1 s timer for a shorter comparison.
  for (const [expireEveryMs, checkpoints] of [
    [100, long],
    [1000, long.slice(0, 1)],
  ] as const) {
    const r = await runChild({
      checkpoints: [...checkpoints],
      simulatedRate: 100_000,
      windowMs: 500,
      expireEveryMs,
      requestEveryMs: 2000,
    });
    log(
      `correlator: expire every ${expireEveryMs} ms: ${Math.round(r.eventsPerS)} events/s (correlator only ${Math.round(r.correlatorEventsPerS)}), heap ${r.samples.map((s) => s.heapUsedMiB.toFixed(0)).join('/')} MiB`,
    );
    out.push(r);
  }
  return out;
}

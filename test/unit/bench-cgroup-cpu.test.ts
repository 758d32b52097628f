/**
 * The bench's CPU budget (bench/cgroup-cpu.ts): the quota for a share of one core, cpu.stat's
 * throttling counters, and which hierarchy a kernel offers (a fake /sys/fs/cgroup in a temp dir).
 * Creating a real cgroup needs root and is done by the bench, not here.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { cpuControllerRoot, parseCpuStat, PERIOD_US, quotaUs } from '../../bench/cgroup-cpu';

void t.test(
  'quota: a share of one core per 100 ms period, at least the kernel minimum of 1 ms',
  (t) => {
    t.equal(PERIOD_US, 100_000);
    t.equal(quotaUs(5), 5000);
    t.equal(quotaUs(2.5), 2500);
    t.equal(quotaUs(100), 100_000);
    t.equal(quotaUs(0.2), 1000, 'below 1 % the kernel minimum');
    for (const bad of [0, -1, 101, NaN, Infinity])
      t.throws(() => quotaUs(bad), /share of one core/, `${bad} refused`);
    t.end();
  },
);

void t.test('cpu.stat: periods and throttled periods, v1 and v2 alike', (t) => {
  t.same(parseCpuStat('nr_periods 39\nnr_throttled 12\nthrottled_time 1234\n'), {
    periods: 39,
    throttled: 12,
  });
  t.same(
    parseCpuStat('usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 7\nnr_throttled 7\n'),
    { periods: 7, throttled: 7 },
  );
  t.same(parseCpuStat(''), { periods: 0, throttled: 0 }, 'nothing yet');
  t.end();
});

void t.test(
  'which hierarchy: v1 cpu controller, v2 with cpu enabled, or the reason for none',
  (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cgroup-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const none = cpuControllerRoot(dir);
    t.ok('why' in none && /no CPU controller/.test(none.why), 'none: the reason');
    writeFileSync(join(dir, 'cgroup.controllers'), 'memory pids\n');
    t.ok('why' in cpuControllerRoot(dir), 'v2 without cpu: none');
    writeFileSync(join(dir, 'cgroup.controllers'), 'cpuset cpu io memory\n');
    t.same(cpuControllerRoot(dir), { version: 'v2', dir });
    mkdirSync(join(dir, 'cpu'));
    writeFileSync(join(dir, 'cpu', 'cpu.cfs_quota_us'), '-1\n');
    t.same(cpuControllerRoot(dir), { version: 'v1', dir: join(dir, 'cpu') }, 'v1 first');
    t.end();
  },
);

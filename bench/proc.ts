/**
 * Process measurement helpers for the benchmarks: CPU time of a process (all its threads), peak
 * RSS and wall time of a command, medians. Everything here reads /proc or runs /usr/bin/time; no
 * numbers are estimated.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * CPU nanoseconds a process has run so far, summed over its live threads. /proc/PID/task/TID/schedstat
 * has nanosecond resolution (field 1: time on CPU), where /proc/PID/stat's utime+stime counts
 * 10 ms ticks — too coarse for tcpdump, which spends tens of milliseconds on a whole trial.
 * Falls back to stat's ticks when schedstat is absent. null when the process is gone.
 */
export function cpuNs(pid: number): number | null {
  try {
    let sum = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const f = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8');
      sum += Number(f.split(' ')[0] ?? '0');
    }
    return sum;
  } catch {
    return statCpuNs(pid);
  }
}

/** utime+stime of /proc/PID/stat (all threads, including exited ones) in ns; null when gone. */
export function statCpuNs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may contain spaces and parentheses.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15. USER_HZ is 100 on Linux.
    const ticks = Number(rest[11]) + Number(rest[12]);
    return ticks * 10_000_000;
  } catch {
    return null;
  }
}

/** Resident set size of a live process in MiB (VmRSS of /proc/PID/status); null when gone. */
export function rssMiB(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] === undefined ? null : Number(m[1]) / 1024;
  } catch {
    return null;
  }
}

/** Median of numbers (NaN for none). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

/** The q-quantile (0..1) of numbers, nearest rank (NaN for none): 0.99 is the p99. */
export function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? NaN;
}

/** Wall time and peak RSS of one command run. */
export interface CommandCost {
  wallS: number;
  /** Peak resident set size in MiB (from /usr/bin/time -v), null when unknown. */
  peakRssMiB: number | null;
  /** CPU seconds (user + system) of the command and its children. */
  cpuS: number | null;
  code: number;
  stderrTail: string;
}

/**
 * Runs `file args` with stdout to `stdoutTo` (default /dev/null) under `/usr/bin/time -v`; wall time is measured here
 * (hrtime around the process), peak RSS and CPU come from time's report.
 */
export function measureCommand(
  file: string,
  args: readonly string[],
  stdoutTo = '/dev/null',
): Promise<CommandCost> {
  const report = join(tmpdir(), `hoptrace-bench-time-${process.pid}-${Date.now()}.txt`);
  const devNull = openSync(stdoutTo, 'w');
  return new Promise<CommandCost>((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn('/usr/bin/time', ['-v', '-o', report, file, ...args], {
      stdio: ['ignore', devNull, 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString('utf8')).slice(-4000);
    });
    child.once('error', (e) => {
      closeSync(devNull);
      reject(e);
    });
    child.once('close', (code) => {
      const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
      closeSync(devNull);
      let text = '';
      try {
        text = readFileSync(report, 'utf8');
      } catch {
        // time could not write its report: RSS and CPU stay unknown
      }
      rmSync(report, { force: true });
      const num = (re: RegExp): number | null => {
        const m = re.exec(text);
        return m?.[1] === undefined ? null : Number(m[1]);
      };
      const rssKiB = num(/Maximum resident set size \(kbytes\): (\d+)/);
      const user = num(/User time \(seconds\): ([\d.]+)/);
      const sys = num(/System time \(seconds\): ([\d.]+)/);
      resolve({
        wallS,
        peakRssMiB: rssKiB === null ? null : rssKiB / 1024,
        cpuS: user === null || sys === null ? null : user + sys,
        code: code ?? -1,
        stderrTail: stderr.trim().split('\n').slice(-3).join(' | '),
      });
    });
  });
}

/** Formats a number with a fixed number of decimals, or '–' for null/NaN. */
export function fmt(x: number | null | undefined, digits = 0): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** `a / b` formatted as a ratio ("3.1×"), '–' when either is unknown. */
export function ratio(
  a: number | null | undefined,
  b: number | null | undefined,
  digits = 2,
): string {
  if (a === null || a === undefined || b === null || b === undefined || b === 0) return '–';
  if (!Number.isFinite(a) || !Number.isFinite(b)) return '–';
  return `${fmt(a / b, digits)}×`;
}

/** A Markdown table. */
export function table(head: string[], rows: string[][]): string {
  const line = (c: string[]): string => `| ${c.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * `npm run reliability [-- --quick] [--only load,fuzz] [--fuzz-frames N] [--fuzz-seconds S]`: the load and
 * fault figures of the hardening issue, measured against the real collector (`hoptrace collector`
 * as a child process, so SIGKILL is real) with simulated agents speaking the real protocol over
 * loopback, then RELIABILITY.md and bench/reliability-results.json written from the results
 * (bench/reliability/render.ts). Scenarios run one after another, each bounded in count and time;
 * one that fails is reported as failed with its reason and the others still run (exit code 1).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { scenarioAgentKill } from './reliability/agent-kill';
import { scenarioCaptures } from './reliability/captures';
import { scenarioCollectorKill } from './reliability/collector-kill';
import { scenarioCorrupt } from './reliability/corrupt';
import { scenarioDiskFull } from './reliability/disk-full';
import { scenarioFuzz } from './reliability/fuzz';
import { scenarioHealthz } from './reliability/healthz';
import { scenarioLoad } from './reliability/load';
import { renderReliability } from './reliability/render';
import {
  SCENARIOS,
  type Ctx,
  type Machine,
  type ReliabilityResults,
  type ScenarioId,
  type ScenarioOut,
  type ScenarioResult,
} from './reliability/types';

const repoRoot = resolve(__dirname, '..', '..');

const RUN: Record<ScenarioId, (ctx: Ctx, out: ScenarioOut) => Promise<void>> = {
  load: scenarioLoad,
  captures: scenarioCaptures,
  'collector-kill': scenarioCollectorKill,
  'agent-kill': scenarioAgentKill,
  'disk-full': scenarioDiskFull,
  corrupt: scenarioCorrupt,
  fuzz: scenarioFuzz,
  healthz: scenarioHealthz,
};

const TITLES: Record<ScenarioId, string> = {
  load: 'agents streaming into one collector',
  captures: 'concurrent captures',
  'collector-kill': 'collector SIGKILLs mid-stream',
  'agent-kill': 'agent SIGKILL',
  'disk-full': 'disk full',
  corrupt: 'corrupt files in the data directory',
  fuzz: 'mutated Envelope frames',
  healthz: '/healthz while a capture is analysed',
};

/** Writes `text` formatted by the repository's prettier config, so `npm run lint` stays clean. */
async function writeFormatted(path: string, text: string): Promise<void> {
  const prettier = await import('prettier');
  const config = (await prettier.resolveConfig(path)) ?? {};
  writeFileSync(path, await prettier.format(text, { ...config, filepath: path }));
}

function log(s: string): void {
  process.stderr.write(`reliability: ${s}\n`);
}

const loadavg = (): string =>
  readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** The filesystem holding `dir` (longest mount point that prefixes it). */
function fsOf(dir: string): string {
  let best = { at: '', fs: 'unknown' };
  for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [dev, at, fs] = line.split(' ');
    if (dev === undefined || at === undefined || fs === undefined) continue;
    if (
      (dir === at || dir.startsWith(at.endsWith('/') ? at : `${at}/`)) &&
      at.length >= best.at.length
    )
      best = { at, fs: `${fs} (${dev} on ${at})` };
  }
  return best.fs;
}

function machine(): Machine {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  return {
    nproc: cpus().length,
    cpu: model.trim(),
    memGiB: Math.round(totalmem() / 2 ** 30),
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim(),
    node: process.version,
    dataFs: fsOf(tmpdir()),
    loadBefore: loadavg(),
  };
}

function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: repoRoot })
      .toString()
      .trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: repoRoot,
    })
      .toString()
      .trim();
    return dirty === '' ? head : `${head} (with uncommitted changes)`;
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      only: { type: 'string' },
      'fuzz-frames': { type: 'string' },
      'fuzz-seconds': { type: 'string' },
      out: { type: 'string' },
      json: { type: 'string' },
      render: { type: 'string' },
    },
  });
  const out = values.out ?? join(repoRoot, 'RELIABILITY.md');
  if (values.render !== undefined) {
    const saved = JSON.parse(readFileSync(values.render, 'utf8')) as ReliabilityResults;
    await writeFormatted(out, renderReliability(saved));
    return 0;
  }
  const quick = values.quick === true;
  const only = (values.only?.split(',') ?? [...SCENARIOS]).filter((s) => s !== '');
  const unknown = only.filter((s) => !(SCENARIOS as readonly string[]).includes(s));
  if (unknown.length > 0) {
    process.stderr.write(
      `unknown scenario ${unknown.join(', ')}; known: ${SCENARIOS.join(', ')}\n`,
    );
    return 2;
  }
  const fuzzFrames = Number(values['fuzz-frames'] ?? (quick ? 600 : 1_000_000));
  const fuzzSeconds = Number(values['fuzz-seconds'] ?? (quick ? 30 : 1800));
  if (![fuzzFrames, fuzzSeconds].every((n) => Number.isSafeInteger(n) && n > 0)) {
    process.stderr.write('--fuzz-frames and --fuzz-seconds take a positive integer\n');
    return 2;
  }
  const ctx: Ctx = {
    quick,
    root: typeof process.getuid === 'function' && process.getuid() === 0,
    fuzzFrames,
    fuzzSeconds,
    log,
  };
  const t0 = Date.now();
  const args = [
    ...(quick ? ['--quick'] : []),
    ...(values.only !== undefined ? [`--only ${values.only}`] : []),
    ...(values['fuzz-frames'] !== undefined ? [`--fuzz-frames ${fuzzFrames}`] : []),
    ...(values['fuzz-seconds'] !== undefined ? [`--fuzz-seconds ${fuzzSeconds}`] : []),
  ];
  const results: ReliabilityResults = {
    command: `npm run reliability${args.length > 0 ? ` -- ${args.join(' ')}` : ''}`,
    quick,
    date: new Date().toISOString(),
    commit: commit(),
    machine: machine(),
    scenarios: [],
    totalS: 0,
  };
  for (const id of SCENARIOS) {
    if (!only.includes(id)) continue;
    const s0 = Date.now();
    log(`${id} …`);
    const r: ScenarioResult = {
      id,
      title: TITLES[id],
      setup: '',
      rows: [],
      notes: [],
      durationS: 0,
    };
    try {
      await RUN[id](ctx, r);
    } catch (e) {
      log(`${id} FAILED: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      r.error = e instanceof Error ? e.message : String(e);
    }
    r.durationS = (Date.now() - s0) / 1000;
    log(`${id} done in ${r.durationS.toFixed(1)} s`);
    results.scenarios.push(r);
  }
  results.totalS = (Date.now() - t0) / 1000;
  results.machine.loadAfter = loadavg();
  await writeFormatted(out, renderReliability(results));
  const json = values.json ?? join(repoRoot, 'bench', 'reliability-results.json');
  await writeFormatted(json, JSON.stringify(results));
  log(`wrote ${out} and ${json} in ${results.totalS.toFixed(0)} s`);
  const failed = results.scenarios.some((s) => s.error !== undefined);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(
      `reliability: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    process.exit(2);
  },
);

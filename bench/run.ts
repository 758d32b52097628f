/**
 * `npm run bench [-- --quick] [-- --only capture,correlator,files,live]`: every measurement of
 * issue 5 in one run, then BENCHMARKS.md regenerated from the results (bench/report.ts). Sections
 * run one after another, never in parallel, so they do not compete for the two cores; a section
 * that fails is reported as failed with its reason and the others still run (exit code 1).
 * `--only files --large-only` runs the files section's large three-point case alone (not part of
 * --quick) and merges it into bench/results.json's other sections.
 */
import { cpus } from 'node:os';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadNativeAddon } from '../native/loader';
import { benchCapture, toolVersion, type CaptureResult } from './capture';
import { benchCorrelator } from './correlator';
import type { CorrelatorResult } from './correlator-child';
import { benchFiles, type FileResult } from './files';
import { benchLargeFiles } from './large-files';
import { benchLink, type LinkResult, type LinkScheme, type ShareBudget } from './link';
import { benchLive, type LiveRow } from './live';
import { renderBenchmarks, type BenchResults, type Machine } from './report';

const SECTIONS = ['capture', 'correlator', 'files', 'live'] as const;
type Section = (typeof SECTIONS)[number];

/**
 * The zero-loss searches under a CPU budget (bench/cpu-share.ts): rates doubled, then bisected;
 * both tools held to the same share of one core, at two shares. At 1 % (10 ms of CPU a second,
 * the kernel's smallest quota at a 100 ms period) what each tool costs a second whatever the rate
 * weighs most; at 5 % its cost per packet does, and one sending core (~0.5-1.2 M pps here) still
 * offers more than either takes.
 */
const SHARE_BUDGETS: readonly ShareBudget[] = [
  {
    percent: 1,
    search: { ladder: [20_000, 40_000, 80_000, 160_000, 320_000, 640_000], refine: 3 },
  },
  {
    percent: 5,
    search: { ladder: [80_000, 160_000, 320_000, 640_000, 1_280_000], refine: 3 },
  },
];
const SHARE_BUDGETS_QUICK: readonly ShareBudget[] = [
  { percent: 1, search: { ladder: [40_000, 160_000], refine: 1 } },
];

const repoRoot = resolve(__dirname, '..', '..');

/** Writes `text` formatted by the repository's prettier config, so `npm run lint` stays clean. */
async function writeFormatted(path: string, text: string): Promise<void> {
  const prettier = await import('prettier');
  const config = (await prettier.resolveConfig(path)) ?? {};
  writeFileSync(path, await prettier.format(text, { ...config, filepath: path }));
}

function log(s: string): void {
  process.stderr.write(`bench: ${s}\n`);
}

async function machine(): Promise<Machine> {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const addon = loadNativeAddon();
  return {
    nproc: cpus().length,
    cpu: model.trim(),
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim(),
    node: process.version,
    libpcap: addon.ok ? addon.addon.libpcapVersion : `native addon not loaded: ${addon.reason}`,
    tcpdump: await toolVersion('tcpdump', ['--version']),
    tshark: await toolVersion('tshark', ['--version']),
    loadBefore: load,
    date: new Date().toISOString(),
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' },
      'share-only': { type: 'boolean' },
      // Of the CPU budgets, only these shares (percent of one core, e.g. `1` or `1,5`).
      'share-percent': { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      // Where the raw results go (default bench/results.json).
      json: { type: 'string' },
      // Re-render BENCHMARKS.md from a results.json of an earlier run (no measurement).
      render: { type: 'string' },
      // The files section's large three-point case alone, merged into bench/results.json's other
      // sections (bench/large-files.ts); --large-frames N frames per point file (3,800,000).
      'large-only': { type: 'boolean' },
      'large-frames': { type: 'string' },
      // The whole-agent rows (issue 20): which link schemes (default wss,ws), or only them.
      link: { type: 'string' },
      'link-only': { type: 'boolean' },
    },
  });
  if (values.render !== undefined) {
    const saved = JSON.parse(readFileSync(values.render, 'utf8')) as BenchResults;
    await writeFormatted(values.out ?? join(repoRoot, 'BENCHMARKS.md'), renderBenchmarks(saved));
    return 0;
  }
  const quick = values.quick === true;
  // `--share-only`: of the capture section, only the whole agent's zero-loss searches under the
  // CPU budgets (over the first `--link` scheme, after its warm-up capture).
  const shareOnly = values['share-only'] === true;
  const only = (values.only?.split(',') ?? [...SECTIONS]).filter((s) => s !== '');
  const unknown = only.filter((s) => !(SECTIONS as readonly string[]).includes(s));
  if (unknown.length > 0) {
    process.stderr.write(`unknown section ${unknown.join(', ')}; known: ${SECTIONS.join(', ')}\n`);
    return 2;
  }
  const wants = (s: Section): boolean => only.includes(s);
  if (
    typeof process.getuid === 'function' &&
    process.getuid() !== 0 &&
    (wants('capture') || wants('live'))
  ) {
    process.stderr.write(
      'bench: the capture and live sections create network namespaces: run as root\n',
    );
    return 2;
  }
  const t0 = Date.now();
  const results: BenchResults = {
    machine: await machine(),
    quick,
    command: `npm run bench${quick ? ' -- --quick' : ''}`,
    errors: {},
  };
  const largeOnly = values['large-only'] === true;
  const out = values.out ?? join(repoRoot, 'BENCHMARKS.md');
  const resultsPath = values.json ?? join(repoRoot, 'bench', 'results.json');
  // --large-only keeps an earlier run's other sections (its section states its own date and
  // load): those of --json when that file exists, else bench/results.json's. Read before the
  // minutes of measuring, so a missing one is said at once.
  const earlier: BenchResults | undefined = largeOnly ? readEarlier(resultsPath) : undefined;
  const attempt = async <T>(
    s: Section,
    fn: () => Promise<T>,
    label: string = s,
  ): Promise<T | undefined> => {
    if (!wants(s)) return undefined;
    const s0 = Date.now();
    try {
      const r = await fn();
      log(`${label} done in ${((Date.now() - s0) / 1000).toFixed(1)} s`);
      return r;
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      log(`${label} FAILED: ${msg}`);
      results.errors[label] = msg;
      return undefined;
    }
  };

  const floodSrc = process.env.HOPTRACE_UDP_FLOOD_SRC ?? join(repoRoot, 'bench', 'udp-flood.c');
  const schemes = (values.link ?? 'wss,ws').split(',').filter((s) => s !== '');
  if (schemes.some((s) => s !== 'wss' && s !== 'ws')) {
    process.stderr.write(`bench: --link takes wss and/or ws, not ${values.link ?? ''}\n`);
    return 2;
  }
  const capture: CaptureResult | undefined = await attempt('capture', () =>
    values['link-only'] === true || shareOnly
      ? Promise.resolve({ trials: [] })
      : benchCapture({
          rates: quick
            ? [10_000, 50_000, 0]
            : [10_000, 25_000, 50_000, 100_000, 200_000, 400_000, 0],
          durationS: quick ? 1 : 2,
          repeats: quick ? 1 : 8,
          floodSrc,
          log,
        }),
  );
  if (capture !== undefined) results.capture = capture;
  // The whole agent, link included, against tcpdump: part of the capture section. Its search
  // under the CPU budget (goal 3's row) runs over the first scheme asked (wss by default).
  const shareScheme = schemes[0] as LinkScheme | undefined;
  const percents = values['share-percent']?.split(',').map(Number);
  const budgets = (quick ? SHARE_BUDGETS_QUICK : SHARE_BUDGETS).filter(
    (b) => percents === undefined || percents.includes(b.percent),
  );
  if (budgets.length === 0) {
    const known = SHARE_BUDGETS.map((b) => b.percent).join(', ');
    process.stderr.write(`bench: --share-percent names no budget (known: ${known})\n`);
    return 2;
  }
  const link: LinkResult | undefined = await attempt('capture', () =>
    shareScheme === undefined
      ? Promise.resolve({ trials: [] })
      : benchLink({
          schemes: shareOnly ? [shareScheme] : (schemes as LinkScheme[]),
          rounds: shareOnly ? 0 : quick ? 2 : 5,
          durationS: quick ? 1 : 2,
          floodSrc,
          scan: !shareOnly,
          share: {
            budgets,
            scheme: shareScheme,
            ...(quick ? { durationS: 3 } : {}),
          },
          log,
        }),
  );
  if (link !== undefined) results.link = link;
  const correlator: CorrelatorResult[] | undefined = await attempt('correlator', () =>
    benchCorrelator(quick, log),
  );
  if (correlator !== undefined) results.correlator = correlator;
  const files: FileResult | undefined = largeOnly
    ? undefined
    : await attempt('files', () => benchFiles(repoRoot, quick ? 100_000 : 400_000, log));
  if (files !== undefined) results.files = files;
  // The large case takes minutes (1.5 GiB written, tcpdump -nn over it six times a trial).
  const large =
    quick && !largeOnly
      ? undefined
      : await attempt(
          'files',
          () =>
            benchLargeFiles(
              repoRoot,
              {
                framesPerPoint: Number(values['large-frames'] ?? 3_800_000),
                trials: 3,
                scales: [0.1, 1],
              },
              log,
            ),
          'files (large)',
        );
  if (large !== undefined) results.filesLarge = large;
  const live: LiveRow[] | undefined = await attempt('live', () =>
    benchLive(
      quick ? ['preserve'] : ['preserve', 'kube-proxy-nodeport', 'proxy-pod'],
      quick ? 1 : 2,
      log,
    ),
  );
  if (live !== undefined) results.live = live;

  results.totalS = (Date.now() - t0) / 1000;
  results.machine.loadAfter = readFileSync('/proc/loadavg', 'utf8')
    .split(' ')
    .slice(0, 3)
    .join(' ');
  const merged: BenchResults =
    earlier !== undefined
      ? { ...earlier, ...(large === undefined ? {} : { filesLarge: large }) }
      : results;
  if (largeOnly) merged.errors = { ...merged.errors, ...results.errors };
  await writeFormatted(out, renderBenchmarks(merged));
  await writeFormatted(resultsPath, JSON.stringify(merged));
  log(`wrote ${out} and ${resultsPath} in ${results.totalS.toFixed(0)} s`);
  return Object.keys(results.errors).length === 0 ? 0 : 1;
}

/** The results --large-only adds its section to: `path`'s, else bench/results.json's. */
function readEarlier(path: string): BenchResults {
  const from = existsSync(path) ? path : join(repoRoot, 'bench', 'results.json');
  try {
    return JSON.parse(readFileSync(from, 'utf8')) as BenchResults;
  } catch (e) {
    throw new Error(
      `--large-only adds its section to an earlier run's results, and ${from} cannot be read (${e instanceof Error ? e.message : String(e)}): run the whole bench once first`,
    );
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(2);
  },
);

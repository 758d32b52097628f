/**
 * The large three-point case (issue 20, goal 2): `hoptrace analyze` over three distinct point
 * files of ≥ 1.5 GiB in all (bench/pcap-writer.ts, BENCH_POINTS) against the page-cache floor —
 * `cat` of the same three files — and `tcpdump -nn -r` over each file once (summed), run with TZ
 * unset and with TZ=UTC (unset, glibc re-reads /etc/localtime for every timestamp it prints).
 * Trials run back to back after one warming `cat`, so every command reads from the page cache;
 * medians are reported. analyze's peak RSS is also measured on files a tenth the size (and at other
 * scales when asked) to show memory flat. The files live in a temp dir, removed at the end, on
 * failure and on SIGINT/SIGTERM.
 */
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_CLIENT, BENCH_POINTS, writeBenchPcap } from './pcap-writer';
import { verdictLayer } from './files';
import { measureCommand, median, type CommandCost } from './proc';

/** Bytes a bench frame takes on average (102 and 152 B frames, 16 B record headers). */
const BYTES_PER_FRAME = 143;
const POINTS = ['decap', 'egress', 'backend'] as const;

/** One back-to-back trial: every command over the same three files. */
export interface LargeTrial {
  cat: CommandCost;
  analyze: CommandCost;
  /** `tcpdump -nn -r` over each file, TZ unset: wall and CPU seconds summed. */
  tcpdumpS: number;
  tcpdumpCpuS: number;
  /** The same with TZ=UTC. */
  tcpdumpTzS: number;
  tcpdumpTzCpuS: number;
  /** `node -e 0`: Node's own start, part of every analyze run. */
  nodeStartS: number;
  /** bench/floor-walk.ts over the three files: Node's start, analyze's reads, the record headers. */
  floorS: number;
  /** bench/floor-walk.c over the three files: the same walk in C on one core, no Node. */
  cFloorS?: number;
  /** floor-walk.c -2: the first file, then the later ones on two threads (analyze's order). */
  cFloor2S?: number;
  /**
   * Where the environment sets NODE_EXTRA_CA_CERTS (Node reads and parses that file at every
   * start): `node -e 0` and analyze with it unset.
   */
  nodeStartNoCaS?: number;
  analyzeNoCaS?: number;
  /**
   * `analyze --report-dir` (what a user attaching the report runs: the inputs' SHA-256 beside the
   * analysis, evidence.pcapng, the reports) and `sha256sum` of the three files; absent in results
   * from before 2026-12-06 21:10 UTC.
   */
  bundle?: CommandCost;
  sha256sumS?: number;
}

/** analyze's peak RSS on three point files of `framesPerPoint` frames each. */
export interface LargeRss {
  scale: number;
  framesPerPoint: number;
  totalMiB: number;
  peakRssMiB: number | null;
  wallS: number;
}

export interface LargeFileResult {
  framesPerPoint: number;
  totalMiB: number;
  trials: LargeTrial[];
  /** Medians over the trials (wall seconds; analyze's peak RSS in MiB). */
  median: {
    catS: number;
    analyzeS: number;
    analyzeCpuS: number;
    analyzeRssMiB: number;
    tcpdumpS: number;
    tcpdumpTzS: number;
    nodeStartS: number;
    floorS: number;
    cFloorS?: number;
    cFloor2S?: number;
    nodeStartNoCaS?: number;
    analyzeNoCaS?: number;
    bundleS?: number;
    bundleCpuS?: number;
    bundleRssMiB?: number;
    sha256sumS?: number;
  };
  /** analyze's peak RSS by scale (1 is the trials' median). */
  rss: LargeRss[];
  analyzeLayer: string | null;
  /**
   * The probe's SYN: 0-based frame in each point file (three quarters in, PROBE_AT); absent in
   * results from before 2026-12-06 18:00 UTC, when it was frame 1000.
   */
  probeFrame?: number;
  /** The section's own run: it may be merged into an earlier run's results (--large-only). */
  date: string;
  loadBefore: string;
  loadAfter: string;
}

export interface LargeOptions {
  framesPerPoint: number;
  trials: number;
  /** Other sizes to measure analyze's peak RSS at, as multiples of framesPerPoint (e.g. 0.1). */
  scales: number[];
}

const loadavg = (): string =>
  readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/**
 * Where the probe request sits in a point file of `frames` frames: three quarters in. A request
 * is rarely a capture's first packets: this way the window around it has frames on both sides,
 * and reading its frames again (identity headers, evidence) starts far from the file's start.
 */
export const PROBE_AT = (frames: number): number => Math.floor((frames * 3) / 4);

/** Writes the three point files of `frames` frames each under `dir` with `tag`; returns them. */
function writePoints(dir: string, tag: string, frames: number): { files: string[]; bytes: number } {
  let bytes = 0;
  const files = POINTS.map((p) => {
    const f = join(dir, `${tag}-${p}.pcap`);
    bytes += writeBenchPcap(f, frames, 'bench0001', 'pcap', BENCH_POINTS[p], PROBE_AT(frames));
    return f;
  });
  return { files, bytes };
}

async function run(file: string, args: string[], out?: string): Promise<CommandCost> {
  const c = await measureCommand(file, args, out);
  if (c.code !== 0) throw new Error(`${file} ${args.join(' ')} exited ${c.code}: ${c.stderrTail}`);
  return c;
}

/** `tcpdump -nn -r` over each file once; TZ unset or UTC. Wall and CPU seconds summed. */
async function tcpdumpEach(files: string[], tz: boolean): Promise<[number, number]> {
  let wall = 0;
  let cpu = 0;
  for (const f of files) {
    const env = tz ? ['TZ=UTC'] : ['-u', 'TZ'];
    const c = await run('/usr/bin/env', [...env, 'tcpdump', '-nn', '-r', f]);
    wall += c.wallS;
    cpu += c.cpuS ?? NaN;
  }
  return [wall, cpu];
}

/** Runs the large case; throws (after removing its files) when the disk cannot hold them. */
export async function benchLargeFiles(
  repoRoot: string,
  opts: LargeOptions,
  log: (s: string) => void,
): Promise<LargeFileResult> {
  const loadBefore = loadavg();
  const date = new Date().toISOString();
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-bench-large-'));
  const cleanup = (): void => {
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    cleanup();
    process.kill(process.pid, sig);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const scales = opts.scales.filter((s) => s !== 1);
    const frames = (s: number): number => Math.max(2000, Math.round(opts.framesPerPoint * s));
    const need = [1, ...scales].reduce((a, s) => a + 3 * frames(s) * BYTES_PER_FRAME, 0);
    const fs = statfsSync(dir);
    const free = fs.bavail * fs.bsize;
    if (need + 2 ** 30 > free)
      throw new Error(
        `large files: ${(need / 2 ** 30).toFixed(1)} GiB needed (+1 GiB spare), ${(free / 2 ** 30).toFixed(1)} GiB free in ${tmpdir()}`,
      );
    const big = writePoints(dir, 'x1', opts.framesPerPoint);
    const totalMiB = big.bytes / 2 ** 20;
    log(`files large: wrote 3 × ${opts.framesPerPoint} frames (${totalMiB.toFixed(0)} MiB)`);
    const main = join(repoRoot, 'dist', 'cli', 'main.js');
    const analyzeArgs = (files: string[]): string[] => [
      main,
      'analyze',
      ...files.flatMap((f, i) => ['--point', `${POINTS[i] ?? `p${i}`}=${f}`]),
      '--client',
      BENCH_CLIENT,
      '--json',
    ];
    const verdictFile = join(dir, 'verdict.json');
    const cFloor = join(dir, 'floor-walk');
    await run('cc', ['-O2', '-o', cFloor, join(repoRoot, 'bench', 'floor-walk.c'), '-lpthread']);
    const extraCa = process.env['NODE_EXTRA_CA_CERTS'] !== undefined;
    const noCa = ['-u', 'NODE_EXTRA_CA_CERTS', process.execPath];
    // Warm the page cache: every trial then reads the files from memory.
    await run('cat', big.files);
    const trials: LargeTrial[] = [];
    for (let k = 0; k < opts.trials; k++) {
      const cat = await run('cat', big.files);
      const analyze = await run(process.execPath, analyzeArgs(big.files), verdictFile);
      const [tcpdumpS, tcpdumpCpuS] = await tcpdumpEach(big.files, false);
      const [tcpdumpTzS, tcpdumpTzCpuS] = await tcpdumpEach(big.files, true);
      const node = await run(process.execPath, ['-e', '0']);
      const floor = await run(process.execPath, [
        join(repoRoot, 'dist', 'bench', 'floor-walk.js'),
        ...big.files,
      ]);
      const cWalk = await run(cFloor, big.files);
      const cWalk2 = await run(cFloor, ['-2', ...big.files]);
      const bundleDir = join(dir, 'bundle');
      rmSync(bundleDir, { recursive: true, force: true });
      const bundle = await run(process.execPath, [
        ...analyzeArgs(big.files),
        '--report-dir',
        bundleDir,
      ]);
      const sha = await run('sha256sum', big.files);
      const nodeNoCa = extraCa ? await run('/usr/bin/env', [...noCa, '-e', '0']) : undefined;
      const analyzeNoCa = extraCa
        ? await run('/usr/bin/env', [...noCa, ...analyzeArgs(big.files)], verdictFile)
        : undefined;
      trials.push({
        cat,
        cFloorS: cWalk.wallS,
        cFloor2S: cWalk2.wallS,
        ...(nodeNoCa === undefined ? {} : { nodeStartNoCaS: nodeNoCa.wallS }),
        ...(analyzeNoCa === undefined ? {} : { analyzeNoCaS: analyzeNoCa.wallS }),
        analyze,
        bundle,
        sha256sumS: sha.wallS,
        tcpdumpS,
        tcpdumpCpuS,
        tcpdumpTzS,
        tcpdumpTzCpuS,
        nodeStartS: node.wallS,
        floorS: floor.wallS,
      });
      log(
        `files large: trial ${k + 1}: cat ${cat.wallS.toFixed(2)} s, analyze ${analyze.wallS.toFixed(2)} s (${analyze.peakRssMiB?.toFixed(0) ?? '?'} MiB), tcpdump -nn ${tcpdumpS.toFixed(1)} s, TZ=UTC ${tcpdumpTzS.toFixed(1)} s`,
      );
    }
    const analyzeLayer = verdictLayer(verdictFile);
    const med = (f: (t: LargeTrial) => number | null): number =>
      median(trials.map(f).filter((x): x is number => x !== null));
    const m = {
      catS: med((t) => t.cat.wallS),
      analyzeS: med((t) => t.analyze.wallS),
      analyzeCpuS: med((t) => t.analyze.cpuS),
      analyzeRssMiB: med((t) => t.analyze.peakRssMiB),
      tcpdumpS: med((t) => t.tcpdumpS),
      tcpdumpTzS: med((t) => t.tcpdumpTzS),
      nodeStartS: med((t) => t.nodeStartS),
      floorS: med((t) => t.floorS),
      cFloorS: med((t) => t.cFloorS ?? null),
      cFloor2S: med((t) => t.cFloor2S ?? null),
      bundleS: med((t) => t.bundle?.wallS ?? null),
      bundleCpuS: med((t) => t.bundle?.cpuS ?? null),
      bundleRssMiB: med((t) => t.bundle?.peakRssMiB ?? null),
      sha256sumS: med((t) => t.sha256sumS ?? null),
      ...(extraCa
        ? {
            nodeStartNoCaS: med((t) => t.nodeStartNoCaS ?? null),
            analyzeNoCaS: med((t) => t.analyzeNoCaS ?? null),
          }
        : {}),
    };
    const rss: LargeRss[] = [
      {
        scale: 1,
        framesPerPoint: opts.framesPerPoint,
        totalMiB,
        peakRssMiB: m.analyzeRssMiB,
        wallS: m.analyzeS,
      },
    ];
    // The other scales after the trials, one set of files at a time (the 1× files removed first).
    for (const f of big.files) rmSync(f, { force: true });
    for (const s of scales) {
      const set = writePoints(dir, `x${s}`, frames(s));
      await run('cat', set.files);
      // The 1× trials' path (a worker thread for the later points: auto takes it from 64 MiB a
      // file), so that the sizes compare memory, not two ways of reading.
      const c = await run(process.execPath, [...analyzeArgs(set.files), '--parallel', 'on']);
      rss.push({
        scale: s,
        framesPerPoint: frames(s),
        totalMiB: set.bytes / 2 ** 20,
        peakRssMiB: c.peakRssMiB,
        wallS: c.wallS,
      });
      log(
        `files large: ${s}× (${(set.bytes / 2 ** 20).toFixed(0)} MiB): analyze ${c.wallS.toFixed(2)} s, ${c.peakRssMiB?.toFixed(0) ?? '?'} MiB`,
      );
      for (const f of set.files) rmSync(f, { force: true });
    }
    rss.sort((a, b) => a.scale - b.scale);
    return {
      framesPerPoint: opts.framesPerPoint,
      totalMiB,
      trials,
      median: m,
      rss,
      analyzeLayer,
      probeFrame: PROBE_AT(opts.framesPerPoint),
      date,
      loadBefore,
      loadAfter: loadavg(),
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    cleanup();
  }
}

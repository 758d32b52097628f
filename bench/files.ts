/**
 * File benchmark: `hoptrace decode --json` and `hoptrace analyze` on a large synthetic pcap vs
 * `tcpdump -r` and `tshark -r` on the same file, one after another in the same run. Wall time is
 * measured around each process, peak RSS and CPU come from /usr/bin/time -v. Our two commands also
 * run on a file a quarter the size, to show whether memory grows with the file.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_CLIENT, writeBenchPcap } from './pcap-writer';
import { measureCommand, type CommandCost } from './proc';

/** One measured command. */
export interface FileRow {
  tool: string;
  command: string;
  packets: number;
  cost: CommandCost;
}

export interface FileResult {
  packets: number;
  fileMiB: number;
  rows: FileRow[];
  /** analyze's verdict layer on the big file (sanity: the request was found). */
  analyzeLayer: string | null;
}

/** Runs the file benchmark on a `packets`-frame capture (and one of a quarter the size). */
export async function benchFiles(
  repoRoot: string,
  packets: number,
  log: (s: string) => void,
): Promise<FileResult> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-bench-files-'));
  try {
    const big = join(dir, 'big.pcap');
    const bigNg = join(dir, 'big.pcapng');
    const small = join(dir, 'small.pcap');
    const smallCount = Math.round(packets / 4);
    const size = writeBenchPcap(big, packets, 'bench0001');
    writeBenchPcap(small, smallCount, 'bench0001');
    writeBenchPcap(bigNg, packets, 'bench0001', 'pcapng');
    log(`files: wrote ${packets} frames (${(size / 2 ** 20).toFixed(1)} MiB)`);
    const main = join(repoRoot, 'dist', 'cli', 'main.js');
    const analyzeArgs = (f: string): string[] => [
      main,
      'analyze',
      '--point',
      `decap=${f}`,
      '--point',
      `egress=${f}`,
      '--point',
      `backend=${f}`,
      '--client',
      BENCH_CLIENT,
      '--json',
    ];
    const verdictFile = join(dir, 'verdict.json');
    const plan: { tool: string; file: string; args: string[]; n: number; out?: string }[] = [
      {
        tool: 'tcpdump -r -w /dev/null',
        file: 'tcpdump',
        args: ['-r', big, '-w', '/dev/null'],
        n: packets,
      },
      { tool: 'tcpdump -nn -r', file: 'tcpdump', args: ['-nn', '-r', big], n: packets },
      {
        tool: 'tshark -T fields',
        file: 'tshark',
        args: ['-r', big, '-T', 'fields', '-e', 'ip.src', '-e', 'tcp.srcport'],
        n: packets,
      },
      {
        tool: 'hoptrace decode --json',
        file: process.execPath,
        args: [main, 'decode', '--json', big],
        n: packets,
      },
      {
        tool: 'hoptrace analyze (3 points = file read 3×)',
        file: process.execPath,
        args: analyzeArgs(big),
        n: packets,
        out: verdictFile,
      },
      {
        tool: 'hoptrace analyze (pcapng, 3 points)',
        file: process.execPath,
        args: analyzeArgs(bigNg),
        n: packets,
      },
      {
        // The floor under analyze: Node reading the three files and walking their records.
        tool: 'node floor-walk (3 points = file read 3×, nothing decoded)',
        file: process.execPath,
        args: [join(repoRoot, 'dist', 'bench', 'floor-walk.js'), big, big, big],
        n: packets,
      },
      {
        // The floor under every hoptrace command: Node's own start, no module of ours loaded.
        tool: 'node -e 0 (Node startup alone)',
        file: process.execPath,
        args: ['-e', '0'],
        n: 0,
      },
      {
        tool: 'hoptrace decode --json (¼ file)',
        file: process.execPath,
        args: [main, 'decode', '--json', small],
        n: smallCount,
      },
      {
        tool: 'hoptrace analyze (¼ file, 3 points)',
        file: process.execPath,
        args: analyzeArgs(small),
        n: smallCount,
      },
    ];
    const rows: FileRow[] = [];
    for (const p of plan) {
      const cost = await measureCommand(p.file, p.args, p.out);
      const shown = [p.file === process.execPath ? 'node' : p.file, ...p.args]
        .join(' ')
        .replaceAll(dir, '$DIR');
      log(
        `files: ${p.tool}: ${cost.wallS.toFixed(2)} s, ${cost.peakRssMiB?.toFixed(0) ?? '?'} MiB (exit ${cost.code})`,
      );
      if (cost.code !== 0) throw new Error(`${shown} exited ${cost.code}: ${cost.stderrTail}`);
      rows.push({ tool: p.tool, command: shown, packets: p.n, cost });
    }
    // The verdict itself, so the report can say the request was found.
    const analyzeLayer = verdictLayer(verdictFile);
    return { packets, fileMiB: size / 2 ** 20, rows, analyzeLayer };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The verdict's layer in an `analyze --json` output file; null when it cannot be read. */
export function verdictLayer(file: string): string | null {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { verdict?: { layer?: string } };
    return parsed.verdict?.layer ?? null;
  } catch {
    return null;
  }
}

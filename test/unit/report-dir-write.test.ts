/**
 * `analyze --report-dir` writes its bundle all or none (offline/report-dir.ts writeBundle): the
 * files name each other (report.json its evidence.pcapng and inventory.json), so a write that
 * failed half-way left this run's first files beside an earlier run's last ones. A bundle that
 * cannot be written whole leaves the directory as it was, and no temporary file behind.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');

function analyze(args: string[]): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [bin, 'analyze', ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr };
}

void t.test('a bundle that cannot be written whole leaves the directory as it was', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-report-dir-write-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const points = (['decap', 'egress', 'backend'] as const).flatMap((name) => {
    const file = join(dir, `${name}.pcap`);
    writeBenchPcap(file, 2000, 'bundle01', 'pcap', BENCH_POINTS[name], 1500);
    return ['--point', `${name}=${file}`];
  });
  const out = join(dir, 'bundle');
  // A first run writes the whole bundle.
  t.equal(analyze([...points, '--report-dir', out]).code, 0);
  const before = new Map(readdirSync(out).map((f) => [f, readFileSync(join(out, f))]));
  t.same([...before.keys()].sort(), [
    'SHA256SUMS',
    'evidence.pcapng',
    'inventory.json',
    'report.html',
    'report.json',
    'report.md',
    'sequence.svg',
  ]);
  // The second run's last file is blocked by a directory; its first ones must not replace the
  // first run's (a different --client selects the same request, so report.md would differ).
  rmSync(join(out, 'sequence.svg'));
  mkdirSync(join(out, 'sequence.svg'));
  const second = analyze([...points, '--client', '10.90.0.42', '--report-dir', out]);
  t.equal(second.code, 1, second.stderr);
  t.match(
    second.stderr,
    /FILE_WRITE: --report-dir: cannot write .*sequence\.svg .*nothing of this bundle was written/,
  );
  t.match(second.stderr, /a directory named sequence\.svg is in the way/);
  for (const [f, bytes] of before) {
    if (f === 'sequence.svg') continue;
    t.ok(readFileSync(join(out, f)).equals(bytes), `${f}: the first run's, untouched`);
  }
  t.same(
    readdirSync(out).filter((f) => f.endsWith('.tmp')),
    [],
    'no temporary file left behind',
  );
  t.end();
});

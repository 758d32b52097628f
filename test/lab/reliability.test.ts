// The reliability script (bench/reliability.ts) in its --quick mode, as `npm run reliability`
// runs it: every scenario runs to its end against the real collector process (root: the
// disk-full and fuzz scenarios mount a small tmpfs), and RELIABILITY.md and the results JSON are
// written — here into a temporary folder, never over the committed ones. Whether the targets are
// met is the figures' business (RELIABILITY.md), not this test's: it proves the script works.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SCENARIOS, type ReliabilityResults } from '../../bench/reliability/types';
import { missingPrerequisites } from '../../lab/prereq';

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test(
    'npm run reliability -- --quick runs every scenario and writes its files',
    async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'hoptrace-reliability-test-'));
      t.teardown(() => {
        rmSync(dir, { recursive: true, force: true });
      });
      const md = join(dir, 'RELIABILITY.md');
      const json = join(dir, 'results.json');
      const script = join(__dirname, '..', '..', 'bench', 'reliability.js');
      const t0 = Date.now();
      const code = await new Promise<number | null>((resolve) => {
        const child = execFile(process.execPath, [script, '--quick', '--out', md, '--json', json], {
          env: { ...process.env, NODE_OPTIONS: '' },
          maxBuffer: 64 * 1024 * 1024,
        });
        child.once('exit', (c) => {
          resolve(c);
        });
      });
      t.ok(existsSync(md) && existsSync(json), 'RELIABILITY.md and the JSON are written');
      const results = JSON.parse(readFileSync(json, 'utf8')) as ReliabilityResults;
      t.same(
        results.scenarios.map((s) => s.id),
        [...SCENARIOS],
        'every scenario ran, in order',
      );
      for (const s of results.scenarios) {
        t.equal(s.error, undefined, `${s.id} ran to its end`);
        t.ok(s.rows.length > 0, `${s.id} measured something`);
      }
      t.equal(code, 0, 'the script exits 0 when every scenario ran');
      t.match(readFileSync(md, 'utf8'), /npm run reliability -- --quick/, 'the command is named');
      t.ok(Date.now() - t0 < 300_000, `quick mode took ${Math.round((Date.now() - t0) / 1000)} s`);
    },
  );
}

/**
 * One capture given for two points under two names (a copy: checkPointInputs refuses only one
 * path or inode): the analysis compares the capture with itself, so its `preserved` proves nothing
 * about the path between them, and a caution says so (offline/same-files.ts). Files of one size
 * whose bytes differ, and files of other sizes, get none.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { analyzeFiles } from '../../offline/analyze-files';
import { findSameFiles } from '../../offline/same-files';
import type { Inventory } from '../../common/inventory';

const EMPTY: Inventory = { nodes: {}, pods: {} };
const dir = mkdtempSync(join(tmpdir(), 'hoptrace-same-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
const decap = join(dir, 'decap.pcap');
writeBenchPcap(decap, 300, 'samefile', 'pcap', BENCH_POINTS.decap, 100);
const backend = join(dir, 'backend.pcap');
writeBenchPcap(backend, 300, 'samefile', 'pcap', BENCH_POINTS.backend, 100);
const copy = join(dir, 'copy-of-decap.pcap');
copyFileSync(decap, copy);
const copy2 = join(dir, 'another-copy.pcap');
copyFileSync(decap, copy2);
// The same size, one byte different at the very end (the last frame's last byte).
const altered = join(dir, 'altered.pcap');
const bytes = readFileSync(decap);
bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
writeFileSync(altered, bytes);

const caveatsOf = (points: { name: string; file: string }[]): string[] =>
  analyzeFiles({ points, inventory: EMPTY, selector: {} }).caveats ?? [];

void t.test('a copy given for the backend: preserved, with a caution naming both', (t) => {
  const points = [
    { name: 'decap', file: decap },
    { name: 'backend', file: copy },
  ];
  const r = analyzeFiles({ points, inventory: EMPTY, selector: {} });
  t.equal(r.verdict.layer, 'preserved', 'what the old code said, without a word');
  const same = (r.caveats ?? []).filter((c) => /byte-identical/.test(c));
  t.equal(same.length, 1, `one caution: ${JSON.stringify(r.caveats)}`);
  t.match(same[0] ?? '', /^decap and backend read byte-identical files/);
  t.match(same[0] ?? '', new RegExp(`${decap} and ${copy}: ${bytes.length} bytes each`));
  t.match(same[0] ?? '', /proves nothing about a rewrite/);
  t.end();
});

void t.test('three points, one file copied: one caution naming the three', (t) => {
  const c = caveatsOf([
    { name: 'decap', file: decap },
    { name: 'egress', file: copy },
    { name: 'backend', file: copy2 },
  ]).filter((x) => /byte-identical/.test(x));
  t.equal(c.length, 1);
  t.match(c[0] ?? '', /^decap, egress and backend read byte-identical files/);
  t.end();
});

void t.test('the same size with a byte changed, or another capture: no caution', (t) => {
  t.same(
    findSameFiles([
      { name: 'decap', file: decap },
      { name: 'backend', file: altered },
    ]),
    [],
  );
  const c = caveatsOf([
    { name: 'decap', file: decap },
    { name: 'backend', file: backend },
  ]);
  t.notMatch(c.join('\n'), /byte-identical/);
  t.end();
});

void t.test('a file that cannot be read is left to the pass, not compared', (t) => {
  t.same(
    findSameFiles([
      { name: 'decap', file: decap },
      { name: 'backend', file: join(dir, 'missing.pcap') },
    ]),
    [],
  );
  t.end();
});

/**
 * Classic pcap records no writer gives — a fraction of a second of 10^6 µs or more (10^9 with the
 * nanosecond magic), a captured length above the original (wire) length — are read as given, as
 * libpcap reads them, and counted, as tcpdump flags them: the same counts from the JS reader
 * (offline/pcap-file.ts) and from the C fast path (summary.c through offline/summary-file.ts),
 * whatever the chunk size; `analyze` names them in Capture health and in a caution, on both paths,
 * and still reads the file. Fails (never skips) without the addon.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { openCaptureFile } from '../../offline/pcap-file';
import { openSummaryPcap } from '../../offline/summary-file';
import { analyzeFiles } from '../../offline/analyze-files';
import { fileFramesCell } from '../../core/report/capture-health';
import type { Inventory } from '../../common/inventory';
import { runAnalyze } from '../../cli/analyze';
import type { ReportDocument } from '../../core/report/report-document';
import { reportSchemaErrors } from './report-schema';
import { fastStats, jsStats } from './capture-stats-fixtures';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const EMPTY: Inventory = { nodes: {}, pods: {} };
const dir = mkdtempSync(join(tmpdir(), 'ht-invalid-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The file offsets of the records of a little-endian classic pcap. */
function offsets(file: Buffer): number[] {
  const out: number[] = [];
  for (let at = 24; at + 16 <= file.length; at += 16 + file.readUInt32LE(at + 8)) out.push(at);
  return out;
}

/**
 * `file` (LE µs) with invalid records: two with a fraction of a second at and above the limit, one
 * whose captured length exceeds its wire length; `ns` rewrites it with the nanosecond magic (each
 * fraction × 1000, the limit 10^9).
 */
function damage(file: Buffer, ns: boolean): Buffer {
  const b = Buffer.from(file);
  const at = offsets(b);
  if (ns) {
    b.writeUInt32LE(0xa1b23c4d, 0);
    for (const o of at) b.writeUInt32LE(b.readUInt32LE(o + 4) * 1000, o + 4);
  }
  const limit = ns ? 1_000_000_000 : 1_000_000;
  const pick = (k: number): number => at[at.length - k] ?? 24;
  b.writeUInt32LE(limit, pick(50) + 4);
  b.writeUInt32LE(0xffffffff, pick(40) + 4);
  b.writeUInt32LE(b.readUInt32LE(pick(30) + 8) - 1, pick(30) + 12);
  // At the limit less one: a valid time, not counted.
  b.writeUInt32LE(limit - 1, pick(20) + 4);
  return b;
}

const base = join(dir, 'base.pcap');
writeBenchPcap(base, 2000, 'invalid1', 'pcap', BENCH_POINTS.backend, 1000);
const good = readFileSync(base);

for (const ns of [false, true]) {
  const unit = ns ? 'ns' : 'µs';
  void t.test(`invalid times and lengths are counted, the same on both paths (${unit})`, (t) => {
    const path = join(dir, `bad-${unit}.pcap`);
    writeFileSync(path, damage(good, ns));
    const js = jsStats(path);
    t.same(js.invalid, { times: 2, lengths: 1 }, 'the JS reader');
    t.equal(js.frames, 2000, 'every record read, none refused');
    t.equal(js.truncated, undefined);
    for (const chunk of [undefined, 64, 4096]) {
      const fast = fastStats(path, chunk);
      t.same(fast.invalid, js.invalid, `the fast path (chunk ${chunk ?? 'default'})`);
      t.equal(fast.frames, js.frames);
    }
    t.end();
  });
}

void t.test('a file with none: nothing flagged on either path', (t) => {
  t.equal(jsStats(base).invalid, undefined);
  t.equal(fastStats(base).invalid, undefined);
  t.end();
});

void t.test('a file cut after invalid records: counted up to the cut, alike', (t) => {
  const bad = damage(good, false);
  const path = join(dir, 'bad-cut.pcap');
  writeFileSync(path, bad.subarray(0, bad.length - 10));
  const js = openCaptureFile(path);
  t.throws(() => {
    const frames = js.frames();
    while (frames.next().done !== true);
  }, /FILE_TRUNCATED/);
  const fast = openSummaryPcap(path, { chunkSize: 4096 });
  if (fast === null) return t.fail('no fast path');
  t.throws(() => {
    while (fast.next() !== null);
  }, /FILE_TRUNCATED/);
  t.same(js.stats().invalid, { times: 2, lengths: 1 });
  t.same(fast.stats().invalid, js.stats().invalid);
  t.end();
});

for (const fast of [true, false]) {
  const how = fast ? 'native fast path' : 'JS reader and decoder';
  void t.test(`analyze says the file has invalid records, and reads it (${how})`, (t) => {
    const points = (['decap', 'egress', 'backend'] as const).map((name) => {
      const file = join(dir, `${name}.pcap`);
      writeBenchPcap(file, 2000, 'invalid1', 'pcap', BENCH_POINTS[name], 1000);
      return { name, file };
    });
    const clean = analyzeFiles({ points, inventory: EMPTY, selector: {} }, { fast });
    const backend = points[2];
    if (backend === undefined) return t.fail('no backend');
    writeFileSync(backend.file, damage(readFileSync(backend.file), false));
    const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, { fast });
    t.equal(r.verdict.layer, clean.verdict.layer, 'the same verdict: the file is not refused');
    const h = r.captureHealth?.find((x) => x.point === 'backend');
    t.same(h?.invalidRecords, { times: 2, lengths: 1 });
    t.equal(r.captureHealth?.find((x) => x.point === 'decap')?.invalidRecords, undefined);
    if (h === undefined) return t.end();
    t.equal(
      fileFramesCell(h),
      '2000 (2 with an invalid time (a fraction of a second of 10^6 µs, or 10^9 ns, or more), ' +
        '1 with a captured length above the original (wire) length)',
    );
    const caution = (r.caveats ?? []).filter((c) => c.startsWith('backend: '));
    t.equal(caution.length, 1, JSON.stringify(r.caveats));
    t.match(caution[0] ?? '', /has records no capture writes — 2 with an invalid time/);
    t.match(caution[0] ?? '', /read as given \(libpcap reads them, tcpdump flags them\)/);
    t.end();
  });
}

void t.test('the bundle says it: report.md, report.json (schema)', async (t) => {
  const points = (['decap', 'backend'] as const).map((name) => {
    const file = join(dir, `bundle-${name}.pcap`);
    writeBenchPcap(file, 2000, 'invalid1', 'pcap', BENCH_POINTS[name], 1000);
    if (name === 'backend') writeFileSync(file, damage(readFileSync(file), true));
    return { name, file };
  });
  const rd = join(dir, 'rd');
  const argv = points.flatMap((p) => ['--point', `${p.name}=${p.file}`]);
  await runAnalyze([...argv, '--report-dir', rd], () => undefined);
  const md = readFileSync(join(rd, 'report.md'), 'utf8');
  t.match(
    md,
    /2 with an invalid time \(a fraction of a second of 10\^6 µs, or 10\^9 ns, or more\)/,
  );
  const doc = JSON.parse(readFileSync(join(rd, 'report.json'), 'utf8')) as ReportDocument;
  t.same(reportSchemaErrors(doc), [], 'report.json is valid against proto/report.schema.json');
  t.same(doc.captureHealth?.[1]?.invalidRecords, { times: 2, lengths: 1 });
});

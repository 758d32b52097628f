/**
 * A point whose clock is off by more than the correlation window (core/correlate/far-syn.ts):
 * analyze finds the request there by its SYN's ISN, outside the window, and follows it — never
 * "dropped, never reached the backend" for a file that holds the request — with a caution that
 * says how far it was. Every way of reading the files gives the same answer (the native fast
 * path with its gates, the JS reader and decoder, no gates, the later points on a worker thread).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { analyzeFiles } from '../../offline/analyze-files';
import type { AnalyzeFilesOptions } from '../../offline/analyze-files';
import { loadNativeAddon } from '../../native/loader';
import type { Inventory } from '../../common/inventory';
import { checkBundle } from './bundle-check';
import type { ReportDocument } from '../../core/report/report-document';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');

const FRAMES = 4000;
const PROBE_AT = 3000;
const EMPTY: Inventory = { nodes: {}, pods: {} };

function files(t: { teardown(fn: () => void): void }, backendOffsetUs: number, probe = true) {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-clock-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const points = (['decap', 'egress', 'backend'] as const).map((name) => {
    const file = join(dir, `${name}.pcap`);
    const view =
      name === 'backend'
        ? { ...BENCH_POINTS.backend, tsOffsetUs: BENCH_POINTS.backend.tsOffsetUs + backendOffsetUs }
        : BENCH_POINTS[name];
    // Without the probe at the backend, its file holds only the background flows.
    writeBenchPcap(
      file,
      FRAMES,
      'clock0001',
      'pcap',
      view,
      name === 'backend' && !probe ? FRAMES * 2 : PROBE_AT,
    );
    return { name, file };
  });
  return points;
}

const WAYS: { name: string; opts: AnalyzeFilesOptions; native: boolean }[] = [
  { name: 'native fast path', opts: {}, native: true },
  { name: 'no gates', opts: { gate: false }, native: true },
  { name: 'later points on a worker thread', opts: { parallel: true }, native: true },
  { name: 'JS reader and decoder', opts: { fast: false }, native: false },
];

const native = loadNativeAddon().ok;

for (const way of WAYS) {
  void t.test(`backend clock 30 s ahead: the request is followed there (${way.name})`, (t) => {
    if (way.native && !native) {
      t.fail(`the native addon does not load: ${JSON.stringify(loadNativeAddon())}`);
      t.end();
      return;
    }
    const points = files(t, 30_000_000);
    const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, way.opts);
    t.equal(r.verdict.layer, 'preserved', 'not "dropped"');
    const backend = r.points[2];
    t.equal(backend?.status, 'matched');
    t.ok(backend?.matchedBy.includes('tcp-isn'));
    // 30 s plus the backend's own 60 µs against decap's 0.
    t.equal(backend?.outsideWindowNs, String(30_000_060_000));
    t.match(
      r.caveats?.join('\n') ?? '',
      /backend: the request's SYN was found \+30\.0 s from its time at decap, outside the ±10\.0 s window/,
    );
    t.equal(r.points[1]?.outsideWindowNs, undefined, 'egress is within the window');
    t.end();
  });

  void t.test(
    `backend clock 30 s ahead, the request not there: still dropped (${way.name})`,
    (t) => {
      if (way.native && !native) {
        t.fail('the native addon does not load');
        t.end();
        return;
      }
      const points = files(t, 30_000_000, false);
      const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, way.opts);
      t.equal(r.verdict.layer, 'dropped');
      t.equal(r.points[2]?.status, 'not-seen');
      t.equal(r.points[2]?.outsideWindowNs, undefined);
      t.end();
    },
  );
}

void t.test('clocks within the window: no second pass result, no caution', (t) => {
  const points = files(t, 5_000_000);
  const r = analyzeFiles({ points, inventory: EMPTY, selector: {} });
  t.equal(r.verdict.layer, 'preserved');
  t.equal(r.points[2]?.outsideWindowNs, undefined);
  t.notMatch(r.caveats?.join('\n') ?? '', /outside the/);
  t.end();
});

void t.test('the bundle says it: report.json (valid against the schema), report.md', (t) => {
  const points = files(t, 30_000_000);
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-clock-bundle-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  execFileSync(
    process.execPath,
    [
      bin,
      'analyze',
      ...points.flatMap((p) => ['--point', `${p.name}=${p.file}`]),
      '--report-dir',
      dir,
    ],
    { stdio: 'pipe' },
  );
  const doc: ReportDocument = checkBundle(t, dir, {
    points: ['decap', 'egress', 'backend'],
    layer: 'preserved',
  });
  t.equal(doc.points[2]?.outsideWindowNs, String(30_000_060_000));
  t.match(readFileSync(join(dir, 'report.md'), 'utf8'), /found \+30\.0 s from its time at decap/);
  t.end();
});

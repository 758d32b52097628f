/**
 * A point whose clock is off by more than the correlation window (core/correlate/far-syn.ts):
 * analyze finds the request there by its SYN's ISN, outside the window, and follows it — never
 * "dropped, never reached the backend" for a file that holds the request — with a caution that
 * says how far it was. Every way of reading the files gives the same answer (the native fast
 * path with its gates, the JS reader and decoder, no gates, the later points on a worker thread).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
import { shiftPcapTimes } from './pcap-shift';
import { pcapWithTsoffset } from './pcapng-writer';
import { tsharkColumn } from './tshark';

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
    `backend clock 30 s ahead, the request not there: unknown, not dropped (${way.name})`,
    (t) => {
      if (way.native && !native) {
        t.fail('the native addon does not load');
        t.end();
        return;
      }
      // Its frames all lie 30 s after the request: a clock that far off cannot be told from a
      // capture made at another time, so "never reached the backend" would say more than was
      // seen (a first version said dropped).
      const points = files(t, 30_000_000, false);
      const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, way.opts);
      t.equal(r.verdict.layer, 'unknown');
      t.match(
        r.verdict.reason ?? '',
        /the request was seen at egress but not at backend, and the backend capture does not cover the request's time \(\S+Z by decap's clock\): its frames run from \S+Z to \S+Z by its own clock, so it begins \d+\.\d+ s after the request, more than the 10\.000 s the points' clocks are allowed to differ/,
      );
      t.equal(r.points[2]?.status, 'not-seen');
      t.equal(r.points[2]?.outsideWindowNs, undefined);
      // Within the window the capture covers the request's time: then it is a drop.
      const near = analyzeFiles(
        { points: files(t, 5_000_000, false), inventory: EMPTY, selector: {} },
        way.opts,
      );
      t.equal(near.verdict.layer, 'dropped', 'a backend clock 5 s ahead: dropped');
      // A capture of the hour before: it ends before the request.
      const hourBefore = files(t, 0, false);
      const backendFile = hourBefore[2]?.file ?? '';
      writeFileSync(backendFile, shiftPcapTimes(readFileSync(backendFile), -3_600_000_000_000n));
      const before = analyzeFiles({ points: hourBefore, inventory: EMPTY, selector: {} }, way.opts);
      t.equal(before.verdict.layer, 'unknown');
      t.match(before.verdict.reason ?? '', /so it ends 3\d{3}\.\d{3} s before the request/);
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

/** if_tsoffset 1800000000 s: 2027-01-15T08:00:00Z. */
const OFFSET_S = 1_800_000_000n;

/**
 * The three points at 2027 (the benchmark files moved by 10^8 s), decap written as pcapng whose
 * IDB carries if_tsoffset = 1800000000 and whose packets hold their times minus it (1970 times
 * read without the offset); egress and backend classic pcap at the right times.
 */
function tsoffsetFiles(t: { teardown(fn: () => void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-tsoffset-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return (['decap', 'egress', 'backend'] as const).map((name) => {
    const raw = join(dir, `${name}-raw.pcap`);
    writeBenchPcap(raw, FRAMES, 'tsoff0001', 'pcap', BENCH_POINTS[name], PROBE_AT);
    const at2027 = shiftPcapTimes(readFileSync(raw), (OFFSET_S - 1_700_000_000n) * 1_000_000_000n);
    const file = join(dir, name === 'decap' ? 'decap.pcapng' : `${name}.pcap`);
    writeFileSync(file, name === 'decap' ? pcapWithTsoffset(at2027, OFFSET_S) : at2027);
    return { name, file };
  });
}

for (const way of WAYS) {
  void t.test(
    `decap pcapng with if_tsoffset 1800000000: 2027, no clock caution (${way.name})`,
    (t) => {
      if (way.native && !native) {
        t.fail('the native addon does not load');
        t.end();
        return;
      }
      const points = tsoffsetFiles(t);
      const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, way.opts);
      t.equal(r.verdict.layer, 'preserved');
      const decap = BigInt(r.points[0]?.firstTsNs ?? '0');
      t.ok(decap >= OFFSET_S * 1_000_000_000n, `decap's times are in 2027 (${String(decap)} ns)`);
      t.ok(decap < (OFFSET_S + 60n) * 1_000_000_000n, 'within the minute the files cover');
      for (const p of r.points)
        t.equal(p.outsideWindowNs, undefined, `${p.name} within the window`);
      t.notMatch(r.caveats?.join('\n') ?? '', /outside the|clock/, 'no clock caution');
      for (const c of r.clock ?? []) {
        const off = BigInt(c.offsetNs ?? '0');
        t.ok(
          off > -1_000_000n && off < 1_000_000n,
          `${c.point}: offset below 1 ms (${c.offsetNs})`,
        );
      }
      t.end();
    },
  );
}

void t.test('if_tsoffset: report.md in 2027 and evidence.pcapng on the same clock', (t) => {
  const points = tsoffsetFiles(t);
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-tsoffset-bundle-'));
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
  t.match(readFileSync(join(dir, 'report.md'), 'utf8'), /2027-01-15T08:00:00\.0/);
  const doc = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as ReportDocument;
  t.same(doc.evidence?.problems ?? [], [], 'every point in evidence.pcapng (no frame "changed")');
  t.same(
    doc.evidence?.interfaces.map((i) => i.point),
    ['decap', 'egress', 'backend'],
    'one interface per point',
  );
  // tshark's times of the evidence packets: all on decap's clock, in 2027, seconds apart at most.
  const epoch = tsharkColumn(join(dir, 'evidence.pcapng'), 'frame.time_epoch').map(Number);
  t.ok(epoch.length >= 9, `packets of the three points (${epoch.length})`);
  for (const s of epoch) t.ok(s >= 1_800_000_000 && s < 1_800_000_060, `${s}: 2027`);
  t.end();
});

/**
 * pcapng packet blocks no writer gives — an Enhanced Packet Block (or an obsolete Packet Block)
 * whose captured length is above its original (wire) length — are read as given, as libpcap reads
 * them, and counted, as classic pcap records are (pcap-invalid-records.test.ts): the same counts
 * from the JS reader (offline/pcap-file.ts) and from the fast path (summary_run_ng through
 * offline/summary-file.ts, with the blocks it leaves to the JS parser), in either byte order,
 * whatever the chunk size; `analyze` names them in Capture health and in the same caution, on both
 * paths. A pcapng block has no fraction of a second: `times` stays 0. Fails (never skips) without
 * the addon.
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
import { fastStats, jsStats } from './capture-stats-fixtures';
import { block, epb, idb, pcapWithTsoffset, shb, spb, u16, u32 } from './pcapng-writer';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const EMPTY: Inventory = { nodes: {}, pods: {} };
const dir = mkdtempSync(join(tmpdir(), 'ht-ng-invalid-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The file offsets of the Enhanced Packet Blocks of a pcapng file in byte order `le`. */
function epbOffsets(file: Buffer, le: boolean): number[] {
  const out: number[] = [];
  const u = (at: number): number => (le ? file.readUInt32LE(at) : file.readUInt32BE(at));
  for (let at = 0; at + 8 <= file.length; at += u(at + 4)) if (u(at) === 6) out.push(at);
  return out;
}

/**
 * `file` with three Enhanced Packet Blocks whose original length is one below, and one whose
 * original length is equal to, their captured length (valid: not counted).
 */
function shorten(file: Buffer, le: boolean): Buffer {
  const b = Buffer.from(file);
  const at = epbOffsets(b, le);
  const set = (k: number, less: number): void => {
    const o = at[at.length - k];
    if (o === undefined) throw new Error('too few blocks');
    const caplen = le ? b.readUInt32LE(o + 20) : b.readUInt32BE(o + 20);
    if (le) b.writeUInt32LE(caplen - less, o + 24);
    else b.writeUInt32BE(caplen - less, o + 24);
  };
  set(50, 1);
  set(40, 1);
  set(30, 0);
  set(5, 1);
  return b;
}

const basePcap = join(dir, 'base.pcap');
writeBenchPcap(basePcap, 2000, 'invalid1', 'pcap', BENCH_POINTS.backend, 1000);
const pcap = readFileSync(basePcap);

for (const le of [true, false]) {
  const order = le ? 'little-endian' : 'big-endian';
  void t.test(`Enhanced Packet Blocks: counted, the same on both paths (${order})`, (t) => {
    const path = join(dir, `bad-${order}.pcapng`);
    writeFileSync(path, shorten(pcapWithTsoffset(pcap, 0n, { le }), le));
    const js = jsStats(path);
    t.same(js.invalid, { times: 0, lengths: 3 }, 'the JS reader');
    t.equal(js.frames, 2000, 'every block read, none refused');
    t.equal(js.truncated, undefined);
    for (const chunk of [undefined, 64, 4096]) {
      const fast = fastStats(path, chunk);
      t.same(fast.invalid, js.invalid, `the fast path (chunk ${chunk ?? 'default'})`);
      t.equal(fast.frames, js.frames);
    }
    t.end();
  });
}

void t.test('a pcapng file with none: nothing flagged on either path', (t) => {
  const path = join(dir, 'good.pcapng');
  writeFileSync(path, pcapWithTsoffset(pcap, 0n));
  t.equal(jsStats(path).invalid, undefined);
  t.equal(fastStats(path).invalid, undefined);
  t.end();
});

/**
 * Packet blocks the fast path leaves to the JS parser, among the runs it takes itself: interface 1
 * has a resolution of 2^-40 s (a divisor above 32 bits: not in the addon's table), block 2 is the
 * obsolete Packet Block, block 3 a Simple Packet Block (no captured length: nothing to check).
 */
function mixed(le: boolean): Buffer {
  const frame = Buffer.alloc(60, 0xab);
  // Obsolete Packet Block (pcapng §A): interface (16) | drops (16) | ts high | ts low | caplen | len.
  const pb = (iface: number, wire: number): Buffer =>
    block(
      2,
      Buffer.concat([
        u16(iface, le),
        u16(0, le),
        u32(0, le),
        u32(1000, le),
        u32(frame.length, le),
        u32(wire, le),
        frame,
      ]),
      le,
    );
  return Buffer.concat([
    shb(le),
    idb(le, 1, 'eth0', null),
    idb(le, 1, 'eth1', 0x80 | 40),
    epb(le, 0, 1000n, frame, 59), // native run: counted
    epb(le, 0, 1001n, frame, 60),
    epb(le, 1, 1n << 40n, frame, 10), // the JS parser: counted
    epb(le, 1, 2n << 40n, frame, 61),
    pb(0, 59), // the JS parser: counted
    pb(0, 600),
    spb(le, frame),
    // An SPB has no captured length: its packet is its original length (10), cut: never counted.
    block(3, Buffer.concat([u32(10, le), frame]), le),
    epb(le, 0, 1002n, frame, 1), // native run again: counted
  ]);
}

void t.test('blocks the fast path leaves to the JS parser are counted once, alike', (t) => {
  for (const le of [true, false]) {
    const path = join(dir, `mixed-${String(le)}.pcapng`);
    writeFileSync(path, mixed(le));
    const js = jsStats(path);
    t.same(js.invalid, { times: 0, lengths: 4 }, `the JS reader (le ${String(le)})`);
    t.equal(js.frames, 9);
    for (const chunk of [undefined, 64]) {
      const fast = fastStats(path, chunk);
      t.same(fast.invalid, js.invalid, `the fast path (le ${String(le)}, chunk ${chunk ?? '-'})`);
      t.equal(fast.frames, js.frames);
    }
  }
  t.end();
});

void t.test('a pcapng file cut after invalid blocks: counted up to the cut, alike', (t) => {
  const bad = shorten(pcapWithTsoffset(pcap, 0n), true);
  const path = join(dir, 'bad-cut.pcapng');
  // Inside the fifth block from the end, the last one with a longer captured length.
  const at = epbOffsets(bad, true);
  writeFileSync(path, bad.subarray(0, (at[at.length - 5] ?? 0) + 10));
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
  t.same(js.stats().invalid, { times: 0, lengths: 2 }, 'the third is in the cut block: not read');
  t.same(fast.stats().invalid, js.stats().invalid);
  t.end();
});

for (const fast of [true, false]) {
  const how = fast ? 'native fast path' : 'JS reader and decoder';
  void t.test(`analyze says the pcapng file has invalid blocks, and reads it (${how})`, (t) => {
    const points = (['decap', 'egress', 'backend'] as const).map((name) => {
      const file = join(dir, `${name}.pcapng`);
      writeBenchPcap(file, 2000, 'invalid1', 'pcapng', BENCH_POINTS[name], 1000);
      return { name, file };
    });
    const clean = analyzeFiles({ points, inventory: EMPTY, selector: {} }, { fast });
    const backend = points[2];
    if (backend === undefined) return t.fail('no backend');
    writeFileSync(backend.file, shorten(readFileSync(backend.file), true));
    const r = analyzeFiles({ points, inventory: EMPTY, selector: {} }, { fast });
    t.equal(r.verdict.layer, clean.verdict.layer, 'the same verdict: the file is not refused');
    const h = r.captureHealth?.find((x) => x.point === 'backend');
    t.same(h?.invalidRecords, { times: 0, lengths: 3 });
    t.equal(r.captureHealth?.find((x) => x.point === 'decap')?.invalidRecords, undefined);
    if (h === undefined) return t.end();
    t.equal(fileFramesCell(h), '2000 (3 with a captured length above the original (wire) length)');
    const caution = (r.caveats ?? []).filter((c) => c.startsWith('backend: '));
    t.equal(caution.length, 1, JSON.stringify(r.caveats));
    t.match(
      caution[0] ?? '',
      /has records no capture writes — 3 with a captured length above the original \(wire\) length: they were read as given \(libpcap reads them, tcpdump flags them\)/,
    );
    t.end();
  });
}

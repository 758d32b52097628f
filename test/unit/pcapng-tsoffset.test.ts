/**
 * pcapng if_tsoffset (draft-ietf-opsawg-pcapng §4.2, IDB option 14: a signed 64-bit count of
 * seconds added to every time of the interface). It was ignored, so a file whose IDB said
 * if_tsoffset = 1800000000 read as 1970 where tshark shows 2027. Now every read path adds it —
 * the JS reader (`fast: false`, decode, evidence) and the native fast path (summary_run_ng, and
 * the JS parser's lone blocks) — and gives tshark's times; a time the offset takes out of what
 * hoptrace carries (0 to 2^64 − 1 ns) is FILE_TIME_RANGE on both paths, never a wrapped time.
 *
 *   SHB | IDB[if_name, if_tsresol, if_tsoffset] ... | EPB[ts = time − offset, in the IDB's units]
 *
 * Fails (never skips) without the addon or tshark.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runDecode } from '../../cli/decode';
import { utcPacketTime } from '../../core/report/times';
import { writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { openCaptureFile } from '../../offline/pcap-file';
import { openSummaryPcap, summaryEvents } from '../../offline/summary-file';
import { replayCaptureFile } from '../../offline/replay';
import { isHoptraceError } from '../../common/errors';
import { shiftPcapTimes } from './pcap-shift';
import {
  END,
  block,
  epb,
  idb,
  option,
  pcapWithTsoffset,
  shb,
  spb,
  u16,
  u32,
} from './pcapng-writer';
import { tsharkColumn } from './tshark';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'ht-tsoffset-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const ctx = { point: 'p', node: 'n' };
const S = 1_000_000_000n;
/** The reviewer's offset: 2027-01-15T08:00:00Z. */
const OFFSET = 1_800_000_000n;
/** The benchmark capture starts at 1_700_000_000 s; moved by this it starts at OFFSET. */
const TO_2027 = (OFFSET - 1_700_000_000n) * S;

/** `count` benchmark frames as a classic pcap moved to 2027 (the times the pcapng must give). */
function pcap2027(name: string, count: number): Buffer {
  const path = join(dir, `${name}.pcap`);
  writeBenchPcap(path, count, 'tsoff1');
  return shiftPcapTimes(readFileSync(path), TO_2027);
}

/** The times each read path gives for `path`, or the error it ends with. */
function times(path: string, chunkSize?: number) {
  const js: bigint[] = [];
  const replay: bigint[] = [];
  const fast: bigint[] = [];
  const errors: string[] = [];
  let inRuns = 0;
  const code = (e: unknown): string => (isHoptraceError(e) ? e.code : String(e));
  try {
    for (const f of openCaptureFile(path).frames()) js.push(f.tsNs);
  } catch (e) {
    errors.push(`js ${code(e)}`);
  }
  try {
    for (const ev of replayCaptureFile(path, ctx)) replay.push(ev.tsNs);
  } catch (e) {
    errors.push(`replay ${code(e)}`);
  }
  try {
    const reader = openSummaryPcap(path, chunkSize === undefined ? {} : { chunkSize });
    if (reader === null) throw new Error('the fast path did not take the file');
    const counting = {
      path: reader.path,
      format: reader.format,
      decode: reader.decode,
      next: () => {
        const b = reader.next();
        if (b !== null && b.count > 1) inRuns += b.count;
        return b;
      },
      stats: () => reader.stats(),
      seekPoints: () => reader.seekPoints(),
      close: () => {
        reader.close();
      },
    };
    for (const ev of summaryEvents(counting, { ...ctx, iface: 'file' })) fast.push(ev.tsNs);
  } catch (e) {
    errors.push(`fast ${code(e)}`);
  }
  return { js, replay, fast, errors, inRuns };
}

/** The times of a classic LE µs pcap, in ns. */
function pcapTimes(pcap: Buffer): bigint[] {
  const out: bigint[] = [];
  for (let at = 24; at + 16 <= pcap.length; at += 16 + pcap.readUInt32LE(at + 8))
    out.push(BigInt(pcap.readUInt32LE(at)) * S + BigInt(pcap.readUInt32LE(at + 4)) * 1000n);
  return out;
}

/** Where two lists of times first differ, as a line ('same' when they do not): a short failure. */
function firstDifference(got: readonly bigint[], want: readonly bigint[]): string {
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    if (got[i] !== want[i])
      return `frame ${i + 1}: ${String(got[i])} ns, want ${String(want[i])} (of ${want.length})`;
  }
  return 'same';
}

/** tshark's frame.time_epoch ("1800000000.000010000") as ns. */
function epochNs(s: string): bigint {
  const [sec = '', frac = ''] = s.split('.');
  return BigInt(sec) * S + BigInt(frac.padEnd(9, '0').slice(0, 9));
}

for (const le of [true, false]) {
  for (const tsresol of [null, 9]) {
    const what = `${le ? 'LE' : 'BE'}, if_tsresol ${tsresol ?? 'default (µs)'}`;
    void t.test(`if_tsoffset 1800000000 (${what}): 2027 on every read path, as tshark`, (t) => {
      const pcap = pcap2027(`bench-${String(le)}-${String(tsresol)}`, 3000);
      const want = pcapTimes(pcap);
      const path = join(dir, `offset-${String(le)}-${String(tsresol)}.pcapng`);
      writeFileSync(path, pcapWithTsoffset(pcap, OFFSET, { le, tsresol, name: 'eth0' }));
      // The file as written holds 1970 times (the offset is what moves them to 2027).
      t.ok(readFileSync(path).includes(u32(Number(OFFSET), le)), 'the IDB carries the offset');
      const tshark = tsharkColumn(path, 'frame.time_epoch').map(epochNs);
      t.equal(firstDifference(tshark, want), 'same', 'tshark gives the times it was made from');
      t.ok((want[0] ?? 0n) >= OFFSET * S, 'which are in 2027');
      const lines: string[] = [];
      t.equal(
        runDecode(['--json', path], (l) => lines.push(l)),
        0,
        'hoptrace decode reads it',
      );
      t.same(
        lines.slice(0, 3).map((l) => (JSON.parse(l) as { time: string }).time),
        want.slice(0, 3).map((ns) => utcPacketTime(ns)),
        'hoptrace decode prints the 2027 times',
      );
      t.match(lines[0] ?? '', /"time":"2027-/);
      for (const chunk of [undefined, 100, 1500]) {
        const got = times(path, chunk);
        const at = `chunk ${chunk ?? 'default'}`;
        t.same(got.errors, [], `${at}: no error`);
        t.equal(firstDifference(got.js, want), 'same', `${at}: the JS reader`);
        t.equal(firstDifference(got.replay, want), 'same', `${at}: the JS reader and decoder`);
        t.equal(firstDifference(got.fast, want), 'same', `${at}: the fast path`);
        if (chunk === undefined)
          t.ok(got.inRuns > want.length / 2, 'most frames in the addon runs (the C side added it)');
      }
      t.end();
    });
  }
}

void t.test('two interfaces, one offset ahead and one behind; a simple packet block', (t) => {
  const pcap = pcap2027('two', 400);
  const want = pcapTimes(pcap);
  const frames: Buffer[] = [];
  for (let at = 24; at + 16 <= pcap.length; at += 16 + pcap.readUInt32LE(at + 8))
    frames.push(pcap.subarray(at + 16, at + 16 + pcap.readUInt32LE(at + 8)));
  const parts = [shb(true), idb(true, 1, 'eth0', null, OFFSET), idb(true, 1, 'eth1', 9, -3600n)];
  frames.forEach((f, i) => {
    const ns = want[i] ?? 0n;
    // Runs of ten on each interface: eth1's times are an hour ahead of what they mean.
    parts.push(
      Math.floor(i / 10) % 2 === 0
        ? epb(true, 0, (ns - OFFSET * S) / 1000n, f)
        : epb(true, 1, ns + 3600n * S, f),
    );
  });
  // A simple packet block has no time: 0, with no offset added, on both paths.
  parts.push(spb(true, frames[0]!));
  const path = join(dir, 'two.pcapng');
  writeFileSync(path, Buffer.concat(parts));
  const got = times(path);
  t.same(got.errors, []);
  t.equal(firstDifference(got.js, [...want, 0n]), 'same', 'the JS reader');
  t.equal(firstDifference(got.fast, [...want, 0n]), 'same', 'the fast path');
  const tshark = tsharkColumn(path, 'frame.time_epoch').map(epochNs);
  t.equal(firstDifference(tshark, [...want, 0n]), 'same', 'tshark');
  t.end();
});

void t.test(
  'an offset that takes a time out of 0 … 2^64 − 1 ns: FILE_TIME_RANGE, not a wrap',
  (t) => {
    const pcap = pcap2027('range', 120);
    const frames: Buffer[] = [];
    for (let at = 24; at + 16 <= pcap.length; at += 16 + pcap.readUInt32LE(at + 8))
      frames.push(pcap.subarray(at + 16, at + 16 + pcap.readUInt32LE(at + 8)));
    // The last ns hoptrace carries is 2^64 − 1 = 18446744073 s + 709551615 ns.
    const top = 18_446_744_073n;
    const cases: { name: string; offset: bigint; ts: bigint; ok: boolean }[] = [
      { name: 'the last ns that fits', offset: top, ts: 709_551_615n, ok: true },
      { name: 'one ns past 2^64', offset: top, ts: 709_551_616n, ok: false },
      { name: 'the largest offset', offset: 2n ** 63n - 1n, ts: 0n, ok: false },
      { name: 'before 1970', offset: -1n, ts: 999_999_999n, ok: false },
      { name: 'the smallest offset', offset: -(2n ** 63n), ts: 2n ** 64n - 1n, ok: false },
    ];
    for (const c of cases) {
      // Frames on interface 0 (no offset), then from frame 60 on interface 1 (ns, `offset`).
      const parts = [shb(true), idb(true, 1, 'eth0', null), idb(true, 1, 'eth1', 9, c.offset)];
      frames.forEach((f, i) => {
        parts.push(
          i < 59 ? epb(true, 0, 1_700_000_000_000_000n + BigInt(i), f) : epb(true, 1, c.ts, f),
        );
      });
      const path = join(dir, `range-${c.name.replace(/\W+/g, '-')}.pcapng`);
      writeFileSync(path, Buffer.concat(parts));
      for (const chunk of [undefined, 100]) {
        const got = times(path, chunk);
        const at = `${c.name} (chunk ${chunk ?? 'default'})`;
        if (c.ok) {
          t.same(got.errors, [], `${at}: read`);
          t.equal(got.fast.at(-1), 2n ** 64n - 1n, `${at}: 2^64 − 1 ns on the fast path`);
          t.equal(got.js.at(-1), 2n ** 64n - 1n, `${at}: and the JS reader`);
        } else {
          t.same(
            got.errors,
            ['js FILE_TIME_RANGE', 'replay FILE_TIME_RANGE', 'fast FILE_TIME_RANGE'],
            `${at}: refused on every path`,
          );
          t.equal(got.js.length, 59, `${at}: after the frames before it (JS)`);
          t.equal(got.fast.length, 59, `${at}: after the frames before it (fast)`);
        }
      }
    }
    const path = join(dir, 'range-one-ns-past-2-64.pcapng');
    t.throws(() => [...openCaptureFile(path).frames()], {
      code: 'FILE_TIME_RANGE',
      message: /packet 60 of interface 1 .*if_tsoffset of 18446744073 s .*past 2\^64 ns/,
    });
    t.end();
  },
);

void t.test('if_tsoffset refused as libpcap refuses it: not 8 bytes, or twice', (t) => {
  const frame = Buffer.alloc(60, 0x11);
  const idbWith = (...opts: Buffer[]): Buffer =>
    block(
      1,
      Buffer.concat([u16(1, true), u16(0, true), u32(262144, true), ...opts, END(true)]),
      true,
    );
  const cases: [string, Buffer, RegExp][] = [
    ['4 bytes', idbWith(option(14, u32(1, true), true)), /if_tsoffset option of length 4, not 8/],
    [
      'twice',
      idbWith(option(14, Buffer.alloc(8), true), option(14, Buffer.alloc(8), true)),
      /more than one if_tsoffset option/,
    ],
  ];
  for (const [name, bad, message] of cases) {
    const path = join(dir, `refused-${name}.pcapng`);
    writeFileSync(path, Buffer.concat([shb(true), bad, epb(true, 0, 1n, frame)]));
    t.throws(() => [...openCaptureFile(path).frames()], { code: 'FILE_BAD_BLOCK', message }, name);
    t.same(times(path).errors, [
      'js FILE_BAD_BLOCK',
      'replay FILE_BAD_BLOCK',
      'fast FILE_BAD_BLOCK',
    ]);
  }
  t.end();
});

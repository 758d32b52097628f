/**
 * pcapng through the fast file source (offline/summary-file.ts: the addon takes runs of
 * Enhanced Packet Blocks from the PcapngReader's buffer, the JS parser every other block) against
 * the JS reader + reference decoder: the same events in the same order, the same statistics and
 * the same errors — for both byte orders, several interfaces of different link types and
 * timestamp resolutions, sections, statistics and other blocks between packets, simple and
 * obsolete packet blocks, blocks larger than the chunk, and blocks broken in every way the JS
 * reader refuses; at chunk sizes that cut blocks everywhere. Fails (never skips) without the addon.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { openSummaryPcap, summaryEvents } from '../../offline/summary-file';
import { SUMMARY_LAYOUT, SUMMARY_STOP } from '../../core/decode/summary';
import { replayCaptureFile } from '../../offline/replay';
import { json, same, sameUnderDamage, type Outcome } from './same-events';
import { block, END, epb, idb, isb, option, pad4, shb, spb, u16, u32 } from './pcapng-writer';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const ctx = { point: 'p', node: 'n' };

/** A reader's stats as text (the span's times are bigints). */
const statsText = (s: object): string =>
  JSON.stringify(s, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

function reference(path: string): Outcome {
  const out: Outcome = { events: [], error: null, stats: null };
  try {
    for (const ev of replayCaptureFile(path, ctx, undefined, (_f, s) => {
      out.stats = statsText(s);
    }))
      out.events.push(json(ev));
  } catch (e: unknown) {
    out.error = e instanceof Error ? e.message : String(e);
  }
  return out;
}

/** The fast source; also how many frames came in blocks of more than one (the addon's runs). */
function fast(path: string, chunkSize?: number): Outcome & { format: string; inRuns: number } {
  const out = {
    events: [] as string[],
    error: null as string | null,
    stats: null as string | null,
  };
  let format = 'none';
  let inRuns = 0;
  try {
    const reader = openSummaryPcap(path, chunkSize === undefined ? {} : { chunkSize });
    if (reader === null) throw new Error('the fast path did not take the file');
    format = reader.format;
    // summaryEvents over a reader that counts the blocks it hands out.
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
    for (const ev of summaryEvents(counting, { ...ctx, iface: 'file' })) out.events.push(json(ev));
    out.stats = statsText(reader.stats());
  } catch (e: unknown) {
    out.error = e instanceof Error ? e.message : String(e);
  }
  return { ...out, format, inRuns };
}

/** The frames (data and µs time) of a classic LE µs pcap. */
function framesOf(file: Buffer): { us: bigint; data: Buffer }[] {
  const out: { us: bigint; data: Buffer }[] = [];
  let at = 24;
  while (at + 16 <= file.length) {
    const caplen = file.readUInt32LE(at + 8);
    const us = BigInt(file.readUInt32LE(at)) * 1_000_000n + BigInt(file.readUInt32LE(at + 4));
    out.push({ us, data: file.subarray(at + 16, at + 16 + caplen) });
    at += 16 + caplen;
  }
  return out;
}

/** The frames of the benchmark capture (bench/pcap-writer.ts), `count` of them, written in `dir`. */
function benchFrames(dir: string, count: number): { us: bigint; data: Buffer }[] {
  const base = join(dir, 'bench.pcap');
  writeBenchPcap(base, count, 'abc123');
  return framesOf(readFileSync(base));
}

/** An EPB carrying options (epb_flags, a comment) after its data. */
function epbWithOptions(le: boolean, iface: number, ts: bigint, data: Buffer): Buffer {
  const body = Buffer.concat([
    u32(iface, le),
    u32(Number(ts >> 32n), le),
    u32(Number(ts & 0xffffffffn), le),
    u32(data.length, le),
    u32(data.length, le),
    pad4(data),
    option(2, u32(1, le), le),
    option(1, Buffer.from('inbound'), le),
    END(le),
  ]);
  return block(6, body, le);
}

/** The obsolete Packet Block (type 2): interface id (16) | drops (16) | ts | caplen | len | data. */
function pb(le: boolean, iface: number, ts: bigint, data: Buffer): Buffer {
  const body = Buffer.concat([
    u16(iface, le),
    u16(0, le),
    u32(Number(ts >> 32n), le),
    u32(Number(ts & 0xffffffffn), le),
    u32(data.length, le),
    u32(data.length, le),
    pad4(data),
  ]);
  return block(2, body, le);
}

/** Offset of the n-th (0-based) block of type `type` after the section header. */
function blockAt(file: Buffer, type: number, n: number, le = true): number {
  const rd = (at: number): number => (le ? file.readUInt32LE(at) : file.readUInt32BE(at));
  let at = 0;
  let seen = 0;
  while (at + 8 <= file.length) {
    if (rd(at) === type && seen++ === n) return at;
    at += rd(at + 4);
  }
  throw new Error(`no block ${n} of type ${type}`);
}

void t.test('pcapng: same events, statistics and errors as the JS reader', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-pcapng-'));
  try {
    const frames = benchFrames(dir, 3000);
    const raw = (d: Buffer): Buffer => d.subarray(14); // Ethernet → RAW IP (linktype 101)
    const cases: { name: string; bytes: Buffer; runs: boolean | null }[] = [];
    for (const le of [true, false]) {
      const tag = le ? 'LE' : 'BE';
      cases.push({
        name: `one interface ${tag}, µs`,
        bytes: Buffer.concat([
          shb(le),
          idb(le, 1, 'eth0', null),
          ...frames.map((f) => epb(le, 0, f.us, f.data)),
        ]),
        runs: true,
      });
      // Two interfaces (Ethernet in ns, RAW IP in ms), runs of 1, 2, 5 and 50 blocks.
      const mixed: Buffer[] = [shb(le), idb(le, 1, 'veth1', 9), idb(le, 101, 'wg0', 3)];
      let k = 0;
      for (const run of [1, 2, 5, 50, 1, 50, 2, 5, 1]) {
        for (let j = 0; j < run * 10 && k < frames.length; j++, k++) {
          const f = frames[k]!;
          mixed.push(
            (k / 10) % 2 < 1
              ? epb(le, 0, f.us * 1000n + 7n, f.data)
              : epb(le, 1, f.us / 1000n, raw(f.data)),
          );
        }
        mixed.push(
          run % 2 === 0
            ? epb(le, 1, frames[k]!.us / 1000n, raw(frames[k]!.data))
            : epb(le, 0, frames[k]!.us * 1000n, frames[k]!.data),
        );
        k++;
      }
      cases.push({ name: `two interfaces ${tag}`, bytes: Buffer.concat(mixed), runs: true });
      // Packet by packet, as `dumpcap -i eth0 -i wg0` writes them.
      cases.push({
        name: `interleaved ${tag}`,
        bytes: Buffer.concat([
          shb(le),
          idb(le, 1, 'eth0', null),
          idb(le, 101, 'wg0', 9),
          ...frames.map((f, i) =>
            i % 2 === 0 ? epb(le, 0, f.us, f.data) : epb(le, 1, f.us * 1000n, raw(f.data)),
          ),
        ]),
        runs: true,
      });
    }
    // Other blocks between packets: statistics (with drops), name resolution, a custom block,
    // packet blocks with options, simple and obsolete packet blocks.
    {
      const le = true;
      const parts: Buffer[] = [shb(le), idb(le, 1, null, null), idb(le, 1, 'eth1', 6)];
      frames.slice(0, 1200).forEach((f, i) => {
        if (i % 100 === 17)
          parts.push(isb(le, i % 2, { ifrecv: BigInt(i), ifdrop: BigInt(i % 7) }));
        if (i % 250 === 3) parts.push(block(4, Buffer.concat([u16(0, le), u16(0, le)]), le));
        if (i % 300 === 5)
          parts.push(block(0x00000bad, Buffer.concat([u32(32473, le), Buffer.from('abcd')]), le));
        if (i % 90 === 11) parts.push(epbWithOptions(le, 1, f.us, f.data));
        else if (i % 130 === 12) parts.push(spb(le, f.data));
        else if (i % 170 === 13) parts.push(pb(le, 1, f.us, f.data));
        else parts.push(epb(le, i % 3 === 0 ? 0 : 1, f.us, f.data));
      });
      parts.push(isb(le, 0, { ifdrop: 5n, osdrop: 6n }), isb(le, 1, { ifdrop: 9n }));
      cases.push({ name: 'blocks between packets', bytes: Buffer.concat(parts), runs: true });
    }
    // Sections: a little-endian one, then a big-endian one with interfaces of its own.
    cases.push({
      name: 'two sections',
      bytes: Buffer.concat([
        shb(true),
        idb(true, 1, 'a', null),
        ...frames.slice(0, 700).map((f) => epb(true, 0, f.us, f.data)),
        isb(true, 0, { ifdrop: 3n }),
        shb(false),
        idb(false, 101, 'b', 9),
        idb(false, 1, 'c', 9),
        ...frames
          .slice(700, 1400)
          .map((f, i) =>
            i % 20 < 10
              ? epb(false, 0, f.us * 1000n, raw(f.data))
              : epb(false, 1, f.us * 1000n, f.data),
          ),
        isb(false, 1, { osdrop: 4n }),
      ]),
      runs: true,
    });
    // Resolutions: seconds and 2^-20 s go to the addon; 2^-40 s and 10^-19 s (a divisor above
    // 32 bits) are read by the JS parser one block at a time.
    for (const res of [0, 0x94, 0xa8, 19]) {
      const scale = (us: bigint): bigint =>
        res === 0
          ? us / 1_000_000n
          : res === 0x94
            ? (us << 20n) / 1_000_000n
            : res === 0xa8
              ? (us << 40n) / 1_000_000n
              : us * 10n ** 13n;
      cases.push({
        name: `tsresol 0x${res.toString(16)}`,
        bytes: Buffer.concat([
          shb(true),
          idb(true, 1, null, res),
          ...frames
            .slice(0, 400)
            .map((f) => epb(true, 0, scale(f.us) & 0xffffffffffffffffn, f.data)),
        ]),
        runs: res === 0 || res === 0x94,
      });
    }
    // Packet blocks larger than the chunk (the buffer grows), between ordinary ones.
    cases.push({
      name: 'big blocks',
      bytes: Buffer.concat([
        shb(true),
        idb(true, 1, null, null),
        ...frames
          .slice(0, 60)
          .map((f, i) =>
            epb(
              true,
              0,
              f.us,
              i % 9 === 4 ? Buffer.concat([f.data, Buffer.alloc(300_000 + i, 0x41)]) : f.data,
            ),
          ),
      ]),
      runs: true,
    });
    // Interfaces described between packets, 700 of them, packets of any earlier one (the addon's
    // table grows as they come).
    {
      const parts: Buffer[] = [shb(true)];
      frames.slice(0, 1400).forEach((f, i) => {
        if (i % 2 === 0)
          parts.push(idb(true, i % 4 === 0 ? 1 : 101, `if${i / 2}`, i % 3 === 0 ? 9 : null));
        const id = (i * 7919) % (Math.floor(i / 2) + 1);
        const eth = id % 2 === 0;
        const ts = id % 3 === 0 ? f.us * 1000n : f.us;
        parts.push(epb(true, id, ts, eth ? f.data : raw(f.data)));
      });
      // An interface block every second packet: runs of two at most, so no claim about them.
      cases.push({ name: 'many interfaces', bytes: Buffer.concat(parts), runs: null });
    }
    // Broken files: the JS reader's error, after the same frames.
    const good = cases[0]!.bytes;
    const at = blockAt(good, 6, 1500);
    const broken = (name: string, edit: (b: Buffer) => Buffer): void => {
      cases.push({ name, bytes: edit(Buffer.from(good)), runs: true });
    };
    broken('trailer differs', (b) => {
      b.writeUInt32LE(b.readUInt32LE(at + 4) + 4, at + b.readUInt32LE(at + 4) - 4);
      return b;
    });
    broken('unknown interface', (b) => {
      b.writeUInt32LE(3, at + 8);
      return b;
    });
    broken('caplen past the block', (b) => {
      b.writeUInt32LE(b.readUInt32LE(at + 4), at + 20);
      return b;
    });
    broken('length not a multiple of 4', (b) => {
      b.writeUInt32LE(b.readUInt32LE(at + 4) + 2, at + 4);
      return b;
    });
    broken('block too short', (b) => {
      b.writeUInt32LE(28, at + 4);
      return b;
    });
    broken('cut inside a block', (b) => b.subarray(0, at + 40));
    broken('cut inside a block header', (b) => b.subarray(0, at + 5));
    broken('cut at the end', (b) => b.subarray(0, b.length - 1));

    let checked = 0;
    for (const c of cases) {
      const path = join(dir, `${c.name.replace(/[^a-z0-9]+/gi, '-')}.pcapng`);
      writeFileSync(path, c.bytes);
      const want = reference(path);
      for (const chunk of [undefined, 64, 100, 1500, 100_000]) {
        const got = fast(path, chunk);
        t.equal(got.format, 'pcapng', `${c.name}: read as pcapng by the fast path`);
        same(t, got, want, `${c.name} (chunk ${chunk ?? 'default'})`);
        if (chunk === undefined) {
          if (c.runs)
            t.ok(got.inRuns > got.events.length / 2, `${c.name}: most frames in the addon's runs`);
          else if (c.runs === false)
            t.equal(got.inRuns, 0, `${c.name}: every frame through the JS parser`);
        }
        checked++;
      }
    }
    t.equal(checked, cases.length * 5, 'every case at every chunk size');
    const errors = cases.map(
      (c) => reference(join(dir, `${c.name.replace(/[^a-z0-9]+/gi, '-')}.pcapng`)).error,
    );
    t.match(errors.join('\n'), /FILE_BAD_BLOCK/);
    t.match(errors.join('\n'), /FILE_TRUNCATED/);
    t.match(JSON.parse(reference(join(dir, 'blocks-between-packets.pcapng')).stats ?? '{}'), {
      dropped: 5 + 6 + 9,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test("pcapng: damaged at random, still the JS reader's events and errors", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-pcapng-'));
  try {
    const frames = benchFrames(dir, 300);
    const good = Buffer.concat([
      shb(true),
      idb(true, 1, 'eth0', null),
      idb(true, 101, 'wg0', 9),
      ...frames.flatMap((f, i) => [
        i % 2 === 0 ? epb(true, 0, f.us, f.data) : epb(true, 1, f.us * 1000n, f.data.subarray(14)),
        ...(i % 97 === 50 ? [isb(true, i % 2, { ifdrop: BigInt(i) })] : []),
      ]),
    ]);
    sameUnderDamage(t, { dir, good, keep: 28, ext: 'pcapng', reference, fast });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test('pcapng: a time past 2^64 ns is FILE_TIME_RANGE on both paths, never wrapped', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-pcapng-'));
  try {
    const frames = benchFrames(dir, 20);
    const path = join(dir, 'far.pcapng');
    const far = 1n << 40n; // seconds (if_tsresol 10^0): 2^40 × 10^9 ns > 2^64
    writeFileSync(
      path,
      Buffer.concat([
        shb(true),
        idb(true, 1, null, 0),
        ...frames.map((f, i) => epb(true, 0, i === 7 ? far : f.us / 1_000_000n, f.data)),
      ]),
    );
    const want = reference(path);
    const got = fast(path);
    t.match(want.error, /^FILE_TIME_RANGE: .*packet 8 of interface 0 .*past 2\^64 ns/);
    t.equal(got.error, want.error, 'the fast path stops with the same error');
    t.equal(want.events.length, 7, 'after the seven frames before it');
    t.same(got.events, want.events, 'the same seven events');
    t.match(want.error, /if_tsresol/, 'naming what may be damaged');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test('the addon on pcapng blocks: where a run stops, and why', (t) => {
  const addon = load.addon;
  const ports = Buffer.alloc(65536);
  const out = Buffer.alloc(192 * 8);
  const frame = Buffer.alloc(60, 0x11);
  const e = (iface: number, ts: bigint): Buffer => epb(true, iface, ts, frame);
  const file = Buffer.concat([e(0, 1n), e(1, 2n), e(1, 3n), e(2, 4n), e(0, 5n)]);
  const one = e(0, 1n).length;
  /** Interface table entries: [link type, mul, div, if_tsoffset in s (0 unless given)]. */
  const table = (
    ...rows: ([number, number, number] | [number, number, number, bigint])[]
  ): Buffer => {
    const b = Buffer.alloc(24 * rows.length);
    rows.forEach(([lt, mul, div, offset], k) => {
      b.writeUInt32LE(lt, 24 * k);
      b.writeUInt32LE(mul, 24 * k + 4);
      b.writeUInt32LE(div, 24 * k + 8);
      b.writeBigInt64LE(offset ?? 0n, 24 * k + 16);
    });
    return b;
  };
  // [records, next, stop] (its invalid lengths: pcapng-invalid-records.test.ts).
  const run = (src: Buffer, pos: number, ifaces: Buffer, recs = out): [number, number, number] => {
    const [n, next, stop] = addon.summarize(
      src,
      pos,
      src.length,
      SUMMARY_LAYOUT.pcapngLe,
      0,
      1 << 26,
      ports,
      recs,
      ifaces,
    );
    return [n, next, stop];
  };
  const rec = (k: number): { ts: bigint; iface: number } => ({
    ts: out.readBigUInt64LE(192 * k + 16),
    iface: out.readUInt32LE(192 * k + 188),
  });
  // Interfaces 0 and 1 in the table, 2 left out (div 0): the run alternates, then stops at 2.
  const two = table([1, 1000, 1], [101, 1_000_000_000, 3], [1, 1000, 0]);
  t.same(run(file, 0, two), [3, 3 * one, SUMMARY_STOP.block], 'stops at an interface left out');
  t.same(
    [0, 1, 2].map(rec),
    [
      { ts: 1000n, iface: 0 },
      { ts: 666666666n, iface: 1 },
      { ts: 1000000000n, iface: 1 },
    ],
    'each record: time = units × mul / div (rounded down, as the JS reader), its interface id',
  );
  t.same(run(file, 0, table([1, 1000, 1])), [1, one, SUMMARY_STOP.block], 'an id past the table');
  t.same(run(file, 4 * one, two), [1, 5 * one, SUMMARY_STOP.end], 'the last block, then the end');
  t.same(run(file.subarray(0, one + 10), 0, two), [1, one, SUMMARY_STOP.end], 'a block cut short');
  t.same(run(file, 0, two, Buffer.alloc(192)), [1, one, SUMMARY_STOP.full], 'out holds one');
  const isbFirst = Buffer.concat([isb(true, 0, {}), file]);
  t.same(run(isbFirst, 0, two), [0, 0, SUMMARY_STOP.block], 'any other block type');
  t.same(run(file, 0, Buffer.alloc(0)), [0, 0, SUMMARY_STOP.block], 'an empty table takes none');
  t.throws(
    () => addon.summarize(file, 0, file.length, SUMMARY_LAYOUT.pcapngLe, 1, 1 << 26, ports, out),
    /interface table/,
  );
  t.throws(() => run(file, 0, Buffer.alloc(13)), /24 bytes an interface/);
  // if_tsoffset: seconds added to the scaled time; a time it takes below 0 or to 2^64 ns or
  // beyond stops the run at that block (the JS parser refuses it: FILE_TIME_RANGE).
  const ahead = table([1, 1000, 1, 1_800_000_000n], [1, 1, 1, 0n]);
  t.same(run(file, 0, ahead), [3, 3 * one, SUMMARY_STOP.block], 'offsets taken');
  t.same(
    [0, 1, 2].map(rec),
    [
      { ts: 1_800_000_000_000_001_000n, iface: 0 },
      { ts: 2n, iface: 1 },
      { ts: 3n, iface: 1 },
    ],
    'time = units × mul / div + if_tsoffset × 10^9, per interface',
  );
  const behind = table([1, 1000, 1, 0n], [1, 1, 1, -1n]);
  t.same(run(file, 0, behind), [1, one, SUMMARY_STOP.block], 'stops at a time below 0');
  const top = table([1, 1, 1, 18_446_744_073n], [1, 1, 1, 18_446_744_073n]);
  const last = Buffer.concat([e(0, 709_551_615n), e(1, 709_551_616n)]);
  t.same(run(last, 0, top), [1, one, SUMMARY_STOP.block], 'stops at a time of 2^64 ns');
  t.equal(rec(0).ts, 2n ** 64n - 1n, 'and takes 2^64 − 1');
  t.end();
});

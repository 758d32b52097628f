/**
 * The fast file source (offline/summary-file.ts, the addon's summarize over file chunks)
 * against the JS reader + reference decoder (replayCaptureFile): the same events, in the same
 * order, for every capture of the shared corpus (pcap and pcapng) and for hand-made classic pcap
 * files that cut records at chunk ends, grow the buffer, use every pcap byte order and resolution,
 * and end or break inside a record — and the same error where the JS reader refuses a file.
 * Hand-made pcapng files are in summary-pcapng.test.ts. Fails (never skips) without the addon.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { openSummaryPcap, summaryEvents } from '../../offline/summary-file';
import { replayCaptureFile, replayCaptureFileFast } from '../../offline/replay';
import { json, same, sameUnderDamage, type Outcome } from './same-events';
import type { PacketEvent } from '../../common/event';
import { PCAPS } from './corpus';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const pcaps = PCAPS;
const ctx = { point: 'p', node: 'n' };

function collect(events: () => Iterable<PacketEvent>): Outcome {
  const out: Outcome = { events: [], error: null };
  try {
    for (const ev of events()) out.events.push(json(ev));
  } catch (e: unknown) {
    out.error = e instanceof Error ? e.message : String(e);
  }
  return out;
}

const reference = (path: string): Outcome => collect(() => replayCaptureFile(path, ctx));

/** The fast source with a given chunk size; null when it does not take the file. */
function fast(path: string, chunkSize?: number): Outcome | null {
  let reader: ReturnType<typeof openSummaryPcap>;
  try {
    reader = openSummaryPcap(path, chunkSize === undefined ? {} : { chunkSize });
  } catch (e: unknown) {
    return { events: [], error: e instanceof Error ? e.message : String(e) };
  }
  if (reader === null) return null;
  const r = reader;
  return collect(() => summaryEvents(r, { ...ctx, iface: 'file' }));
}

void t.test('every corpus capture: same events and errors as the JS reader', (t) => {
  let taken = 0;
  let refused = 0;
  const files = readdirSync(pcaps)
    .filter((f) => /\.(pcap|pcapng|cap)$/.test(f))
    .sort();
  t.ok(files.length > 50, `${files.length} corpus captures`);
  for (const file of files) {
    const path = join(pcaps, file);
    const want = reference(path);
    if (want.error !== null) refused++;
    same(
      t,
      collect(() => replayCaptureFileFast(path, ctx)),
      want,
      `${file} (replay)`,
    );
    for (const chunk of [undefined, 64, 1500]) {
      const got = fast(path, chunk);
      if (got === null) {
        t.fail(`${file}: the fast path must take every capture file when the addon loads`);
        continue;
      }
      if (chunk === undefined) taken++;
      same(t, got, want, `${file} (chunk ${chunk ?? 'default'})`);
    }
  }
  t.comment(
    `${taken} of ${files.length} captures on the fast path, ${refused} refused by the JS reader`,
  );
  t.equal(taken, files.length, 'the fast path is taken for every file, pcap and pcapng');
  t.ok(refused > 0, 'files the JS reader refuses are among them');
  t.end();
});

/** The 24-byte header and records of a little-endian µs pcap, for rewriting. */
function records(file: Buffer): { header: Buffer; recs: { hdr: number[]; data: Buffer }[] } {
  const recs: { hdr: number[]; data: Buffer }[] = [];
  let at = 24;
  while (at + 16 <= file.length) {
    const hdr = [0, 4, 8, 12].map((o) => file.readUInt32LE(at + o));
    const caplen = hdr[2]!;
    recs.push({ hdr, data: file.subarray(at + 16, at + 16 + caplen) });
    at += 16 + caplen;
  }
  return { header: file.subarray(0, 24), recs };
}

/** Rewrites a LE µs pcap as `le`/`ns` (magic and every header field in that byte order). */
function rewrite(file: Buffer, le: boolean, ns: boolean): Buffer {
  const { header, recs } = records(file);
  const parts: Buffer[] = [];
  const h = Buffer.alloc(24);
  const w32 = (b: Buffer, v: number, at: number): void => {
    if (le) b.writeUInt32LE(v >>> 0, at);
    else b.writeUInt32BE(v >>> 0, at);
  };
  const w16 = (b: Buffer, v: number, at: number): void => {
    if (le) b.writeUInt16LE(v, at);
    else b.writeUInt16BE(v, at);
  };
  w32(h, ns ? 0xa1b23c4d : 0xa1b2c3d4, 0);
  w16(h, header.readUInt16LE(4), 4);
  w16(h, header.readUInt16LE(6), 6);
  w32(h, header.readUInt32LE(16), 16);
  w32(h, header.readUInt32LE(20), 20);
  parts.push(h);
  for (const r of recs) {
    const rh = Buffer.alloc(16);
    w32(rh, r.hdr[0]!, 0);
    w32(rh, ns ? r.hdr[1]! * 1000 + 7 : r.hdr[1]!, 4);
    w32(rh, r.hdr[2]!, 8);
    w32(rh, r.hdr[3]!, 12);
    parts.push(rh, r.data);
  }
  return Buffer.concat(parts);
}

void t.test('hand-made files: chunk ends, byte orders, big records, broken records', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-file-'));
  try {
    const base = join(dir, 'bench.pcap');
    writeBenchPcap(base, 3000, 'abc123');
    const file = readFileSync(base);
    const cases: { name: string; bytes: Buffer }[] = [
      { name: 'bench', bytes: file },
      { name: 'bench BE µs', bytes: rewrite(file, false, false) },
      { name: 'bench LE ns', bytes: rewrite(file, true, true) },
      { name: 'bench BE ns', bytes: rewrite(file, false, true) },
      { name: 'header only', bytes: file.subarray(0, 24) },
      { name: 'header cut', bytes: file.subarray(0, 20) },
      { name: 'record header cut', bytes: file.subarray(0, 24 + 16 + 102 + 9) },
    ];
    // Cut inside a record's data, at several places.
    for (const cut of [24 + 16 + 50, Math.floor(file.length / 2) + 3, file.length - 1]) {
      cases.push({ name: `cut at ${cut}`, bytes: file.subarray(0, cut) });
    }
    // A record claiming more than the bound (262144, libpcap's maximum) in the middle of the file.
    {
      const { recs } = records(file);
      let at = 24;
      for (let i = 0; i < 1500; i++) at += 16 + recs[i]!.data.length;
      const bad = Buffer.from(file);
      bad.writeUInt32LE(300000, at + 8);
      cases.push({ name: 'caplen above the bound', bytes: bad });
    }
    // Big records (snaplen raised): larger than the small chunks, so the buffer must grow; plus
    // one above 262144, which a raised snaplen does not allow, and a big record cut by the end.
    {
      const { recs } = records(file);
      const h = Buffer.from(file.subarray(0, 24));
      h.writeUInt32LE(1 << 20, 16);
      const parts: Buffer[] = [h];
      recs.slice(0, 40).forEach((r, i) => {
        const data = i % 7 === 3 ? Buffer.concat([r.data, Buffer.alloc(200000 + i, 0x41)]) : r.data;
        const rh = Buffer.alloc(16);
        rh.writeUInt32LE(r.hdr[0]!, 0);
        rh.writeUInt32LE(r.hdr[1]!, 4);
        rh.writeUInt32LE(data.length, 8);
        rh.writeUInt32LE(data.length, 12);
        parts.push(rh, data);
      });
      const big = Buffer.concat(parts);
      cases.push({ name: 'records above the chunk size', bytes: big });
      cases.push({ name: 'big record cut', bytes: big.subarray(0, big.length - 150000) });
      const over = Buffer.from(big);
      over.writeUInt32LE(262145, 24 + 8);
      cases.push({ name: 'caplen above 262144 under a raised snaplen', bytes: over });
    }
    let taken = 0;
    for (const c of cases) {
      const path = join(dir, `${c.name.replace(/[^a-z0-9]+/gi, '-')}.pcap`);
      writeFileSync(path, c.bytes);
      const want = reference(path);
      for (const chunk of [undefined, 64, 4096, 100_000]) {
        const got = fast(path, chunk);
        if (got === null) {
          t.fail(`${c.name}: the fast path must take a classic pcap`);
          continue;
        }
        taken++;
        same(t, got, want, `${c.name} (chunk ${chunk ?? 'default'})`);
      }
      same(
        t,
        collect(() => replayCaptureFileFast(path, ctx)),
        want,
        `${c.name} (replay)`,
      );
    }
    t.ok(taken > 0);
    // The errors are the JS reader's own.
    const errors = cases.map(
      (c) => reference(join(dir, `${c.name.replace(/[^a-z0-9]+/gi, '-')}.pcap`)).error,
    );
    t.match(errors.join('\n'), /FILE_TRUNCATED/);
    t.match(errors.join('\n'), /FILE_BAD_RECORD/);
    t.match(errors.join('\n'), /FILE_TOO_SHORT/);
    // A missing file: the same error on both paths.
    same(
      t,
      collect(() => replayCaptureFileFast(join(dir, 'missing.pcap'), ctx)),
      reference(join(dir, 'missing.pcap')),
      'missing file',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test("classic pcap damaged at random: still the JS reader's events and errors", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-file-'));
  try {
    const base = join(dir, 'bench.pcap');
    writeBenchPcap(base, 300, 'abc123');
    sameUnderDamage(t, { dir, good: readFileSync(base), keep: 24, ext: 'pcap', reference, fast });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test('a closed reader leaves its memory to the next; open readers never share it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-sumreuse-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const a = join(dir, 'a.pcap');
  const b = join(dir, 'b.pcap');
  writeBenchPcap(a, 3000, 'reuse001', 'pcap');
  writeBenchPcap(b, 2000, 'reuse002', 'pcap');
  const chunk = 64 << 10;
  const alone = { a: fast(a, chunk), b: fast(b, chunk) };
  // Two readers open at once, their blocks interleaved: each reads its own file as it would alone.
  const ra = openSummaryPcap(a, { chunkSize: chunk });
  const rb = openSummaryPcap(b, { chunkSize: chunk });
  if (ra === null || rb === null) throw new Error('the fast path did not take the files');
  const ia = summaryEvents(ra, { ...ctx, iface: 'file' })[Symbol.iterator]();
  const ib = summaryEvents(rb, { ...ctx, iface: 'file' })[Symbol.iterator]();
  const got: { a: string[]; b: string[] } = { a: [], b: [] };
  for (let done = 0; done < 2;) {
    done = 0;
    for (const [it, list] of [
      [ia, got.a],
      [ib, got.b],
    ] as const) {
      const n = it.next();
      if (n.done === true) done++;
      else list.push(json(n.value));
    }
  }
  t.same(got.a, alone.a?.events, 'a, interleaved with b: its own events');
  t.same(got.b, alone.b?.events, 'b, interleaved with a: its own events');
  // One after the other: the second reader reads into the first one's buffer.
  const r1 = openSummaryPcap(a, { chunkSize: chunk });
  const first = r1?.next();
  const buf = first?.src;
  r1?.close();
  const r2 = openSummaryPcap(b, { chunkSize: chunk });
  t.equal(r2?.next()?.src, buf, 'the same chunk buffer, taken again');
  r2?.close();
  t.same(fast(b, chunk)?.events, alone.b?.events, 'and what it reads is still its own file');
  t.end();
});

/**
 * The C fast path (native/pcap-batch/src/summary.c) against the reference decoder (core/decode):
 * for every frame it takes — corpus frames, every header prefix of them, byte-mutated copies and
 * the benchmark's synthetic VXLAN/TCP frames — the event built from its summary record must equal
 * decodeFrame + toPacketEvent exactly. Frames it does not take are decoded by the reference, so
 * this is the whole correctness argument for the fast path. Fails (never skips) without the addon.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

/** The asserts check() uses (any subtest has them). */
type Asserts = Pick<typeof t, 'equal' | 'not' | 'fail'>;
import { writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon, type PcapBatchAddon } from '../../native/loader';
import { openCaptureFile } from '../../offline/pcap-file';
import {
  decodeSummaryFrame,
  encodeSummaryFrame,
  WorkerFrameParser,
} from '../../agent/capture/worker-frames';
import {
  SUMMARY_BYTES,
  SUMMARY_LAYOUT,
  R,
  SUMMARY_STOP,
  summaryEvent,
  summaryPortTable,
} from '../../core/decode/summary';
import { decodeFrame, type DecodeOptions } from '../../core/decode/frame';
import { toPacketEvent } from '../../core/decode/event';
import { EventsWireEncoder, parseSummaryFrame } from '../../agent/capture/summary-wire';
import { Out, writeEvent } from '../../common/events-wire';
import type { EncodedEvents } from '../../common/wire';
import { xorshift32 } from './xorshift';
import { PCAPS } from './corpus';

/**
 * Gathers the bytes of the SLOW records' frames (which point into `src`) into one compact area and
 * points their data offsets there — the shape the capture's summary mode delivers.
 */
function compactSlowFrames(
  recs: Buffer,
  count: number,
  src: Uint8Array,
): { raw: Buffer; rawBytes: number } {
  let size = 0;
  for (let i = 0; i < count; i++) {
    const o = i * SUMMARY_BYTES;
    if (recs[o] !== 1) size += recs.readUInt32LE(o + R.caplen);
  }
  const raw = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < count; i++) {
    const o = i * SUMMARY_BYTES;
    if (recs[o] === 1) continue;
    const caplen = recs.readUInt32LE(o + R.caplen);
    const from = recs.readUInt32LE(o + R.dataOffset);
    raw.set(src.subarray(from, from + caplen), at);
    recs.writeUInt32LE(at, o + R.dataOffset);
    at += caplen;
  }
  return { raw, rawBytes: at };
}

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}
const addon: PcapBatchAddon = load.addon;

const pcaps = PCAPS;
const ctx = { point: 'p', node: 'n', iface: 'eth0' };

interface Frame {
  linktype: number;
  tsNs: bigint;
  wireLength: number;
  data: Uint8Array;
}

/** Packs frames into one capture-batch buffer (u32 caplen | u32 wirelen | u64 ts | data pad 8). */
function batch(frames: Frame[]): { buf: Buffer; bytes: number } {
  let size = 0;
  for (const f of frames) size += 16 + ((f.data.length + 7) & ~7);
  const buf = Buffer.alloc(size);
  let at = 0;
  for (const f of frames) {
    buf.writeUInt32LE(f.data.length, at);
    buf.writeUInt32LE(f.wireLength, at + 4);
    buf.writeBigUInt64LE(f.tsNs, at + 8);
    buf.set(f.data, at + 16);
    at += 16 + ((f.data.length + 7) & ~7);
  }
  return { buf, bytes: at };
}

interface Tally {
  frames: number;
  fast: number;
  mismatches: number;
  /** Records whose wire bytes (summary-wire.ts) differ from writeEvent(summaryEvent(…)). */
  wireMismatches?: number;
}

/**
 * The records' protobuf entries as the agent writes them (EventsWireEncoder, one chunk per
 * event) against writeEvent of the event summaryEvent builds: must be byte-identical.
 */
function checkWire(
  t: Asserts,
  label: string,
  out: Buffer,
  n: number,
  raw: Buffer,
  linktype: number,
  tally: Tally,
  opts?: DecodeOptions,
): void {
  const want: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const ref = new Out();
    writeEvent(ref, summaryEvent(out, i, raw, linktype, i + 1, ctx, opts));
    want.push(Buffer.from(ref.buf.subarray(0, ref.at)));
  }
  // The records as a live capture writes them: each with its frame's offset (R.frameOffset).
  const recs = Buffer.from(out.subarray(0, n * SUMMARY_BYTES));
  for (let i = 0; i < n; i++) recs.writeUInt32LE(i, i * SUMMARY_BYTES + R.frameOffset);
  const frame = { count: n, linktype, firstFrame: 1, ctx, recs, raw };
  // Chunks of up to 7 events, FAST runs in C between SLOW records: the same bytes in order.
  const sized: EncodedEvents[] = [];
  const big = new EventsWireEncoder((c) => sized.push(c), 7, opts);
  big.summaries(frame);
  big.flush();
  const joined = Buffer.concat(sized.map((c) => c.bytes));
  if (!joined.equals(Buffer.concat(want)) || sized.some((c) => c.count < 1 || c.count > 7)) {
    tally.wireMismatches = (tally.wireMismatches ?? 0) + 1;
    t.fail(`${label}: chunks of 7 differ from the events in order`);
  }
  // Both writers of FAST records: C (the addon's wireRun) and TypeScript.
  for (const writer of ['native', 'js'] as const) {
    const chunks: EncodedEvents[] = [];
    const enc = new EventsWireEncoder((c) => chunks.push(c), 1, opts, writer);
    enc.summaries(frame);
    enc.flush();
    if (chunks.length !== n) t.fail(`${label} (${writer}): ${chunks.length} chunks for ${n}`);
    for (let i = 0; i < n; i++) {
      const got = Buffer.from(chunks[i]?.bytes ?? new Uint8Array(0));
      const w = want[i] ?? Buffer.alloc(0);
      if (!got.equals(w)) {
        tally.wireMismatches = (tally.wireMismatches ?? 0) + 1;
        if (tally.wireMismatches <= 10) {
          t.fail(`${label} #${i + 1} (${writer}): wire bytes`, {
            found: got.toString('hex'),
            wanted: w.toString('hex'),
          });
        }
      }
    }
  }
}

/** Summarizes frames of one link type and compares every record with the reference. */
function check(
  t: Asserts,
  label: string,
  frames: Frame[],
  tally: Tally,
  opts?: DecodeOptions,
): void {
  if (frames.length === 0) return;
  const linktype = frames[0]?.linktype ?? 1;
  const { buf, bytes } = batch(frames);
  const out = Buffer.alloc(SUMMARY_BYTES * frames.length);
  const [n, next, stop] = addon.summarize(
    buf,
    0,
    bytes,
    SUMMARY_LAYOUT.batch,
    linktype,
    0xffffffff,
    summaryPortTable(opts),
    out,
  );
  t.equal(n, frames.length, `${label}: every record summarized`);
  checkWire(t, label, out, n, buf, linktype, tally, opts);
  t.equal(next, bytes, `${label}: consumed the batch`);
  t.not(stop, SUMMARY_STOP.bad, `${label}: no framing error`);
  frames.forEach((f, i) => {
    tally.frames++;
    if (out[i * SUMMARY_BYTES] === 1) tally.fast++;
    const want = toPacketEvent(
      { index: i + 1, tsNs: f.tsNs, wireLength: f.wireLength },
      decodeFrame(linktype, f.data, opts),
      ctx,
    );
    const got = summaryEvent(out, i, buf, linktype, i + 1, ctx, opts);
    // Exact: same keys, same key order in JSON (what `decode --json` and the store write).
    const a = JSON.stringify(got, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    const b = JSON.stringify(want, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    if (a !== b) {
      tally.mismatches++;
      if (tally.mismatches <= 10) t.fail(`${label} #${i + 1}`, { found: a, wanted: b });
    }
  });
}

function corpusFrames(): Map<string, Frame[]> {
  const byFile = new Map<string, Frame[]>();
  for (const file of readdirSync(pcaps).sort()) {
    if (!/\.(pcap|pcapng)$/.test(file) || file.startsWith('libpcap_')) continue;
    const frames: Frame[] = [];
    try {
      for (const f of openCaptureFile(join(pcaps, file)).frames()) {
        frames.push({
          linktype: f.linktype,
          tsNs: f.tsNs,
          wireLength: f.wireLength,
          data: Uint8Array.from(f.data),
        });
      }
    } catch {
      // Files the reader refuses are the reader's tests' business; keep what was read.
    }
    byFile.set(file, frames);
  }
  return byFile;
}

const corpus = corpusFrames();

/** Splits a list of frames into runs of one link type (a pcapng file may mix them). */
function runs(frames: Frame[]): Frame[][] {
  const out: Frame[][] = [];
  for (const f of frames) {
    const last = out[out.length - 1];
    if (last !== undefined && last[0]?.linktype === f.linktype) last.push(f);
    else out.push([f]);
  }
  return out;
}

void t.test('corpus frames: fast records equal the reference', (t) => {
  const tally: Tally = { frames: 0, fast: 0, mismatches: 0 };
  for (const [file, frames] of corpus) for (const r of runs(frames)) check(t, file, r, tally);
  t.comment(`${tally.fast} of ${tally.frames} corpus frames took the fast path`);
  t.equal(tally.mismatches, 0);
  t.equal(tally.wireMismatches ?? 0, 0, 'wire bytes identical');
  // The fast path must actually be exercised, or this test proves nothing.
  t.ok(tally.fast > 100, `fast path taken for ${tally.fast} frames`);
  t.end();
});

void t.test('every header prefix of every corpus frame', (t) => {
  const tally: Tally = { frames: 0, fast: 0, mismatches: 0 };
  for (const [file, frames] of corpus) {
    for (const r of runs(frames)) {
      const prefixes: Frame[] = [];
      for (const f of r) {
        const limit = Math.min(f.data.length, 160);
        for (let k = 0; k <= limit; k++) prefixes.push({ ...f, data: f.data.subarray(0, k) });
      }
      check(t, `${file} prefixes`, prefixes, tally);
    }
  }
  t.comment(`${tally.fast} of ${tally.frames} prefixes took the fast path`);
  t.equal(tally.mismatches, 0);
  t.equal(tally.wireMismatches ?? 0, 0, 'wire bytes identical');
  t.end();
});

void t.test('byte-mutated corpus frames', (t) => {
  // Deterministic xorshift: the same mutations every run.
  const rnd = xorshift32(0x9e3779b9);
  const tally: Tally = { frames: 0, fast: 0, mismatches: 0 };
  for (const [file, frames] of corpus) {
    for (const r of runs(frames)) {
      const mutated: Frame[] = [];
      for (const f of r) {
        if (f.data.length === 0) continue;
        for (let m = 0; m < 24; m++) {
          const data = Uint8Array.from(f.data);
          const flips = 1 + rnd(3);
          for (let k = 0; k < flips; k++) {
            const at = rnd(Math.min(data.length, 120));
            data[at] = rnd(4) === 0 ? 0 : rnd(256);
          }
          mutated.push({ ...f, data });
        }
      }
      check(t, `${file} mutated`, mutated, tally);
    }
  }
  t.comment(`${tally.fast} of ${tally.frames} mutated frames took the fast path`);
  t.equal(tally.mismatches, 0);
  t.equal(tally.wireMismatches ?? 0, 0, 'wire bytes identical');
  t.end();
});

void t.test(
  'synthetic VXLAN and plain TCP frames (the benchmark file), default and custom ports',
  (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'ht-summary-'));
    try {
      const path = join(dir, 'bench.pcap');
      writeBenchPcap(path, 4000, 'abc123');
      const frames: Frame[] = [];
      for (const f of openCaptureFile(path).frames())
        frames.push({
          linktype: f.linktype,
          tsNs: f.tsNs,
          wireLength: f.wireLength,
          data: Uint8Array.from(f.data),
        });
      const tally: Tally = { frames: 0, fast: 0, mismatches: 0 };
      check(t, 'bench', frames, tally);
      t.equal(tally.fast, tally.frames, 'every synthetic frame takes the fast path');
      // VXLAN moved to another port: 4789/8472 frames become plain UDP, on both paths.
      check(t, 'bench, vxlan on 9999', frames, tally, { vxlanPorts: [9999] });
      t.equal(tally.mismatches, 0);
      t.equal(tally.wireMismatches ?? 0, 0, 'wire bytes identical');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    t.end();
  },
);

void t.test('classic pcap layout: records read straight from the file', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-summary-'));
  try {
    const path = join(dir, 'bench.pcap');
    writeBenchPcap(path, 1000, 'abc123');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const file = (require('node:fs') as typeof import('node:fs')).readFileSync(path);
    const linktype = file.readUInt32LE(20);
    const out = Buffer.alloc(SUMMARY_BYTES * 400);
    const ports = summaryPortTable();
    const ref = [...openCaptureFile(path).frames()];
    let pos = 24;
    let seen = 0;
    let cut = 0;
    // Feed the file in odd-sized windows: a record cut by the window end is left for the next.
    while (pos < file.length) {
      const end = Math.min(file.length, pos + 7919);
      const [n, next, stop] = addon.summarize(
        file,
        pos,
        end,
        SUMMARY_LAYOUT.pcapLeUs,
        linktype,
        262144,
        ports,
        out,
      );
      t.not(stop, SUMMARY_STOP.bad);
      if (next < end) cut++;
      for (let i = 0; i < n; i++) {
        const f = ref[seen];
        seen++;
        if (f === undefined) break;
        const got = summaryEvent(out, i, file, linktype, f.index, ctx);
        const want = toPacketEvent(f, decodeFrame(linktype, f.data), ctx);
        if (
          JSON.stringify(got, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) !==
          JSON.stringify(want, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))
        )
          t.fail(`record ${f.index}`);
      }
      if (n === 0 && next === pos) {
        // The record does not fit the window: widen it to the whole rest.
        const [n2, next2] = addon.summarize(
          file,
          pos,
          file.length,
          SUMMARY_LAYOUT.pcapLeUs,
          linktype,
          262144,
          ports,
          out.subarray(0, SUMMARY_BYTES),
        );
        t.equal(n2, 1);
        seen += n2;
        pos = next2;
        continue;
      }
      pos = next;
    }
    t.equal(seen, ref.length, 'every record once');
    t.ok(cut > 0, 'records were cut at window ends and resumed');
    // A record claiming more than maxCaplen stops with SUMMARY_STOP.bad at that record.
    const bad = Buffer.from(file.subarray(0, 24 + 16));
    bad.writeUInt32LE(300000, 24 + 8);
    const [n, next, stop] = addon.summarize(
      bad,
      24,
      bad.length,
      SUMMARY_LAYOUT.pcapLeUs,
      linktype,
      262144,
      ports,
      out,
    );
    t.same([n, next, stop], [0, 24, SUMMARY_STOP.bad]);
    t.throws(() => addon.summarize(bad, 24, bad.length + 1, 0, 1, 0, ports, out), /pos <= end/);
    t.throws(() => addon.summarize(bad, 0, 1, 0, 1, 0, Buffer.alloc(10), out), /65536/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

void t.test(
  'worker summary frames: fast and slow records reach the parent as the same events',
  (t) => {
    // Mixed batch: fast frames and frames left to the reference decoder (prefix-truncated ones).
    const source = [...corpus.values()].flat().filter((f) => f.linktype === 1);
    const frames: Frame[] = [];
    for (const f of source.slice(0, 200)) {
      frames.push(f);
      frames.push({ ...f, data: f.data.subarray(0, Math.min(f.data.length, 30)) });
    }
    const { buf, bytes } = batch(frames);
    const out = Buffer.alloc(SUMMARY_BYTES * frames.length);
    const [n] = addon.summarize(buf, 0, bytes, 0, 1, 0xffffffff, summaryPortTable(), out);
    t.equal(n, frames.length);
    const { raw, rawBytes } = compactSlowFrames(out, n, buf);
    const wire = encodeSummaryFrame(out, n, raw, rawBytes, 1, 41, JSON.stringify(ctx));
    // Reused buffers are overwritten after the call: the frame must not view them.
    out.fill(0xee);
    buf.fill(0xee);
    const parsed = new WorkerFrameParser().push(wire);
    t.equal(parsed.length, 1);
    const got = parsed[0]?.type === 'events' ? parsed[0].events : [];
    t.equal(got.length, frames.length);
    let slow = 0;
    frames.forEach((f, i) => {
      const want = toPacketEvent(
        { index: 41 + i, tsNs: f.tsNs, wireLength: f.wireLength },
        decodeFrame(1, f.data),
        ctx,
      );
      if (want.truncated) slow++;
      t.same(got[i], want, `frame ${i}`);
    });
    t.ok(slow > 0, `slow records (${slow}) travelled as raw bytes`);
    // A body whose sizes do not add up is refused with a reason, not misread.
    const body = wire.subarray(5, wire.length - 1);
    t.throws(() => decodeSummaryFrame(body), /does not hold/);
    t.throws(() => decodeSummaryFrame(Buffer.alloc(10)), /shorter than its header/);
    // A SLOW record pointing past the raw area is refused where it is read, on both paths.
    const bad = Buffer.from(wire.subarray(5));
    const head = (22 + bad.readUInt16LE(20) + 7) & ~7;
    const slowAt = frames.findIndex((_, i) => bad[head + i * SUMMARY_BYTES] !== 1);
    t.ok(slowAt >= 0, 'the batch has a SLOW record');
    bad.writeUInt32LE(rawBytes, head + slowAt * SUMMARY_BYTES + R.dataOffset);
    t.throws(
      () => decodeSummaryFrame(bad),
      new RegExp(`summary record ${slowAt} points past the raw area`),
    );
    const enc = new EventsWireEncoder(() => undefined);
    t.throws(
      () => {
        enc.summaries(parseSummaryFrame(bad));
      },
      new RegExp(`summary record ${slowAt} points past the raw area`),
    );
    t.end();
  },
);

void t.test('payload keys: markers, request lines and their edges, at every offset', (t) => {
  // Ethernet / IPv4 / TCP (no options) around a payload.
  const frame = (payload: Uint8Array, caplen?: number): Frame => {
    const total = 20 + 20 + payload.length;
    const f = Buffer.alloc(14 + total);
    f.writeUInt16BE(0x0800, 12);
    f[14] = 0x45;
    f.writeUInt16BE(total, 16);
    f.writeUInt16BE(0x1234, 18);
    f[22] = 64;
    f[23] = 6;
    f.writeUInt32BE(0x0a5a002a, 26);
    f.writeUInt32BE(0x0af40205, 30);
    f.writeUInt16BE(40000, 34);
    f.writeUInt16BE(8080, 36);
    f.writeUInt32BE(1000, 38);
    f[46] = 0x50;
    f[47] = 0x18;
    f.set(payload, 54);
    return {
      linktype: 1,
      tsNs: 1n,
      wireLength: f.length,
      data: f.subarray(0, caplen ?? f.length),
    };
  };
  const text = (s: string): Uint8Array => Buffer.from(s, 'latin1');
  const payloads: Uint8Array[] = [];
  const bodies = [
    'hoptrace-probe-abc123',
    'hoptrace-probe-',
    'hoptrace-probe-!x hoptrace-probe-z9',
    'hoptrace-probehoptrace-probe-q',
    'hhhoptrace-probe-hoptrace-probe-k',
    'hoptrace-probe-' + 'a'.repeat(40),
    'GET /x HTTP/1.1\r\nHost: y\r\n\r\n',
    'GET /x HTTP/1.0',
    'GET /x HTTP/2.0\n',
    'POST / HTTP/1.1\rhoptrace-probe-r1',
    '\r\n',
  ];
  for (const body of bodies) {
    for (let pad = 0; pad < 530; pad += pad < 40 ? 1 : 37) {
      payloads.push(text('x'.repeat(pad) + body));
      payloads.push(text('y'.repeat(pad) + body + ' tail'));
    }
  }
  const frames: Frame[] = [];
  for (const p of payloads) {
    frames.push(frame(p));
    // Cut by a snaplen inside the payload: hashes and the marker see only what was captured.
    frames.push(frame(p, 54 + Math.floor(p.length / 2)));
  }
  const tally: Tally = { frames: 0, fast: 0, mismatches: 0 };
  check(t, 'payloads', frames, tally);
  t.equal(tally.fast, tally.frames, 'all take the fast path');
  t.equal(tally.mismatches, 0);
  t.equal(tally.wireMismatches ?? 0, 0, 'wire bytes identical');
  t.end();
});

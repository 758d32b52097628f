/**
 * Frame retention in the agent (agent/capture/retention.ts, retention-store.ts): the pcap file a
 * capture retains into is readable by the offline reader with record N = frame N; the bound stops
 * retention for good and counts what came after; the store answers FramesRequests from the file
 * with the bytes asked for, a byte budget per reply, and a stable reason for every frame it
 * cannot give; nothing of a released capture remains, and nothing is left on disk.
 */
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { FileSource } from '../../agent/capture/file-source';
import { PcapRetentionWriter, type RetentionTarget } from '../../agent/capture/retention';
import { RetentionStore } from '../../agent/capture/retention-store';
import type { FramesRequest } from '../../common/wire';
import { payloadOffset } from '../../core/decode/frame';
import { openCaptureFile } from '../../offline/pcap-file';
import { PCAPS } from './corpus';

const PCAP = join(PCAPS, 'zeek_http-get.pcap');

function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-retention-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** The frames of a pcap file as [index, tsNs, wireLength, bytes]. */
function framesOf(
  path: string,
): { index: number; tsNs: bigint; wireLength: number; data: Buffer }[] {
  const r = openCaptureFile(path);
  return [...r.frames()].map((f) => ({
    index: f.index,
    tsNs: f.tsNs,
    wireLength: f.wireLength,
    data: Buffer.from(f.data),
  }));
}

/** A frame of `n` bytes whose bytes say which frame it is. */
function frameBytes(frame: number, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (frame * 7 + i) & 0xff);
}

function request(frames: number[], o: Partial<FramesRequest> = {}): FramesRequest {
  return {
    requestId: 'q-1',
    captureId: 'c-x-00000000',
    point: 'decap',
    frames,
    release: false,
    ...o,
  };
}

void t.test(
  'the writer: a pcap file the offline reader reads, frame N = record N, cut to snaplen',
  (t) => {
    const dir = tempDir(t);
    const path = join(dir, 'r.pcap');
    const fd = openSync(path, 'w+');
    const w = new PcapRetentionWriter({ fd, snaplen: 64, maxBytes: 1 << 20 }, 1);
    for (let f = 1; f <= 5; f++)
      w.add(1_700_000_000_123_456_789n + BigInt(f), 100 + f, frameBytes(f, 30 + f * 10));
    w.close();
    closeSync(fd);
    const got = framesOf(path);
    t.same(
      got.map((f) => [f.index, f.tsNs, f.wireLength, f.data.length]),
      [1, 2, 3, 4, 5].map((f) => [
        f,
        1_700_000_000_123_456_789n + BigInt(f),
        100 + f,
        Math.min(64, 30 + f * 10),
      ]),
      'timestamps in ns, wire lengths, data cut to the retention snaplen',
    );
    for (const f of got)
      t.same(f.data, Buffer.from(frameBytes(f.index, 30 + f.index * 10).subarray(0, 64)));
    t.match(w.stats(), { state: 'on', retained: 5, dropped: 0, snaplen: 64 });
    t.end();
  },
);

void t.test('the bound: retention stops at the first frame that does not fit, for good', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'r.pcap');
  const fd = openSync(path, 'w+');
  // Header (24) + three records of 16 + 50 bytes: the fourth frame is one byte too many.
  const w = new PcapRetentionWriter({ fd, snaplen: 256, maxBytes: 24 + 3 * 66 + 65 }, 1);
  for (let f = 1; f <= 10; f++) w.add(BigInt(f), f === 6 ? 1 : 50, frameBytes(f, f === 6 ? 1 : 50));
  w.close();
  closeSync(fd);
  t.same(
    framesOf(path).map((f) => f.index),
    [1, 2, 3],
    'frames 1..3 kept; frame 6 (small enough) is not taken once retention stopped',
  );
  t.match(w.stats(), { state: 'full', retained: 3, dropped: 7, bytes: 24 + 3 * 66 });
  t.end();
});

void t.test(
  'a failed write stops retention and says why; an unknown link type keeps nothing',
  (t) => {
    const dir = tempDir(t);
    const path = join(dir, 'r.pcap');
    writeFileSync(path, '');
    const ro = openSync(path, 'r');
    const w = new PcapRetentionWriter({ fd: ro, snaplen: 64, maxBytes: 1 << 20 }, 1);
    w.add(1n, 10, frameBytes(1, 10));
    t.equal(w.flush(), false, 'the write to a read-only fd fails');
    w.add(2n, 10, frameBytes(2, 10));
    closeSync(ro);
    t.match(w.stats(), { state: 'failed', retained: 0, dropped: 2, error: /EBADF|bad file/i });
    const none = new PcapRetentionWriter({ fd: -1, snaplen: 64, maxBytes: 1 << 20 }, -1);
    none.add(1n, 10, frameBytes(1, 10));
    t.match(none.stats(), { state: 'failed', retained: 0, dropped: 1, error: /link type -1/ });
    t.end();
  },
);

for (const payload of [false, true])
  void t.test(
    `a file replay retains what it delivers, frame for frame: ${payload ? 'whole with payload' : 'headers only by default'}`,
    async (t) => {
      const dir = tempDir(t);
      const path = join(dir, 'r.pcap');
      const fd = openSync(path, 'w+');
      t.teardown(() => {
        closeSync(fd);
      });
      const src = new FileSource(
        PCAP,
        { point: 'p', node: 'n', iface: 'eth0' },
        {
          retain: { fd, snaplen: 128, maxBytes: 1 << 20, ...(payload ? { payload } : {}) },
        },
      );
      const frames: number[] = [];
      await new Promise<void>((resolve, reject) => {
        void src.start(
          (evs) => frames.push(...evs.map((e) => e.frame)),
          (err) => {
            if (err === null) resolve();
            else reject(err);
          },
        );
      });
      const original = framesOf(PCAP);
      const kept = framesOf(path);
      t.same(
        frames,
        original.map((f) => f.index),
        'events numbered as the file',
      );
      // Headers only: each frame up to where its payload starts (the reference decoder's
      // payloadOffset, evidence.pcapng's cut), never past the retention snaplen.
      const cut = (d: Buffer): number =>
        payload ? 128 : Math.min(128, payloadOffset(1, d) ?? d.length);
      t.same(
        kept.map((f) => [f.index, f.tsNs, f.wireLength, f.data]),
        original.map((f) => [f.index, f.tsNs, f.wireLength, f.data.subarray(0, cut(f.data))]),
      );
      const get = kept.find(
        (f) => f.wireLength > 66 && original[f.index - 1]?.data.includes('GET /'),
      );
      t.ok(get !== undefined, 'the HTTP request frame was kept');
      t.equal(
        get?.data.includes('GET /') ?? false,
        payload,
        payload ? 'its request line with it' : 'without its request line',
      );
      t.match(src.stats().retention, { state: 'on', retained: original.length, dropped: 0 });
    },
  );

/** A store with one point whose source wrote `n` frames of 100 bytes (stats as given). */
function storeWith(
  t: { teardown(fn: () => void): void },
  n: number,
  o: { maxBytes?: number; snaplen?: number } = {},
): { store: RetentionStore; dir: string; target: RetentionTarget; writer: PcapRetentionWriter } {
  const dir = tempDir(t);
  const store = new RetentionStore({ dir, onWarning: () => undefined, ...o });
  t.teardown(() => {
    store.close();
  });
  const target = store.open('c-x-00000000', 'decap', 0, 65535);
  if (target === null) throw new Error('no retention');
  const writer = new PcapRetentionWriter(target, 1);
  for (let f = 1; f <= n; f++) writer.add(1000n * BigInt(f), 100, frameBytes(f, 100));
  writer.close();
  return { store, dir, target, writer };
}

void t.test('the store: the file is unlinked at once; answers carry the bytes asked for', (t) => {
  const { store, dir, target, writer } = storeWith(t, 20);
  t.same(readdirSync(dir), [], 'nothing named on disk: the agent holds the fd only');
  t.equal(target.snaplen, 256, 'the default: headers');
  store.ended('c-x-00000000', 'decap', writer.stats(), true);
  const r = store.answer(request([7, 3, 3, 25]));
  t.equal(r.linkType, 1);
  t.equal(r.snaplen, 256);
  t.same(
    r.records.map((x) => [x.frame, x.tsNs, x.origLen, Buffer.from(x.data)]),
    [3, 7].map((f) => [f, 1000n * BigInt(f), 100, Buffer.from(frameBytes(f, 100))]),
    'each frame once, in frame order, with its own bytes',
  );
  t.same(r.missing, [{ frame: 25, reason: 'FRAMES_NOT_CAPTURED' }], 'beyond the capture');
  t.equal(r.retained, 20);
  t.end();
});

void t.test(
  'the store: a full bound, a cut file, a byte budget, release, an unknown capture',
  (t) => {
    // Room for 5 records of 16 + 100 bytes.
    const { store, writer } = storeWith(t, 12, { maxBytes: 24 + 5 * 116 });
    store.ended('c-x-00000000', 'decap', writer.stats(), true);
    t.match(writer.stats(), { state: 'full', retained: 5, dropped: 7 });
    const full = store.answer(request([2, 5, 6, 12, 13]));
    t.same(
      full.records.map((x) => x.frame),
      [2, 5],
    );
    t.same(full.missing, [
      { frame: 6, reason: 'RETENTION_FULL' },
      { frame: 12, reason: 'RETENTION_FULL' },
      { frame: 13, reason: 'FRAMES_NOT_CAPTURED' },
    ]);
    t.equal(full.retentionDropped, 7, 'the count travels with the answer');

    // Budget: 250 bytes of data fit two 100-byte frames; the third is neither found nor missing.
    const part = store.answer(request([1, 2, 3]), 250);
    t.same(
      part.records.map((x) => x.frame),
      [1, 2],
    );
    t.same(part.missing, [], 'frame 3 did not fit: the collector asks again');

    store.release('c-x-00000000', 'decap');
    const gone = store.answer(request([1, 2]));
    t.equal(gone.errorCode, 'RETENTION_GONE');
    t.same(
      gone.missing.map((m) => m.reason),
      ['RETENTION_GONE', 'RETENTION_GONE'],
    );
    t.equal(store.heldPoints, 0);
    t.equal(store.reservedBytes, 0, 'its budget is given back');
    t.end();
  },
);

void t.test(
  'the store: frames past a cut file are RETENTION_CUT; no final word, no guessing',
  (t) => {
    const { store, writer } = storeWith(t, 4);
    // Counters from a status a moment before the worker was killed: 6 retained, the file holds 4.
    store.ended('c-x-00000000', 'decap', { ...writer.stats(), retained: 6 }, false);
    const r = store.answer(request([4, 5, 9]));
    t.same(
      r.records.map((x) => x.frame),
      [4],
    );
    t.same(r.missing, [
      { frame: 5, reason: 'RETENTION_CUT' },
      { frame: 9, reason: 'RETENTION_CUT' },
    ]);
    t.end();
  },
);

void t.test('the budget across captures; a directory that cannot be used; the sweep', (t) => {
  const dir = tempDir(t);
  const store = new RetentionStore({
    dir,
    maxBytes: 1 << 20,
    totalBytes: 1.5 * (1 << 20),
    onWarning: () => undefined,
  });
  t.teardown(() => {
    store.close();
  });
  const a = store.open('c-a-00000000', 'decap', 0, 65535);
  const b = store.open('c-b-00000000', 'decap', 0, 65535);
  const c = store.open('c-c-00000000', 'decap', 0, 65535);
  t.equal(a?.maxBytes, 1 << 20);
  t.equal(b?.maxBytes, 0.5 * (1 << 20), 'what is left of the budget');
  t.equal(c, null, 'nothing left');
  t.match(store.answer(request([1], { captureId: 'c-c-00000000' })), {
    errorCode: 'RETENTION_OFF',
    message: /budget/,
    missing: [{ frame: 1, reason: 'RETENTION_OFF' }],
  });
  t.equal(store.open('c-a-00000000', 'decap', 0, 65535), a, 'a resent command: the same file');
  store.release('c-a-00000000', 'decap');
  t.not(store.open('c-d-00000000', 'decap', 128, 65535), null, 'released budget is reused');

  const warnings: string[] = [];
  const file = join(dir, 'not-a-dir');
  writeFileSync(file, '');
  const broken = new RetentionStore({ dir: file, onWarning: (m) => warnings.push(m) });
  t.equal(broken.open('c-e-00000000', 'decap', 0, 65535), null);
  t.match(broken.answer(request([1], { captureId: 'c-e-00000000' })).missing, [
    { frame: 1, reason: 'RETENTION_OFF' },
  ]);
  t.ok(warnings.length > 0, 'said once');

  const sweep = tempDir(t);
  writeFileSync(join(sweep, 'hoptrace-retain-999999999-1.pcap'), 'x'); // a pid that cannot exist
  writeFileSync(join(sweep, `hoptrace-retain-${process.pid}-1.pcap`), 'x'); // ours, from before
  writeFileSync(join(sweep, 'keep.txt'), 'x');
  new RetentionStore({ dir: sweep }).close();
  t.same(readdirSync(sweep), ['keep.txt'], 'stale retention names removed, nothing else');
  t.end();
});

void t.test('the capture snaplen and the asked snaplen bound what is kept', (t) => {
  const dir = tempDir(t);
  const store = new RetentionStore({ dir });
  t.teardown(() => {
    store.close();
  });
  t.equal(store.open('c-a-00000000', 'decap', 0, 96)?.snaplen, 96, 'never more than the capture');
  t.equal(store.open('c-b-00000000', 'decap', 65535, 0)?.snaplen, 65535, 'full frames when asked');
  t.equal(store.open('c-c-00000000', 'decap', 1, 0)?.snaplen, 64, 'at least 64 bytes');
  t.equal(store.open('c-d-00000000', 'decap', 0, 0)?.payload, undefined, 'headers only by default');
  t.equal(store.open('c-e-00000000', 'decap', 65535, 0, true)?.payload, true, 'whole when asked');
  t.end();
});

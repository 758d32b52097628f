/**
 * Reading a capture file again from the middle (offline/seek-points.ts, pcap-file.ts resume):
 * every resume point the fast path's readers gather (classic pcap; pcapng with interfaces
 * described along the way and a second section) starts a reader at the frame it names, with the
 * file's frame numbers; a file changed at the point, or a point past its end, reads from the start;
 * the points stay bounded in number; and `analyze`'s identity-header scan and evidence.pcapng use
 * them — shown by damaging every file before the request after the analysis: with the points the
 * re-reads succeed and say the same, without them they meet the damage.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_CLIENT, BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { analyzeFiles } from '../../offline/analyze-files';
import { buildEvidencePcapng } from '../../offline/evidence';
import { scanIdentityHeaders } from '../../offline/identity-scan';
import { openCaptureFile, type ResumePoint } from '../../offline/pcap-file';
import { MAX_SEEK_POINTS, SEEK_SPACING, SeekPoints, resumeFor } from '../../offline/seek-points';
import { openSummaryPcap } from '../../offline/summary-file';
import { loadNativeAddon } from '../../native/loader';
import { epb, idb, shb } from './pcapng-writer';
import { tcp } from './frames';

/** The summary reader's read size here. */
const CHUNK = 64 << 10;

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-seek-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Every frame of a file through the JS reader: number → data (hex) and link type. */
function allFrames(file: string): Map<number, string> {
  const out = new Map<number, string>();
  const r = openCaptureFile(file);
  for (const f of r.frames())
    out.set(f.index, `${f.linktype}/${Buffer.from(f.data).toString('hex')}`);
  return out;
}

/** The resume points the fast path's reader gathers over the whole file. */
function gathered(file: string): readonly ResumePoint[] {
  const r = openSummaryPcap(file, { chunkSize: CHUNK });
  if (r === null) throw new Error('the addon did not load');
  while (r.next() !== null);
  return r.seekPoints();
}

/** A pcapng file: two sections, interfaces described between packets, ~1.4 MB. */
function pcapngFile(path: string): void {
  const blocks: Buffer[] = [];
  for (const le of [true, false]) {
    blocks.push(shb(le), idb(le, 1, 'eth0', 9));
    for (let i = 0; i < 6000; i++) {
      // A second interface (raw IPv4 frames, µs) appears a third of the way into each section.
      if (i === 2000) blocks.push(idb(le, 101, 'tun0', null));
      const onTun = i >= 2000 && i % 3 === 0;
      const seg = {
        src: '10.90.0.42',
        dst: '10.96.0.10',
        sport: 40000 + (i & 255),
        dport: 80,
        seq: i,
        flags: 0x18,
        payload: 'x'.repeat(48 + (i % 40)),
      };
      const data = tcp(0n, seg).data;
      blocks.push(
        epb(le, onTun ? 1 : 0, BigInt(1_700_000_000_000_000 + i), onTun ? data.subarray(14) : data),
      );
    }
  }
  writeFileSync(path, Buffer.concat(blocks));
}

const addon = loadNativeAddon().ok;

void t.test(
  'every resume point starts a reader at its frame',
  { skip: addon ? false : 'the native addon did not load (the fast path gathers the points)' },
  (t) => {
    const pcap = join(dir, 'bench.pcap');
    writeBenchPcap(pcap, 12_000, 'seek0001');
    const ng = join(dir, 'two-sections.pcapng');
    pcapngFile(ng);
    const benchNg = join(dir, 'bench.pcapng');
    writeBenchPcap(benchNg, 12_000, 'seek0001', 'pcapng');
    for (const file of [pcap, ng, benchNg]) {
      const frames = allFrames(file);
      const points = gathered(file);
      const size = readFileSync(file).length;
      // A point is taken where a read of the summary reader starts (here every 64 KiB chunk at
      // most) once SEEK_SPACING bytes lie behind the last: so every gap, the tail's too, is
      // between SEEK_SPACING and SEEK_SPACING + a chunk.
      const offsets = [0, ...points.map((p) => p.offset)];
      const gaps = offsets.slice(1).map((o, k) => o - (offsets[k] ?? 0));
      t.ok(
        gaps.every((g) => g >= SEEK_SPACING && g <= SEEK_SPACING + CHUNK) &&
          size - (offsets.at(-1) ?? 0) <= SEEK_SPACING + CHUNK,
        `${file}: ${points.length} points over ${size} bytes, gaps ${Math.min(...gaps)}–${Math.max(...gaps)}`,
      );
      let ok = 0;
      let before = -1;
      for (const p of points) {
        if (p.offset <= before) t.fail(`points out of order at ${p.offset}`);
        before = p.offset;
        const r = openCaptureFile(file, { resume: p });
        const first = r.frames().next();
        r.close();
        if (!r.resumed || first.done === true) {
          t.fail(`${file}: no resume at ${p.offset}`);
          continue;
        }
        const f = first.value;
        const want = frames.get(p.framesBefore + 1);
        if (
          f.index === p.framesBefore + 1 &&
          `${f.linktype}/${Buffer.from(f.data).toString('hex')}` === want
        )
          ok++;
        else
          t.fail(
            `${file}: the point at ${p.offset} gave frame ${f.index}, not frame ${p.framesBefore + 1} as read from the start`,
          );
      }
      t.equal(
        ok,
        points.length,
        `${file}: each of ${points.length} points gives the frame read from the start`,
      );
      // Read on from a point in the middle to the end: the same frames, the same numbers.
      const mid = points[Math.floor(points.length / 2)];
      if (mid === undefined) continue;
      const r = openCaptureFile(file, { resume: mid });
      let n = 0;
      let same = true;
      for (const f of r.frames()) {
        n++;
        if (frames.get(f.index) !== `${f.linktype}/${Buffer.from(f.data).toString('hex')}`)
          same = false;
      }
      t.ok(
        same && n === frames.size - mid.framesBefore,
        `${file}: from the middle point on, ${n} frames as read from the start`,
      );
    }
    const sections = gathered(ng).filter((p) => p.ng !== undefined);
    t.ok(
      new Set(sections.map((p) => p.ng?.le)).size === 2,
      'pcapng points in both sections (both byte orders)',
    );
    t.ok(
      sections.some((p) => p.ng?.count === 2) && sections.some((p) => p.ng?.count === 1),
      'with the interfaces described before each point',
    );
    t.end();
  },
);

void t.test(
  'a pcapng file that keeps describing interfaces: one list per section, not a copy per point',
  { skip: addon ? false : 'the native addon did not load' },
  (t) => {
    // One SHB, then [IDB, a packet on it] over and over: ~2 MB, ~30,000 interfaces.
    const file = join(dir, 'many-ifaces.pcapng');
    const blocks: Buffer[] = [shb(true)];
    const data = tcp(0n, {
      src: '10.0.0.1',
      dst: '10.0.0.2',
      sport: 1,
      dport: 2,
      seq: 1,
      flags: 2,
    }).data;
    for (let i = 0; i < 30_000; i++)
      blocks.push(idb(true, 1, null, null), epb(true, i, BigInt(i), data));
    writeFileSync(file, Buffer.concat(blocks));
    const points = gathered(file);
    t.ok(points.length >= 5, `${points.length} points`);
    t.equal(new Set(points.map((p) => p.ng?.ifaces)).size, 1, 'all share the one list');
    const counts = points.map((p) => p.ng?.count ?? 0);
    t.ok(
      counts.every((c, k) => k === 0 || c > (counts[k - 1] ?? 0)),
      'each with the count described before it',
    );
    const frames = allFrames(file);
    const mid = points[Math.floor(points.length / 2)];
    if (mid === undefined) return t.end();
    const r = openCaptureFile(file, { resume: mid });
    const got = [...r.frames()].map((f) => f.index);
    t.ok(r.resumed, 'resumed');
    t.equal(
      got.length,
      frames.size - mid.framesBefore,
      'every later frame, its interface described after the point included',
    );
    t.equal(got[0], mid.framesBefore + 1, 'numbered as in the file');
    t.end();
  },
);

void t.test(
  'a file that changed at the point, or ends before it, is read from the start',
  { skip: addon ? false : 'the native addon did not load' },
  (t) => {
    const file = join(dir, 'changed.pcap');
    writeBenchPcap(file, 6000, 'seek0002');
    const [p] = gathered(file);
    if (p === undefined) return t.fail('no resume point');
    const bytes = readFileSync(file);
    bytes[p.offset + 3] = (bytes[p.offset + 3] ?? 0) ^ 0xff; // the record's time
    writeFileSync(file, bytes);
    let r = openCaptureFile(file, { resume: p });
    t.equal(r.resumed, false, 'changed at the point: not resumed');
    t.equal(r.frames().next().value?.index, 1, 'the first frame read is frame 1');
    r = openCaptureFile(file, { resume: { ...p, offset: bytes.length + 100 } });
    t.equal(r.resumed, false, 'a point past the end: not resumed');
    t.equal(r.frames().next().value?.index, 1, 'read from frame 1');
    r.close();
    r = openCaptureFile(file, { resume: { ...p, ng: { le: true, ifaces: [], count: 0 } } });
    t.equal(r.resumed, false, 'a pcapng point on a classic pcap file: not resumed');
    r.close();
    t.end();
  },
);

void t.test('resume points stay bounded; resumeFor picks the last before the frame', (t) => {
  const s = new SeekPoints();
  let added = 0;
  const offers = 5 * MAX_SEEK_POINTS;
  for (let i = 1; i <= offers; i++) {
    const offset = i * SEEK_SPACING;
    if (!s.wants(offset)) continue;
    s.add({ offset, framesBefore: i * 10, head: '00'.repeat(16) });
    added++;
  }
  const pts = s.points();
  t.ok(
    pts.length <= MAX_SEEK_POINTS && added > MAX_SEEK_POINTS,
    `${pts.length} kept of ${added} added`,
  );
  t.ok(
    pts.every((p, k) => k === 0 || p.offset > (pts[k - 1]?.offset ?? 0)),
    'in file order',
  );
  const gaps = pts.map((p, k) => p.offset - (pts[k - 1]?.offset ?? 0));
  const end = offers * SEEK_SPACING;
  t.ok(
    end - (pts.at(-1)?.offset ?? 0) <= Math.max(...gaps) && Math.max(...gaps) <= 8 * SEEK_SPACING,
    `spread over all that was read: gaps up to ${Math.max(...gaps) / SEEK_SPACING} × SEEK_SPACING`,
  );
  for (const frame of [1, 10, 11, 155, 4096 * 17 + 3, 10 ** 9]) {
    const linear = [...pts].reverse().find((p) => p.framesBefore < frame);
    t.equal(resumeFor(pts, frame), linear, `frame ${frame}`);
  }
  t.equal(resumeFor(undefined, 5), undefined, 'no points: none');
  t.end();
});

void t.test(
  'analyze reads the request again from its resume points',
  { skip: addon ? false : 'the native addon did not load' },
  (t) => {
    // The request 50,000 frames in (~7 MB): past several resume points (with the gate, the fast
    // path takes one per 2 MiB chunk it reads).
    const points = (['decap', 'egress', 'backend'] as const).map((name) => {
      const file = join(dir, `late-${name}.pcap`);
      writeBenchPcap(file, 60_000, 'seek0003', 'pcap', BENCH_POINTS[name], 50_000);
      return { name, file };
    });
    const input = {
      points,
      inventory: { nodes: {}, pods: {} },
      selector: { client: BENCH_CLIENT },
    };
    const seek = new Map<string, readonly ResumePoint[]>();
    const r = analyzeFiles(input, { seek, parallel: true });
    t.equal(r.verdict.layer, 'preserved', 'the bench request is preserved');
    t.ok(
      points.every((p) => (seek.get(p.name)?.length ?? 0) >= 3),
      'every point has resume points, the worker passes too',
    );
    const ids = scanIdentityHeaders(points, r, seek);
    const evidence = buildEvidencePcapng({ points, result: r, version: 'test', seek });
    t.equal(evidence.problems.length, 0, 'evidence: no problem');
    t.equal(evidence.packets, 9, "evidence: the request's three packets at each point");
    // Resume points whose bytes the files no longer hold: read from the start, the same answer.
    const stale = new Map(
      [...seek].map(([k, v]) => [k, v.map((p) => ({ ...p, head: 'ff'.repeat(16) }))]),
    );
    t.same(scanIdentityHeaders(points, r, stale), ids, 'stale resume points: the same answer');
    t.same(
      buildEvidencePcapng({ points, result: r, version: 'test', seek: stale }).bytes,
      evidence.bytes,
      'stale resume points: the same evidence',
    );
    // Damage every file's first record (a caplen above libpcap's maximum): a read from the start
    // fails there; one from a resume point never sees it.
    for (const p of points) {
      const b = readFileSync(p.file);
      b.writeUInt32LE(0x7fffffff, 24 + 8);
      writeFileSync(p.file, b);
    }
    t.same(
      scanIdentityHeaders(points, r, seek),
      ids,
      'identity headers: the same answer from the resume points',
    );
    const again = buildEvidencePcapng({ points, result: r, version: 'test', seek });
    t.equal(again.problems.length, 0, 'evidence: still no problem');
    t.same(again.bytes, evidence.bytes, 'evidence: the same bytes');
    const blind = scanIdentityHeaders(points, r);
    t.notSame(
      blind,
      ids,
      'without them the identity scan meets the damage (so the points were used)',
    );
    const blindEvidence = buildEvidencePcapng({ points, result: r, version: 'test' });
    t.ok(
      blindEvidence.problems.some((p) => p.code === 'FILE_BAD_RECORD'),
      'without them evidence meets the damage',
    );
    t.end();
  },
);

/**
 * Later points read on another thread (offline/pass-pool.ts, pass-worker.ts): `hoptrace analyze`
 * gives the same result with workers as on one thread — three and four bench points (four: more
 * later points than workers, the rest read here), pcap and pcapng —; a damaged later file gives
 * the same result (damaged after good frames) or error (damaged at its first record, code and
 * message) as in-thread; a worker that never answers, or whose script
 * fails to load, is given up after the stall time and the pass runs here, with the same result.
 * Fails (never skips) without the addon.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_CLIENT, BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { analyzeFiles, type PointFile } from '../../offline/analyze-files';
import { FilePointStream } from '../../offline/point-stream';
import { PassPool } from '../../offline/pass-pool';
import { analyzeEventStreams } from '../../core/report/analyze';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-pass-pool-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const INV = { nodes: {}, pods: {} };
const FRAMES = 20_000;

function points(fmt: 'pcap' | 'pcapng', four: boolean): PointFile[] {
  const names = ['decap', 'egress', 'backend'] as const;
  const pts: PointFile[] = names.map((name) => {
    const file = join(dir, `${name}.${fmt}`);
    writeBenchPcap(file, FRAMES, 'bench0001', fmt, BENCH_POINTS[name]);
    return { name, file };
  });
  if (four) pts.splice(2, 0, { name: 'node', file: pts[1]?.file ?? '' });
  return pts;
}

const outcome = (pts: PointFile[], parallel: boolean): string => {
  try {
    return JSON.stringify(
      analyzeFiles(
        { points: pts, inventory: INV, selector: { client: BENCH_CLIENT } },
        { parallel },
      ),
    );
  } catch (e) {
    return `error: ${e instanceof Error ? e.message : String(e)}`;
  }
};

void t.test('workers: the same analysis as one thread', (t) => {
  t.ok(availableParallelism() > 1, 'a spare core, so the workers run');
  for (const fmt of ['pcap', 'pcapng'] as const)
    for (const four of [false, true]) {
      const pts = points(fmt, four);
      const one = outcome(pts, false);
      t.match(one, /"layer":"preserved"/, `${fmt}, ${pts.length} points: the request followed`);
      t.equal(outcome(pts, true), one, `${fmt}, ${pts.length} points: workers = one thread`);
    }
  t.end();
});

void t.test('a damaged later file: the same result, or error, from a worker', (t) => {
  const pts = points('pcap', false);
  const bad = join(dir, 'bad-backend.pcap');
  const bytes = readFileSync(pts[2]?.file ?? '');
  // A record header in the middle claiming more than libpcap's maximum.
  let pos = 24;
  for (let k = 0; k < FRAMES / 2; k++) pos += 16 + bytes.readUInt32LE(pos + 8);
  bytes.writeUInt32LE(10_000_000, pos + 8);
  writeFileSync(bad, bytes);
  const damaged = [pts[0], pts[1], { name: 'backend', file: bad }].filter(
    (p): p is PointFile => p !== undefined,
  );
  // Damaged after good frames: analysed up to the damage, which the capture health names.
  const one = outcome(damaged, false);
  t.match(one, /"damaged":\{"offset":\d+,"detail":"record 10001 at offset \d+ claims 10000000/);
  t.match(one, /"code":"FILE_BAD_RECORD"/, 'one thread: the damage named');
  t.equal(outcome(damaged, true), one, 'a worker: the same result');
  // Damaged at its first record: the file's error, the same from a worker.
  const first = Buffer.from(bytes);
  first.writeUInt32LE(10_000_000, 24 + 8);
  const badFirst = join(dir, 'bad-first-backend.pcap');
  writeFileSync(badFirst, first);
  const atFirst = damaged.map((p) => (p.name === 'backend' ? { ...p, file: badFirst } : p));
  const err = outcome(atFirst, false);
  t.match(err, /^error: FILE_BAD_RECORD/, 'one thread: FILE_BAD_RECORD');
  t.equal(outcome(atFirst, true), err, 'a worker: the same error and message');
  t.end();
});

void t.test('a worker that never answers or fails to load is given up', (t) => {
  const pts = points('pcap', false);
  const silent = join(dir, 'silent-worker.js');
  writeFileSync(silent, 'setInterval(() => {}, 1000);\n');
  const broken = join(dir, 'broken-worker.js');
  writeFileSync(broken, "throw new Error('cannot start');\n");
  const one = outcome(pts, false);
  for (const [label, script] of [
    ['silent', silent],
    ['broken', broken],
  ] as const) {
    const pool = new PassPool({ size: 1, script, stallMs: 300 });
    const streams = pts.map(
      ({ name, file }) => new FilePointStream(name, file, true, undefined, true, { pool }),
    );
    const started = Date.now();
    const result = analyzeEventStreams({
      points: streams,
      inventory: INV,
      selector: { client: BENCH_CLIENT },
    });
    pool.close();
    const took = Date.now() - started;
    const health = streams.map((s) => s.health()).filter((h) => h !== null);
    t.equal(health.length, 3, `${label}: every file read to the end`);
    const oneResult = JSON.parse(one) as { verdict: unknown; points: unknown };
    t.same(
      (
        JSON.parse(
          JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
        ) as { verdict: unknown }
      ).verdict,
      oneResult.verdict,
      `${label}: the same verdict, the pass run here`,
    );
    t.ok(took < 30_000, `${label}: bounded (${took} ms)`);
    t.equal(pool.size, 0, `${label}: the worker given up`);
  }
  t.end();
});

/**
 * offline/digest-pool.ts: the inputs' SHA-256 taken beside the analysis. The digests are those of
 * file-digest.ts whichever thread hashed each file (the worker, this thread, or both); a worker
 * that cannot start or exits without answering costs time, never a digest; an unreadable file
 * throws FILE_NOT_FOUND as before; the size and time kept are those read before the analysis.
 */
import { appendFileSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import { PendingDigests } from '../../offline/digest-pool';
import { fileDigest } from '../../offline/file-digest';

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-digest-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Five files of 1–5 MiB (distinct bytes), as point files. */
const points = Array.from({ length: 5 }, (_, k) => {
  const file = join(dir, `p${k}.pcap`);
  const b = Buffer.alloc((k + 1) << 20);
  for (let i = 0; i < b.length; i += 4096) b[i] = (i >> 12) + k;
  writeFileSync(file, b);
  return { name: `p${k}`, file };
});
const want = new Map(points.map((p) => [p.name, fileDigest(p.file).sha256]));
const sums = (m: Map<string, { sha256: string }>): Map<string, string> =>
  new Map([...m].map(([k, v]) => [k, v.sha256]));

void t.test(
  'the same digests with the worker, without it, and standard input left out',
  async (t) => {
    const withWorker = await new PendingDigests(points).take();
    t.same(sums(withWorker), want, 'with the worker');
    t.same(
      sums(await new PendingDigests(points, { worker: false }).take()),
      want,
      'this thread alone',
    );
    const stdin = await new PendingDigests([
      ...points.slice(0, 2),
      { name: 'in', file: '-' },
    ]).take();
    t.same([...stdin.keys()], ['p0', 'p1'], "'-' is not hashed");
    // The worker hashes while this thread is busy (the analysis): it has taken files by then.
    const busy = new PendingDigests(points);
    // This thread blocked, as during analyzeFiles, until the worker has claimed every file (a
    // worker under tap can take a second to start), at most 20 s.
    const until = Date.now() + 20_000;
    while (busy.claimed() < points.length && Date.now() < until);
    t.same(sums(await busy.take()), want, 'after this thread was blocked');
    t.equal(busy.hashed.worker, 5, 'the worker hashed them meanwhile');
    t.equal(busy.hashed.here, 0, 'none twice');
  },
);

void t.test(
  'a worker that cannot start, or exits without answering, costs no digest',
  async (t) => {
    const broken = join(dir, 'broken-worker.js');
    writeFileSync(broken, "throw new Error('broken');\n");
    t.same(
      sums(await new PendingDigests(points, { script: broken }).take()),
      want,
      'throws at start',
    );
    const claimer = join(dir, 'claiming-worker.js');
    // Claims two files and exits without a word: this thread must hash them itself.
    writeFileSync(
      claimer,
      "const { workerData } = require('node:worker_threads');\n" +
        'Atomics.add(workerData.claim, 0, 2);\n',
    );
    const claimed = new PendingDigests(points, { script: claimer });
    const until = Date.now() + 20_000;
    while (claimed.claimed() < 2 && Date.now() < until); // it claims before this thread does
    t.same(sums(await claimed.take()), want, 'claimed files hashed here after the worker exited');
    t.equal(claimed.hashed.here, 5, 'all of them here');
    t.same(
      sums(await new PendingDigests(points, { script: join(dir, 'no-such-worker.js') }).take()),
      want,
      'a worker script that is missing',
    );
  },
);

void t.test('an unreadable file throws FILE_NOT_FOUND; close() stops the worker', async (t) => {
  const missing = [...points, { name: 'gone', file: join(dir, 'gone.pcap') }];
  for (const worker of [true, false]) {
    const p = new PendingDigests(missing, { worker });
    let code = 'no error';
    try {
      await p.take();
    } catch (e) {
      code = isHoptraceError(e) ? e.code : String(e);
    }
    t.equal(code, 'FILE_NOT_FOUND', `worker ${String(worker)}`);
  }
  const p = new PendingDigests(points);
  p.close();
  t.pass('closed without waiting');
});

void t.test('the size and time kept are those read before the analysis', async (t) => {
  const file = join(dir, 'growing.pcap');
  writeFileSync(file, Buffer.alloc(1 << 20, 7));
  utimesSync(file, 1_700_000_000, 1_700_000_000);
  const pending = new PendingDigests([{ name: 'g', file }]);
  // The capture goes on while it is analysed.
  appendFileSync(file, Buffer.alloc(100, 8));
  const d = (await pending.take()).get('g');
  t.equal(d?.mtimeMs, 1_700_000_000_000, 'the time read before the analysis');
  t.not(d?.mtimeMs, fileDigest(file).mtimeMs, 'which report-dir.ts changedSince sees as changed');
});

/**
 * offline/digest-pool.ts: the inputs' SHA-256 taken beside the analysis. The digests are those of
 * file-digest.ts whichever thread hashed each file (the worker, this thread, or both); a worker
 * that cannot start, fails on a file or exits without answering costs time, never a digest; an
 * unreadable file throws FILE_NOT_FOUND as before; only regular files are hashed; the time kept is
 * the one read before the analysis, and a size that changed marks the digest `changed`.
 */
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
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

/**
 * Blocks this thread, as analyzeFiles does, until `cond` holds (at most 20 s: a worker under tap
 * can take seconds to start), sleeping between checks so the worker has the core.
 */
function blockUntil(cond: () => boolean): boolean {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 20_000;
  while (!cond() && Date.now() < until) Atomics.wait(nap, 0, 0, 10);
  return cond();
}

/** A worker script of the test's own in the temp dir (CommonJS source). */
function workerScript(name: string, source: string): string {
  const file = join(dir, name);
  writeFileSync(file, source);
  return file;
}

const noSpareCore =
  availableParallelism() < 2 ? 'one core: no worker is started (every file is hashed here)' : false;

void t.test('the same digests with the worker, without it; only regular files', async (t) => {
  t.same(sums(await new PendingDigests(points).take()), want, 'with the worker');
  t.same(
    sums(await new PendingDigests(points, { worker: false }).take()),
    want,
    'this thread alone',
  );
  const odd = await new PendingDigests([
    ...points.slice(0, 2),
    { name: 'in', file: '-' },
    { name: 'dev', file: '/dev/null' },
  ]).take();
  t.same([...odd.keys()], ['p0', 'p1'], "'-' and a file that is not a regular one are not hashed");
});

void t.test('the worker hashes while this thread is blocked', { skip: noSpareCore }, async (t) => {
  const busy = new PendingDigests(points);
  t.ok(
    blockUntil(() => busy.claimed() === points.length),
    'the worker claimed every file',
  );
  t.same(sums(await busy.take()), want, 'the digests');
  t.equal(busy.hashed.worker, 5, 'the worker hashed them');
  t.equal(busy.hashed.here, 0, 'none twice');
});

void t.test(
  'a worker that cannot start, or exits without answering, costs no digest',
  { skip: noSpareCore },
  async (t) => {
    const broken = workerScript('broken-worker.js', "throw new Error('broken');\n");
    t.same(
      sums(await new PendingDigests(points, { script: broken }).take()),
      want,
      'throws at start',
    );
    t.same(
      sums(await new PendingDigests(points, { script: join(dir, 'no-such-worker.js') }).take()),
      want,
      'a worker script that is missing',
    );
    // Claims two files and exits without a word: this thread must hash them itself.
    const claimer = workerScript(
      'claiming-worker.js',
      "const { workerData } = require('node:worker_threads');\n" +
        'Atomics.add(workerData.claim, 0, 2);\n',
    );
    const claimed = new PendingDigests(points, { script: claimer });
    t.ok(
      blockUntil(() => claimed.claimed() >= 2),
      'it claimed two before this thread took any',
    );
    t.same(sums(await claimed.take()), want, 'claimed files hashed here after it exited');
    t.equal(claimed.hashed.here, 5, 'all of them here');
  },
);

void t.test('an unreadable file throws FILE_NOT_FOUND, whoever claimed it', async (t) => {
  const missing = [...points, { name: 'gone', file: join(dir, 'gone.pcap') }];
  const codeOf = async (p: PendingDigests): Promise<string> => {
    try {
      await p.take();
      return 'no error';
    } catch (e) {
      return isHoptraceError(e) ? e.code : String(e);
    }
  };
  t.equal(await codeOf(new PendingDigests(missing, { worker: false })), 'FILE_NOT_FOUND', 'here');
  if (noSpareCore !== false) return;
  // The worker claims every file, fails on the missing one, and this thread reads it again.
  const p = new PendingDigests(missing);
  t.ok(
    blockUntil(() => p.claimed() === missing.length),
    'the worker claimed all six',
  );
  t.equal(await codeOf(p), 'FILE_NOT_FOUND', 'by the worker');
  t.equal(p.hashed.worker, 5, 'the readable ones hashed there');
});

void t.test(
  'close() stops a worker that would not stop by itself',
  { skip: noSpareCore },
  async (t) => {
    const beat = join(dir, 'heartbeat');
    // Never exits by itself; appends a byte every 5 ms while it runs.
    const stuck = workerScript(
      'stuck-worker.js',
      `const { appendFileSync } = require('node:fs');\n` +
        `setInterval(() => appendFileSync(${JSON.stringify(beat)}, '.'), 5);\n`,
    );
    const p = new PendingDigests(points, { script: stuck });
    t.ok(
      blockUntil(() => existsSync(beat)),
      'it runs',
    );
    const closed = await Promise.race([
      p.close().then(() => 'closed'),
      new Promise((r) =>
        setTimeout(() => {
          r('still running after 10 s');
        }, 10_000).unref(),
      ),
    ]);
    t.equal(closed, 'closed');
    const size = statSync(beat).size;
    await new Promise((r) => setTimeout(r, 100));
    t.equal(statSync(beat).size, size, 'and it no longer runs');
  },
);

void t.test(
  'the time kept is the one before the analysis; a new size marks it changed',
  async (t) => {
    const file = join(dir, 'growing.pcap');
    writeFileSync(file, Buffer.alloc(1 << 20, 7));
    utimesSync(file, 1_700_000_000, 1_700_000_000);
    const pending = new PendingDigests([{ name: 'g', file }], { worker: false });
    // The capture goes on while it is analysed; its time even reads the same afterwards.
    appendFileSync(file, Buffer.alloc(100, 8));
    utimesSync(file, 1_700_000_000, 1_700_000_000);
    const d = (await pending.take()).get('g');
    t.equal(d?.mtimeMs, 1_700_000_000_000, 'the time read before the analysis');
    t.equal(d?.changed, true, 'the size hashed is not the size before: changed');
    const same = (await new PendingDigests([{ name: 'g', file }], { worker: false }).take()).get(
      'g',
    );
    t.equal(same?.changed, undefined, 'an unchanged file is not marked');
  },
);

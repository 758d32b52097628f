/**
 * What the data directory keeps of finished captures and repros (collector/retention.ts,
 * collector/finished-index.ts). Before, nothing was ever removed (~75 KB a capture for good: an
 * API token holder making and cancelling captures filled the disk), and a start read every
 * capture's session.json (20,000 finished ones: 1.5 s warm, 8.1 s from a cold page cache).
 */
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseCollectorArgs } from '../../cli/collector';
import { parseAge } from '../../cli/args';
import type { CaptureView } from '../../collector/capture-views';
import { FinishedIndex } from '../../collector/finished-index';
import type { CollectorLogger } from '../../collector/logger';
import {
  expiredFinished,
  RETAIN_SETTLE_MS,
  retentionText,
  type FinishedEntry,
} from '../../collector/disk-retention';
import { CaptureStore } from '../../collector/store';
import { sweepExpired } from '../../collector/retention-sweep';
import { NETNS_REPRO } from './collector-fixtures';
import { collector, SPEC, tempDir, TOKEN } from './finished-fixtures';

const H = 3_600_000;
const entries = (...ats: number[]): FinishedEntry[] =>
  ats.map((atMs, i) => ({ id: `c-${i}`, atMs }));

void t.test(
  'expiredFinished: beyond the count, past the age, never a settling or kept one',
  (t) => {
    const now = 100 * H;
    const xs = entries(10 * H, 50 * H, 90 * H, 99 * H, now - 1_000);
    t.strictSame(expiredFinished(xs, now, { maxCount: null, maxAgeMs: null }), [], 'keep all');
    t.strictSame(
      expiredFinished(xs, now, { maxCount: 2, maxAgeMs: null }),
      ['c-0', 'c-1', 'c-2'],
      'the oldest beyond the two most recent',
    );
    t.strictSame(
      expiredFinished([...xs].reverse(), now, { maxCount: 2, maxAgeMs: null }),
      ['c-0', 'c-1', 'c-2'],
      'by when they finished, whatever the order given',
    );
    t.strictSame(
      expiredFinished(xs, now, { maxCount: null, maxAgeMs: 24 * H }),
      ['c-0', 'c-1'],
      'older than a day',
    );
    t.strictSame(
      expiredFinished(xs, now, { maxCount: 0, maxAgeMs: null }),
      ['c-0', 'c-1', 'c-2', 'c-3'],
      `one finished less than ${RETAIN_SETTLE_MS / 1000} s ago is still written to: kept`,
    );
    t.strictSame(
      expiredFinished(xs, now, { maxCount: 2, maxAgeMs: null }, (id) => id === 'c-1'),
      ['c-0', 'c-2'],
      'one the caller keeps is kept',
    );
    t.equal(
      retentionText({ maxCount: 10_000, maxAgeMs: 30 * 24 * H }, 'captures'),
      'the 10,000 most recent finished captures and finished captures younger than 30 d',
    );
    t.equal(retentionText({ maxCount: null, maxAgeMs: null }, 'repros'), 'all finished repros');
    t.end();
  },
);

void t.test('FinishedIndex: appended, a torn or foreign line skipped, compacted', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'finished.idx');
  const rewrites: string[] = [];
  const open = (): FinishedIndex => {
    const x = new FinishedIndex(path, (p, text) => {
      rewrites.push(text);
      writeFileSync(p, text);
    });
    x.load();
    return x;
  };
  const a = open();
  t.equal(a.size, 0, 'no file: empty');
  a.add('c-a1-00000001', 1000);
  a.add('c-a2-00000002', 2000);
  a.add('c-a2-00000002', 2000);
  a.remove(['c-a1-00000001', 'c-nope-00000003']);
  t.equal(readFileSync(path, 'utf8').split('\n').length - 1, 3, 'two lines and one removal');
  // A line cut by a crash can still look like one ("…04 12" of "…04 1234"): only whole lines count.
  appendFileSync(path, '../../etc 5\nc-a3-00000004 12');
  const b = open();
  t.strictSame(b.entries(), [{ id: 'c-a2-00000002', atMs: 2000 }], 'the torn last line is not one');
  t.equal(b.skipped, 2, 'two lines that are not one, counted');
  t.ok(readFileSync(path, 'utf8').endsWith('\n'), 'rewritten at once: the next line starts whole');
  for (let i = 0; i < 80; i++) b.add(`c-b${i}-0000000${i % 10}`, i);
  b.remove(Array.from({ length: 80 }, (_, i) => `c-b${i}-0000000${i % 10}`));
  t.equal(rewrites.length, 2, 'rewritten once it held twice the lines it needs');
  const c = open();
  t.strictSame(c.entries(), [{ id: 'c-a2-00000002', atMs: 2000 }]);
  c.add('c-a5-00000005', 3000);
  c.add('c-a4-00000004', 500);
  t.strictSame(
    c.entries().map((e) => e.atMs),
    [500, 2000, 3000],
    'oldest first, one added out of order sorted in',
  );
  t.end();
});

/** A clock the test moves. */
function testClock(): { nowMs(): number; advance(ms: number): void } {
  let now = Date.now();
  return {
    nowMs: () => now,
    advance: (ms) => {
      now += ms;
    },
  };
}

function recordingLogger(): CollectorLogger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (_: unknown, m: string): void => {
    lines.push(m);
  };
  return { lines, info: keep, warn: keep, error: keep, debug: keep };
}

type CaptureList = { captures: CaptureView[]; olderFinished: number };

void t.test(
  '--retain-finished: the oldest finished captures leave the data directory (and memory)',
  async (t) => {
    const dir = tempDir(t);
    const clock = testClock();
    const log = recordingLogger();
    const opts = {
      captures: 2,
      repros: 1,
      clock,
      logger: log,
      retain: { maxCount: 3, maxAgeMs: null },
    };
    const { req, close } = collector(t, dir, opts);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = ((await req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
      t.equal((await req('DELETE', `/v1/captures/${id}`)).status, 200);
      ids.push(id);
      clock.advance(RETAIN_SETTLE_MS + 1);
    }
    const stored = (): string[] =>
      readdirSync(join(dir, 'captures'))
        .filter((d) => d.startsWith('c-'))
        .sort();
    // A capture's evidence and digests are written after its verdict: it is kept until they are.
    for (let i = 0; i < 500 && stored().length > 3; i++)
      await new Promise((r) => setTimeout(r, 10));
    t.strictSame(stored(), ids.slice(2).sort(), 'the three most recent are kept (all five before)');
    t.equal((await req('GET', `/v1/captures/${ids[0]}`)).status, 404, 'a removed one is gone');
    t.equal((await req('GET', `/v1/captures/${ids[2]}`)).status, 200, 'a kept older one is read');
    const list = (await req('GET', '/v1/captures')).json as CaptureList;
    t.strictSame(
      list.captures.map((c) => c.id),
      ids.slice(3),
    );
    t.equal(list.olderFinished, 1, 'one older one kept on disk, not listed');
    t.match(log.lines.join('\n'), /removed 1 finished capture from the data directory: it keeps/);

    // The age limit: a restart with the clock two days on removes what is older than a day.
    await close();
    clock.advance(48 * H);
    const again = collector(t, dir, { ...opts, retain: { maxCount: 3, maxAgeMs: 24 * H } });
    t.strictSame(stored(), [], 'all three older than a day: removed at start');
    t.equal(((await again.req('GET', '/v1/captures')).json as CaptureList).olderFinished, 0);
  },
);

void t.test(
  'a start reads only the unfinished and the newest finished captures; the index is a cache',
  async (t) => {
    const dir = tempDir(t);
    const clock = testClock();
    const first = collector(t, dir, { captures: 1, repros: 1, clock });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = ((await first.req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
      await first.req('DELETE', `/v1/captures/${id}`);
      ids.push(id);
      clock.advance(1000);
    }
    const running = ((await first.req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
    await first.close();
    // The oldest's record damaged: the old start read (and moved aside) every capture.
    writeFileSync(join(dir, 'captures', ids[0] ?? '', 'session.json'), '{"damaged"');
    const store = new CaptureStore({ dir, fsync: false });
    const loaded = store.loadSessions(1).map((l) => l.record.id);
    t.strictSame(loaded, [ids[2], running].sort(), 'the newest finished and the running one');
    t.equal(store.finishedNotLoaded, 2, 'two finished ones left unread');
    t.strictSame(store.quarantined, [], 'the damaged one was not read at all');
    t.ok(existsSync(join(dir, 'captures', ids[0] ?? '')));

    // Without the index (an older version's data directory, or it was lost), every capture is
    // read once and indexed; the damaged one is then moved aside, as before.
    writeFileSync(join(dir, 'captures', 'finished.idx'), '');
    const again = new CaptureStore({ dir, fsync: false });
    t.strictSame(
      again.loadSessions(1).map((l) => l.record.id),
      [ids[2], running].sort(),
    );
    t.equal(again.finishedNotLoaded, 1);
    t.equal(again.quarantined.length, 1, 'read, and moved aside');
    t.strictSame(
      again
        .finishedEntries()
        .map((e) => e.id)
        .sort(),
      [ids[1], ids[2]].sort(),
      'indexed again',
    );
    t.strictSame(
      new CaptureStore({ dir, fsync: false }).loadSessions(1).map((l) => l.record.id),
      [ids[2], running].sort(),
      'and the next start reads from the index again',
    );
  },
);

void t.test(
  '--retain-finished-repros: the oldest finished repros leave the data directory',
  async (t) => {
    const dir = tempDir(t);
    const clock = testClock();
    const { req } = collector(t, dir, {
      captures: 2,
      repros: 1,
      clock,
      retainRepros: { maxCount: 1, maxAgeMs: null },
    });
    const ids: string[] = [];
    const finish = async (id: string): Promise<void> => {
      await req('POST', `/v1/repros/${id}/finish`, {
        returnRoutes: [{ node: 'vpn-node', dst: '10.90.0.0/24', dev: 'tun0' }],
      });
    };
    const make = async (): Promise<string> => {
      const id = ((await req('POST', '/v1/repros', NETNS_REPRO)).json as { id: string }).id;
      ids.push(id);
      return id;
    };
    // The first finished two minutes ago (its view's time moved back).
    await finish(await make());
    const past = (Date.now() - 120_000) / 1000;
    utimesSync(join(dir, 'repros', `${ids[0]}.json`), past, past);
    // The second started two minutes ago and finishes now: by its start it would be past the
    // settle minute, and removed as soon as the third lets it go from memory.
    clock.advance(-120_000);
    const second = await make();
    clock.advance(120_000);
    await finish(second);
    await finish(await make());
    const left = readdirSync(join(dir, 'repros')).sort();
    t.strictSame(
      left,
      [ids[1], `${ids[1]}.json`, ids[2], `${ids[2]}.json`].sort(),
      'the newest kept, the one finished within a minute (started before) not yet removed, the oldest gone',
    );
    t.equal((await req('GET', `/v1/repros/${ids[0]}`)).status, 404);
    t.equal((await req('GET', `/v1/repros/${ids[2]}`)).status, 200);
  },
);

void t.test('--retain-finished, --retain-finished-repros and --retain-age', (t) => {
  const env = { HOPTRACE_TOKEN: TOKEN };
  const d = parseCollectorArgs([], env);
  t.strictSame(d.retainFinished, { maxCount: 10_000, maxAgeMs: null }, 'the default');
  t.strictSame(d.retainFinishedRepros, { maxCount: 1_000, maxAgeMs: null });
  const o = parseCollectorArgs(
    ['--retain-finished', '0', '--retain-finished-repros', '20', '--retain-age', '30d'],
    env,
  );
  t.strictSame(o.retainFinished, { maxCount: null, maxAgeMs: 30 * 24 * H }, '0 keeps every one');
  t.strictSame(o.retainFinishedRepros, { maxCount: 20, maxAgeMs: 30 * 24 * H });
  for (const bad of ['-1', '1.5', 'many'])
    t.throws(() => parseCollectorArgs([`--retain-finished=${bad}`], env), {
      code: 'CLI_USAGE',
      where: '--retain-finished',
    });
  t.throws(() => parseCollectorArgs(['--retain-age', '0.5m'], env), {
    code: 'CLI_USAGE',
    where: '--retain-age',
    message: /shorter than a minute/,
  });
  t.throws(() => parseCollectorArgs(['--retain-age', '30s'], env), {
    code: 'CLI_USAGE',
    where: '--retain-age',
    message: /not an age/,
  });
  t.throws(() => parseCollectorArgs(['--retain-age', '3w'], env), {
    code: 'CLI_USAGE',
    message: /not an age/,
  });
  t.equal(parseAge('12h', '--x'), 12 * H);
  t.equal(parseAge('1.5d', '--x'), 36 * H);
  t.throws(() => parseAge('9'.repeat(30) + 'd', '--x'), { code: 'CLI_USAGE' });
  t.throws(() => parseAge('30', '--x'), { code: 'CLI_USAGE' }, 'a unit is required');
  t.end();
});

void t.test('a sweep skips what it cannot remove and goes on', (t) => {
  const log = recordingLogger();
  const forgotten: string[] = [];
  const n = sweepExpired(
    ['a', 'b', 'c'],
    { one: 'capture', policy: { maxCount: 1, maxAgeMs: null } },
    (id) => {
      if (id === 'a') throw new Error('EACCES');
    },
    (id) => forgotten.push(id),
    log,
  );
  // Before, the first failure ended the sweep — and, oldest first, every later sweep: retention
  // stopped for good behind one directory it could not remove.
  t.equal(n, 2);
  t.strictSame(forgotten, ['b', 'c']);
  t.match(log.lines[0], /cannot remove 1 finished capture past the retention \(a\): tried again/);
  t.match(log.lines[1], /removed 2 finished captures/);
  t.end();
});

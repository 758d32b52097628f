/**
 * Finished captures and repros are held in memory up to a count, the most recent (a review
 * found every capture ever made held for the collector's life: ~27 KB each, and an API token
 * holder can make and cancel ~1 M a day). An older one is read from the data directory when
 * asked for by id — its view, reports and bundle as before — and no longer listed; the list (the
 * API's and the web view's) says how many it leaves out and how to open one. A restarted
 * collector holds the same most recent ones. A finished repro that could not be saved is never
 * let go, and the repro list, /healthz and the web view count those.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseCollectorArgs } from '../../cli/collector';
import type { CaptureView } from '../../collector/capture-views';
import { newestFinished, RecentFinished } from '../../collector/recent-finished';
import { CaptureStore } from '../../collector/store';
import { HoptraceError } from '../../common/errors';
import { answerWithReplay, NETNS_REPRO, twoNodeHub } from './collector-fixtures';
import { PCAPS } from './corpus';
import { collector, SPEC, tempDir, TOKEN } from './finished-fixtures';

void t.test('RecentFinished lets the oldest go past its count, never a pinned one', (t) => {
  const evicted: string[] = [];
  const pinned = new Set<string>();
  const r = new RecentFinished(
    2,
    (id) => evicted.push(id),
    (id) => pinned.has(id),
  );
  r.add('a');
  r.add('b');
  t.strictSame(evicted, [], 'two held');
  r.add('a'); // again: now the newest
  pinned.add('b');
  r.add('c');
  t.strictSame(evicted, ['a'], 'b is the oldest but pinned: a goes');
  r.add('d');
  t.strictSame(evicted, ['a', 'c'], 'and then c');
  t.equal(r.held(), 2);
  pinned.delete('b');
  r.add('e');
  t.strictSame(evicted, ['a', 'c', 'b'], 'unpinned, b goes at the next finish');
  pinned.add('d');
  pinned.add('e');
  r.add('f');
  t.equal(r.held(), 3, 'all the older ones pinned: more are held than the count');
  t.equal(r.older(), 3);
  t.equal(r.pinnedCount(), 2, 'd and e: held in memory only');
  pinned.delete('e');
  t.equal(r.pinnedCount(), 1, 'counted as they are now');
  r.countOlder(5);
  t.equal(r.older(), 8, 'let go, and found older at a start');
  t.throws(() => new RecentFinished(0, () => undefined), RangeError);
  t.end();
});

void t.test('newestFinished keeps the most recent by time, oldest first', (t) => {
  const xs = [
    { id: 'x', at: 30 },
    { id: 'y', at: 10 },
    { id: 'z', at: 20 },
    { id: 'w', at: 30 },
  ];
  t.strictSame(
    newestFinished(xs, 2, (x) => x.at).map((x) => x.id),
    ['x', 'w'],
  );
  t.strictSame(
    newestFinished(xs, 9, (x) => x.at).map((x) => x.id),
    ['y', 'z', 'x', 'w'],
  );
  t.end();
});

type CaptureList = { captures: CaptureView[]; olderFinished: number };
type ReproList = {
  repros: { id: string; state: string }[];
  olderFinished: number;
  pinned: number;
};

void t.test(
  'finished captures past --keep-finished leave memory, are read from the data directory, and a restart holds the same',
  async (t) => {
    const dir = tempDir(t);
    const { sessions, req, close } = collector(t, dir, { captures: 2, repros: 1 });
    const ids: string[] = [];
    const reports = new Map<string, string>();
    for (let i = 0; i < 4; i++) {
      const made = await req('POST', '/v1/captures', SPEC);
      t.equal(made.status, 201);
      const id = (made.json as CaptureView).id;
      ids.push(id);
      t.equal((await req('DELETE', `/v1/captures/${id}`)).status, 200);
      const md = await req('GET', `/v1/captures/${id}/report.md`);
      t.equal(md.status, 200, 'a cancelled capture has its report');
      reports.set(id, md.text);
    }
    const listed = (await req('GET', '/v1/captures')).json as CaptureList;
    t.strictSame(
      listed.captures.map((c) => c.id),
      ids.slice(2),
      'the two most recent are listed (the old collector listed all four, held in memory)',
    );
    t.equal(listed.olderFinished, 2, 'and the list says two older ones are left out');
    t.equal(sessions.list().length, 2, 'two held in memory');
    // The web view's list says so too, and how to open one (it listed the two without a word).
    const page = await req('GET', '/ui/');
    t.equal(page.status, 200);
    t.match(
      page.text,
      '<p class="note older">2 older finished captures are not listed (no longer held in memory, still in the data directory); open one by id: <code>/ui/captures/&lt;id&gt;</code>.</p>',
    );
    t.notMatch(page.text, /older finished repro/, 'no repro was let go');
    t.notMatch(page.text, /No captures yet/);
    const byId = await req('GET', `/ui/captures/${ids[0]}`);
    t.equal(byId.status, 200, 'the older one opens by that URL');
    t.match(byId.text, `Capture ${ids[0]}`);

    // The oldest, from the data directory: its view, report, bundle and archive as before.
    const old = await req('GET', `/v1/captures/${ids[0]}`);
    t.equal(old.status, 200);
    t.match(old.json, { id: ids[0], state: 'cancelled' });

    const md = await req('GET', `/v1/captures/${ids[0]}/report.md`);
    t.equal(md.status, 200);
    t.equal(md.text, reports.get(ids[0] ?? ''), 'its report, as written');
    t.equal((await req('GET', `/v1/captures/${ids[0]}/SHA256SUMS`)).status, 200);
    t.equal((await req('GET', `/v1/captures/${ids[0]}/bundle.tar`)).status, 200);
    const again = await req('DELETE', `/v1/captures/${ids[1]}`);
    t.equal(again.status, 200, 'cancelling a finished one that left memory answers its view');
    t.match(again.json, { id: ids[1], state: 'cancelled' });
    t.equal(
      (await req('GET', '/v1/captures/c-zzzzzzzz-00000000')).status,
      404,
      'an id that was never made is still not found',
    );

    // A restart holds the two most recent again, and counts the others.
    await close();
    const second = collector(t, dir, { captures: 2, repros: 1 });
    const relisted = (await second.req('GET', '/v1/captures')).json as CaptureList;
    t.strictSame(
      relisted.captures.map((c) => c.id),
      ids.slice(2),
    );
    t.equal(relisted.olderFinished, 2);
    t.match((await second.req('GET', `/v1/captures/${ids[0]}`)).json, {
      id: ids[0],
      state: 'cancelled',
    });
  },
);

void t.test(
  'a finished capture whose stored record is damaged is STORE_IO, not "no such capture"',
  async (t) => {
    const dir = tempDir(t);
    const { req } = collector(t, dir, { captures: 1, repros: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const id = ((await req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
      await req('DELETE', `/v1/captures/${id}`);
      ids.push(id);
    }
    writeFileSync(join(dir, 'captures', ids[0] ?? '', 'session.json'), '{"not": "a record"');
    const r = await req('GET', `/v1/captures/${ids[0]}`);
    t.equal(r.status, 503);
    t.match(r.json, { error: { code: 'STORE_IO', message: /session\.json/ } });
  },
);

void t.test(
  'finished repros past --keep-finished-repros leave memory and are read from the data directory',
  async (t) => {
    const dir = tempDir(t);
    const { req, close } = collector(t, dir, { captures: 2, repros: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const made = await req('POST', '/v1/repros', NETNS_REPRO);
      t.equal(made.status, 201);
      const id = (made.json as { id: string }).id;
      ids.push(id);
      // Routes given and no frames to fetch: the fake agents answer no request.
      const done = await req('POST', `/v1/repros/${id}/finish`, {
        returnRoutes: [{ node: 'vpn-node', dst: '10.90.0.0/24', dev: 'tun0' }],
      });
      t.equal(done.status, 200);
    }
    const listed = (await req('GET', '/v1/repros')).json as ReproList;
    t.strictSame(
      listed.repros.map((r) => r.id),
      ids.slice(2),
      'the most recent is listed',
    );
    t.equal(listed.olderFinished, 2);
    t.equal(listed.pinned, 0, 'each was saved: none held in memory only');
    t.match((await req('GET', '/healthz')).json, { ok: true, reprosPinned: 0 });
    const page = await req('GET', '/ui/');
    t.match(
      page.text,
      /<p class="note older">2 older finished repros are not listed .*<code>\/ui\/repros\/&lt;id&gt;<\/code>/,
    );
    t.notMatch(page.text, /older finished capture|held in memory only/);
    t.equal(
      (await req('GET', `/ui/repros/${ids[0]}`)).status,
      200,
      'the older one opens by that URL',
    );
    const old = await req('GET', `/v1/repros/${ids[0]}`);
    t.equal(old.status, 200, 'an older one is read from the data directory');
    t.match(old.json, { id: ids[0], state: 'finished' });
    t.equal((await req('GET', `/v1/repros/${ids[0]}/report.md`)).status, 200);
    t.equal((await req('GET', `/v1/repros/${ids[0]}/bundle.tar`)).status, 200);

    await close();
    const second = collector(t, dir, { captures: 2, repros: 1 });
    const relisted = (await second.req('GET', '/v1/repros')).json as ReproList;
    t.strictSame(
      relisted.repros.map((r) => r.id),
      ids.slice(2),
      'a restart holds the most recent',
    );
    t.equal(relisted.olderFinished, 2);
    t.match((await second.req('GET', `/v1/repros/${ids[1]}`)).json, { id: ids[1] });
  },
);

void t.test('--keep-finished and --keep-finished-repros take a whole number ≥ 1', (t) => {
  const env = { HOPTRACE_TOKEN: TOKEN };
  const opts = parseCollectorArgs(['--keep-finished', '5', '--keep-finished-repros', '3'], env);
  t.equal(opts.keepFinished, 5);
  t.equal(opts.keepFinishedRepros, 3);
  t.equal(parseCollectorArgs([], env).keepFinished, undefined, 'the default (1,000) unless given');
  for (const flag of ['--keep-finished', '--keep-finished-repros'])
    for (const bad of ['0', '-1', '1.5', 'many'])
      t.throws(
        () => parseCollectorArgs([`${flag}=${bad}`], env),
        { code: 'CLI_USAGE', where: flag, message: /whole number ≥ 1 of finished/ },
        `${flag} ${bad}`,
      );
  t.end();
});

void t.test('a finished capture leaves no events file open', async (t) => {
  const hub = twoNodeHub();
  answerWithReplay(hub, join(PCAPS, 'zeek_http-get.pcap'));
  const { store, req } = collector(t, tempDir(t), { captures: 2, repros: 1 }, hub);
  const id = ((await req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
  const until = async (what: string, ok: () => boolean): Promise<void> => {
    for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
    t.ok(ok(), what);
  };
  await until('both points append their events', () => store.openEventFiles() === 2);
  t.equal((await req('DELETE', `/v1/captures/${id}`)).status, 200);
  // The old collector kept both open for its life: one file per capture point, until EMFILE.
  await until('closed once finished', () => store.openEventFiles() === 0);
  t.equal((await req('GET', `/v1/captures/${id}/report.md`)).status, 200, 'its report is there');
});

void t.test('a finished capture read back from the data directory keeps its layer', async (t) => {
  const hub = twoNodeHub();
  answerWithReplay(hub, join(PCAPS, 'zeek_http-get.pcap'));
  const { req } = collector(t, tempDir(t), { captures: 1, repros: 1 }, hub);
  const id = ((await req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
  let held: CaptureView | undefined;
  for (let i = 0; i < 500; i++) {
    held = (await req('GET', `/v1/captures/${id}`)).json as CaptureView;
    if (held.progress.layer !== null) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await req('DELETE', `/v1/captures/${id}`);
  held = (await req('GET', `/v1/captures/${id}`)).json as CaptureView;
  t.not(held.progress.layer, null, 'held: the live analysis names a layer');
  const other = ((await req('POST', '/v1/captures', SPEC)).json as CaptureView).id;
  await req('DELETE', `/v1/captures/${other}`);
  const read = (await req('GET', `/v1/captures/${id}`)).json as CaptureView;
  t.strictSame(read.progress, held.progress, 'read back: the same (its layer was null)');
  t.equal(read.progress.layer, read.verdict?.layer);
});

void t.test(
  'finished repros whose bundle could not be written stay in memory, and the list, /healthz and the web view count them',
  async (t) => {
    const dir = tempDir(t);
    class FullDisk extends CaptureStore {
      override writeReproBundle(): void {
        throw new HoptraceError('STORE_IO', 'cannot write (ENOSPC)', { where: dir });
      }
    }
    const { req } = collector(
      t,
      dir,
      { captures: 2, repros: 1 },
      twoNodeHub(),
      new FullDisk({ dir, fsync: false }),
    );
    const fresh = (await req('GET', '/v1/repros')).json as ReproList;
    t.equal(fresh.pinned, 0);
    const ui0 = await req('GET', '/ui/');
    t.match(ui0.text, /No repros yet/);
    t.notMatch(ui0.text, /held in memory only|older finished/);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const id = ((await req('POST', '/v1/repros', NETNS_REPRO)).json as { id: string }).id;
      ids.push(id);
      await req('POST', `/v1/repros/${id}/finish`, {
        returnRoutes: [{ node: 'vpn-node', dst: '10.90.0.0/24', dev: 'tun0' }],
      });
    }
    const listed = (await req('GET', '/v1/repros')).json as ReproList;
    t.strictSame(
      listed.repros.map((r) => r.id),
      ids,
      'both held past --keep-finished-repros 1: they are nowhere else',
    );
    t.equal(listed.olderFinished, 0);
    // Before, nothing said so: the list looked like any other, and the memory they hold grew unseen.
    t.equal(listed.pinned, 2, 'the list counts them');
    t.match((await req('GET', '/healthz')).json, { ok: true, reprosPinned: 2 }, '/healthz too');
    t.match(
      (await req('GET', '/ui/')).text,
      /<p class="error pinned">2 finished repros are held in memory only: their bundle or view is not in the data directory \(writing it there failed: STORE_IO in the collector's log\)/,
    );
    t.equal((await req('GET', `/v1/repros/${ids[0]}/report.md`)).status, 200, 'served from memory');
  },
);

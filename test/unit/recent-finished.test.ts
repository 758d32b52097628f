/**
 * Finished captures and repros are held in memory up to a count, the most recent (a review
 * found every capture ever made held for the collector's life: ~27 KB each, and an API token
 * holder can make and cancel ~1 M a day). An older one is read from the data directory when
 * asked for by id — its view, reports and bundle as before — and no longer listed; the list says
 * how many it leaves out. A restarted collector holds the same most recent ones.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseCollectorArgs } from '../../cli/collector';
import type { CaptureView } from '../../collector/capture-views';
import { newestFinished, RecentFinished } from '../../collector/recent-finished';
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
type ReproList = { repros: { id: string; state: string }[]; olderFinished: number };

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

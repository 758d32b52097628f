/**
 * `kubectl hoptrace report` (and capture / repro at their end) checks the bundle it downloads
 * against the SHA256SUMS the collector serves with it (cli/kubectl/bundle-download.ts), here
 * against a fake collector on loopback that serves what each case needs: a wrong byte or a cut
 * file is BUNDLE_CHECKSUM and nothing is written; a collector without SHA256SUMS leaves the files
 * unverified and says so; a bundle rewritten during the download is downloaded again; a
 * SHA256SUMS that is not one is COLLECTOR_BAD_RESPONSE. And common/sha256sums.ts's reader.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { downloadBundle, downloadedLines } from '../../cli/kubectl/bundle-download';
import { CollectorClient } from '../../cli/collector-client';
import { HoptraceError } from '../../common/errors';
import { manifestOf, parseManifest } from '../../common/sha256sums';
import { tempDir } from './live-capture-fixtures';
import { checkSums } from './sums-check';
import { TOKEN, closeServer } from './transport-fixtures';

const ID = 'c-abc-01234567';

/** A capture's bundle as a collector keeps it (SHA256SUMS of these very bytes). */
function bundle(): Map<string, Buffer> {
  const files = new Map<string, Buffer>([
    ['report.md', Buffer.from('# hoptrace: preserved\n')],
    ['report.json', Buffer.from('{"verdict":{"layer":"preserved"}}\n')],
    ['report.html', Buffer.from('<!doctype html><title>hoptrace</title>\n')],
    ['sequence.svg', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>\n')],
    ['evidence.pcapng', Buffer.from([0x0a, 0x0d, 0x0d, 0x0a, 1, 2, 3, 4, 5, 6, 7, 8])],
    ['inventory.json', Buffer.from('{"nodes":{},"pods":{}}\n')],
  ]);
  files.set('SHA256SUMS', Buffer.from(manifestOf(files)));
  return files;
}

/**
 * A collector on loopback serving GET /v1/captures/ID/<name> from `serve(name, n)` (n: how many
 * times that name was asked for before); null is the API's 404.
 */
async function fakeCollector(
  t: { teardown(fn: () => Promise<void>): void },
  serve: (name: string, n: number) => Buffer | null,
): Promise<CollectorClient> {
  const asked = new Map<string, number>();
  const server = createServer((req, res) => {
    const name = (req.url ?? '').slice(`/v1/captures/${ID}/`.length);
    const n = asked.get(name) ?? 0;
    asked.set(name, n + 1);
    const body = serve(name, n);
    if (body === null) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: { code: 'API_NOT_FOUND', message: 'no such endpoint', where: req.url, hint: null },
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(body);
  });
  await new Promise<void>((r) => {
    server.listen(0, '127.0.0.1', r);
  });
  t.teardown(() => closeServer(server));
  return new CollectorClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, TOKEN);
}

/** The download's error, or null when it succeeded. */
const failure = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => null,
    (e: unknown) => e,
  );

const O = { evidenceWaitMs: 0, pollMs: 10 };

void t.test('a whole bundle: verified, SHA256SUMS written beside the files', async (t) => {
  const files = bundle();
  const client = await fakeCollector(t, (name) => files.get(name) ?? null);
  const dir = join(tempDir(t, 'dl-ok'), 'out');
  const d = await downloadBundle(client, ID, dir, O);
  t.same(d.check, { verified: 6 });
  t.same(readdirSync(dir).sort(), [...files.keys()].sort());
  t.equal(
    downloadedLines(d).at(-1),
    '  verified 6 files against SHA256SUMS',
    'the lines say how many files were checked',
  );
  const sums = checkSums(dir);
  t.ok(sums.ok, `${sums.how} in the directory: ${sums.out}`);
  t.end();
});

void t.test('a wrong byte or a cut file: BUNDLE_CHECKSUM, nothing written', async (t) => {
  for (const [what, name, change] of [
    [
      'a byte changed',
      'evidence.pcapng',
      (b: Buffer): Buffer => Buffer.from(b.map((x, i) => (i === 6 ? x ^ 1 : x))),
    ],
    ['cut short', 'report.json', (b: Buffer): Buffer => b.subarray(0, b.length - 3)],
  ] as const) {
    const files = bundle();
    const client = await fakeCollector(t, (n) => {
      const body = files.get(n) ?? null;
      return n === name && body !== null ? change(body) : body;
    });
    const dir = join(tempDir(t, 'dl-bad'), 'out');
    const e = await failure(downloadBundle(client, ID, dir, O));
    t.ok(e instanceof HoptraceError, `${what}: a HoptraceError`);
    t.match(e, {
      code: 'BUNDLE_CHECKSUM',
      message: new RegExp(
        `^BUNDLE_CHECKSUM: GET /v1/captures/${ID}/…: ${name.replace('.', '\\.')}: \\d+ bytes received whose SHA-256 is [0-9a-f]{16}…, SHA256SUMS lists [0-9a-f]{16}…; nothing was written \\(download it again`,
      ),
    });
    t.notOk(existsSync(dir), `${what}: nothing written`);
  }
  t.end();
});

void t.test('listed and not served, or served and not listed: BUNDLE_CHECKSUM', async (t) => {
  const files = bundle();
  const without = await fakeCollector(t, (n) =>
    n === 'inventory.json' ? null : (files.get(n) ?? null),
  );
  t.match(await failure(downloadBundle(without, ID, join(tempDir(t, 'dl-a'), 'o'), O)), {
    code: 'BUNDLE_CHECKSUM',
    message: /inventory\.json: listed in SHA256SUMS, not served \(API_NOT_FOUND/,
  });
  const short = new Map(files);
  short.delete('inventory.json');
  short.set('SHA256SUMS', Buffer.from(manifestOf([...short].filter(([n]) => n !== 'SHA256SUMS'))));
  short.set('inventory.json', files.get('inventory.json') ?? Buffer.alloc(0));
  const extra = await fakeCollector(t, (n) => short.get(n) ?? null);
  t.match(await failure(downloadBundle(extra, ID, join(tempDir(t, 'dl-b'), 'o'), O)), {
    code: 'BUNDLE_CHECKSUM',
    message: /inventory\.json: served, not listed in SHA256SUMS/,
  });
  t.end();
});

void t.test('a collector without SHA256SUMS: written, said to be unverified', async (t) => {
  const files = bundle();
  const client = await fakeCollector(t, (n) =>
    n === 'SHA256SUMS' ? null : (files.get(n) ?? null),
  );
  const dir = join(tempDir(t, 'dl-old'), 'out');
  const d = await downloadBundle(client, ID, dir, O);
  t.match(d.check, {
    unverified: /^the collector serves no SHA256SUMS for this bundle \(no such endpoint\)/,
  });
  t.notOk(existsSync(join(dir, 'SHA256SUMS')), 'no SHA256SUMS of its own invented');
  t.equal(readdirSync(dir).length, 6, 'the files as received');
  t.match(
    downloadedLines(d).at(-1),
    /^ {2}not verified against SHA256SUMS: the collector serves no SHA256SUMS/,
  );
  t.notMatch(downloadedLines(d).join('\n'), /verified \d+ files/);
  t.end();
});

void t.test('rewritten during the download: downloaded again, then verified', async (t) => {
  const first = bundle();
  const second = bundle();
  second.set('report.md', Buffer.from('# hoptrace: preserved\n\nwith its evidence\n'));
  second.set(
    'SHA256SUMS',
    Buffer.from(manifestOf([...second].filter(([n]) => n !== 'SHA256SUMS'))),
  );
  // The first SHA256SUMS read sees the old bundle, everything after it the new one.
  const client = await fakeCollector(
    t,
    (n, k) => (n === 'SHA256SUMS' && k === 0 ? first : second).get(n) ?? null,
  );
  const dir = join(tempDir(t, 'dl-again'), 'out');
  const d = await downloadBundle(client, ID, dir, O);
  t.same(d.check, { verified: 6 });
  t.equal(
    readFileSync(join(dir, 'report.md'), 'utf8'),
    '# hoptrace: preserved\n\nwith its evidence\n',
  );

  // One that never holds still: left unverified after the attempts, and said so.
  let gen = 0;
  const restless = await fakeCollector(t, (n) => {
    if (n !== 'SHA256SUMS') return first.get(n) ?? null;
    gen++;
    return Buffer.from(`${'0'.repeat(63)}${gen % 10}  report.md\n`);
  });
  const r = await downloadBundle(restless, ID, join(tempDir(t, 'dl-restless'), 'o'), O);
  t.match(r.check, { unverified: /changed on the collector during each of 3 downloads/ });
  t.end();
});

void t.test('a SHA256SUMS that is not one: COLLECTOR_BAD_RESPONSE, nothing written', async (t) => {
  const files = bundle();
  files.set('SHA256SUMS', Buffer.from(`${'a'.repeat(64)}  ../../etc/cron.d/x\n`));
  const client = await fakeCollector(t, (n) => files.get(n) ?? null);
  const dir = join(tempDir(t, 'dl-evil'), 'out');
  t.match(await failure(downloadBundle(client, ID, dir, O)), {
    code: 'COLLECTOR_BAD_RESPONSE',
    message: /SHA256SUMS is not a checksum file: line 1 names no plain file/,
  });
  t.notOk(existsSync(dir));
  t.end();
});

void t.test('parseManifest: sha256sum lines only, plain names, bounded', (t) => {
  const h = 'e'.repeat(64);
  t.match(parseManifest(`${h}  a.md\n${h} *b.pcapng\n`), { ok: true });
  const one = parseManifest(`${h}  a.md\n`);
  t.same(one.ok ? [...one.sums] : one.problem, [['a.md', h]]);
  for (const [text, why] of [
    ['', /empty/],
    [`${h}  a.md\n${h}  a.md\n`, /names a\.md again/],
    [`${h.slice(1)}  a.md\n`, /line 1 is not/],
    [`${h.toUpperCase()}  a.md\n`, /line 1 is not/],
    [`${h}  .hidden\n`, /names no plain file/],
    [`${h}  dir/a.md\n`, /names no plain file/],
    [`${h}  a.md\r\n`, /line 1 is not/],
    [
      `${h}  a.md\n`.repeat(1).concat(...Array.from({ length: 64 }, (_, i) => `${h}  f${i}\n`)),
      /65 lines/,
    ],
  ] as const)
    t.match(parseManifest(text), { ok: false, problem: why }, JSON.stringify(text.slice(0, 90)));
  t.end();
});

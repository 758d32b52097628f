/**
 * A live capture's whole bundle downloaded from the web view over HTTP (loopback, the real hub,
 * sessions, data directory and replay agents): its page links `hoptrace-<id>.tar` first, the
 * archive unpacks to `hoptrace-<id>/` holding every file SHA256SUMS lists and SHA256SUMS, and
 * `sha256sum -c SHA256SUMS` passes there without renaming anything. The bundle rewritten after
 * the download started still gives the files of the SHA256SUMS it started with; a file changed in
 * place on the collector's disk cuts the download short instead of completing it; a bundle without
 * SHA256SUMS is not offered; no file stays open after any of them.
 */
import { readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { isStreamBody } from '../../collector/api-message';
import { createApi, type Api } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { BUNDLE_FILES } from '../../collector/store';
import { sessionsUiSource } from '../../collector/ui/ui-source';
import { UiSessions } from '../../collector/ui/ui-sessions';
import { parseManifest } from '../../common/sha256sums';
import { archiveBytes, untar } from './archive-check';
import { eventually } from './eventually';
import {
  capture,
  collector,
  startAgent,
  tempDir,
  waitAgents,
  type LoopbackCollector,
} from './live-capture-fixtures';
import { checkSums } from './sums-check';
import { TOKEN, closeServer } from './transport-fixtures';

interface Got {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The body ended as HTTP ends one (false: the connection was cut first). */
  complete: boolean;
}

/** The collector's API with its web view on loopback; its port. */
async function serveUi(
  t: { teardown(fn: () => Promise<void>): void },
  c: LoopbackCollector,
): Promise<{ api: Api; port: number }> {
  const api = createApi({
    sessions: c.sessions,
    tokens: [TOKEN],
    collectorId: c.store.collectorId,
    logger: silentLogger(),
    ui: {
      source: sessionsUiSource(c.sessions),
      logins: new UiSessions([TOKEN], () => Date.now()),
      nowMs: () => Date.now(),
    },
  });
  const server = createServer(api.listener());
  await new Promise<void>((r) => {
    server.listen(0, '127.0.0.1', r);
  });
  t.teardown(() => closeServer(server));
  return { api, port: (server.address() as AddressInfo).port };
}

/**
 * One request on its own connection; `onHeaders` runs once the headers are in, before the body is
 * read.
 */
function get(
  port: number,
  path: string,
  o: {
    method?: string;
    cookie?: string;
    token?: string;
    body?: string;
    onHeaders?: () => void;
  } = {},
): Promise<Got> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { connection: 'close' };
    if (o.cookie !== undefined) headers['cookie'] = o.cookie;
    if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
    if (o.body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const req = request(
      { host: '127.0.0.1', port, path, method: o.method ?? 'GET', headers, agent: false },
      (res) => {
        o.onHeaders?.();
        const chunks: Buffer[] = [];
        let complete = false;
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          complete = true;
        });
        res.on('error', () => undefined);
        res.on('close', () => {
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            complete: complete && res.complete,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

/**
 * The bundle files this process holds open in `dir` (a file replaced since reads `… (deleted)`);
 * the store's own append handles on the events files are not the archive's.
 */
function openIn(dir: string): string[] {
  return readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    })
    .filter((p) => {
      const name = p.slice(dir.length + 1).replace(/ \(deleted\)$/, '');
      return p.startsWith(`${dir}/`) && (BUNDLE_FILES as readonly string[]).includes(name);
    });
}

void t.test('the whole bundle from the web view: tar xf, then sha256sum -c', async (t) => {
  const c = await collector(t, tempDir(t, 'archive-data'));
  const ret = tempDir(t, 'archive-ret');
  startAgent(
    t,
    c.port,
    'agent-vpn',
    'vpn-node',
    { path: '/run/netns/vpn', address: '10.244.1.10' },
    { dir: ret },
  );
  startAgent(
    t,
    c.port,
    'agent-backend',
    'backend-node',
    { path: '/run/netns/web', address: '10.244.2.5' },
    { dir: ret },
  );
  await waitAgents(c.sessions, 2);
  const id = await capture(c);
  const ui = await serveUi(t, c);
  const port = ui.port;
  const bundleDir = c.store.sessionDir(id);

  const login = await get(port, '/ui/login', {
    method: 'POST',
    body: new URLSearchParams({ token: TOKEN, next: '/ui/' }).toString(),
  });
  t.equal(login.status, 303, 'logged in');
  const cookie = (login.headers['set-cookie']?.[0] ?? '').split(';')[0] ?? '';

  // The page: the whole bundle first, then each file.
  const page = (await get(port, `/ui/captures/${id}`, { cookie })).body.toString();
  const links = [...page.matchAll(/<li><a href="([^"]+)">/g)].map((m) => m[1] ?? '');
  const tarPath = `/ui/captures/${id}/files/hoptrace-${id}.tar`;
  t.same(
    links,
    [tarPath, ...BUNDLE_FILES.map((n) => `/ui/captures/${id}/files/${n}`)],
    'the whole bundle is the first download, every file after it',
  );
  t.match(
    page,
    `the whole bundle: every file below in one archive, which unpacks to hoptrace-${id}/`,
  );

  const got = await get(port, tarPath, { cookie });
  t.equal(got.status, 200);
  t.ok(got.complete, 'the download ends whole');
  t.equal(got.headers['content-type'], 'application/x-tar');
  t.equal(got.headers['content-disposition'], `attachment; filename="hoptrace-${id}.tar"`);
  t.equal(Number(got.headers['content-length']), got.body.length, 'its length said up front');

  const x = untar(got.body, tempDir(t, 'archive-out'));
  t.equal(x.status, 0, `tar xf: ${x.stderr}`);
  t.same(x.tops, [`hoptrace-${id}`], 'one directory, hoptrace-<id>');
  const out = join(x.root, `hoptrace-${id}`);
  const sums = readFileSync(join(out, 'SHA256SUMS'), 'utf8');
  const parsed = parseManifest(sums);
  if (!parsed.ok) throw new Error(parsed.problem);
  t.same(
    readdirSync(out).sort(),
    [...parsed.sums.keys(), 'SHA256SUMS'].sort(),
    'every file SHA256SUMS lists, and SHA256SUMS',
  );
  t.same(readdirSync(out).sort(), [...BUNDLE_FILES].sort(), 'the whole bundle');
  const check = checkSums(out);
  t.ok(check.ok, `${check.how} in hoptrace-${id}/: ${check.out}`);
  for (const name of BUNDLE_FILES) {
    const one = await get(port, `/ui/captures/${id}/files/${name}`, { cookie });
    t.ok(readFileSync(join(out, name)).equals(one.body), `${name}: the bytes its own link serves`);
  }
  t.ok(await eventually(() => openIn(bundleDir).length === 0), 'no bundle file left open');

  // The same archive from the JSON API, for a bearer token (curl, scripts): the same bytes.
  const apiTar = `/v1/captures/${id}/bundle.tar`;
  const fromApi = await get(port, apiTar, { token: TOKEN });
  t.equal(fromApi.status, 200, 'GET /v1/captures/:id/bundle.tar');
  t.ok(fromApi.complete, 'whole');
  t.equal(fromApi.headers['content-type'], 'application/x-tar');
  t.equal(fromApi.headers['content-disposition'], `attachment; filename="hoptrace-${id}.tar"`);
  t.ok(fromApi.body.equals(got.body), "the web view's archive, byte for byte");
  t.equal((await get(port, apiTar)).status, 401, 'not without the token');
  t.ok(await eventually(() => openIn(bundleDir).length === 0), 'no bundle file left open');

  // HEAD: the length, no body, nothing left open.
  const head = await get(port, tarPath, { cookie, method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(Number(head.headers['content-length']), got.body.length);
  t.equal(head.body.length, 0);
  t.ok(await eventually(() => openIn(bundleDir).length === 0), 'HEAD leaves no file open');

  // Rewritten once the download was answered (its files opened), before a byte of it was read:
  // the archive is still the bundle its SHA256SUMS lists, the one of when it was asked for.
  const before = readFileSync(join(bundleDir, 'evidence.pcapng'));
  const answered = await ui.api.handle({
    method: 'GET',
    url: tarPath,
    headers: { cookie },
  });
  c.store.writeEvidence(id, Buffer.from('evidence written again, after the download began'));
  t.equal(answered.status, 200);
  const during = { body: await archiveBytes(isStreamBody(answered.body) ? answered.body : null) };
  const y = untar(during.body, tempDir(t, 'archive-during'));
  t.equal(y.status, 0, `tar xf: ${y.stderr}`);
  const dy = join(y.root, `hoptrace-${id}`);
  const duringCheck = checkSums(dy);
  t.ok(duringCheck.ok, `${duringCheck.how}: ${duringCheck.out}`);
  t.ok(readFileSync(join(dy, 'evidence.pcapng')).equals(before), 'evidence.pcapng as it was');
  t.equal(readFileSync(join(dy, 'SHA256SUMS'), 'utf8'), sums, 'with the SHA256SUMS it began with');
  const after = await get(port, tarPath, { cookie });
  const z = untar(after.body, tempDir(t, 'archive-after'));
  const dz = join(z.root, `hoptrace-${id}`);
  t.equal(
    readFileSync(join(dz, 'evidence.pcapng'), 'utf8'),
    'evidence written again, after the download began',
  );
  t.ok(checkSums(dz).ok, 'the next download: the new bundle, with its own SHA256SUMS');

  // A file changed in place after it was written: the download is cut, never whole.
  const html = join(bundleDir, 'report.html');
  const bytes = readFileSync(html);
  bytes[100] = (bytes[100] ?? 0) ^ 0x20;
  writeFileSync(html, bytes);
  const cut = await get(port, tarPath, { cookie });
  t.equal(cut.status, 200);
  t.notOk(cut.complete, 'the download does not end as a whole one');
  t.ok(
    cut.body.length < Number(cut.headers['content-length']),
    `cut short: ${cut.body.length} of ${String(cut.headers['content-length'])} bytes`,
  );
  t.ok(
    await eventually(() => openIn(bundleDir).length === 0),
    'a cut download leaves no file open',
  );

  // No SHA256SUMS (a write that failed half-way removes it): no whole bundle offered.
  rmSync(join(bundleDir, 'SHA256SUMS'));
  const bare = (await get(port, `/ui/captures/${id}`, { cookie })).body.toString();
  t.notMatch(bare, `hoptrace-${id}.tar`, 'not linked');
  const none = await get(port, tarPath, { cookie });
  t.equal(none.status, 404);
  t.match(none.body.toString(), /the bundle has no SHA256SUMS/);
  const noneApi = await get(port, apiTar, { token: TOKEN });
  t.equal(noneApi.status, 404, 'nor from the JSON API');
  t.match(JSON.parse(noneApi.body.toString()), {
    error: { code: 'API_NOT_FOUND', message: /the bundle has no SHA256SUMS/, hint: /one by one/ },
  });
});

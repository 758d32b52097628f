/**
 * The web view (/ui/): login by a form that sets a session cookie (never a token in a URL or a
 * cookie), pages for the list, a capture and a repro, no script and nothing external, downloads.
 * The real browser test is test/lab/web-view.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { CaptureView } from '../../collector/capture-views';
import { createApi, type Api, type ApiResponse } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { capturePage } from '../../collector/ui/ui-pages';
import { safeNext } from '../../collector/ui/ui-routes';
import { sessionsUiSource } from '../../collector/ui/ui-source';
import { SESSION_TTL_MS, UiSessions, cookieValue } from '../../collector/ui/ui-sessions';
import { twoNodeHub } from './collector-fixtures';
import { cni } from './live-report-fixtures';
import { CLIENT } from './fixtures-events';
import { bodyText } from './api-body';

const TOKEN = 'ui-test-token-0123456789';
const POINTS = [
  { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
  { name: 'egress', target: '10.244.1.10', iface: 'eth0' },
  { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
];

interface Env {
  api: Api;
  now: { ms: number };
  req(
    method: string,
    url: string,
    o?: { body?: string; cookie?: string; bearer?: string },
  ): Promise<ApiResponse & { text: string }>;
}

function setup(t: { teardown(fn: () => Promise<void> | void): void }): Env {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-ui-'));
  const hub = twoNodeHub();
  const store = new CaptureStore({ dir, fsync: false });
  const sessions = new SessionManager({ hub, store, logger: silentLogger(), debounceMs: 0 });
  sessions.start();
  const now = { ms: Date.parse('2026-12-02T05:00:00Z') };
  const api = createApi({
    sessions,
    tokens: [TOKEN],
    collectorId: store.collectorId,
    logger: silentLogger(),
    ui: {
      source: sessionsUiSource(sessions),
      logins: new UiSessions([TOKEN], () => now.ms),
      nowMs: () => now.ms,
    },
  });
  t.teardown(async () => {
    await sessions.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    api,
    now,
    async req(method, url, o = {}) {
      const headers: Record<string, string> = {};
      if (o.cookie !== undefined) headers['cookie'] = o.cookie;
      if (o.bearer !== undefined) headers['authorization'] = `Bearer ${o.bearer}`;
      const r = await api.handle({
        method,
        url,
        headers,
        ...(o.body === undefined ? {} : { body: o.body }),
      });
      return { ...r, text: bodyText(r.body) };
    },
  };
}

const loginBody = (token: string, next = '/ui/'): string =>
  new URLSearchParams({ token, next }).toString();

async function login(env: Env): Promise<string> {
  const r = await env.req('POST', '/ui/login', { body: loginBody(TOKEN) });
  const set = r.headers['set-cookie'] ?? '';
  return set.split(';')[0] ?? '';
}

void t.test('login: a form, a session cookie, never the token in a URL or a cookie', async (t) => {
  const env = setup(t);
  const anon = await env.req('GET', '/ui/captures/c-1');
  t.equal(anon.status, 303, 'a GET without a session goes to the form');
  t.equal(anon.headers['location'], '/ui/login?next=%2Fui%2Fcaptures%2Fc-1');
  const form = await env.req('GET', '/ui/login?next=%2Fui%2Fcaptures%2Fc-1');
  t.equal(form.status, 200);
  t.match(form.text, /<form method="post" action="\/ui\/login">/);
  t.match(form.text, /type="password" name="token"/);
  t.match(form.text, /name="next" value="\/ui\/captures\/c-1"/);
  t.notMatch(form.text, /<script/i);

  const wrong = await env.req('POST', '/ui/login', { body: loginBody('nope') });
  t.equal(wrong.status, 401);
  t.equal(wrong.headers['set-cookie'], undefined);
  t.match(wrong.text, /That token is not accepted/);
  t.equal(
    (await env.req('GET', `/ui/?token=${TOKEN}`)).status,
    303,
    'a token in a URL opens nothing',
  );
  t.equal(
    (await env.req('GET', '/ui/', { bearer: TOKEN })).status,
    303,
    'the web view asks for its own login, the API bearer is not a browser session',
  );

  const ok = await env.req('POST', '/ui/login', { body: loginBody(TOKEN, '/ui/captures/c-1') });
  t.equal(ok.status, 303);
  t.equal(ok.headers['location'], '/ui/captures/c-1');
  const set = ok.headers['set-cookie'] ?? '';
  t.match(
    set,
    /^hoptrace_ui=[A-Za-z0-9_-]{32}; Max-Age=43200; Path=\/ui; HttpOnly; SameSite=Strict$/,
  );
  t.notMatch(set, new RegExp(TOKEN), 'the cookie is a session id, not the token');
  const cookie = set.split(';')[0] ?? '';
  const list = await env.req('GET', '/ui/', { cookie });
  t.equal(list.status, 200);
  t.match(list.headers['content-security-policy'], /default-src 'none'/);
  t.notMatch(list.headers['content-security-policy'], /script-src/);

  // Expiry, and logout.
  env.now.ms += SESSION_TTL_MS + 1;
  t.equal((await env.req('GET', '/ui/', { cookie })).status, 303, 'expired after 12 h');
  const c2 = await login(env);
  t.equal((await env.req('GET', '/ui/', { cookie: c2 })).status, 200);
  const out = await env.req('POST', '/ui/logout', { cookie: c2 });
  t.equal(out.status, 303);
  t.match(out.headers['set-cookie'], /^hoptrace_ui=; Max-Age=0/);
  t.equal((await env.req('GET', '/ui/', { cookie: c2 })).status, 303, 'logged out');
  t.equal(
    (await env.req('POST', '/ui/', { cookie: c2 })).status,
    401,
    'no session: 401 for a POST',
  );
});

void t.test('no open redirect after login; cookie parsing is strict', (t) => {
  for (const bad of [
    '//evil.example/ui/',
    'https://evil.example/',
    '/ui//evil',
    '/v1/agents',
    'javascript:x',
  ])
    t.equal(safeNext(bad), '/ui/', bad);
  t.equal(safeNext('/ui/repros/r-1'), '/ui/repros/r-1');
  t.equal(cookieValue('a=b; hoptrace_ui=abc_DEF-1', 'hoptrace_ui'), 'abc_DEF-1');
  t.equal(cookieValue('hoptrace_ui=<script>', 'hoptrace_ui'), null);
  t.equal(cookieValue(undefined, 'hoptrace_ui'), null);
  t.end();
});

void t.test('the list and a running capture page (refreshing), 404s, methods', async (t) => {
  const env = setup(t);
  const cookie = await login(env);
  const created = await env.api.handle({
    method: 'POST',
    url: '/v1/captures',
    headers: { authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ points: POINTS, client: CLIENT, timeoutMs: 60_000 }),
  });
  t.equal(created.status, 201);
  const view = JSON.parse(bodyText(created.body)) as CaptureView;
  const list = await env.req('GET', '/ui/', { cookie });
  t.match(list.text, new RegExp(`<a href="/ui/captures/${view.id}">${view.id}</a>`));
  t.match(list.text, /decap → egress → backend/);
  t.match(list.text, /http-equiv="refresh"/, 'refreshes while a capture runs');
  const page = await env.req('GET', `/ui/captures/${view.id}`, { cookie });
  t.equal(page.status, 200);
  t.match(page.text, /waiting for the request/);
  t.match(page.text, /http-equiv="refresh" content="2"/);
  t.equal(
    (page.text.match(/<tr><td>(decap|egress|backend)<\/td>/g) ?? []).length,
    3,
    'one row per point',
  );
  t.equal((await env.req('GET', '/ui/captures/c-nope', { cookie })).status, 404);
  t.equal(
    (await env.req('GET', `/ui/captures/${view.id}/files/report.md`, { cookie })).status,
    404,
    'no report before the verdict',
  );
  t.equal((await env.req('GET', '/ui/captures/%E0%A4%A', { cookie })).status, 400);
  t.equal((await env.req('GET', '/ui/repros/r-none', { cookie })).status, 404);
  const del = await env.req('DELETE', `/ui/captures/${view.id}`, { cookie });
  t.equal(del.status, 405);
  t.equal(del.headers['allow'], 'GET');
});

void t.test(
  'a capture page with a verdict: no refresh, the verdict, the picture, escaped text',
  (t) => {
    const result = cni;
    const view = {
      id: 'c-1',
      state: 'resolved',
      createdAt: '2026-12-02T04:59:00.000Z',
      updatedAt: '2026-12-02T04:59:02.000Z',
      finishedAt: '2026-12-02T04:59:02.000Z',
      request: {
        client: CLIENT,
        dst: null,
        dport: null,
        timeoutMs: 30000,
        stopOnFirstMatch: true,
        settleMs: 2000,
      },
      points: POINTS.map((p) => ({
        ...p,
        name: p.name === 'egress' ? '<script>alert(1)</script>' : p.name,
        agentId: 'a',
        node: 'vpn-node',
        state: 'stopped',
        packets: 7,
        events: 7,
        kernelDrops: 0,
        queueDrops: 0,
        lost: 0,
      })),
      progress: { requestSeen: true, layer: 'cni-masquerade' },
      verdict: result.verdict,
      finalReason: null,
      reportUrls: null,
    } as unknown as CaptureView;
    const html = capturePage(
      view,
      result,
      '<svg xmlns="http://www.w3.org/2000/svg"><g class="lane"/></svg>',
      [{ name: 'report.md', label: 'the report' }],
    );
    t.notMatch(html, /http-equiv="refresh"/, 'a final capture does not refresh');
    t.match(html, /<p class="verdict layer-cni-masquerade">cni-masquerade<\/p>/);
    t.match(html, /source rewritten by the VPN node&#39;s CNI masquerade/);
    t.match(html, /<div class="picture"><svg /);
    t.match(html, /href="\/ui\/captures\/c-1\/files\/report\.md"/);
    t.notMatch(html, /<script>/, 'a hostile point name is text');
    t.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    t.end();
  },
);

void t.test('over a socket: the login form body is bounded; /ui needs no bearer', async (t) => {
  const env = setup(t);
  const server = createServer(env.api.listener());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) =>
        server.close(() => {
          r();
        }),
      ),
  );
  const port = (server.address() as AddressInfo).port;
  const send = (path: string, method: string, body: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method }, (res) => {
        res.resume();
        res.on('end', () => {
          resolve(res.statusCode ?? 0);
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  t.equal(await send('/ui/login', 'POST', loginBody(TOKEN)), 303);
  t.equal(await send('/ui/login', 'POST', 'token=' + 'x'.repeat(5000)), 413);
  t.equal(await send('/v1/agents', 'GET', ''), 401, 'the API still wants its bearer');
});

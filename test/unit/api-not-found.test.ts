/**
 * What a 404 says (adversarial review F9): the path as the request gave it — `//v1/captures` was
 * read as protocol-relative and answered for `/captures` — and the id once, not
 * "capture X: capture X not found".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { requestUrl } from '../../collector/request-url';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { twoNodeHub } from './collector-fixtures';
import { bodyText } from './api-body';

const TOKEN = 'sekrit-token-0123';

function api(t: { teardown(fn: () => Promise<void> | void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-404-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const store = new CaptureStore({ dir, fsync: false });
  const sessions = new SessionManager({ hub: twoNodeHub(), store, logger: silentLogger() });
  sessions.start();
  t.teardown(() => sessions.close());
  const a = createApi({ sessions, tokens: [TOKEN], collectorId: 'c', logger: silentLogger() });
  return async (method: string, url: string) => {
    const r = await a.handle({ method, url, headers: { authorization: `Bearer ${TOKEN}` } });
    const body = JSON.parse(bodyText(r.body)) as { error?: { message: string; where: string } };
    return { status: r.status, error: body.error };
  };
}

void t.test('a target is a path even when it starts with //', (t) => {
  t.equal(requestUrl('//v1/captures').pathname, '//v1/captures');
  t.equal(requestUrl('/v1/captures?x=1').pathname, '/v1/captures');
  t.equal(requestUrl('/v1/captures?x=1').searchParams.get('x'), '1');
  t.equal(requestUrl('http://collector:7070/v1/agents').pathname, '/v1/agents', 'absolute form');
  t.end();
});

void t.test('404s name the path as given, and what is missing once', async (t) => {
  const req = api(t);
  const slashes = await req('GET', '//v1/captures');
  t.equal(slashes.status, 404);
  t.equal(
    slashes.error?.message,
    'API_NOT_FOUND: //v1/captures: no such endpoint (see the API in README.md)',
  );
  t.equal((await req('GET', 'http://collector:7070/v1/captures')).status, 200, 'absolute form');

  const cases: [string, string][] = [
    [
      '/v1/captures/c-abc-12345678',
      'API_NOT_FOUND: /v1/captures/c-abc-12345678: no such capture (GET /v1/captures lists the live and most recent ones; finished ones past the retention (--retain-finished, --retain-age) are removed)',
    ],
    [
      '/v1/captures/not-an-id',
      'API_NOT_FOUND: /v1/captures/not-an-id: no such capture (GET /v1/captures lists the live and most recent ones; finished ones past the retention (--retain-finished, --retain-age) are removed)',
    ],
    [
      '/v1/captures/c-abc-12345678/report.md',
      'API_NOT_FOUND: /v1/captures/c-abc-12345678/report.md: no such capture (GET /v1/captures lists the live and most recent ones; finished ones past the retention (--retain-finished, --retain-age) are removed)',
    ],
    [
      '/v1/repros/r-abc-12345678',
      'API_NOT_FOUND: /v1/repros/r-abc-12345678: no such repro (GET /v1/repros lists the running and most recent ones; finished ones past the retention (--retain-finished-repros, --retain-age) are removed)',
    ],
    [
      '/v1/repros/r-abc-12345678/report.md',
      'API_NOT_FOUND: /v1/repros/r-abc-12345678/report.md: no such repro (GET /v1/repros lists the running and most recent ones; finished ones past the retention (--retain-finished-repros, --retain-age) are removed)',
    ],
  ];
  for (const [url, message] of cases) {
    const r = await req('GET', url);
    t.equal(r.status, 404, url);
    t.equal(r.error?.message, message, url);
  }
});

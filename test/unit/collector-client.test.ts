// The CLI's collector API client (cli/collector-client.ts), which `capture`, `doctor --collector`
// and cluster `repro` share: every way a call can fail maps to an error that says what, where and
// what to do, and the collector's own errors keep their code, where and hint.
import t from 'tap';
import { CollectorClient } from '../../cli/collector-client';
import { HoptraceError, isHoptraceError } from '../../common/errors';
import { errorResponse } from '../../collector/http';
import { DOCTOR_REPORT } from '../../cli/collector-replies';
import type { Reply as ReplyKind } from '../../cli/reply-shapes';
import { bodyText } from './api-body';

/** Any JSON, read as it is: these tests are about the transport. */
const ANY: ReplyKind<unknown> = { what: 'JSON', read: (v) => ({ value: v }) };

type Reply = { status: number; body: string } | Error;

function fakeFetch(reply: Reply, seen: { url?: string; init?: RequestInit } = {}): typeof fetch {
  return ((url: string, init?: RequestInit) => {
    seen.url = url;
    if (init !== undefined) seen.init = init;
    if (reply instanceof Error) return Promise.reject(reply);
    return Promise.resolve(new Response(reply.body, { status: reply.status }));
  }) as typeof fetch;
}

async function failure(client: CollectorClient): Promise<unknown> {
  try {
    await client.json('POST', '/v1/doctor', ANY, { vpn: 'a' });
  } catch (e) {
    return e;
  }
  return undefined;
}

void t.test('a JSON reply: parsed; the token, method and body are sent', async (t) => {
  const seen: { url?: string; init?: RequestInit } = {};
  const c = new CollectorClient(
    'http://127.0.0.1:7070',
    'tok',
    fakeFetch({ status: 200, body: '{"ok":1}' }, seen),
  );
  t.same(await c.json('POST', '/v1/doctor', ANY, { vpn: 'a' }), { ok: 1 });
  t.equal(seen.url, 'http://127.0.0.1:7070/v1/doctor');
  t.equal(seen.init?.method, 'POST');
  t.same(seen.init?.headers, { authorization: 'Bearer tok', 'content-type': 'application/json' });
  t.equal(seen.init?.body, '{"vpn":"a"}');
});

void t.test('unreachable: COLLECTOR_UNREACHABLE with the cause and what to check', async (t) => {
  const cause = new Error('connect ECONNREFUSED 127.0.0.1:7070');
  const c = new CollectorClient(
    'http://127.0.0.1:7070',
    'tok',
    fakeFetch(new TypeError('fetch failed', { cause })),
  );
  const e = await failure(c);
  t.ok(isHoptraceError(e));
  t.match(e, {
    code: 'COLLECTOR_UNREACHABLE',
    message: /ECONNREFUSED/,
    where: 'http://127.0.0.1:7070',
    hint: /--collector/,
  });
});

void t.test("a transport's coded cause is the error, not COLLECTOR_UNREACHABLE", async (t) => {
  // What kubectl hoptrace's fetch throws when the port-forward under a later request fails.
  const cause = new HoptraceError(
    'KUBECTL_PORT_FORWARD',
    'the port-forward to hoptrace/hoptrace-collector-0:7070 sent a message larger than 8 MiB',
    {
      where: 'port-forward',
      hint: 'kubectl -n hoptrace port-forward pod/hoptrace-collector-0 7070',
    },
  );
  const c = new CollectorClient(
    'http://c',
    'tok',
    fakeFetch(new TypeError('fetch failed', { cause })),
  );
  t.equal(await failure(c), cause);
});

void t.test('401: API_UNAUTHORIZED naming the token flags', async (t) => {
  const c = new CollectorClient('http://c', 'bad', fakeFetch({ status: 401, body: '{}' }));
  t.match(await failure(c), {
    code: 'API_UNAUTHORIZED',
    where: 'POST http://c/v1/doctor',
    hint: /--token-file or HOPTRACE_TOKEN/,
  });
});

void t.test("the collector's error keeps its code, message, where and hint", async (t) => {
  const body = JSON.stringify({
    error: {
      code: 'DOCTOR_NO_AGENT',
      message: 'DOCTOR_NO_AGENT: no agent holds vpn/wg-0',
      where: 'vpn/wg-0',
      hint: 'deploy the agent DaemonSet',
    },
  });
  const c = new CollectorClient('http://c', 'tok', fakeFetch({ status: 409, body }));
  t.match(await failure(c), {
    code: 'DOCTOR_NO_AGENT',
    message: 'no agent holds vpn/wg-0',
    where: 'vpn/wg-0',
    hint: 'deploy the agent DaemonSet',
  });
  const bare = JSON.stringify({ error: { code: 'API_NOT_FOUND', message: 'no capture x' } });
  const c2 = new CollectorClient('http://c', 'tok', fakeFetch({ status: 404, body: bare }));
  t.match(await failure(c2), { code: 'API_NOT_FOUND', where: 'POST http://c/v1/doctor' });
});

void t.test('not the API: COLLECTOR_BAD_RESPONSE, for errors and for replies', async (t) => {
  const html = new CollectorClient(
    'http://c',
    'tok',
    fakeFetch({ status: 502, body: '<html>bad gateway</html>' }),
  );
  t.match(await failure(html), {
    code: 'COLLECTOR_BAD_RESPONSE',
    message: /HTTP 502/,
    hint: /hoptrace collector/,
  });
  const unknown = JSON.stringify({ error: { code: 'NOT_A_CODE', message: 'x' } });
  const c = new CollectorClient('http://c', 'tok', fakeFetch({ status: 500, body: unknown }));
  t.match(await failure(c), { code: 'COLLECTOR_BAD_RESPONSE' });
  const text = new CollectorClient('http://c', 'tok', fakeFetch({ status: 200, body: 'hello' }));
  t.match(await failure(text), {
    code: 'COLLECTOR_BAD_RESPONSE',
    message: 'POST /v1/doctor did not return JSON',
    where: 'http://c',
  });
});

void t.test(
  'an error the collector composed comes back word for word, nothing said twice',
  async (t) => {
    // What collector/http.ts sends for a HoptraceError with a where and a hint.
    const original = new HoptraceError('API_NO_AGENT', 'decap: no agent reaches 10.244.1.10', {
      where: 'POST /v1/captures',
      hint: 'start hoptrace agents on the nodes',
    });
    const c = new CollectorClient(
      'http://c',
      'tok',
      fakeFetch({ status: 409, body: bodyText(errorResponse(original).body) }),
    );
    const e = await failure(c);
    t.ok(isHoptraceError(e));
    if (!isHoptraceError(e)) return;
    t.equal(e.message, original.message, 'the same one line');
    t.notMatch(e.message, /POST \/v1\/captures: POST \/v1\/captures/);
    t.equal(e.detail, 'decap: no agent reaches 10.244.1.10');
  },
);

void t.test(
  'JSON of another shape: COLLECTOR_BAD_RESPONSE with the URL and what is wrong',
  async (t) => {
    const c = new CollectorClient('http://c', 'tok', fakeFetch({ status: 200, body: '{"id":5}' }));
    await t.rejects(c.json('POST', '/v1/doctor', DOCTOR_REPORT, { vpn: 'a' }), {
      code: 'COLLECTOR_BAD_RESPONSE',
      where: 'POST http://c/v1/doctor',
      message: /: not a doctor report .*: tunnelRange is not a string \(check --collector/,
    });
  },
);

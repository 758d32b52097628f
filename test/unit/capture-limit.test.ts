/**
 * Live captures are capped (adversarial review F6: one API token holder armed 1,000 one-hour
 * captures in 3 s, each a real packet capture on the agents): past the cap POST /v1/captures is
 * 429 API_TOO_MANY_CAPTURES, nothing is armed, and a finished capture makes room again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseCollectorArgs } from '../../cli/collector';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { startCollector } from '../../collector/main';
import type { CaptureView } from '../../collector/capture-views';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { twoNodeHub } from './collector-fixtures';

const TOKEN = 'sekrit-token-0123';
const SPEC = {
  points: [
    { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
    { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
  ],
  timeoutMs: 3_600_000,
};

function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-limit-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

function setup(t: { teardown(fn: () => Promise<void> | void): void }, maxLiveCaptures: number) {
  const hub = twoNodeHub();
  const store = new CaptureStore({ dir: tempDir(t), fsync: false });
  const sessions = new SessionManager({ hub, store, logger: silentLogger(), maxLiveCaptures });
  sessions.start();
  t.teardown(() => sessions.close());
  const api = createApi({ sessions, tokens: [TOKEN], collectorId: 'c', logger: silentLogger() });
  const req = async (method: string, url: string, body?: unknown) => {
    const r = await api.handle({
      method,
      url,
      headers: { authorization: `Bearer ${TOKEN}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: r.status, json: JSON.parse(r.body.toString()) as unknown };
  };
  const armed = (): number => hub.sent.filter((s) => s.cmd.kind === 'capture').length;
  return { req, armed };
}

const errorOf = (j: unknown): { code: string; message: string; where: string; hint: string } =>
  (j as { error: { code: string; message: string; where: string; hint: string } }).error;

void t.test(
  'past the cap a capture is refused with 429, nothing armed; a finished one makes room',
  async (t) => {
    const { req, armed } = setup(t, 2);
    const a = await req('POST', '/v1/captures', SPEC);
    const b = await req('POST', '/v1/captures', SPEC);
    t.same([a.status, b.status], [201, 201]);
    t.equal(armed(), 4, 'two points each');

    const c = await req('POST', '/v1/captures', SPEC);
    t.equal(c.status, 429);
    const e = errorOf(c.json);
    t.equal(e.code, 'API_TOO_MANY_CAPTURES');
    t.match(
      e.message,
      /^API_TOO_MANY_CAPTURES: POST \/v1\/captures: 2 captures are live; this collector runs at most 2 at once \(wait for one to finish/,
    );
    t.match(e.hint, /cancel one .*--max-live-captures/, 'what to do');
    t.equal(armed(), 4, 'nothing armed for it');
    t.equal(
      ((await req('GET', '/v1/captures')).json as { captures: unknown[] }).captures.length,
      2,
    );

    const id = (a.json as CaptureView).id;
    t.equal((await req('DELETE', `/v1/captures/${id}`)).status, 200);
    t.equal((await req('POST', '/v1/captures', SPEC)).status, 201, 'a cancelled one is not live');
  },
);

void t.test('requests that arrive together cannot pass the cap between them', async (t) => {
  const { req, armed } = setup(t, 2);
  const all = await Promise.all(Array.from({ length: 6 }, () => req('POST', '/v1/captures', SPEC)));
  t.same(all.map((r) => r.status).sort(), [201, 201, 429, 429, 429, 429]);
  t.equal(armed(), 4);
});

void t.test('--max-live-captures sets the cap of a started collector', async (t) => {
  const env = { HOPTRACE_TOKEN: TOKEN };
  t.equal(parseCollectorArgs([], env).maxLiveCaptures, undefined, 'the default (32) unless given');
  for (const bad of ['0', '1.5', '1e3', 'x', ''])
    t.throws(() => parseCollectorArgs(['--max-live-captures', bad], env), {
      code: 'CLI_USAGE',
      where: '--max-live-captures',
    });
  const opts = parseCollectorArgs(['--max-live-captures', '1', '--listen', '127.0.0.1:0'], env);
  t.equal(opts.maxLiveCaptures, 1);
  const c = await startCollector({
    ...opts,
    dataDir: tempDir(t),
    logger: silentLogger(),
    hubFactory: () => twoNodeHub(),
    fsync: false,
  });
  t.teardown(() => c.close());
  const post = () =>
    fetch(`${c.url}/v1/captures`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(SPEC),
    });
  t.equal((await post()).status, 201);
  const second = await post();
  t.equal(second.status, 429);
  t.match(await second.text(), /API_TOO_MANY_CAPTURES/);
});

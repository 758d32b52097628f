/**
 * Live captures are capped (adversarial review F6: one API token holder armed 1,000 one-hour
 * captures in 3 s, each a real packet capture on the agents): past the cap POST /v1/captures is
 * 429 API_TOO_MANY_CAPTURES, nothing is armed, and a finished capture makes room again. And per
 * node: an agent runs at most its --max-captures (its hello says how many; 4 for an older agent
 * whose hello does not), so a capture that needs one more there is 429 API_AGENT_BUSY up front,
 * not a point that fails with AGENT_BUSY once the capture has started; so is a repro.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type tap from 'tap';
import { parseCollectorArgs } from '../../cli/collector';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { startCollector } from '../../collector/main';
import type { CaptureView } from '../../collector/capture-views';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { NETNS_REPRO, twoNodeHub } from './collector-fixtures';
import { bodyText } from './api-body';

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

function setup(
  t: { teardown(fn: () => Promise<void> | void): void },
  maxLiveCaptures: number,
  hub = twoNodeHub(),
) {
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
    return { status: r.status, json: JSON.parse(bodyText(r.body)) as unknown };
  };
  const armed = (): number => hub.sent.filter((s) => s.cmd.kind === 'capture').length;
  return { req, armed, hub };
}

const errorOf = (j: unknown): { code: string; message: string; where: string; hint: string } =>
  (j as { error: { code: string; message: string; where: string; hint: string } }).error;

/** A 429 with `code`, its message and hint as given. */
function refused(
  t: Pick<typeof tap, 'equal' | 'match'>,
  r: { status: number; json: unknown },
  code: string,
  message: RegExp,
  hint: RegExp,
): void {
  t.equal(r.status, 429);
  const e = errorOf(r.json);
  t.equal(e.code, code);
  t.match(e.message, message);
  t.match(e.hint, hint, 'what to do');
}

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
      message: /live captures and repros/,
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

/** A capture of `points` points, all on the VPN node's pod. */
const onVpnNode = (points: number) => ({
  points: Array.from({ length: points }, (_, i) => ({
    name: `p${i}`,
    target: '10.244.1.10',
    iface: 'eth0',
  })),
  timeoutMs: 3_600_000,
});

void t.test(
  "a capture that needs more of a node than its agent's --max-captures is refused up front (429)",
  async (t) => {
    const hub = twoNodeHub();
    const vpn = hub.list[0];
    if (vpn === undefined) throw new Error('no agent');
    vpn.hello.maxCaptures = 3;
    const { req, armed } = setup(t, 32, hub);
    const a = await req('POST', '/v1/captures', onVpnNode(2));
    t.equal(a.status, 201);
    t.equal(armed(), 2);
    // Two more points on the VPN node: 4 > 3. The old collector armed them (its cap is 32) and the
    // agent failed the second with AGENT_BUSY.
    const b = await req('POST', '/v1/captures', onVpnNode(2));
    t.equal(b.status, 429);
    const e = errorOf(b.json);
    t.equal(e.code, 'API_AGENT_BUSY');
    t.match(
      e.message,
      /node vpn-node runs 2 capture points for this collector and its agent agent-vpn takes 3 at once \(its --max-captures\); this capture needs 2 more there/,
    );
    t.match(e.hint, /wait for a capture on vpn-node to finish.*higher --max-captures/);
    t.equal(armed(), 2, 'nothing armed for it');
    t.equal((await req('POST', '/v1/captures', SPEC)).status, 201, 'one more there fits');
    t.equal((await req('POST', '/v1/captures', SPEC)).status, 429, 'then not even one');
    const agents = (await req('GET', '/v1/agents')).json as {
      agents: { agentId: string; maxCaptures: number; liveCaptures: number }[];
    };
    t.match(agents.agents, [
      { agentId: 'agent-vpn', maxCaptures: 3, liveCaptures: 3 },
      { agentId: 'agent-backend', maxCaptures: 4, liveCaptures: 1 },
    ]);
    // A finished capture frees its points.
    t.equal((await req('DELETE', `/v1/captures/${(a.json as CaptureView).id}`)).status, 200);
    t.equal((await req('POST', '/v1/captures', onVpnNode(2))).status, 201, 'room again');
  },
);

void t.test(
  'an older agent whose hello says nothing of its captures is taken to run 4 at once',
  async (t) => {
    const { req, armed, hub } = setup(t, 32);
    t.equal(hub.list[0]?.hello.maxCaptures, undefined, 'a hello without the field');
    for (let i = 0; i < 4; i++) t.equal((await req('POST', '/v1/captures', SPEC)).status, 201);
    const fifth = await req('POST', '/v1/captures', SPEC);
    t.equal(fifth.status, 429);
    t.match(errorOf(fifth.json), {
      code: 'API_AGENT_BUSY',
      message:
        /runs 4 capture points .* takes 4 at once \(the default of an agent that does not say its --max-captures\)/,
    });
    t.equal(armed(), 8);
  },
);

void t.test(
  "a repro that needs more of a node than its agent's --max-captures is refused up front too (429)",
  async (t) => {
    const hub = twoNodeHub();
    const vpn = hub.list[0];
    if (vpn === undefined) throw new Error('no agent');
    vpn.hello.maxCaptures = 3;
    const { req, armed } = setup(t, 32, hub);
    const a = await req('POST', '/v1/captures', onVpnNode(2));
    t.equal(a.status, 201);
    t.equal(armed(), 2);
    // The repro's decap and egress points on the VPN node: 4 > 3. The old collector armed all
    // three points and the agent failed one of the two there with AGENT_BUSY.
    refused(
      t,
      await req('POST', '/v1/repros', NETNS_REPRO),
      'API_AGENT_BUSY',
      /^API_AGENT_BUSY: POST \/v1\/repros: node vpn-node runs 2 capture points for this collector and its agent agent-vpn takes 3 at once \(its --max-captures\); this repro needs 2 more there/,
      /wait for a capture on vpn-node to finish.*higher --max-captures/,
    );
    t.equal(armed(), 2, 'nothing armed for it');
    t.strictSame(
      ((await req('GET', '/v1/repros')).json as { repros: unknown[] }).repros,
      [],
      'and no repro made',
    );
    // Room again: the repro runs, and its points count against the next capture.
    t.equal((await req('DELETE', `/v1/captures/${(a.json as CaptureView).id}`)).status, 200);
    t.equal((await req('POST', '/v1/repros', NETNS_REPRO)).status, 201);
    t.equal(armed(), 5, 'its three points armed');
    const c = await req('POST', '/v1/captures', onVpnNode(2));
    t.equal(c.status, 429);
    t.match(errorOf(c.json).message, /node vpn-node runs 2 capture points/);
  },
);

void t.test(
  '--max-live-captures counts repros too: past it a repro or a capture is refused (429)',
  async (t) => {
    // Agents that take many captures: the collector's own limit is the one reached.
    const hub = twoNodeHub();
    for (const a of hub.list) a.hello.maxCaptures = 64;
    const { req, armed } = setup(t, 2, hub);
    t.equal((await req('POST', '/v1/captures', SPEC)).status, 201);
    const r = await req('POST', '/v1/repros', NETNS_REPRO);
    t.equal(r.status, 201, 'one capture and one repro: the limit of 2');
    t.equal(armed(), 5);

    // The old collector made this repro (and any number more): each arms three capture points for
    // up to its timeout.
    refused(
      t,
      await req('POST', '/v1/repros', NETNS_REPRO),
      'API_TOO_MANY_CAPTURES',
      /^API_TOO_MANY_CAPTURES: POST \/v1\/repros: 1 capture and 1 repro are live; this collector runs at most 2 at once/,
      /POST \/v1\/repros\/:id\/finish ends one.*--max-live-captures/,
    );
    const c = await req('POST', '/v1/captures', SPEC);
    t.equal(c.status, 429, 'a capture counts the repro too');
    t.match(errorOf(c.json), { where: 'POST /v1/captures', message: /1 capture and 1 repro/ });
    t.equal(armed(), 5, 'nothing armed for either');
    t.equal(
      ((await req('GET', '/v1/repros')).json as { repros: unknown[] }).repros.length,
      1,
      'no second repro made',
    );

    // Repros arriving together cannot pass the limit between them.
    const id = (r.json as { id: string }).id;
    t.equal((await req('POST', `/v1/repros/${id}/finish`, {})).status, 200);
    const all = await Promise.all(
      Array.from({ length: 4 }, () => req('POST', '/v1/repros', NETNS_REPRO)),
    );
    t.same(
      all.map((x) => x.status).sort(),
      [201, 429, 429, 429],
      'a finished repro makes room for one',
    );
  },
);

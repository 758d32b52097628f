/**
 * The HTTP API, socket-free through `handle()`: validation, auth, 404/409, and a whole capture
 * lifecycle with a fake hub delivering events replayed from a public pcap at all three points.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { replayCaptureFile } from '../../offline/replay';
import { createApi, type Api, type ApiResponse } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import type { CaptureView } from '../../collector/capture-views';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import type { PacketEvent } from '../../common/event';
import type { NamespaceFacts, NatRule } from '../../common/wire';
import { FakeHub, status, twoNodeHub } from './collector-fixtures';
import { PCAPS } from './corpus';
import { reportSchemaErrors } from './report-schema';
import { bodyText } from './api-body';

const TOKEN = 'sekrit-token';
const PCAP = join(PCAPS, 'zeek_http-get.pcap');
const POINTS = [
  { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
  { name: 'egress', target: '10.244.1.10', iface: 'eth0' },
  { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
];

function events(point: string, node: string): PacketEvent[] {
  return [...replayCaptureFile(PCAP, { point, node, iface: 'eth0' })];
}

interface Env {
  hub: FakeHub;
  sessions: SessionManager;
  req: (
    method: string,
    url: string,
    body?: unknown,
    token?: string | null,
  ) => Promise<Omit<ApiResponse, 'body'> & { body: string; json: unknown }>;
  close: () => Promise<void>;
  dir: string;
  api: Api;
}

function setup(
  t: { teardown(fn: () => Promise<void> | void): void },
  o: { agents?: boolean; dir?: string } = {},
): Env {
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'hoptrace-api-'));
  if (o.dir === undefined)
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
  const hub = o.agents === false ? new FakeHub() : twoNodeHub();
  const store = new CaptureStore({ dir, fsync: false });
  const sessions = new SessionManager({ hub, store, logger: silentLogger(), debounceMs: 0 });
  sessions.start();
  const api = createApi({
    sessions,
    tokens: [TOKEN],
    collectorId: store.collectorId,
    logger: silentLogger(),
  });
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await sessions.close();
  };
  t.teardown(close);
  const req: Env['req'] = async (method, url, body, token = TOKEN) => {
    const headers: Record<string, string> = {};
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    const r = await api.handle({
      method,
      url,
      headers,
      ...(body === undefined
        ? {}
        : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = bodyText(r.body);
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      // report.md
    }
    return { ...r, body: text, json };
  };
  return { hub, sessions, req, close, dir, api };
}

function waitFinal(sessions: SessionManager, id: string): Promise<CaptureView> {
  return new Promise((resolve) => {
    const now = sessions.get(id);
    if (now && ['resolved', 'timeout', 'failed', 'cancelled'].includes(now.state)) {
      resolve(now);
      return;
    }
    const off = sessions.onChange((v) => {
      if (v.id === id && ['resolved', 'timeout', 'failed', 'cancelled'].includes(v.state)) {
        off();
        resolve(v);
      }
    });
  });
}

const errorOf = (j: unknown): { code: string; where: string | null; message: string } =>
  (j as { error: { code: string; where: string | null; message: string } }).error;

void t.test('auth: 401 without or with a wrong token; /healthz is open', async (t) => {
  const { req } = setup(t);
  const a = await req('GET', '/v1/captures', undefined, null);
  t.equal(a.status, 401);
  t.equal(errorOf(a.json).code, 'API_UNAUTHORIZED');
  t.equal(a.headers['www-authenticate'], 'Bearer realm="hoptrace"');
  t.equal((await req('GET', '/v1/agents', undefined, 'wrong')).status, 401);
  const h = await req('GET', '/healthz', undefined, null);
  t.equal(h.status, 200);
  t.match(h.json, { ok: true, agentsConnected: 2 });
});

void t.test('validation: 400 API_BAD_REQUEST naming the field', async (t) => {
  const { req } = setup(t);
  const cases: [unknown, string][] = [
    ['{not json', 'body'],
    [[], 'body'],
    [{ points: POINTS.slice(0, 1) }, 'points'],
    [{ points: [POINTS[0], { ...POINTS[1], iface: 'eth0; rm -rf' }] }, 'points[1].iface'],
    [{ points: [POINTS[0], { ...POINTS[1], target: 'not-a-target' }] }, 'points[1].target'],
    [{ points: [POINTS[0], { ...POINTS[1], name: 'Egress' }] }, 'points[1].name'],
    [{ points: [POINTS[0], POINTS[0]] }, 'points'],
    [{ points: POINTS, client: '10.90.0.999' }, 'client'],
    [{ points: POINTS, dport: 70000 }, 'dport'],
    [{ points: POINTS, timeoutMs: 'soon' }, 'timeoutMs'],
    // Out of range (issue 17: -5 and 1e15 were accepted).
    [{ points: POINTS, timeoutMs: -5 }, 'timeoutMs'],
    [{ points: POINTS, timeoutMs: 1e15 }, 'timeoutMs'],
    [{ points: POINTS, settleMs: -1 }, 'settleMs'],
    [{ points: POINTS, stopOnFirstMatch: 'yes' }, 'stopOnFirstMatch'],
    [{ points: POINTS, evidencePayload: 'yes' }, 'evidencePayload'],
    [{ points: POINTS, evidencePayload: 1 }, 'evidencePayload'],
    [{ points: POINTS, evidencePayload: 'true' }, 'evidencePayload'],
    [{ points: POINTS, color: 'red' }, 'color'],
    [{ points: POINTS, inventory: { nodes: [] } }, 'inventory'],
    [{ points: POINTS, doctor: '10.90.0.0/24' }, 'doctor'],
    [{ points: POINTS, doctor: {} }, 'doctor.tunnelRange'],
    [{ points: POINTS, doctor: { tunnelRange: '10.90.0.0/33' } }, 'doctor.tunnelRange'],
    [{ points: POINTS, doctor: { tunnelRange: '10.90.0.0/24', vpn: 'x' } }, 'doctor.vpn'],
  ];
  for (const [body, where] of cases) {
    const r = await req('POST', '/v1/captures', body);
    t.equal(r.status, 400, `${JSON.stringify(body)} → 400`);
    t.equal(errorOf(r.json).code, 'API_BAD_REQUEST');
    t.equal(errorOf(r.json).where, where);
  }
  // A method the path does not take is 405 with Allow (issue 17), not 400.
  const put = await req('PUT', '/v1/captures', {});
  t.equal(put.status, 405, 'wrong method');
  t.equal(put.headers['allow'], 'GET, POST');
  t.equal(errorOf(put.json).code, 'API_METHOD_NOT_ALLOWED');
});

void t.test(
  'perPacket: agents are asked to fold flows unless a capture wants every packet; kept in session.json',
  async (t) => {
    const { req, hub, dir } = setup(t);
    const each = await req('POST', '/v1/captures', { points: POINTS, perPacket: true });
    t.equal(each.status, 201);
    const plain = await req('POST', '/v1/captures', { points: POINTS });
    t.equal(plain.status, 201);
    const idOf = (r: { json: unknown }): string => (r.json as { id: string }).id;
    const fold = (id: string): (boolean | undefined)[] =>
      hub
        .captures()
        .filter((c) => c.captureId === id)
        .map((c) => c.foldFlows);
    t.same(fold(idOf(each)), [undefined, undefined, undefined], 'perPacket: no folding asked');
    t.same(fold(idOf(plain)), [true, true, true], 'by default every point folds');
    const spec = JSON.parse(
      readFileSync(join(dir, 'captures', idOf(each), 'session.json'), 'utf8'),
    ) as { spec: { perPacket?: unknown } };
    t.equal(spec.spec.perPacket, true, 'session.json keeps it');
    const bad = await req('POST', '/v1/captures', { points: POINTS, perPacket: 1 });
    t.equal(bad.status, 400);
    t.equal(errorOf(bad.json).where, 'perPacket');
  },
);

void t.test(
  'evidencePayload: the agents are asked for whole frames; kept in session.json; default headers',
  async (t) => {
    const { req, hub, dir } = setup(t);
    const payload = await req('POST', '/v1/captures', { points: POINTS, evidencePayload: true });
    t.equal(payload.status, 201);
    const plain = await req('POST', '/v1/captures', { points: POINTS, evidencePayload: false });
    t.equal(plain.status, 201);
    const idOf = (r: { json: unknown }): string => (r.json as { id: string }).id;
    const sent = hub.captures();
    const of = (id: string): (number | undefined)[] =>
      sent.filter((c) => c.captureId === id).map((c) => c.retainSnaplen);
    t.same(of(idOf(payload)), [65535, 65535, 65535], 'retainSnaplen = the capture snaplen');
    t.same(of(idOf(plain)), [undefined, undefined, undefined], "the agents' default (256)");
    const whole = (id: string): (boolean | undefined)[] =>
      sent.filter((c) => c.captureId === id).map((c) => c.retainPayload);
    t.same(whole(idOf(payload)), [true, true, true], 'retainPayload: whole frames');
    t.same(whole(idOf(plain)), [undefined, undefined, undefined], 'headers only by default');
    const spec = (id: string): unknown =>
      (
        JSON.parse(readFileSync(join(dir, 'captures', id, 'session.json'), 'utf8')) as {
          spec: { evidencePayload?: unknown };
        }
      ).spec.evidencePayload;
    t.equal(spec(idOf(payload)), true, 'session.json keeps it (a restart re-reads it)');
    t.equal(spec(idOf(plain)), undefined, 'false is the default, not stored');
  },
);

void t.test(
  'HTTP details: 405 everywhere, HEAD as GET, broken percent-encoding is 400',
  async (t) => {
    const { req } = setup(t);
    for (const [method, url, allow] of [
      ['POST', '/v1/agents', 'GET'],
      ['PATCH', '/v1/captures/c-abc-0000aaaa', 'GET, DELETE'],
      ['POST', '/v1/captures/c-abc-0000aaaa/report.md', 'GET'],
      ['GET', '/v1/doctor', 'POST'],
      ['DELETE', '/v1/repros', 'GET, POST'],
      ['POST', '/v1/captures/c-abc-0000aaaa/bundle.tar', 'GET'],
      ['DELETE', '/v1/repros/r-abc-0000aaaa/bundle.tar', 'GET'],
    ] as const) {
      const r = await req(method, url);
      t.equal(r.status, 405, `${method} ${url}`);
      t.equal(r.headers['allow'], allow, `${method} ${url}: Allow`);
    }
    const head = await req('HEAD', '/v1/captures');
    t.equal(head.status, 200, 'HEAD is answered as GET (the listener sends no body)');
    for (const url of [
      '/v1/captures/%E0%A4%A/report.md',
      '/v1/captures/%E0%A4%A',
      '/v1/repros/%E0%A4%A',
    ]) {
      const r = await req('GET', url);
      t.equal(r.status, 400, `${url}: 400, not 500`);
      t.equal(errorOf(r.json).code, 'API_BAD_REQUEST');
      t.match(errorOf(r.json).message, /malformed percent-encoding/);
    }
    const badInventory = await req('POST', '/v1/repros', {
      workload: { netns: 'vpn*' },
      decapIface: 'wg0',
      egressIface: 'eth0',
      backend: { target: '10.244.2.5', iface: 'eth0' },
      client: '10.90.0.42',
      inventory: { pods: { x: null } },
    });
    t.equal(badInventory.status, 400, 'a repro inventory with a null pod is refused');
    t.equal(errorOf(badInventory.json).code, 'CLI_BAD_INVENTORY');
    t.equal((await req('GET', '/v1/repros')).status, 200, 'and the repro list still answers');
    for (const timeoutMs of [-5, 1e15, 0.5]) {
      const r = await req('POST', '/v1/repros', {
        workload: { netns: 'vpn*' },
        decapIface: 'wg0',
        egressIface: 'eth0',
        backend: { target: '10.244.2.5', iface: 'eth0' },
        client: '10.90.0.42',
        timeoutMs,
      });
      t.equal(r.status, 400, `repro timeoutMs ${timeoutMs} is refused`);
    }
  },
);

void t.test('404 for unknown captures, paths and reports before the verdict', async (t) => {
  const { req } = setup(t);
  for (const url of ['/v1/captures/c-zzz-00000000', '/v1/captures/..%2Fetc', '/v1/nothing']) {
    const r = await req('GET', url);
    t.equal(r.status, 404, url);
    t.equal(errorOf(r.json).code, 'API_NOT_FOUND');
  }
  t.equal((await req('DELETE', '/v1/captures/c-zzz-00000000')).status, 404);
  const c = await req('POST', '/v1/captures', { points: POINTS });
  t.equal(c.status, 201);
  const id = (c.json as CaptureView).id;
  t.equal(c.headers['location'], `/v1/captures/${id}`);
  const r = await req('GET', `/v1/captures/${id}/report.md`);
  t.equal(r.status, 404);
  t.match(errorOf(r.json).message, /report\.md/);
  // The whole bundle as one archive: none before the verdict, none of an unknown capture or repro.
  const tar = await req('GET', `/v1/captures/${id}/bundle.tar`);
  t.equal(tar.status, 404, 'no archive before the verdict');
  t.match(errorOf(tar.json), {
    code: 'API_NOT_FOUND',
    where: `/v1/captures/${id}/bundle.tar`,
    message: /not there yet/,
    hint: /once there is a verdict/,
  });
  for (const url of [
    '/v1/captures/c-zzz-00000000/bundle.tar',
    '/v1/repros/r-zzz-00000000/bundle.tar',
  ]) {
    const none = await req('GET', url);
    t.equal(none.status, 404, url);
    t.equal(errorOf(none.json).code, 'API_NOT_FOUND');
  }
});

void t.test('409 API_NO_AGENT when no agent can reach any point', async (t) => {
  const { req } = setup(t, { agents: false });
  const r = await req('POST', '/v1/captures', { points: POINTS });
  t.equal(r.status, 409);
  t.equal(errorOf(r.json).code, 'API_NO_AGENT');
  t.match(errorOf(r.json).message, /decap: AGENT_NOT_CONNECTED/);
});

void t.test(
  'lifecycle: arm, events from a pcap at three points → resolved, preserved, reports',
  async (t) => {
    const { req, hub, sessions } = setup(t);
    // The fake agents answer like real ones: status capturing, then the point's events.
    hub.onSend = (agentId, cmd) => {
      if (cmd.kind !== 'capture') return;
      const c = cmd.capture;
      const node = agentId === 'agent-vpn' ? 'vpn-node' : 'backend-node';
      setImmediate(() => {
        void hub
          .deliver({
            kind: 'status',
            agentId,
            status: status(c.captureId, c.point, 'capturing', {
              netns: c.target === '10.244.1.10' ? '/run/netns/vpn' : '/run/netns/web',
              netnsAddresses: [c.target],
            }),
          })
          .then(() =>
            hub.deliver({
              kind: 'events',
              agentId,
              batch: { captureId: c.captureId, point: c.point, events: events(c.point, node) },
            }),
          );
      });
    };
    const c = await req('POST', '/v1/captures', { points: POINTS, client: '141.142.228.5' });
    t.equal(c.status, 201);
    const created = c.json as CaptureView;
    t.equal(created.state, 'arming');
    t.same(
      created.points.map((p) => [p.name, p.agentId, p.node, p.state]),
      [
        ['decap', 'agent-vpn', 'vpn-node', 'arming'],
        ['egress', 'agent-vpn', 'vpn-node', 'arming'],
        ['backend', 'agent-backend', 'backend-node', 'arming'],
      ],
    );
    t.same(
      hub.captures().map((x) => [x.point, x.target, x.iface]),
      POINTS.map((p) => [p.name, p.target, p.iface]),
    );
    const final = await waitFinal(sessions, created.id);
    t.equal(final.state, 'resolved');
    t.equal(final.verdict?.layer, 'preserved');
    const g = await req('GET', `/v1/captures/${created.id}`);
    const v = g.json as CaptureView;
    t.equal(v.state, 'resolved');
    t.equal(v.verdict?.layer, 'preserved');
    t.ok(v.points.every((p) => p.packets > 0 && p.kernelDrops === null && p.state === 'stopped'));
    t.same(v.reportUrls, {
      markdown: `/v1/captures/${created.id}/report.md`,
      json: `/v1/captures/${created.id}/report.json`,
    });
    t.same(
      hub.stops().map((s) => s.point),
      ['decap', 'egress', 'backend'],
      'capture stopped on every agent',
    );
    const md = await req('GET', `/v1/captures/${created.id}/report.md`);
    t.equal(md.status, 200);
    t.match(md.headers['content-type'], /markdown/);
    t.match(md.body, /# hoptrace: preserved/);
    t.match(md.body, /hoptrace capture --point decap=10\.244\.1\.10:tun0/);
    const rj = await req('GET', `/v1/captures/${created.id}/report.json`);
    t.match(rj.json, {
      verdict: { layer: 'preserved' },
      points: [{ name: 'decap' }, { name: 'egress' }, { name: 'backend' }],
    });
    // The collector's report.json is the same evidence form as analyze's (proto/report.schema.json).
    t.strictSame(reportSchemaErrors(rj.json), [], 'report.json is valid against the schema');
    t.match(rj.json, {
      schemaVersion: 1,
      source: 'live',
      inputs: [{ name: 'decap', agentId: 'agent-vpn', node: 'vpn-node', iface: 'tun0' }],
      capture: { id: created.id, state: 'resolved' },
      reproduce: {
        command: /^hoptrace capture --point decap=10\.244\.1\.10:tun0 .*--token-file TOKEN_FILE/,
      },
    });
    const list = await req('GET', '/v1/captures');
    t.equal((list.json as { captures: unknown[] }).captures.length, 1);
    const agents = await req('GET', '/v1/agents');
    t.match(agents.json, {
      agents: [
        { agentId: 'agent-vpn', node: 'vpn-node', connected: true },
        { agentId: 'agent-backend' },
      ],
    });
  },
);

void t.test(
  'a request the backend never saw while its capture dropped packets: the report says so',
  async (t) => {
    const { req, hub, sessions } = setup(t);
    const c = (await req('POST', '/v1/captures', { points: POINTS, settleMs: 2000 }))
      .json as CaptureView;
    for (const p of POINTS) {
      const backend = p.name === 'backend';
      await hub.deliver({
        kind: 'status',
        agentId: backend ? 'agent-backend' : 'agent-vpn',
        status: status(c.id, p.name, 'capturing', {
          packets: backend ? 5000 : 12,
          kernelDrops: backend ? 37 : 0,
        }),
      });
    }
    const done = waitFinal(sessions, c.id);
    for (const point of ['decap', 'egress'])
      await hub.deliver({
        kind: 'events',
        agentId: 'agent-vpn',
        batch: { captureId: c.id, point, events: events(point, 'vpn-node') },
      });
    const v = await done;
    t.equal(v.verdict?.layer, 'dropped');
    const md = (await req('GET', `/v1/captures/${c.id}/report.md`)).body;
    t.match(
      md,
      /- \*\*caution\*\*: backend did not see the request, and its capture lost 37 in the kernel/,
    );
    t.match(md, /\| backend \| backend-node \| eth0 \| \w+ \| 5000 \| 37 \| 0 \| 0 \|/);
    t.match(md, /\| decap \| vpn-node \| tun0 \| \w+ \| \d+ \| 0 \| 0 \| 0 \|/);
    const rj = (await req('GET', `/v1/captures/${c.id}/report.json`)).json as {
      caveats?: string[];
    };
    t.equal(rj.caveats?.length, 1, 'one caution in the JSON report');
    t.strictSame(reportSchemaErrors(rj), [], 'a dropped verdict: valid against the schema');
    // The backend's final counters come when its capture stops, after the verdict: the report is
    // rewritten with them (and a status from the wrong agent changes nothing).
    await hub.deliver({
      kind: 'status',
      agentId: 'agent-vpn',
      status: status(c.id, 'backend', 'stopped', { packets: 1, kernelDrops: 999 }),
    });
    await hub.deliver({
      kind: 'status',
      agentId: 'agent-backend',
      status: status(c.id, 'backend', 'stopped', { packets: 5100, kernelDrops: 41 }),
    });
    const md2 = (await req('GET', `/v1/captures/${c.id}/report.md`)).body;
    t.match(md2, /its capture lost 41 in the kernel/, 'the caution with the final count');
    t.match(md2, /\| backend \| backend-node \| eth0 \| \w+ \| 5100 \| 41 \| 0 \| 0 \|/);
    t.match(md2, /# hoptrace: dropped/, 'the verdict unchanged');
  },
);

void t.test('final counters after a collector restart still rewrite the report', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-api-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const first = setup(t, { dir });
  const c = (await first.req('POST', '/v1/captures', { points: POINTS, settleMs: 2000 }))
    .json as CaptureView;
  for (const p of POINTS) {
    const backend = p.name === 'backend';
    await first.hub.deliver({
      kind: 'status',
      agentId: backend ? 'agent-backend' : 'agent-vpn',
      status: status(c.id, p.name, 'capturing', { packets: backend ? 5000 : 12, kernelDrops: 0 }),
    });
  }
  const done = waitFinal(first.sessions, c.id);
  for (const point of ['decap', 'egress'])
    await first.hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: c.id, point, events: events(point, 'vpn-node') },
    });
  t.equal((await done).verdict?.layer, 'dropped');
  const before = (await first.req('GET', `/v1/captures/${c.id}/report.md`)).body;
  t.notMatch(before, /caution/, 'no drops so far: no caution');
  await first.close();

  // A new collector on the same data directory; the backend's final counters arrive now.
  const second = setup(t, { dir });
  await second.hub.deliver({
    kind: 'status',
    agentId: 'agent-backend',
    status: status(c.id, 'backend', 'stopped', { packets: 5100, kernelDrops: 41 }),
  });
  const after = (await second.req('GET', `/v1/captures/${c.id}/report.md`)).body;
  t.match(after, /its capture lost 41 in the kernel/, 'rewritten with the final count');
  t.match(after, /# hoptrace: dropped/, 'the verdict unchanged');
  const generated = (md: string): string | undefined =>
    md.split('\n').find((l) => l.startsWith('- generated: '));
  t.ok(generated(before), 'the report says when it was generated');
  t.equal(generated(after), generated(before), 'rewritten from the same inputs');
});

void t.test('DELETE cancels and stops the agents', async (t) => {
  const { req, hub } = setup(t);
  const c = (await req('POST', '/v1/captures', { points: POINTS })).json as CaptureView;
  const d = await req('DELETE', `/v1/captures/${c.id}`);
  t.equal(d.status, 200);
  t.equal((d.json as CaptureView).state, 'cancelled');
  t.equal(hub.stops().length, 3);
  t.equal(
    (await req('GET', `/v1/captures/${c.id}/report.json`)).status,
    200,
    'a cancelled capture has a report',
  );
  t.equal(
    ((await req('DELETE', `/v1/captures/${c.id}`)).json as CaptureView).state,
    'cancelled',
    'idempotent',
  );
});

void t.test('a point no agent can reach fails visibly; an unknown node too', async (t) => {
  const { req } = setup(t);
  const r = await req('POST', '/v1/captures', {
    points: [
      POINTS[0],
      POINTS[1],
      { name: 'backend', target: '/run/netns/web', iface: 'eth0', node: 'gone-node' },
    ],
  });
  t.equal(r.status, 201);
  const v = r.json as CaptureView;
  const backend = v.points[2];
  t.equal(backend?.state, 'failed');
  t.equal(backend?.error?.code, 'AGENT_NOT_CONNECTED');
  t.match(backend?.error?.message, /gone-node/);
  const r2 = await req('POST', '/v1/captures', {
    points: [POINTS[0], { name: 'backend', target: '/run/netns/web', iface: 'eth0' }],
  });
  t.equal(
    (r2.json as CaptureView).points[1]?.error?.code,
    'TARGET_NOT_FOUND',
    'a path with two agents needs node',
  );
});

void t.test(
  'restart: an unfinished capture resumes and the resent events complete it',
  async (t) => {
    const first = setup(t);
    const c = (await first.req('POST', '/v1/captures', { points: POINTS })).json as CaptureView;
    for (const p of POINTS) {
      const agentId = p.name === 'backend' ? 'agent-backend' : 'agent-vpn';
      await first.hub.deliver({
        kind: 'status',
        agentId,
        status: status(c.id, p.name, 'capturing'),
      });
    }
    await first.hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: c.id, point: 'decap', events: events('decap', 'vpn-node') },
    });
    await first.close(); // the collector goes away mid-capture

    const second = setup(t, { dir: first.dir });
    const resumed = second.sessions.get(c.id);
    t.equal(resumed?.state, 'capturing', 'loaded from the data directory');
    t.equal(resumed?.points[0]?.events, events('decap', 'x').length, 'stored events reloaded');
    const done = waitFinal(second.sessions, c.id);
    await second.hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: c.id, point: 'egress', events: events('egress', 'vpn-node') },
    });
    await second.hub.deliver({
      kind: 'events',
      agentId: 'agent-backend',
      batch: { captureId: c.id, point: 'backend', events: events('backend', 'backend-node') },
    });
    const v = await done;
    t.equal(v.state, 'resolved');
    t.equal(v.verdict?.layer, 'preserved');
  },
);

void t.test(
  'messages from the wrong agent or for unknown captures are dropped (and acknowledged)',
  async (t) => {
    const { req, hub, sessions } = setup(t);
    const c = (await req('POST', '/v1/captures', { points: POINTS })).json as CaptureView;
    await hub.deliver({
      kind: 'events',
      agentId: 'agent-backend',
      batch: { captureId: c.id, point: 'decap', events: events('decap', 'x') },
    });
    await hub.deliver({
      kind: 'events',
      agentId: 'agent-vpn',
      batch: { captureId: 'c-none-00000000', point: 'decap', events: events('decap', 'x') },
    });
    t.equal(sessions.get(c.id)?.points[0]?.events, 0);
  },
);

void t.test(
  'restart: a resumed capture waits for every armed agent before concluding from absence',
  async (t) => {
    const first = setup(t);
    const body = { points: POINTS, settleMs: 200 };
    const c = (await first.req('POST', '/v1/captures', body)).json as CaptureView;
    for (const p of POINTS) {
      const agentId = p.name === 'backend' ? 'agent-backend' : 'agent-vpn';
      await first.hub.deliver({
        kind: 'status',
        agentId,
        status: status(c.id, p.name, 'capturing'),
      });
    }
    await first.close();

    // The new collector: only the VPN node's agent is back so far.
    const second = setup(t, { dir: first.dir, agents: false });
    second.hub.addAgent('agent-vpn', 'vpn-node', ['192.168.50.1']);
    for (const point of ['decap', 'egress'])
      await second.hub.deliver({
        kind: 'events',
        agentId: 'agent-vpn',
        batch: { captureId: c.id, point, events: events(point, 'vpn-node') },
      });
    // Several settle periods pass: the backend's events are in flight, not missing.
    await new Promise((r) => setTimeout(r, 800));
    t.equal(second.sessions.get(c.id)?.state, 'capturing', 'no verdict while an agent is away');

    const done = waitFinal(second.sessions, c.id);
    second.hub.addAgent('agent-backend', 'backend-node', ['192.168.50.2']);
    await second.hub.deliver({
      kind: 'events',
      agentId: 'agent-backend',
      batch: { captureId: c.id, point: 'backend', events: events('backend', 'backend-node') },
    });
    const v = await done;
    t.equal(v.state, 'resolved');
    t.equal(v.verdict?.layer, 'preserved', 'the resent backend events complete the journey');
  },
);

/** One request to `port` on loopback; resolves with the status, headers and the body's size. */
function send(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<{ status: number; headers: Record<string, unknown>; bytes: number }> {
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes });
      });
    });
    // The server may answer (and stop reading) before the whole body is sent.
    r.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE' && e.code !== 'ECONNRESET') reject(e);
    });
    r.end(body);
  });
}

void t.test('over a socket: the token is checked before the body; HEAD has no body', async (t) => {
  const { api } = setup(t);
  const server = createServer(api.listener());
  await new Promise<void>((r) => {
    server.listen(0, '127.0.0.1', r);
  });
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => {
          r();
        });
      }),
  );
  const port = (server.address() as AddressInfo).port;
  const big = Buffer.alloc(3 << 20, 0x61); // 3 MiB, over the 1 MiB body limit
  const wrong = await send(port, 'POST', '/v1/captures', { authorization: 'Bearer nope' }, big);
  t.equal(wrong.status, 401, 'a peer without the token gets 401, not 413: its body was never read');
  const right = await send(port, 'POST', '/v1/captures', { authorization: `Bearer ${TOKEN}` }, big);
  t.equal(right.status, 413, 'with the token, the oversized body is refused as such');
  const head = await send(port, 'HEAD', '/v1/captures', { authorization: `Bearer ${TOKEN}` });
  t.equal(head.status, 200);
  t.equal(head.bytes, 0, 'HEAD: no body');
  t.match(String(head.headers['content-type']), /application\/json/);
});

/** What an agent's doctor facts say of one namespace (a node or the VPN pod), nothing read wrong. */
function doctorFacts(
  name: string,
  target: string,
  node: string,
  natRules: NatRule[] = [],
): NamespaceFacts {
  return {
    name,
    target,
    netns: '(agent namespace)',
    node,
    addresses:
      name === 'vpn' ? ['10.244.1.10'] : node === 'vpn-node' ? ['192.168.50.1'] : ['192.168.50.2'],
    rpFilter: [{ iface: 'all', value: 2 }],
    routes: [],
    lookups: [],
    natChains: ['POSTROUTING'],
    natRules,
    ipvsState: 'read',
    ipvs: [],
    family: 4,
    errorCode: '',
    message: '',
    unread: [],
  };
}

/** The fake agents capture (status, then the pcap's events) and, asked, answer doctor requests. */
function answerLikeAgents(hub: FakeHub, doctor: boolean): void {
  hub.onSend = (agentId, cmd) => {
    const node = agentId === 'agent-vpn' ? 'vpn-node' : 'backend-node';
    if (cmd.kind === 'doctorRequest') {
      if (!doctor) return;
      const masq: NatRule = {
        chain: 'POSTROUTING',
        args: ['-s', '10.90.0.0/24', '-j', 'MASQUERADE'],
        text: '-A POSTROUTING -s 10.90.0.0/24 -j MASQUERADE',
      };
      const facts = cmd.doctorRequest.targets.map((x) =>
        doctorFacts(x.name, x.target, node, x.name === 'vpn-node' ? [masq] : []),
      );
      setImmediate(() => {
        hub.reply({
          kind: 'doctorReport',
          agentId,
          report: { requestId: cmd.doctorRequest.requestId, agentId, node, facts },
        });
      });
      return;
    }
    if (cmd.kind !== 'capture') return;
    const c = cmd.capture;
    setImmediate(() => {
      void hub
        .deliver({
          kind: 'status',
          agentId,
          status: status(c.captureId, c.point, 'capturing', { netnsAddresses: [c.target] }),
        })
        .then(() =>
          hub.deliver({
            kind: 'events',
            agentId,
            batch: { captureId: c.captureId, point: c.point, events: events(c.point, node) },
          }),
        );
    });
  };
}

/** report.md of capture `id` once `done` says it has what is awaited (the doctor runs after). */
async function reportWhen(
  req: Env['req'],
  id: string,
  done: (md: string) => boolean,
): Promise<string> {
  const until = Date.now() + 10_000;
  for (;;) {
    const md = (await req('GET', `/v1/captures/${id}/report.md`)).body;
    if (done(md) || Date.now() > until) return md;
    await new Promise((r) => setTimeout(r, 20));
  }
}

void t.test(
  "a capture with doctor: the agents' findings in What to change, the picture and Reproduce",
  async (t) => {
    const { req, hub, sessions, dir } = setup(t);
    answerLikeAgents(hub, true);
    const c = await req('POST', '/v1/captures', {
      points: POINTS,
      client: '141.142.228.5',
      doctor: { tunnelRange: '10.90.0.0/24' },
    });
    t.equal(c.status, 201);
    const id = (c.json as CaptureView).id;
    t.equal((await waitFinal(sessions, id)).state, 'resolved');
    const md = await reportWhen(req, id, (x) => x.includes('Doctor findings from'));
    t.match(
      md,
      /Doctor findings from doctor's checks through the agents at the capture's end \(vpn 10\.244\.1\.10, backend 10\.244\.2\.5, tunnel range 10\.90\.0\.0\/24\)/,
    );
    const what = md.slice(md.indexOf('## What to change'));
    t.match(
      what,
      /-A POSTROUTING -s 10\.90\.0\.0\/24 -j MASQUERADE/,
      'What to change names the rule',
    );
    t.match(md, /--doctor-tunnel-range 10\.90\.0\.0\/24/, 'the Reproduce line asks for doctor too');
    const rj = (await req('GET', `/v1/captures/${id}/report.json`)).json as {
      doctor: { status: string; result?: { findings: { check: string; subject: string }[] } };
      capture: { request: { doctor?: unknown } };
    };
    t.strictSame(reportSchemaErrors(rj), [], 'report.json is valid against the schema');
    t.equal(rj.doctor.status, 'given');
    t.ok(
      rj.doctor.result?.findings.some(
        (f) => f.check === 'masquerade' && /MASQUERADE/.test(f.subject),
      ),
      "report.json: doctor's masquerade finding",
    );
    t.same(rj.capture.request.doctor, { tunnelRange: '10.90.0.0/24' });
    const svg = (await req('GET', `/v1/captures/${id}/sequence.svg`)).body;
    t.match(svg, /masquerade/i, "the picture carries doctor's finding");
    const saved = JSON.parse(readFileSync(join(dir, 'captures', id, 'session.json'), 'utf8')) as {
      spec: { doctor?: unknown };
    };
    t.same(saved.spec.doctor, { tunnelRange: '10.90.0.0/24' }, 'persisted in session.json');
  },
);

void t.test(
  'a capture with doctor whose agents do not answer: the report says it could not read',
  async (t) => {
    const { req, hub, sessions } = setup(t);
    answerLikeAgents(hub, false);
    const c = await req('POST', '/v1/captures', {
      points: POINTS,
      doctor: { tunnelRange: '10.90.0.0/24' },
    });
    const id = (c.json as CaptureView).id;
    await waitFinal(sessions, id);
    const md = await reportWhen(req, id, (x) => /did not answer/.test(x));
    t.match(
      md,
      /Could not read doctor's checks through the agents .*: the agents did not answer \(/,
    );
    t.notMatch(md, /Doctor findings from/);
    const rj = (await req('GET', `/v1/captures/${id}/report.json`)).json as {
      doctor: { status: string };
    };
    t.equal(rj.doctor.status, 'unreadable');
    t.strictSame(reportSchemaErrors(rj), [], 'report.json is valid against the schema');
  },
);

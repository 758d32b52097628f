/**
 * The Kubernetes API side of the collector against a simulated API server (test/unit/k8s-fixtures):
 * the inventory from nodes and pods, `namespace/pod` targets, the merge with what agents report,
 * and the errors (K8S_POD_NOT_FOUND, K8S_POD_NO_IP, K8S_API_UNREACHABLE, K8S_FORBIDDEN, K8S_CONFIG).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseCapturePoint } from '../../cli/capture';
import { parseCollectorArgs } from '../../cli/collector';
import { parseCaptureRequest, parsePodTarget } from '../../collector/capture-request';
import { createApi } from '../../collector/http';
import { buildLiveInventory } from '../../collector/inventory-live';
import { clusterInventory, firstHostAddress } from '../../collector/k8s/facts';
import { K8sInventorySource } from '../../collector/k8s/source';
import { silentLogger } from '../../collector/logger';
import { startCollector } from '../../collector/main';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { isHoptraceError } from '../../common/errors';
import type { CaptureCommand } from '../../common/wire';
import { FakeHub } from './collector-fixtures';
import {
  KUBE_TOKEN,
  pod,
  PODS,
  startFakeApiServer,
  writeKubeconfig,
  type FakeApiServer,
} from './k8s-fixtures';
import { bodyText } from './api-body';

function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-k8s-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

async function withApi(
  t: { teardown(fn: () => Promise<void> | void): void },
  intervalMs = 60_000,
): Promise<{ fake: FakeApiServer; src: K8sInventorySource; dir: string }> {
  const dir = tmp(t);
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  const src = await K8sInventorySource.start({
    api: { kind: 'kubeconfig', file: fake.kubeconfig },
    intervalMs,
    timeoutMs: 2000,
    logger: silentLogger(),
  });
  t.teardown(() => {
    src.close();
  });
  return { fake, src, dir };
}

void t.test('first host address of a pod CIDR (the bridge gateway)', (t) => {
  t.equal(firstHostAddress('10.244.2.0/24'), '10.244.2.1');
  t.equal(firstHostAddress('10.244.2.77/24'), '10.244.2.1');
  t.equal(firstHostAddress('100.64.0.0/10'), '100.64.0.1');
  t.equal(firstHostAddress('fd00:10:244:1::/64'), 'fd00:10:244:1::1');
  t.equal(firstHostAddress('2001:db8::/32'), '2001:db8::1');
  t.equal(firstHostAddress('10.0.0.0/32'), null);
  t.equal(firstHostAddress('nonsense'), null);
  t.equal(firstHostAddress('10.0.0.0/'), null);
  t.end();
});

void t.test('namespace/pod targets', (t) => {
  t.same(parsePodTarget('vpn/wg-0'), { namespace: 'vpn', name: 'wg-0' });
  t.same(parsePodTarget('web/web-6d4b.x'), { namespace: 'web', name: 'web-6d4b.x' });
  t.equal(parsePodTarget('vpn-node/1234'), null, 'NODE/PID stays a PID');
  t.equal(parsePodTarget('vpn-node/10.244.1.10'), null, 'NODE/IP stays an IP');
  t.equal(parsePodTarget('/run/netns/vpn'), null);
  t.equal(parsePodTarget('Vpn/wg-0'), null, 'namespaces are lower case');
  t.equal(parsePodTarget('a/b/c'), null);
  t.same(parseCapturePoint('decap=vpn/wg-0:wg0'), {
    name: 'decap',
    target: 'vpn/wg-0',
    iface: 'wg0',
  });
  t.same(parseCapturePoint('egress=vpn-node/1234:eth0'), {
    name: 'egress',
    target: '1234',
    iface: 'eth0',
    node: 'vpn-node',
  });
  const spec = parseCaptureRequest({
    points: [
      { name: 'decap', target: 'vpn/wg-0', iface: 'wg0' },
      { name: 'backend', target: 'web/web-1', iface: 'eth0' },
    ],
  });
  t.equal(spec.points[0]?.target, 'vpn/wg-0');
  t.throws(
    () =>
      parseCaptureRequest({
        points: [
          { name: 'decap', target: 'vpn/wg-0', iface: 'wg0', node: 'vpn-node' },
          { name: 'backend', target: 'web/web-1', iface: 'eth0' },
        ],
      }),
    /API_BAD_REQUEST: points\[0\]\.node: a namespace\/pod target brings its node/,
  );
  t.end();
});

void t.test('inventory from the simulated API server', async (t) => {
  const { fake, src } = await withApi(t);
  t.same([...fake.auth], [`Bearer ${KUBE_TOKEN}`], 'the kubeconfig token is sent');
  t.ok(
    fake.requests.includes('GET /api/v1/nodes?limit=500') &&
      fake.requests.includes('GET /api/v1/pods?limit=500'),
    'lists are paged',
  );
  t.equal(src.error(), undefined);
  const inv = src.inventory();
  t.same(inv?.nodes, {
    'vpn-node': ['192.168.50.1', '10.244.1.1', 'fd00:10:244:1::1'],
    'backend-node': ['192.168.50.2', '203.0.113.7', '10.244.2.1'],
  });
  t.same(
    inv?.pods,
    {
      'vpn/wg-0': { ip: '10.244.1.10', node: 'vpn-node', role: 'vpn', labeled: true },
      'vpn/wg-0@fd00:10:244:1::a': {
        ip: 'fd00:10:244:1::a',
        node: 'vpn-node',
        role: 'vpn',
        labeled: true,
      },
      'web/web-1': { ip: '10.244.2.5', node: 'backend-node', role: 'backend', labeled: true },
      'web/envoy-0': { ip: '10.244.2.9', node: 'backend-node', role: 'other', labeled: false },
    },
    'hostNetwork, pending and finished pods hold no address of their own',
  );
  const wg = src.snapshot()?.pods.find((p) => p.name === 'wg-0');
  t.same(wg?.owner, { kind: 'StatefulSet', name: 'wg' });
});

void t.test('paging: a list that continues is read to the end', async (t) => {
  const dir = tmp(t);
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  const many = Array.from({ length: 1203 }, (_, i) => ({
    metadata: { name: `p-${i}`, namespace: 'bulk' },
    spec: { nodeName: 'vpn-node' },
    status: { phase: 'Running', podIP: `10.244.${Math.floor(i / 250) + 10}.${(i % 250) + 1}` },
  }));
  fake.pods = many;
  const src = await K8sInventorySource.start({
    api: { kind: 'kubeconfig', file: fake.kubeconfig },
    intervalMs: 60_000,
    logger: silentLogger(),
  });
  t.teardown(() => {
    src.close();
  });
  t.equal(src.snapshot()?.pods.length, 1203);
  const pages = fake.requests.filter((r) => r.startsWith('GET /api/v1/pods'));
  t.equal(pages.length, 3, 'three pages of 500');
  t.match(pages[2], /continue=1000/);
});

void t.test('resolving namespace/pod: found, unknown, pending, fresh read', async (t) => {
  const { src } = await withApi(t);
  t.same(src.resolvePod('vpn', 'wg-0'), { ok: true, ip: '10.244.1.10', node: 'vpn-node' });
  const unknown = src.resolvePod('vpn', 'wg-9');
  t.match(unknown, {
    ok: false,
    code: 'K8S_POD_NOT_FOUND',
    message: /no pod vpn\/wg-9 \(pods in vpn: wg-0\); check with `kubectl -n vpn get pods`/,
  });
  t.match(src.resolvePod('nope', 'x'), { ok: false, message: /no pods at all in namespace nope/ });
  t.match(src.resolvePod('web', 'pending-0'), {
    ok: false,
    code: 'K8S_POD_NO_IP',
    message: /pod web\/pending-0 is Pending, not scheduled, without an IP/,
  });
  t.match(src.resolvePod('batch', 'done-1'), { ok: false, code: 'K8S_POD_NO_IP' });
  const fresh = await src.readPod('web', 'web-1');
  t.match(fresh, { namespace: 'web', name: 'web-1', ips: ['10.244.2.5'], role: 'backend' });
  await t.rejects(src.readPod('vpn', 'wg-9'), { code: 'K8S_POD_NOT_FOUND' });
});

void t.test('a pod that appears is found after the next list', async (t) => {
  const { fake, src } = await withApi(t, 1000);
  t.match(src.resolvePod('vpn', 'wg-1'), { ok: false, code: 'K8S_POD_NOT_FOUND' });
  fake.pods = [
    ...fake.pods,
    {
      metadata: { name: 'wg-1', namespace: 'vpn' },
      spec: { nodeName: 'backend-node' },
      status: { phase: 'Running', podIP: '10.244.2.30' },
    },
  ];
  await src.refresh();
  t.same(src.resolvePod('vpn', 'wg-1'), { ok: true, ip: '10.244.2.30', node: 'backend-node' });
});

/** The fake API's pods with vpn/wg-0 recreated by its StatefulSet: same name, a new IP. */
const RECREATED = [
  pod('vpn', 'wg-0', {
    ip: '10.244.1.44',
    node: 'vpn-node',
    owner: { kind: 'StatefulSet', name: 'wg' },
  }),
  ...PODS.filter((p) => p.metadata?.name !== 'wg-0'),
];

void t.test('capture targets are read fresh: recreated, deleted, pending, API down', async (t) => {
  const { fake, src } = await withApi(t);
  fake.pods = RECREATED; // after the list: the snapshot still has the old pod
  t.same(src.resolvePod('vpn', 'wg-0'), { ok: true, ip: '10.244.1.10', node: 'vpn-node' });
  t.same(await src.resolvePodTarget('vpn', 'wg-0'), {
    ok: true,
    ip: '10.244.1.44',
    node: 'vpn-node',
  });
  fake.pods = RECREATED.filter((p) => p.metadata?.name !== 'wg-0');
  t.match(await src.resolvePodTarget('vpn', 'wg-0'), {
    ok: false,
    code: 'K8S_POD_NOT_FOUND',
    message: /no pod vpn\/wg-0 \(no pods at all in namespace vpn\)/,
  });
  t.match(await src.resolvePodTarget('web', 'pending-0'), { ok: false, code: 'K8S_POD_NO_IP' });
  t.match(await src.resolvePodTarget('web', 'web-9'), {
    ok: false,
    message: /no pod web\/web-9 \(pods in web: web-1, envoy-0, pending-0\)/,
  });
  // The API stops answering: the last list answers, and says so.
  await fake.close();
  t.match(await src.resolvePodTarget('vpn', 'wg-0'), {
    ok: true,
    ip: '10.244.1.10',
    stale: /^reading vpn\/wg-0 from the API failed \(.+\): as listed \d+ s ago$/,
  });
  t.match(await src.resolvePodTarget('vpn', 'wg-9'), { ok: false, code: 'K8S_POD_NOT_FOUND' });
});

void t.test('API unreachable: never listed, and gone after a good list', async (t) => {
  const dir = tmp(t);
  // A port nothing listens on: bind one, close it.
  const gone = await startFakeApiServer(dir);
  await gone.close();
  writeKubeconfig(join(dir, 'dead'), gone.url);
  const src = await K8sInventorySource.start({
    api: { kind: 'kubeconfig', file: join(dir, 'dead') },
    intervalMs: 60_000,
    timeoutMs: 2000,
    logger: silentLogger(),
  });
  t.teardown(() => {
    src.close();
  });
  t.equal(src.error()?.code, 'K8S_API_UNREACHABLE');
  t.match(src.resolvePod('vpn', 'wg-0'), {
    ok: false,
    code: 'K8S_API_UNREACHABLE',
    message: /cannot resolve vpn\/wg-0: the pod list was never read from http:\/\/127\.0\.0\.1:\d+/,
  });

  const { fake, src: live } = await withApi(t);
  await fake.close();
  await live.refresh();
  t.equal(live.error()?.code, 'K8S_API_UNREACHABLE');
  t.same(
    live.resolvePod('vpn', 'wg-0'),
    { ok: true, ip: '10.244.1.10', node: 'vpn-node' },
    'the last list still answers',
  );
  t.match(live.resolvePod('vpn', 'wg-9'), {
    ok: false,
    code: 'K8S_API_UNREACHABLE',
    message: /not in the pod list of \d+ s ago and the API is failing now/,
  });
});

void t.test('API forbidden (RBAC) is K8S_FORBIDDEN; a bad kubeconfig is K8S_CONFIG', async (t) => {
  const dir = tmp(t);
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  fake.mode = 'forbidden';
  const src = await K8sInventorySource.start({
    api: { kind: 'kubeconfig', file: fake.kubeconfig },
    intervalMs: 60_000,
    logger: silentLogger(),
  });
  t.teardown(() => {
    src.close();
  });
  t.equal(src.error()?.code, 'K8S_FORBIDDEN');
  t.match(src.error()?.message, /HTTP 403.*deploy\/base\/rbac\.yaml/);
  t.match(src.resolvePod('vpn', 'wg-0'), { ok: false, code: 'K8S_FORBIDDEN' });

  await t.rejects(
    K8sInventorySource.start({
      api: { kind: 'kubeconfig', file: join(dir, 'missing') },
      logger: silentLogger(),
    }),
    { code: 'K8S_CONFIG', message: /--kubeconfig .*missing/ },
  );
  const saved = process.env['KUBERNETES_SERVICE_HOST'];
  delete process.env['KUBERNETES_SERVICE_HOST'];
  t.teardown(() => {
    if (saved !== undefined) process.env['KUBERNETES_SERVICE_HOST'] = saved;
  });
  await t.rejects(
    K8sInventorySource.start({ api: { kind: 'in-cluster' }, logger: silentLogger() }),
    {
      code: 'K8S_CONFIG',
      message: /not running in a pod/,
    },
  );
});

void t.test(
  'merge: API facts + agent facts, labeled roles win, explicit inventory wins',
  async (t) => {
    const { src } = await withApi(t);
    const api = src.inventory();
    const hub = new FakeHub();
    hub.addAgent(
      'a-vpn',
      'vpn-node',
      ['192.168.50.1', '10.0.0.99'],
      [
        {
          path: '/proc/10/ns/net',
          inode: 1,
          addresses: ['10.244.1.10'],
          interfaces: ['wg0', 'eth0'],
        },
        { path: '/proc/11/ns/net', inode: 2, addresses: ['10.244.1.44'], interfaces: ['eth0'] },
      ],
    );
    const captured = [
      // envoy-0 is captured as the backend point: its role comes from the point (no annotation).
      {
        point: 'backend',
        node: 'backend-node',
        netns: '/proc/20/ns/net',
        addresses: ['10.244.2.9'],
      },
      // web-1 is captured as "egress": its annotation (backend) wins over the point's role.
      {
        point: 'egress',
        node: 'backend-node',
        netns: '/proc/21/ns/net',
        addresses: ['10.244.2.5'],
      },
    ];
    const inv = buildLiveInventory(hub.agents(), captured, undefined, api);
    t.same(inv.nodes['vpn-node'], ['192.168.50.1', '10.244.1.1', 'fd00:10:244:1::1', '10.0.0.99']);
    t.same(inv.nodes['backend-node'], ['192.168.50.2', '203.0.113.7', '10.244.2.1']);
    t.same(inv.pods['web/envoy-0'], { ip: '10.244.2.9', node: 'backend-node', role: 'backend' });
    t.same(inv.pods['web/web-1'], { ip: '10.244.2.5', node: 'backend-node', role: 'backend' });
    t.same(inv.pods['vpn/wg-0'], { ip: '10.244.1.10', node: 'vpn-node', role: 'vpn' });
    t.same(
      inv.pods['vpn-node:/proc/11/ns/net'],
      { ip: '10.244.1.44', node: 'vpn-node', role: 'other' },
      'agent-only namespaces stay',
    );
    t.notOk(
      Object.keys(inv.pods).some((k) => k.includes('/proc/10/')),
      'one entry per IP, named by the API',
    );

    const explicit = {
      nodes: { 'vpn-node': ['192.168.50.1'] },
      pods: { 'my-vpn': { ip: '10.244.1.10', node: 'vpn-node', role: 'proxy' as const } },
    };
    const withExplicit = buildLiveInventory(hub.agents(), captured, explicit, api);
    t.same(withExplicit.nodes['vpn-node'], ['192.168.50.1']);
    t.same(withExplicit.pods['my-vpn'], explicit.pods['my-vpn']);
    t.notOk('vpn/wg-0' in withExplicit.pods, 'the explicit entry replaces the API one with its IP');
    t.ok('web/web-1' in withExplicit.pods);
    t.same(clusterInventory({ nodes: [], pods: [], takenAtMs: 0 }), { nodes: {}, pods: {} });
  },
);

void t.test('POST /v1/captures with namespace/pod targets', async (t) => {
  const { fake, src, dir } = await withApi(t);
  const hub = new FakeHub();
  hub.addAgent('agent-vpn', 'vpn-node', ['192.168.50.1'], []);
  hub.addAgent('agent-backend', 'backend-node', ['192.168.50.2'], []);
  const store = new CaptureStore({ dir: join(dir, 'data'), fsync: false });
  const sessions = new SessionManager({
    hub,
    store,
    logger: silentLogger(),
    debounceMs: 0,
    cluster: src,
  });
  sessions.start();
  t.teardown(() => sessions.close());
  const api = createApi({ sessions, tokens: ['tk'], collectorId: 'c', logger: silentLogger() });
  const post = async (points: unknown[]): Promise<{ status: number; json: unknown }> => {
    const r = await api.handle({
      method: 'POST',
      url: '/v1/captures',
      headers: { authorization: 'Bearer tk' },
      body: JSON.stringify({ points, timeoutMs: 5000 }),
    });
    return { status: r.status, json: JSON.parse(bodyText(r.body)) };
  };

  const ok = await post([
    { name: 'decap', target: 'vpn/wg-0', iface: 'wg0' },
    { name: 'egress', target: 'vpn/wg-0', iface: 'eth0' },
    { name: 'backend', target: 'web/web-9', iface: 'eth0' },
  ]);
  t.equal(ok.status, 201);
  const captures = hub.sent
    .filter((s) => s.cmd.kind === 'capture')
    .map((s) => ({
      agentId: s.agentId,
      target: (s.cmd as { capture: CaptureCommand }).capture.target,
    }));
  t.same(
    captures,
    [
      { agentId: 'agent-vpn', target: '10.244.1.10' },
      { agentId: 'agent-vpn', target: '10.244.1.10' },
    ],
    'the agent on the pod node gets the pod IP',
  );
  const view = ok.json as {
    id: string;
    points: {
      name: string;
      target: string;
      node: string | null;
      error?: { code: string; message: string };
    }[];
  };
  t.match(view.points[0], { target: 'vpn/wg-0', node: 'vpn-node' });
  t.match(view.points[2], {
    target: 'web/web-9',
    state: 'failed',
    error: {
      code: 'K8S_POD_NOT_FOUND',
      message: /no pod web\/web-9 \(pods in web: web-1, envoy-0, pending-0\)/,
    },
  });
  const s = sessions.get(view.id);
  t.ok(s);

  // The StatefulSet recreated wg-0 since the last list: the capture goes to the new pod's IP,
  // and the inventory the verdict will use is listed again.
  fake.pods = RECREATED;
  const lists = (): number => fake.requests.filter((r) => r.startsWith('GET /api/v1/pods?')).length;
  const listsBefore = lists();
  const again = await post([
    { name: 'decap', target: 'vpn/wg-0', iface: 'wg0' },
    { name: 'backend', target: 'web/web-1', iface: 'eth0' },
  ]);
  t.equal(again.status, 201);
  t.same(
    hub.sent
      .filter((x) => x.cmd.kind === 'capture')
      .slice(-2)
      .map((x) => (x.cmd as { capture: CaptureCommand }).capture.target),
    ['10.244.1.44', '10.244.2.5'],
    'the recreated pod, not the IP of the last list',
  );
  // The list runs beside the capture (not awaited by the POST); the periodic one is 60 s away.
  for (let i = 0; i < 100 && src.inventory()?.pods['vpn/wg-0']?.ip !== '10.244.1.44'; i++)
    await new Promise((r) => setTimeout(r, 20));
  t.equal(src.inventory()?.pods['vpn/wg-0']?.ip, '10.244.1.44', 'the inventory knows the new IP');
  t.equal(lists(), listsBefore + 1, 'one list for the new capture');
  fake.pods = PODS;

  const none = await post([
    { name: 'decap', target: 'vpn/nope', iface: 'wg0' },
    { name: 'backend', target: 'web/pending-0', iface: 'eth0' },
  ]);
  t.equal(none.status, 409);
  t.match(none.json, {
    error: { code: 'API_NO_AGENT', message: /decap: K8S_POD_NOT_FOUND .*backend: K8S_POD_NO_IP/ },
  });

  // The API stops answering: the target comes from the last list, and the view says so.
  await fake.close();
  const stale = await post([
    { name: 'decap', target: 'vpn/wg-0', iface: 'wg0' },
    { name: 'backend', target: '192.168.50.2', iface: 'eth0' },
  ]);
  t.equal(stale.status, 201);
  t.match((stale.json as { points: unknown[] }).points, [
    {
      name: 'decap',
      state: 'arming',
      targetNote: /^reading vpn\/wg-0 from the API failed \(.+\): as listed \d+ s ago$/,
    },
    { name: 'backend' },
  ]);
  t.notOk('targetNote' in ((stale.json as { points: object[] }).points[1] ?? {}));

  // Without --kubernetes a namespace/pod target says how to enable it.
  const plain = new SessionManager({
    hub,
    store: new CaptureStore({ dir: join(dir, 'd2'), fsync: false }),
    logger: silentLogger(),
  });
  plain.start();
  t.teardown(() => plain.close());
  const v = await plain.create(
    parseCaptureRequest({
      points: [
        { name: 'decap', target: 'vpn/wg-0', iface: 'wg0' },
        { name: 'backend', target: '192.168.50.2', iface: 'eth0' },
      ],
    }),
  );
  t.match(v.points[0], { state: 'failed', error: { code: 'K8S_CONFIG', message: /--kubernetes/ } });
});

void t.test('hoptrace collector --kubeconfig wires the API view into the collector', async (t) => {
  const dir = tmp(t);
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  const opts = parseCollectorArgs(
    [
      '--listen',
      '127.0.0.1:0',
      '--data-dir',
      join(dir, 'data'),
      '--kubeconfig',
      fake.kubeconfig,
      '--kubernetes-interval',
      '2s',
    ],
    { HOPTRACE_TOKEN: 'tok' },
  );
  t.same(opts.kubernetes, {
    source: { kind: 'kubeconfig', file: fake.kubeconfig },
    intervalMs: 2000,
  });
  t.same(parseCollectorArgs(['--kubernetes'], { HOPTRACE_TOKEN: 'tok' }).kubernetes, {
    source: { kind: 'in-cluster' },
  });
  for (const bad of [
    ['--kubernetes', '--kubeconfig', 'x'],
    ['--kubernetes-interval', '5s'],
    ['--kubernetes', '--kubernetes-interval', '10ms'],
  ]) {
    t.throws(
      () => parseCollectorArgs(bad, { HOPTRACE_TOKEN: 'tok' }),
      { code: 'CLI_USAGE' },
      bad.join(' '),
    );
  }
  const c = await startCollector({ ...opts, logger: silentLogger(), fsync: false });
  t.teardown(() => c.close());
  t.same(c.kubernetes?.resolvePod('web', 'web-1'), {
    ok: true,
    ip: '10.244.2.5',
    node: 'backend-node',
  });

  try {
    await startCollector({
      ...opts,
      kubernetes: { source: { kind: 'kubeconfig', file: join(dir, 'nope') } },
      logger: silentLogger(),
    });
    t.fail('a missing kubeconfig stops the start');
  } catch (e) {
    t.ok(isHoptraceError(e) && e.code === 'K8S_CONFIG');
  }
});

/**
 * `hoptrace repro` on a cluster against the simulated API server (test/unit/k8s-fixtures): the
 * workload listed by namespace + label selector, the deletion as a DELETE through the API (403 →
 * K8S_FORBIDDEN with the RBAC hint), the replacement found by its controller, and the repro core
 * re-attaching decap/egress to the new pod's namespace on its node (FakeHub stands for the agents).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import {
  parseClusterRepro,
  ProbePorts,
  probeUrl,
  runClusterRepro,
  sendProbe,
  sendProbeFromFreePort,
} from '../../cli/repro';
import { createKubeApi, type KubeApi } from '../../collector/k8s/client';
import { K8sPodDeleter, workloadPod } from '../../collector/k8s/repro-deleter';
import { K8sInventorySource } from '../../collector/k8s/source';
import { silentLogger } from '../../collector/logger';
import { ReproManager, type ReproManagerOptions, type ReproView } from '../../collector/repro';
import { parseReproRequest } from '../../collector/repro-requests';
import { REPRO_SAVE_EVERY_MS } from '../../collector/repro-state';
import {
  findReplacement,
  matchK8sWorkload,
  type ProbeReport,
  type WorkloadPod,
} from '../../core/repro/repro-core';
import { routeRepro } from '../../collector/repro-http';
import { renderReproFile, type ReproFileName } from '../../collector/repro-bundle';
import { collectorRuntime } from '../../collector/capture-reports';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { isHoptraceError, HoptraceError } from '../../common/errors';
import type { CaptureStatus, NamespaceInfo } from '../../common/wire';
import type { AgentMessage } from '../../collector/hub-types';
import { FakeHub, status } from './collector-fixtures';
import { startFakeApiServer, wgPod, type FakeApiServer } from './k8s-fixtures';

function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-k8s-repro-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

async function withApi(t: {
  teardown(fn: () => Promise<void> | void): void;
}): Promise<{ fake: FakeApiServer; api: KubeApi }> {
  const dir = tmp(t);
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  const other = wgPod('other', 'uid-other', { ip: '10.244.1.30', owner: null });
  if (other.metadata) other.metadata.labels = { app: 'other' };
  fake.pods = [
    wgPod('wg-0', 'uid-wg-0', { ip: '10.244.1.10' }),
    wgPod('wg-1', 'uid-wg-1', { ip: '10.244.1.20' }),
    other,
  ];
  const api = await createKubeApi({ kind: 'kubeconfig', file: fake.kubeconfig });
  return { fake, api };
}

function ns(path: string, ip: string): NamespaceInfo {
  return { path, inode: 1, addresses: ['127.0.0.1', ip], interfaces: ['lo', 'eth0'] };
}

const SPEC = {
  workload: { kubernetes: { namespace: 'vpn', labelSelector: 'app=wg' } },
  decapIface: 'wg0',
  egressIface: 'eth0',
  backend: { target: '10.244.2.5', iface: 'eth0' },
  client: '10.90.0.42',
};

function hubWithAgents(): FakeHub {
  const hub = new FakeHub();
  hub.addAgent(
    'a-vpn',
    'vpn-node',
    ['192.168.50.1'],
    [ns('/run/netns/cni-aaa', '10.244.1.10'), ns('/run/netns/cni-bbb', '10.244.1.20')],
  );
  hub.addAgent('a-web', 'backend-node', ['192.168.50.2'], [ns('/run/netns/cni-web', '10.244.2.5')]);
  return hub;
}

/** A started ReproManager on hubWithAgents() that deletes pods through `api`, closed at teardown. */
function clusterRepros(
  t: { teardown(fn: () => void): void },
  api: KubeApi,
  nowMs?: () => number,
  more: Partial<ReproManagerOptions> = {},
): { hub: FakeHub; repros: ReproManager } {
  const hub = hubWithAgents();
  const repros = new ReproManager({
    hub,
    logger: silentLogger(),
    kubernetes: new K8sPodDeleter(api),
    ...(nowMs === undefined ? {} : { nowMs }),
    ...more,
  });
  repros.start();
  t.teardown(() => {
    repros.close();
  });
  return { hub, repros };
}

void t.test('the client lists by selector and deletes through the API (403, 404)', async (t) => {
  const { fake, api } = await withApi(t);
  const pods = await api.listPodsBySelector('vpn', 'app=wg');
  t.same(
    pods.map((p) => p.metadata?.name),
    ['wg-0', 'wg-1'],
  );
  t.ok(
    fake.requests.some(
      (r) =>
        r.startsWith('GET /api/v1/namespaces/vpn/pods?') && r.includes('labelSelector=app%3Dwg'),
    ),
  );
  t.same(workloadPod(pods[0] ?? {}), {
    namespace: 'vpn',
    name: 'wg-0',
    uid: 'uid-wg-0',
    node: 'vpn-node',
    ip: '10.244.1.10',
    phase: 'Running',
    terminating: false,
    owner: 'StatefulSet/wg/ss-wg-1',
  });

  await api.deletePod('vpn', 'wg-0');
  t.ok(fake.requests.includes('DELETE /api/v1/namespaces/vpn/pods/wg-0'));
  const after = await api.listPodsBySelector('vpn', 'app=wg');
  t.equal(workloadPod(after[0] ?? {})?.terminating, true, 'deletionTimestamp is read');

  await t.rejects(api.deletePod('vpn', 'nope'), { code: 'K8S_POD_NOT_FOUND' });
  fake.mode = 'no-delete';
  try {
    await api.deletePod('vpn', 'wg-1');
    t.fail('403 must throw');
  } catch (e) {
    t.ok(isHoptraceError(e) && e.code === 'K8S_FORBIDDEN');
    t.match(e, {
      message: /may not delete pods in vpn/,
      hint: /kubectl -n vpn apply -f deploy\/optional\/repro-rbac\.yaml/,
    });
  }
});

void t.test('replacement: same controller, new uid, Running with an IP', (t) => {
  const p = (name: string, uid: string, o: Partial<WorkloadPod> = {}): WorkloadPod => ({
    namespace: 'vpn',
    name,
    uid,
    node: 'vpn-node',
    ip: '10.244.1.9',
    phase: 'Running',
    terminating: false,
    owner: 'StatefulSet/wg/ss',
    ...o,
  });
  const deleted = { uid: 'u0', owner: 'StatefulSet/wg/ss', before: ['u0', 'u1'] };
  t.equal(
    findReplacement(deleted, [p('wg-0', 'u0', { terminating: true }), p('wg-1', 'u1')]),
    null,
  );
  t.equal(findReplacement(deleted, [p('wg-0', 'u2', { phase: 'Pending', ip: null })]), null);
  t.equal(findReplacement(deleted, [p('x', 'u3', { owner: 'ReplicaSet/x/r' })]), null);
  t.equal(findReplacement(deleted, [p('wg-0', 'u2')])?.uid, 'u2');
  t.equal(
    findReplacement({ uid: 'u0', owner: null, before: ['u0'] }, [p('bare', 'u5', { owner: null })])
      ?.uid,
    'u5',
    'a bare pod: any new pod the selector matched',
  );
  const hub = hubWithAgents();
  const m = matchK8sWorkload(hub.agents(), [p('wg-0', 'u0', { ip: '10.244.1.10' })]);
  t.match(m, [
    { agentId: 'a-vpn', netns: '/run/netns/cni-aaa', name: 'vpn/wg-0', ip: '10.244.1.10' },
  ]);
  t.same(m[0]?.addresses, ['10.244.1.10'], 'loopback is not a pod address');
  t.end();
});

void t.test(
  'repro on a cluster: delete through the API, re-attach to the replacement',
  async (t) => {
    const { fake, api } = await withApi(t);
    const { hub, repros } = clusterRepros(t, api);
    const v = await repros.create(parseReproRequest(SPEC));
    t.match(v.attachments, [
      { epoch: 1, pod: { name: 'vpn/wg-0', ip: '10.244.1.10', node: 'vpn-node' } },
    ]);
    t.match(
      hub.captures().map((c) => [c.captureId, c.point, c.target, c.iface]),
      [
        [`${v.id}-b`, 'backend', '10.244.2.5', 'eth0'],
        [`${v.id}-e1`, 'decap', '/run/netns/cni-aaa', 'wg0'],
        [`${v.id}-e1`, 'egress', '/run/netns/cni-aaa', 'eth0'],
      ],
    );

    // The StatefulSet controller: the deleted pod comes back under the same name, new uid and IP.
    fake.onDelete = (old) => {
      setTimeout(() => {
        fake.pods = fake.pods.filter((x) => x !== old);
        fake.pods.push(wgPod('wg-0', 'uid-wg-0-b', { ip: '10.244.1.11' }));
      }, 10);
    };
    const d = await routeRepro(repros, 'POST', `/v1/repros/${v.id}/delete`, undefined);
    t.equal(d?.status, 200);
    t.ok(
      fake.requests.includes('DELETE /api/v1/namespaces/vpn/pods/wg-0'),
      'deleted through the API',
    );
    const mid = repros.get(v.id);
    t.match(mid?.marks, [
      {
        kind: 'deleted',
        detail: /pod vpn\/wg-0 \(10\.244\.1\.10, uid uid-wg-0\) deleted through the API/,
      },
    ]);
    t.equal(
      mid?.attachments.length,
      1,
      'the terminating pod stays attached while its namespace is there',
    );

    // The old namespace leaves the agent's hello; the new pod's appears (the CNI ADD).
    await new Promise((r) => setTimeout(r, 30));
    const agent = hub.list[0];
    if (agent === undefined) throw new Error('no agent');
    agent.hello.namespaces = [
      ns('/run/netns/cni-bbb', '10.244.1.20'),
      ns('/run/netns/cni-ccc', '10.244.1.11'),
    ];
    await repros.refreshPods(v.id);
    const after = repros.get(v.id);
    t.match(after?.attachments, [
      { epoch: 1, detachedAt: /./, detachReason: /no longer reported/ },
      {
        epoch: 2,
        detachedAt: null,
        pod: {
          name: 'vpn/wg-0',
          ip: '10.244.1.11',
          netns: '/run/netns/cni-ccc',
          k8s: { uid: 'uid-wg-0-b', owner: 'StatefulSet/wg/ss-wg-1' },
        },
      },
    ]);
    t.notOk(
      after?.attachments.some((a) => a.pod.name === 'vpn/wg-1'),
      'the replica that was already there is not the replacement',
    );
    t.match(after?.marks.at(-1), {
      kind: 'replacement-ready',
      detail:
        /vpn\/wg-0 \(10\.244\.1\.11, uid uid-wg-0-b\) on vpn-node: same controller StatefulSet\/wg\/ss-wg-1/,
    });
    t.match(
      hub
        .captures()
        .filter((c) => c.captureId === `${v.id}-e2`)
        .map((c) => [c.point, c.target]),
      [
        ['decap', '/run/netns/cni-ccc'],
        ['egress', '/run/netns/cni-ccc'],
      ],
    );
    t.same(
      hub
        .stops()
        .filter((s) => s.captureId === `${v.id}-e1`)
        .map((s) => s.point),
      ['decap', 'egress'],
    );

    // RBAC without delete: 403 → K8S_FORBIDDEN, nothing attached changes.
    fake.mode = 'no-delete';
    await t.rejects(routeRepro(repros, 'POST', `/v1/repros/${v.id}/delete`, undefined), {
      code: 'K8S_FORBIDDEN',
      hint: /kubectl -n vpn apply -f deploy\/optional\/repro-rbac\.yaml/,
    });
    t.equal(repros.get(v.id)?.attachments.length, 2);
  },
);

/** T: 2026-11-30T12:00:00Z. A repro created at T on a clock the test moves (at(ms): T + ms). */
/** Probe n, sent at atMs from port 40000 + n, 200 ms long: answered 200, or timed out. */
function probeAt(n: number, atMs: number, answered: boolean): ProbeReport {
  return {
    probeId: `p${n}`,
    sport: 40000 + n,
    startedAtMs: atMs,
    endedAtMs: atMs + 200,
    ok: answered,
    httpCode: answered ? '200' : null,
    error: answered ? null : 'curl exit 28: Operation timed out',
  };
}

async function clockedRepro(t: { teardown(fn: () => Promise<void> | void): void }): Promise<{
  repros: ReproManager;
  v: ReproView;
  T: number;
  at: (ms: number) => void;
}> {
  const { api } = await withApi(t);
  const T = Date.parse('2026-11-30T12:00:00Z');
  let now = T;
  const { repros } = clusterRepros(t, api, () => now);
  const v = await repros.create(parseReproRequest(SPEC));
  return {
    repros,
    v,
    T,
    at: (ms) => {
      now = T + ms;
    },
  };
}

void t.test('repro: capture losses per point, and the probes in flight then', async (t) => {
  const { repros, v, T, at } = await clockedRepro(t);
  const report = (
    agentId: string,
    captureId: string,
    point: string,
    o: Partial<CaptureStatus>,
  ): AgentMessage => ({
    kind: 'status',
    agentId,
    seq: 0,
    status: status(captureId, point, 'capturing', { kernelDrops: 0, ...o }),
  });
  at(1000);
  await repros.handle(report('a-web', `${v.id}-b`, 'backend', { packets: 100 }));
  await repros.handle(report('a-vpn', `${v.id}-e1`, 'decap', { packets: 40 }));
  at(2000);
  await repros.handle(report('a-web', `${v.id}-b`, 'backend', { packets: 500 }));
  at(3000);
  await repros.handle(report('a-web', `${v.id}-b`, 'backend', { packets: 900, kernelDrops: 9 }));
  const clean = repros.get(v.id);
  t.match(clean?.attachments[0]?.points, [
    { name: 'decap', packets: 40, kernelDrops: 0, queueDrops: 0, lost: 0 },
    { name: 'egress', packets: 0, kernelDrops: null },
  ]);
  // Probes answered by no one, so judged by what is missing: one while the backend capture lost
  // its 9 packets (between its statuses at +2 s and +3 s), one long after.
  const probe = (n: number, atMs: number): ProbeReport => probeAt(n, atMs, false);
  repros.addProbe(v.id, probe(1, T + 2500));
  repros.addProbe(v.id, probe(2, T + 9000));
  const text = repros.get(v.id)?.text.join('\n') ?? '';
  t.match(text, /capture backend lost 9 in the kernel/);
  t.match(
    text,
    'probe p1 (failed-to-connect): capture backend lost 9 in the kernel between 2026-11-30T12:00:02.000Z and 2026-11-30T12:00:03.000Z',
  );
  t.notMatch(text, /probe p2/, 'a probe long after the loss is not cautioned');
  t.match(text, /Those probes may have lost their packets in the capture: run again/);
  t.notMatch(text, /cannot count/, 'egress never ran: its counts mean nothing');
  t.same(
    repros.get(v.id)?.timeline.map((r) => r.lossesInFlight.length),
    [1, 0],
  );

  // Events lost on the way, and a capture that cannot count its drops.
  at(9100);
  await repros.handle({
    kind: 'lost',
    agentId: 'a-vpn',
    seq: 0,
    lost: { captureId: `${v.id}-e1`, point: 'decap', count: 5, reason: 'spool full' },
  });
  await repros.handle(report('a-vpn', `${v.id}-e1`, 'egress', { packets: 40, kernelDrops: null }));
  const more = repros.get(v.id)?.text.join('\n') ?? '';
  t.match(more, /capture decap \(vpn\/wg-0\) lost 5 events on the way to the collector/);
  t.match(
    more,
    'probe p2 (failed-to-connect): capture decap (vpn/wg-0) lost 5 events on the way to the collector between 2026-11-30T12:00:01.000Z and 2026-11-30T12:00:09.100Z',
  );
  t.match(more, /capture egress \(vpn\/wg-0\) cannot count its kernel drops/);
  t.match(more, /A capture that cannot count its drops may have missed any probe/);
  t.end();
});

void t.test('repro: losses while no probe judged by a missing packet was in flight', async (t) => {
  const { repros, v, T, at } = await clockedRepro(t);
  at(1000);
  await repros.handle({
    kind: 'status',
    agentId: 'a-web',
    seq: 0,
    status: status(`${v.id}-b`, 'backend', 'capturing', { packets: 900, kernelDrops: 12 }),
  });
  repros.addProbe(v.id, {
    probeId: 'late',
    sport: 40100,
    startedAtMs: T + 60_000,
    endedAtMs: T + 60_100,
    ok: false,
    httpCode: null,
    error: 'curl exit 28: Operation timed out',
  });
  const text = repros.get(v.id)?.text.join('\n') ?? '';
  t.match(text, /capture backend lost 12 in the kernel/);
  t.match(
    text,
    /No probe judged by a missing packet was in flight \(±1 s\) while a capture lost packets\./,
  );
  t.notMatch(text, /Those probes/);
  t.end();
});

void t.test(
  'repro: 20,000 lost messages are one loss span; losses every other status stay bounded',
  async (t) => {
    const { repros, v, T, at } = await clockedRepro(t);
    const backend = (kernelDrops: number): AgentMessage => ({
      kind: 'status',
      agentId: 'a-web',
      seq: 0,
      status: status(`${v.id}-b`, 'backend', 'capturing', { packets: 1, kernelDrops }),
    });
    at(1000);
    await repros.handle(backend(0));
    await repros.handle({
      kind: 'status',
      agentId: 'a-vpn',
      seq: 0,
      status: status(`${v.id}-e1`, 'decap', 'capturing', { packets: 1, kernelDrops: 0 }),
    });
    // An agent that sends a `lost` per batch it could not deliver, each counting one event.
    for (let i = 1; i <= 20_000; i++) {
      at(1000 + i);
      await repros.handle({
        kind: 'lost',
        agentId: 'a-vpn',
        seq: 0,
        lost: { captureId: `${v.id}-e1`, point: 'decap', count: 1, reason: 'spool full' },
      });
    }
    // Then a backend that loses a packet every other status for 3,000 statuses.
    let drops = 0;
    for (let i = 0; i < 3000; i++) {
      at(30_000 + i * 1000);
      await repros.handle(backend(i % 2 === 0 ? ++drops : drops));
    }
    const probe = (id: string, fromMs: number, toMs: number): ProbeReport => ({
      probeId: id,
      sport: 40200,
      startedAtMs: T + fromMs,
      endedAtMs: T + toMs,
      ok: false,
      httpCode: null,
      error: 'curl exit 28: Operation timed out',
    });
    repros.addProbe(v.id, probe('in-lost', 10_000, 10_200));
    repros.addProbe(v.id, probe('whole-run', 0, 4_000_000));
    const view = repros.get(v.id);
    const [inLost, whole] = view?.timeline ?? [];
    t.same(inLost?.lossesInFlight, [
      'capture decap (vpn/wg-0) lost 20000 events on the way to the collector between 2026-11-30T12:00:01.000Z and 2026-11-30T12:00:21.000Z',
      'capture backend lost 1 in the kernel between 2026-11-30T12:00:01.000Z and 2026-11-30T12:00:30.000Z',
    ]);
    t.equal(whole?.lossesInFlight.length, 10, 'a probe names ten losses at most');
    const counted = (whole?.lossesInFlight ?? []).reduce(
      (n, line) => n + [...line.matchAll(/lost (\d+)/g)].reduce((m, x) => m + Number(x[1]), 0),
      0,
    );
    t.equal(counted, 20_000 + 1500, 'the lines still count every packet lost');
    t.match(view?.text.join('\n'), /capture backend lost 1500 in the kernel/);
    t.end();
  },
);

void t.test('no pod of the workload on an agent → REPRO_NO_WORKLOAD', async (t) => {
  const { api } = await withApi(t);
  const hub = new FakeHub();
  hub.addAgent('a-web', 'backend-node', ['192.168.50.2']);
  const repros = new ReproManager({
    hub,
    logger: silentLogger(),
    kubernetes: new K8sPodDeleter(api),
  });
  await t.rejects(repros.create(parseReproRequest(SPEC)), {
    code: 'REPRO_NO_WORKLOAD',
    message: /wg-0 Running 10\.244\.1\.10 on vpn-node/,
  });
});

void t.test('without --kubernetes: a clear REPRO_NOT_SUPPORTED', async (t) => {
  const hub = hubWithAgents();
  const repros = new ReproManager({ hub, logger: silentLogger() });
  await t.rejects(repros.create(parseReproRequest(SPEC)), {
    code: 'REPRO_NOT_SUPPORTED',
    message: /without --kubernetes or --kubeconfig/,
  });
  const v = await repros.create(parseReproRequest({ ...SPEC, workload: { netns: 'cni-aaa' } }));
  t.teardown(() => {
    repros.close();
  });
  await t.rejects(repros.deletePod(v.id), {
    code: 'REPRO_NOT_SUPPORTED',
    message: /without --kubernetes or --kubeconfig/,
  });
});

void t.test('the collector with --kubeconfig wires the API into /v1/repros', async (t) => {
  const { fake } = await withApi(t);
  const dir = tmp(t);
  const hub = hubWithAgents();
  const cluster = await K8sInventorySource.start({
    api: { kind: 'kubeconfig', file: fake.kubeconfig },
    logger: silentLogger(),
  });
  t.teardown(() => {
    cluster.close();
  });
  const sessions = new SessionManager({
    hub,
    store: new CaptureStore({ dir, fsync: false }),
    logger: silentLogger(),
    cluster,
  });
  sessions.start();
  t.teardown(() => sessions.close());
  const res = await routeRepro(sessions.repros, 'POST', '/v1/repros', JSON.stringify(SPEC));
  t.equal(res?.status, 201);
  const id = (res?.value as { id: string }).id;
  const d = await routeRepro(sessions.repros, 'POST', `/v1/repros/${id}/delete`, undefined);
  t.equal(d?.status, 200);
  t.ok(fake.requests.includes('DELETE /api/v1/namespaces/vpn/pods/wg-0'));
  // A collector started again on the data directory (this one never finished the repro) lists
  // it as interrupted.
  const next = new SessionManager({
    hub: hubWithAgents(),
    store: new CaptureStore({ dir, fsync: false }),
    logger: silentLogger(),
  });
  next.start();
  t.teardown(() => next.close());
  const listed = await routeRepro(next.repros, 'GET', '/v1/repros', undefined);
  t.match(listed?.value, { repros: [{ id, state: 'interrupted', marks: [{ kind: 'deleted' }] }] });
});

async function listen(t: { teardown(fn: () => Promise<void>): void }, s: Server): Promise<string> {
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        s.closeAllConnections();
        s.close(() => {
          resolve();
        });
      }),
  );
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

void t.test('hoptrace repro --collector: flags', (t) => {
  const base = {
    collector: 'http://c:7070',
    'vpn-workload': 'vpn/app=wg,tier=edge',
    backend: 'web/web-1:eth0',
    'decap-iface': 'wg0',
    'egress-iface': 'eth0',
    client: '10.90.0.42',
    url: 'http://10.244.2.5:8080/health',
  };
  const o = parseClusterRepro(
    { ...base, 'delete-after': '5', interval: '500ms' },
    {
      HOPTRACE_TOKEN: 'tok',
    },
  );
  t.match(o, {
    token: 'tok',
    workload: { namespace: 'vpn', labelSelector: 'app=wg,tier=edge' },
    backend: { target: 'web/web-1', iface: 'eth0' },
    deleteAfter: 5,
    intervalMs: 500,
    count: 20,
  });
  t.equal(probeUrl('http://h:1/a/', 'x1').toString(), 'http://h:1/a/hoptrace-probe-x1');
  for (const bad of [
    { ...base, url: undefined },
    { ...base, 'vpn-workload': 'vpn' },
    { ...base, backend: '10.0.0.1' },
    { ...base, url: 'https://x/' },
    { ...base, 'delete-after': '20' },
  ])
    t.throws(() => parseClusterRepro(bad, { HOPTRACE_TOKEN: 'tok' }), { code: 'CLI_USAGE' });
  // More probes than a collector keeps of one repro: refused before anything starts.
  t.throws(() => parseClusterRepro({ ...base, count: '10001' }, { HOPTRACE_TOKEN: 'tok' }), {
    code: 'CLI_USAGE',
    where: '--count',
    message: /a collector keeps at most 10000 probes of one repro/,
  });
  t.equal(parseClusterRepro({ ...base, count: '10000' }, { HOPTRACE_TOKEN: 'tok' }).count, 10_000);
  t.end();
});

void t.test(
  'a probe whose local port another socket holds goes out from the next one',
  async (t) => {
    const seen: number[] = [];
    const backend = await listen(
      t,
      createServer((req, res) => {
        seen.push(req.socket.remotePort ?? 0);
        res.end('ok');
      }),
    );
    // Hold a port the way another program on the user's machine would: a listening socket on it.
    const holder = createServer();
    await new Promise<void>((resolve, reject) => {
      holder.once('error', reject);
      holder.listen(0, '0.0.0.0', resolve);
    });
    t.teardown(
      () =>
        new Promise<void>((resolve) =>
          holder.close(() => {
            resolve();
          }),
        ),
    );
    const busy = (holder.address() as AddressInfo).port;
    const ports = new ProbePorts(busy - 1);
    const res = await sendProbeFromFreePort(probeUrl(backend, 'p1'), ports, 2000);
    t.ok(res.ok, `answered: ${JSON.stringify(res)}`);
    t.not(res.sport, busy, 'the busy port was skipped');
    t.same(seen, [res.sport], 'the port reported is the one the request came from');
    // What the skip is for: a probe bound to the busy port alone fails before reaching the path.
    const direct = await sendProbe(probeUrl(backend, 'p2'), busy, 2000);
    t.equal(direct.errorCode, 'EADDRINUSE', direct.error ?? '');
    t.equal(seen.length, 1);
  },
);

void t.test('hoptrace repro --collector: probes, deletion, replacement, timeline', async (t) => {
  const { fake, api } = await withApi(t);
  const { hub, repros } = clusterRepros(t, api);
  // The collector's /v1/repros (the same routes; auth checked by hand).
  const collector = await listen(
    t,
    createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          let status = 200;
          let value: unknown;
          try {
            if (req.headers.authorization !== 'Bearer tok') throw new Error('unauthorized');
            const a = await routeRepro(
              repros,
              req.method ?? 'GET',
              req.url ?? '/',
              Buffer.concat(chunks).toString(),
            );
            status = a?.status ?? 404;
            value = a?.value ?? {};
          } catch (e) {
            status = 400;
            value = {
              error:
                e instanceof HoptraceError
                  ? { code: e.code, message: e.message }
                  : { code: 'X', message: String(e) },
            };
          }
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(value));
        })();
      });
    }),
  );
  const seen: { path: string; port: number }[] = [];
  const backend = await listen(
    t,
    createServer((req, res) => {
      seen.push({ path: req.url ?? '', port: req.socket.remotePort ?? 0 });
      res.end('ok');
    }),
  );
  // The StatefulSet controller and the CNI: a new wg-0 (new uid, new IP) in a new namespace.
  fake.onDelete = (old) => {
    fake.pods = fake.pods.filter((x) => x !== old);
    fake.pods.push(wgPod('wg-0', 'uid-wg-0-b', { ip: '10.244.1.11' }));
    const agent = hub.list[0];
    if (agent)
      agent.hello.namespaces = [
        ns('/run/netns/cni-bbb', '10.244.1.20'),
        ns('/run/netns/cni-ccc', '10.244.1.11'),
      ];
  };
  const lines: string[] = [];
  const probesSentAt: number[] = [];
  const view = await runClusterRepro(
    {
      collector,
      token: 'tok',
      workload: { namespace: 'vpn', labelSelector: 'app=wg' },
      backend: { target: '10.244.2.5', iface: 'eth0' },
      decapIface: 'wg0',
      egressIface: 'eth0',
      client: '127.0.0.1',
      url: `${backend}/probe`,
      deleteAfter: 2,
      intervalMs: 30,
      count: 4,
      maxTimeMs: 2000,
      armWaitMs: 50,
      settleMs: 10,
    },
    (l) => {
      lines.push(l);
      probesSentAt.push(seen.length);
    },
  );
  t.equal(view.state, 'finished');
  // Progress as it happens: each probe's row printed once, the first ones while probing goes on.
  const rowAt = view.timeline.map((r) => lines.findIndex((l) => l.includes(r.probeId)));
  t.ok(
    rowAt.every((i) => i >= 0),
    'every probe has its row',
  );
  t.equal(
    lines.filter((l) => view.timeline.some((r) => l.includes(r.probeId))).length,
    view.timeline.length,
    'each row printed once',
  );
  t.ok(
    (probesSentAt[rowAt[0] ?? -1] ?? 99) < 4,
    "probe 1's row printed before the last probe was sent",
  );
  t.ok(
    lines.some((l) => l.startsWith('summary: ')),
    'the summary at the end',
  );
  // The repro's bundle, as GET /v1/repros/:id/<file> and the web view serve it.
  const at = '2026-12-02T06:00:00.000Z';
  const file = (name: ReproFileName): string =>
    renderReproFile(
      { view, generatedAt: at, inventory: null, evidence: null, runtime: collectorRuntime() },
      name,
    ) ?? '';
  const html = file('report.html');
  const svg = file('timeline.svg');
  const probeMarks = (x: string): number => (x.match(/class="probe /g) ?? []).length;
  t.equal(probeMarks(svg), view.timeline.length, 'timeline.svg: one mark per probe');
  t.equal(probeMarks(html), view.timeline.length, 'report.html carries the picture');
  t.notMatch(html, /<script/);
  t.match(file('report.md'), /```text\ntime \(UTC, ms\) {12}offset/);
  const json = JSON.parse(file('report.json')) as { id: string; schemaVersion: number };
  t.equal(json.id, view.id);
  t.equal(json.schemaVersion, 1);
  t.equal(seen.length, 4, 'one request per probe');
  t.same(
    seen.map((s) => s.port),
    view.timeline.map((r) => r.sport),
    'each probe from its own local port, as reported',
  );
  t.ok(seen.every((s, i) => s.path === `/probe/hoptrace-probe-${view.timeline[i]?.probeId ?? ''}`));
  t.ok(
    view.timeline.every((r) => r.ok),
    `every probe answered: ${JSON.stringify(view.timeline.map((r) => [r.sport, r.ok, r.detail]))}`,
  );
  t.ok(fake.requests.includes('DELETE /api/v1/namespaces/vpn/pods/wg-0'));
  t.match(
    view.marks.map((m) => m.kind),
    ['deleted', 'replacement-ready'],
  );
  t.match(
    view.attachments.map((a) => a.pod.ip),
    ['10.244.1.10', '10.244.1.11'],
  );
  t.match(lines[0], /attached to vpn\/wg-0 \(10\.244\.1\.10\) on vpn-node/);
  t.ok(lines.some((l) => /after probe 2: pod vpn\/wg-0/.test(l)));
  t.ok(lines.length > 4, 'the timeline is printed');
});

void t.test(
  'finish without routes from the prober: the agents of the path read them',
  async (t) => {
    const hub = hubWithAgents();
    const asked: { nodes: string[]; agentIds: string[]; client: string }[] = [];
    const repros = new ReproManager({
      hub,
      logger: silentLogger(),
      readRoutes: (nodes, agentIds, client) => {
        asked.push({ nodes, agentIds, client });
        return Promise.resolve({
          routes: [{ node: 'vpn-node', dst: '10.90.0.0/24', via: '10.244.1.10', dev: 'cni0' }],
          unread: [],
        });
      },
    });
    const v = await repros.create(parseReproRequest({ ...SPEC, workload: { netns: 'cni-aaa' } }));
    t.teardown(() => {
      repros.close();
    });
    const done = await routeRepro(repros, 'POST', `/v1/repros/${v.id}/finish`, '{}');
    t.equal(done?.status, 200);
    t.same(
      asked,
      [{ nodes: ['vpn-node'], agentIds: ['a-web'], client: '10.90.0.42' }],
      "the VPN pods' nodes and the backend's agent are asked for the routes toward the client",
    );
    t.equal(repros.get(v.id)?.state, 'finished');

    // Routes the prober read itself are used as they are: the agents are not asked.
    const w = await repros.create(parseReproRequest({ ...SPEC, workload: { netns: 'cni-aaa' } }));
    const body = JSON.stringify({
      returnRoutes: [{ node: 'vpn-node', dst: '10.90.0.0/24', via: '10.244.1.10' }],
    });
    await routeRepro(repros, 'POST', `/v1/repros/${w.id}/finish`, body);
    t.equal(asked.length, 1, 'no second read');
  },
);

void t.test(
  'repro views outlive the collector: saved, read back, interrupted ones marked',
  async (t) => {
    const { api } = await withApi(t);
    const dir = mkdtempSync(join(tmpdir(), 'ht-repro-store-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const store = new CaptureStore({ dir, fsync: false });
    const T = Date.parse('2026-11-30T12:00:00Z');
    let now = T;
    const { repros } = clusterRepros(t, api, () => now, { store });
    const v = await repros.create(parseReproRequest(SPEC));
    const saved = (): ReproView | undefined =>
      store.loadRepros().views.find((x) => x.id === v.id) as ReproView | undefined;
    t.match(
      saved(),
      { id: v.id, state: 'running', savedAt: '2026-11-30T12:00:00.000Z' },
      'at create',
    );
    const probe = (n: number, atMs: number): ProbeReport => probeAt(n, atMs, true);
    now = T + 1000;
    repros.addProbe(v.id, probe(1, now));
    t.equal(saved()?.timeline.length, 0, 'a probe within the save interval is not written yet');
    // The prober goes quiet: the repro's once-a-second tick writes it once the interval has passed.
    now = T + REPRO_SAVE_EVERY_MS;
    await new Promise((r) => setTimeout(r, 1200));
    t.equal(saved()?.timeline.length, 1, 'the tick writes what came since the last save');
    now = T + 2 * REPRO_SAVE_EVERY_MS - 3000;
    repros.addProbe(v.id, probe(2, now));
    t.equal(saved()?.timeline.length, 1, 'within the interval again: not yet');
    now = T + 2 * REPRO_SAVE_EVERY_MS + 1000;
    repros.addProbe(v.id, probe(3, now));
    t.equal(saved()?.timeline.length, 3, 'once the interval has passed, with the probe itself');
    now += 1000;
    repros.addMark(v.id, { kind: 'note', atMs: now, detail: 'before the crash' });
    t.match(
      saved()?.marks,
      [{ kind: 'note', detail: 'before the crash' }],
      'a mark is written at once',
    );

    // The collector dies here; a new one on the same data directory reads the repro back.
    const again = clusterRepros(t, api, () => now, { store }).repros;
    again.restore();
    const back = again.get(v.id);
    t.match(back, {
      id: v.id,
      state: 'interrupted',
      waiting: false,
      finalReason:
        /collector stopped while this repro ran; what it had saved at 2026-11-30T12:00:12.000Z is kept/,
      marks: [{ kind: 'note' }],
    });
    t.equal(back?.timeline.length, 3);
    t.same(
      again.list().map((x) => x.id),
      [v.id],
    );
    t.equal(saved()?.state, 'interrupted', 'the mark is saved too');
    t.same(again.addProbe(v.id, probe(4, now)), back, 'probes for it change nothing');
    t.same(again.finishById(v.id, []), back);
    await t.rejects(routeRepro(again, 'POST', `/v1/repros/${v.id}/delete`, undefined), {
      code: 'API_BAD_REQUEST',
      message: /is interrupted: no pod to delete/,
    });
    t.same((await routeRepro(again, 'GET', `/v1/repros/${v.id}`, undefined))?.value, back);

    // A repro that finished is read back as it was; a file that is not a repro is skipped.
    repros.finishById(v.id, []);
    t.equal(saved()?.state, 'finished');
    writeFileSync(join(dir, 'repros', 'r-broken-0000abcd.json'), '{"id": "r-broken-0000abcd"');
    writeFileSync(join(dir, 'repros', 'r-other-0000abcd.json'), JSON.stringify({ ...v, id: 'x' }));
    const warnings: string[] = [];
    const third = clusterRepros(t, api, () => now, {
      store,
      logger: { ...silentLogger(), warn: (_f, m) => warnings.push(m) },
    }).repros;
    third.restore();
    t.match(third.get(v.id), { state: 'finished', finalReason: 'finished by the prober' });
    t.equal(third.list().length, 1);
    t.match(warnings, [
      /not a saved repro, skipped: .*r-broken-0000abcd\.json/,
      /r-other-0000abcd\.json/,
    ]);
  },
);

void t.test('a repro whose view cannot be saved goes on in memory, and says so', async (t) => {
  const { api } = await withApi(t);
  const warnings: string[] = [];
  const failing = {
    saveRepro: () => {
      throw new HoptraceError('STORE_IO', 'cannot write (ENOSPC)', { where: '/data/repros' });
    },
    loadRepros: () => ({ views: [], skipped: [] }),
  };
  const { repros } = clusterRepros(t, api, undefined, {
    store: failing,
    logger: { ...silentLogger(), warn: (_f, m) => warnings.push(m) },
  });
  const v = await repros.create(parseReproRequest(SPEC));
  t.equal(repros.get(v.id)?.state, 'running');
  t.match(warnings, [/saving repro r-.* failed: STORE_IO: .*cannot write \(ENOSPC\)/]);
});

void t.test(
  'the live limit is checked again after the pods are listed: repros arriving together cannot pass it',
  async (t) => {
    const { api } = await withApi(t);
    // A limit of one running repro, as SessionManager's --max-live-captures check counts them.
    const holder: { repros?: ReproManager } = {};
    const checks: string[] = [];
    const { repros } = clusterRepros(t, api, undefined, {
      refuseBeyondLive: (where) => {
        checks.push(where);
        const running = holder.repros?.running() ?? 0;
        if (running >= 1)
          throw new HoptraceError('API_TOO_MANY_CAPTURES', `${running} repro is live`, { where });
      },
    });
    holder.repros = repros;
    // Both pass the check made before the API is asked (none runs yet), then wait for their
    // listing; the one that resumes second must be refused by the check after it.
    const got = await Promise.allSettled([
      repros.create(parseReproRequest(SPEC)),
      repros.create(parseReproRequest(SPEC)),
    ]);
    t.same(got.map((g) => g.status).sort(), ['fulfilled', 'rejected'], 'one made, one refused');
    const no = got.find((g) => g.status === 'rejected');
    const why = no === undefined ? undefined : (no.reason as unknown);
    t.ok(isHoptraceError(why) && why.code === 'API_TOO_MANY_CAPTURES', 'API_TOO_MANY_CAPTURES');
    t.equal(repros.running(), 1, 'one repro runs');
    t.equal(checks.length, 4, 'each request checked before the listing and after it');
  },
);

void t.test(
  'a repro keeps a bounded number of probes and marks; long texts are cut, long ids refused',
  async (t) => {
    const hub = hubWithAgents();
    const repros = new ReproManager({ hub, logger: silentLogger(), maxProbes: 3, maxMarks: 2 });
    repros.start();
    t.teardown(() => {
      repros.close();
    });
    const v = await repros.create(parseReproRequest({ ...SPEC, workload: { netns: 'cni-aaa' } }));
    const post = (what: string, body: unknown) =>
      routeRepro(repros, 'POST', `/v1/repros/${v.id}/${what}`, JSON.stringify(body));
    const probe = (i: number, more: Record<string, unknown> = {}) => ({
      probeId: `p${i}`,
      sport: 40000 + i,
      startedAtMs: 1000 + i,
      endedAtMs: 1001 + i,
      ok: false,
      ...more,
    });
    // Free text beyond 2,000 characters is kept cut, and says so.
    await post('probes', probe(0, { error: 'e'.repeat(50_000) }));
    const kept = repros.get(v.id);
    t.match(
      kept?.timeline[0],
      { detail: /e{2000}… \(cut: 50000 characters\)/ },
      "the prober's error, cut",
    );
    for (let i = 1; i < 3; i++) t.equal((await post('probes', probe(i)))?.status, 200);
    // The fourth: refused, nothing added (the old collector kept every one a client sent, and
    // answered each with the whole view computed from all of them).
    await t.rejects(post('probes', probe(3)), {
      code: 'REPRO_FULL',
      where: `POST /v1/repros/${v.id}/probes`,
      message: new RegExp(`repro ${v.id} holds 3 probes`),
      hint: /finish it .* and start another repro/,
    });
    t.equal(repros.get(v.id)?.timeline.length, 3, 'three probes kept');
    await t.rejects(post('probes', probe(4, { probeId: 'x'.repeat(201) })), {
      code: 'API_BAD_REQUEST',
      where: 'body.probeId',
    });
    await t.rejects(post('probes', probe(4, { httpCode: '2'.repeat(201) })), {
      code: 'API_BAD_REQUEST',
      where: 'body.httpCode',
    });
    const mark = { kind: 'note', atMs: 1500, detail: 'd'.repeat(3000) };
    t.equal((await post('marks', mark))?.status, 200);
    t.match(repros.get(v.id)?.marks[0], { detail: /^d{2000}… \(cut: 3000 characters\)$/ });
    t.equal((await post('marks', { kind: 'note', atMs: 1600 }))?.status, 200);
    await t.rejects(post('marks', { kind: 'note', atMs: 1700 }), {
      code: 'REPRO_FULL',
      message: /holds 2 marks/,
    });
    t.equal(repros.get(v.id)?.marks.length, 2, 'two marks kept');
  },
);

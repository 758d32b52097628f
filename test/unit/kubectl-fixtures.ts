/**
 * A simulated cluster with hoptrace installed, for `kubectl hoptrace`: the simulated API server
 * (k8s-fixtures.ts) holding the collector's pod (Ready, TLS args, port `api`), one agent pod per
 * node, the Secrets hoptrace-token and hoptrace-tls (made by scripts/deploy-tls.sh), and a real
 * collector (in this process, TLS, reading pods from that API server) standing behind the
 * collector pod's port-forward. Its agents are a FakeHub whose agents replay a public pcap, or
 * (`agents: 'replay'`) two real agent runtimes replaying it over wss:// with the CA of
 * hoptrace-tls and retaining their frames, so the bundle has its evidence.pcapng.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectCluster } from '../../cli/kubectl/cluster';
import type { KubectlDeps } from '../../cli/kubectl/flags';
import { runKubectl } from '../../cli/kubectl/run';
import type { PodObject } from '../../collector/k8s/facts';
import { silentLogger } from '../../collector/logger';
import { startCollector, type RunningCollector } from '../../collector/main';
import type { NamespaceFacts } from '../../common/wire';
import { answerWithReplay, twoNodeHub, type FakeHub } from './collector-fixtures';
import { PCAPS } from './corpus';
import { startReplayAgent } from './replay-agent';
import { startFakeApiServer, type FakeApiServer } from './k8s-fixtures';

export const API_TOKEN = 'kubectl-test-token-0123456789';
export const COLLECTOR_POD = 'hoptrace-collector-5d8c9b7f4-x2k9q';
export const PCAP = join(PCAPS, 'zeek_http-get.pcap');
const root = join(__dirname, '..', '..', '..');

export interface KubeScene {
  dir: string;
  fake: FakeApiServer;
  collector: RunningCollector;
  /** The FakeHub standing for the agents (undefined with `agents: 'replay'`). */
  hub: FakeHub | undefined;
  /** Runs `kubectl hoptrace ARGV…` in this process (cwd: `dir`); its exit code and lines. */
  run(
    argv: string[],
    env?: NodeJS.ProcessEnv,
  ): Promise<{ code: number; out: string[]; err: string[] }>;
}

function collectorPod(port: number): PodObject {
  return {
    metadata: {
      name: COLLECTOR_POD,
      namespace: 'hoptrace',
      labels: { 'app.kubernetes.io/name': 'hoptrace', 'app.kubernetes.io/component': 'collector' },
    },
    spec: {
      nodeName: 'backend-node',
      containers: [
        {
          name: 'collector',
          image: 'hoptrace:0.1.0',
          args: [
            'collector',
            '--listen',
            `0.0.0.0:${port}`,
            '--tls-cert',
            '/etc/hoptrace-tls/tls.crt',
          ],
          ports: [{ name: 'api', containerPort: port, protocol: 'TCP' }],
        },
      ],
    },
    status: {
      phase: 'Running',
      podIP: '10.244.2.50',
      conditions: [{ type: 'Ready', status: 'True' }],
    },
  } as PodObject;
}

function agentPod(node: string, suffix: string): PodObject {
  return {
    metadata: {
      name: `hoptrace-agent-${suffix}`,
      namespace: 'hoptrace',
      labels: { 'app.kubernetes.io/name': 'hoptrace', 'app.kubernetes.io/component': 'agent' },
    },
    spec: { nodeName: node, hostNetwork: true },
    status: {
      phase: 'Running',
      podIP: '192.168.50.1',
      conditions: [{ type: 'Ready', status: 'True' }],
    },
  } as PodObject;
}

export async function startKubeScene(
  t: { teardown(fn: () => Promise<void> | void): void },
  o: { silentBackend?: boolean; agents?: 'fake' | 'replay' } = {},
): Promise<KubeScene> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kubectl-'));
  const fake = await startFakeApiServer(dir);
  // The TLS material as install would make it (and README's manual route does).
  execFileSync(
    'bash',
    [join(root, 'scripts', 'deploy-tls.sh'), '--out', join(dir, 'tls'), '--days', '2'],
    {
      stdio: 'ignore',
    },
  );
  const pem = (f: string): Buffer => readFileSync(join(dir, 'tls', f));
  const replay = o.agents === 'replay';
  const hub = replay ? undefined : twoNodeHub();
  if (hub !== undefined) {
    answerWithReplay(hub, PCAP, o.silentBackend === true ? ['backend'] : []);
    answerDoctor(hub);
  }
  const collector = await startCollector({
    host: '127.0.0.1',
    port: 0,
    dataDir: join(dir, 'data'),
    tokens: [API_TOKEN],
    tls: { cert: pem('tls.crt'), key: pem('tls.key') },
    logger: silentLogger(),
    ...(hub === undefined ? {} : { hubFactory: () => hub }),
    kubernetes: { source: { kind: 'kubeconfig', file: fake.kubeconfig } },
    fsync: false,
    debounceMs: 0,
  });
  t.teardown(async () => {
    await collector.close();
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });
  if (replay) {
    const agents = [
      ['agent-vpn', 'vpn-node', '/run/netns/vpn', '10.244.1.10'],
      ['agent-backend', 'backend-node', '/run/netns/web', '10.244.2.5'],
    ] as const;
    for (const [agentId, node, path, address] of agents) {
      mkdirSync(join(dir, `retention-${node}`));
      startReplayAgent(t, {
        url: collector.agentsUrl,
        token: API_TOKEN,
        ca: pem('ca.crt'),
        agentId,
        node,
        ns: { path, address },
        pcap: PCAP,
        retention: { dir: join(dir, `retention-${node}`) },
      });
    }
    while (collector.sessions.agents().filter((a) => a.connected).length < agents.length)
      await new Promise((r) => setTimeout(r, 10));
  }
  const port = Number(new URL(collector.url).port);
  fake.pods = [
    ...fake.pods,
    collectorPod(port),
    agentPod('vpn-node', 'a1b2c'),
    agentPod('backend-node', 'd3e4f'),
  ];
  fake.secrets.set('hoptrace/hoptrace-token', { token: `${API_TOKEN}\n` });
  fake.secrets.set('hoptrace/hoptrace-tls', {
    'ca.crt': pem('ca.crt'),
    'tls.crt': pem('tls.crt'),
    'tls.key': pem('tls.key'),
  });
  fake.forwards.set(`hoptrace/${COLLECTOR_POD}:${port}`, { host: '127.0.0.1', port });
  return {
    dir,
    fake,
    collector,
    hub,
    run: runner(dir),
  };
}

/** `kubectl hoptrace ARGV…` in this process, in `dir`, with `env` as its environment. */
function runner(dir: string): KubeScene['run'] {
  return async (argv, env = {}) => {
    const out: string[] = [];
    const err: string[] = [];
    const deps: KubectlDeps = {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
      env,
      cwd: dir,
      connect: (flags) => connectCluster(flags, env),
      pollMs: 20,
    };
    const code = await runKubectl(argv, deps);
    return { code, out, err };
  };
}

export interface EmptyCluster {
  dir: string;
  fake: FakeApiServer;
  /** The collector the simulated controllers started, once install applied its Deployment. */
  collector(): RunningCollector | undefined;
  run: KubeScene['run'];
}

/**
 * A cluster without hoptrace, whose simulated controllers act on what install applies: the
 * collector's Deployment starts a real collector in this process with the token and TLS material
 * of the Secrets install created (agents then use that token: the simulated collector does not
 * run TokenReview) and its pod, with the Deployment's image and args; the DaemonSet starts an
 * agent pod and a real agent runtime per node, connecting over wss:// with the Secret's CA.
 */
export async function startEmptyCluster(t: {
  teardown(fn: () => Promise<void> | void): void;
}): Promise<EmptyCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kubectl-install-'));
  const fake = await startFakeApiServer(dir);
  let collector: RunningCollector | undefined;
  let started: Promise<RunningCollector> | undefined;
  let agentsStarted = false;
  const secret = (name: string, key: string): Buffer => {
    const v = fake.secrets.get(`hoptrace/${name}`)?.[key];
    if (v === undefined) throw new Error(`the controller found no ${name} ${key}`);
    return Buffer.from(v);
  };
  const startCollectorPod = async (
    deployment: Record<string, unknown>,
  ): Promise<RunningCollector> => {
    const c = await startCollector({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'data'),
      tokens: [secret('hoptrace-token', 'token').toString('utf8').trim()],
      tls: { cert: secret('hoptrace-tls', 'tls.crt'), key: secret('hoptrace-tls', 'tls.key') },
      logger: silentLogger(),
      kubernetes: { source: { kind: 'kubeconfig', file: fake.kubeconfig } },
      fsync: false,
      debounceMs: 0,
    });
    collector = c;
    const port = Number(new URL(c.url).port);
    const template = (
      deployment['spec'] as {
        template: { spec: { containers: { image: string; args: string[] }[] } };
      }
    ).template.spec.containers[0];
    const p = collectorPod(port) as { spec: { containers: { image: string; args: string[] }[] } };
    const container = p.spec.containers[0];
    if (container && template) {
      container.image = template.image;
      container.args = template.args;
    }
    fake.pods = [...fake.pods, p as PodObject];
    fake.forwards.set(`hoptrace/${COLLECTOR_POD}:${port}`, { host: '127.0.0.1', port });
    return c;
  };
  fake.onApply = (path) => {
    if (path === '/apis/apps/v1/namespaces/hoptrace/deployments/hoptrace-collector') {
      started ??= startCollectorPod(fake.objects.get(path) ?? {});
    }
    // A DaemonSet applied again (a second install) changes nothing here.
    if (path === '/apis/apps/v1/namespaces/hoptrace/daemonsets/hoptrace-agent' && !agentsStarted) {
      agentsStarted = true;
      void (started ?? Promise.reject(new Error('agents before the collector'))).then((c) => {
        const agents = [
          ['agent-vpn', 'vpn-node', '/run/netns/vpn', '10.244.1.10', 'a1b2c'],
          ['agent-backend', 'backend-node', '/run/netns/web', '10.244.2.5', 'd3e4f'],
        ] as const;
        for (const [agentId, node, nsPath, address, suffix] of agents) {
          fake.pods = [...fake.pods, agentPod(node, suffix)];
          mkdirSync(join(dir, `retention-${node}`));
          startReplayAgent(t, {
            url: c.agentsUrl,
            token: secret('hoptrace-token', 'token').toString('utf8').trim(),
            ca: secret('hoptrace-tls', 'ca.crt'),
            agentId,
            node,
            ns: { path: nsPath, address },
            pcap: PCAP,
            retention: { dir: join(dir, `retention-${node}`) },
          });
        }
      });
    }
  };
  t.teardown(async () => {
    await collector?.close();
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, fake, collector: () => collector, run: runner(dir) };
}

/**
 * The facts the lab's agents would read for a doctor request, canned (reading them needs root and
 * the lab's namespaces): the backend node's return route for the tunnel range 10.90.0.0/24 still
 * points at 10.244.1.99, an address no pod holds any more (the VPN pod was replaced); the VPN pod
 * and its node are clean.
 */
export const STALE_NEXT_HOP = '10.244.1.99';

function doctorFacts(
  q: { name: string; target: string; routeTo: string[] },
  node: string,
  addresses: string[],
): NamespaceFacts {
  const { name, target } = q;
  const backendNode = name === 'backend-node';
  return {
    name,
    target,
    netns: target === '' ? '(agent namespace)' : target,
    node,
    addresses,
    rpFilter: [{ iface: 'all', value: 0 }],
    routes: backendNode
      ? [
          {
            dst: '10.90.0.0/24',
            gateway: STALE_NEXT_HOP,
            dev: 'eth0',
            type: '',
            prefsrc: '',
            flags: [],
          },
        ]
      : [],
    lookups: q.routeTo.map((to) => ({
      to,
      route: {
        dst: to,
        gateway: backendNode && to.startsWith('10.90.0.') ? STALE_NEXT_HOP : '',
        dev: 'eth0',
        type: '',
        prefsrc: addresses[0] ?? '',
        flags: [],
      },
      error: '',
    })),
    natChains: ['POSTROUTING'],
    natRules: [],
    ipvsState: 'absent',
    ipvs: [],
    family: 4,
    errorCode: '',
    message: '',
    unread: [],
  };
}

/** Makes the hub's agents answer doctor requests with doctorFacts (after what onSend did before). */
function answerDoctor(hub: FakeHub): void {
  const before = hub.onSend;
  hub.onSend = (agentId, cmd) => {
    before?.(agentId, cmd);
    if (cmd.kind !== 'doctorRequest') return;
    const agent = hub.list.find((a) => a.agentId === agentId);
    const node = agent?.node ?? '';
    const facts = cmd.doctorRequest.targets.map((x) =>
      doctorFacts(x, node, x.target === '' ? (agent?.hello.nodeAddresses ?? []) : [x.target]),
    );
    setImmediate(() => {
      hub.reply({
        kind: 'doctorReport',
        agentId,
        report: { requestId: cmd.doctorRequest.requestId, agentId, node, facts },
      });
    });
  };
}

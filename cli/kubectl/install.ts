/**
 * `kubectl hoptrace install --image IMAGE`: the namespace, then the Secrets the manifests mount —
 * hoptrace-token (a new random API token; the agents prove themselves with their ServiceAccount
 * tokens, deploy/base/collector.yaml's --token-review) and hoptrace-tls (tls-material.ts) — each
 * only when absent, so a second install keeps what agents and users already hold; then every
 * manifest of deploy/base with the image, by server-side apply; then it waits until the collector
 * pod is ready and every node's agent is connected to it, and says which nodes have one.
 *
 * `kubectl hoptrace uninstall`: deletes all of it — the manifests' objects (the cluster-wide RBAC
 * included), both Secrets, the namespace last. What was not there is said, not an error.
 */
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadClientLibrary } from '../../collector';
import { HoptraceError } from '../../common/errors';
import { parseDuration } from '../capture';
import type { AgentRow } from '../collector-replies';
import { EXIT } from '../exit-codes';
import type { Cluster } from './cluster';
import { byDeadline } from './deadline';
import {
  AGENT_SELECTOR,
  COLLECTOR_SELECTOR,
  isReady,
  linkCollector,
  TLS_SECRET,
  TOKEN_SECRET,
} from './collector-link';
import { HOPTRACE_NAMESPACE, KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';
import { loadManifests, type Manifest } from './manifests';
import { readAgents, summarizeNodes, type NodeStatus } from './status';
import { makeTlsMaterial } from './tls-material';

export const INSTALL_USAGE = `kubectl hoptrace install --image IMAGE [--timeout 5m] [--tls-dir ./hoptrace-tls] ${KUBE_USAGE}`;
export const UNINSTALL_USAGE = `kubectl hoptrace uninstall ${KUBE_USAGE}`;

const LABELS = { 'app.kubernetes.io/name': 'hoptrace' };

function secret(
  namespace: string,
  name: string,
  type: string,
  data: Record<string, Buffer>,
): Manifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, labels: LABELS },
    type,
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('base64')])),
  };
}

const named = (o: Manifest): string => `${o.kind.toLowerCase()}/${o.metadata.name}`;

/** The manifests refer to namespace hoptrace; installing elsewhere would need them rewritten. */
function onlyHoptrace(ns: string, command: string, usage: string): void {
  if (ns !== HOPTRACE_NAMESPACE) {
    throw new HoptraceError(
      'CLI_USAGE',
      `${command} works in namespace ${HOPTRACE_NAMESPACE} only (the manifests of deploy/ name it)`,
      { where: '--hoptrace-namespace', hint: `usage: ${usage}` },
    );
  }
}

interface InstallState {
  done: boolean;
  line: string;
  nodes: NodeStatus[];
  collectorPod: string | null;
}

/** One look at the cluster: is the collector ready, which nodes' agents are connected to it. */
async function installState(cluster: Cluster, ns: string): Promise<InstallState> {
  const pods = await cluster.listPods(ns, COLLECTOR_SELECTOR);
  const ready = pods.find(isReady);
  if (ready === undefined) {
    const phases = pods.map((p) => `${p.metadata?.name ?? '?'} ${p.status?.phase ?? '?'}`);
    return {
      done: false,
      line: `waiting for the collector pod${phases.length > 0 ? ` (${phases.join(', ')})` : ''}`,
      nodes: [],
      collectorPod: null,
    };
  }
  let agents: AgentRow[];
  try {
    const link = await linkCollector(cluster, ns);
    agents = await readAgents(link.client);
  } catch (e) {
    // Ready, but its port not answering through the forward yet: keep waiting.
    if (e instanceof HoptraceError && /PORT_FORWARD|UNREACHABLE/.test(e.code))
      return {
        done: false,
        line: `waiting for the collector to answer (${e.code})`,
        nodes: [],
        collectorPod: null,
      };
    throw e;
  }
  const [nodes, agentPods] = await Promise.all([
    cluster.listNodes(),
    cluster.listPods(ns, AGENT_SELECTOR),
  ]);
  const status = summarizeNodes(nodes, agentPods, agents);
  const connected = status.filter((n) => n.connected).length;
  return {
    done: status.length > 0 && connected === status.length,
    line: `collector ready; agents connected on ${connected} of ${status.length} nodes`,
    nodes: status,
    collectorPod: ready.metadata?.name ?? null,
  };
}

export async function runInstall(argv: string[], deps: KubectlDeps): Promise<number> {
  const {
    values,
    positionals,
    kube,
    hoptraceNamespace: ns,
  } = parseKubectlArgs('install', INSTALL_USAGE, argv, {
    image: { type: 'string' },
    timeout: { type: 'string' },
    'tls-dir': { type: 'string' },
  });
  const usage = (detail: string): HoptraceError =>
    new HoptraceError('CLI_USAGE', detail, {
      where: 'kubectl hoptrace install',
      hint: `usage: ${INSTALL_USAGE}`,
    });
  if (positionals.length > 0) throw usage(`unexpected argument '${String(positionals[0])}'`);
  const image = values.image;
  if (image === undefined || image === '')
    throw usage('give --image IMAGE (REGISTRY/hoptrace:TAG)');
  onlyHoptrace(ns, 'install', INSTALL_USAGE);
  const timeoutMs = parseDuration(values.timeout ?? '5m', '--timeout');
  const k8s = await loadClientLibrary();
  const manifests = loadManifests(k8s, image);
  const cluster = await deps.connect(kube);
  deps.out(`installing hoptrace (${image}) on ${cluster.server} (context ${cluster.context})`);

  const [namespaces, rest] = [
    manifests.filter((o) => o.kind === 'Namespace'),
    manifests.filter((o) => o.kind !== 'Namespace'),
  ];
  for (const o of namespaces) {
    await cluster.apply(o);
    deps.out(`  applied ${named(o)}`);
  }
  if ((await cluster.readSecret(ns, TOKEN_SECRET))?.get('token') === undefined) {
    const token = randomBytes(32).toString('base64url');
    await cluster.apply(secret(ns, TOKEN_SECRET, 'Opaque', { token: Buffer.from(token) }));
    deps.out(
      `  created secret/${TOKEN_SECRET} (the API token; kubectl hoptrace reads it from there)`,
    );
  } else {
    deps.out(`  kept secret/${TOKEN_SECRET}`);
  }
  if ((await cluster.readSecret(ns, TLS_SECRET))?.get('tls.crt') === undefined) {
    const dir = resolve(deps.cwd, values['tls-dir'] ?? 'hoptrace-tls');
    const m = await makeTlsMaterial(dir, ns);
    await cluster.apply(secret(ns, TLS_SECRET, 'kubernetes.io/tls', { ...m }));
    deps.out(
      `  created secret/${TLS_SECRET} (CA and collector certificate; ca.key stays in ${dir})`,
    );
  } else {
    deps.out(`  kept secret/${TLS_SECRET}`);
  }
  for (const o of rest) {
    await cluster.apply(o);
    deps.out(`  applied ${named(o)}`);
  }

  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    // The wait ends at --timeout even inside a look (the command's end then aborts its requests).
    const st = await byDeadline(
      installState(cluster, ns),
      Math.max(0, deadline - Date.now()),
      () => null,
    );
    if (st === null) {
      throw new HoptraceError(
        'KUBECTL_INSTALL_FAILED',
        `not ready within ${values.timeout ?? '5m'}: ${last === '' ? 'the first look at the cluster did not finish' : `${last} (the last look did not finish)`}`,
        {
          where: `namespace ${ns}`,
          hint: `kubectl -n ${ns} get pods -o wide; kubectl -n ${ns} logs deploy/hoptrace-collector`,
        },
      );
    }
    if (st.line !== last) deps.err(st.line);
    last = st.line;
    if (st.done) {
      deps.out(`ready: collector pod ${ns}/${st.collectorPod ?? '?'}; an agent on every node:`);
      for (const n of st.nodes)
        deps.out(`  ${n.node}: ${n.agentPod ?? '?'}, connected (version ${n.version ?? '?'})`);
      return EXIT.ok;
    }
    if (Date.now() >= deadline) {
      for (const n of st.nodes)
        deps.out(
          `  ${n.node}: ${n.agentPod ?? 'no agent pod'}, ${n.connected ? 'connected' : 'NOT connected'}`,
        );
      throw new HoptraceError(
        'KUBECTL_INSTALL_FAILED',
        `not ready within ${values.timeout ?? '5m'}: ${st.line}`,
        {
          where: `namespace ${ns}`,
          hint: `kubectl -n ${ns} get pods -o wide; kubectl -n ${ns} logs deploy/hoptrace-collector`,
        },
      );
    }
    await delay(Math.min(deps.pollMs ?? 1000, Math.max(0, deadline - Date.now())));
  }
}

export async function runUninstall(argv: string[], deps: KubectlDeps): Promise<number> {
  const {
    positionals,
    kube,
    hoptraceNamespace: ns,
  } = parseKubectlArgs('uninstall', UNINSTALL_USAGE, argv, {});
  if (positionals.length > 0) {
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: 'kubectl hoptrace uninstall',
      hint: `usage: ${UNINSTALL_USAGE}`,
    });
  }
  onlyHoptrace(ns, 'uninstall', UNINSTALL_USAGE);
  const k8s = await loadClientLibrary();
  const manifests = loadManifests(k8s, 'hoptrace');
  const cluster = await deps.connect(kube);
  deps.out(`removing hoptrace from ${cluster.server} (context ${cluster.context})`);
  const secrets = [TOKEN_SECRET, TLS_SECRET].map((n) => secret(ns, n, 'Opaque', {}));
  const order = [
    ...manifests.filter((o) => o.kind !== 'Namespace').reverse(),
    ...secrets,
    ...manifests.filter((o) => o.kind === 'Namespace'),
  ];
  for (const o of order) {
    const gone = await cluster.remove(o);
    deps.out(`  ${gone ? 'deleted' : 'was not there:'} ${named(o)}`);
  }
  return EXIT.ok;
}

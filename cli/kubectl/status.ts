/**
 * `kubectl hoptrace status`: the collector (pod, node, image, agents it counts), every node with
 * its agent pod and whether that agent is connected to the collector (and its version and
 * identity), and the captures still running. Exit 0 when the collector is ready and every node's
 * agent is connected, 3 when some node has none, 1 on an error (no collector: KUBECTL_NO_COLLECTOR).
 */
import type * as K8s from '@kubernetes/client-node';
import { FINAL_STATES, type AgentView, type CaptureView } from '../../collector';
import { HoptraceError } from '../../common/errors';
import type { CollectorClient } from '../collector-client';
import { EXIT } from '../exit-codes';
import { AGENT_SELECTOR, linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';

export const USAGE = `kubectl hoptrace status [--json] ${KUBE_USAGE}`;

export interface NodeStatus {
  node: string;
  agentPod: string | null;
  agentPodPhase: string | null;
  connected: boolean;
  version: string | null;
  identity: string | null;
}

export interface StatusSummary {
  server: string;
  context: string;
  collector: {
    pod: string;
    node: string | null;
    image: string | null;
    collectorId: string | null;
    agentsConnected: number | null;
  };
  nodes: NodeStatus[];
  running: { id: string; state: string; points: string[]; createdAt: string }[];
}

/** What status reads of an agent in GET /v1/agents. */
export type AgentRow = Pick<AgentView, 'node' | 'connected'> & {
  version?: string | undefined;
  identity?: { method?: string | undefined } | undefined;
};

/** What status reads of a capture in GET /v1/captures. */
export type CaptureRow = Pick<CaptureView, 'id' | 'state' | 'createdAt'> & {
  points: { name: string }[];
};

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);
const optString = (x: unknown): boolean => x === undefined || typeof x === 'string';

/**
 * A reply that is JSON but not the shape this plugin reads (a collector of another version, or
 * another server behind the port): COLLECTOR_BAD_RESPONSE naming what is wrong, never a TypeError.
 */
function badShape(request: string, detail: string): HoptraceError {
  return new HoptraceError('COLLECTOR_BAD_RESPONSE', `${request}: ${detail}`, {
    where: request,
    hint: 'the pod behind the port-forward answered, but not as this version of the hoptrace collector does; check its image (kubectl hoptrace install --image, the same version as this plugin)',
  });
}

/** Each element of `list` checked by `ok`; the first one that is not is named. */
function checkList<T>(
  reply: unknown,
  key: string,
  request: string,
  ok: (x: Record<string, unknown>) => boolean,
  shape: string,
): T[] {
  const list = isObject(reply) ? reply[key] : undefined;
  if (!Array.isArray(list)) throw badShape(request, `the reply has no '${key}' list`);
  list.forEach((x: unknown, i) => {
    if (!isObject(x) || !ok(x)) throw badShape(request, `${key}[${i}] is not ${shape}`);
  });
  return list as T[];
}

/** GET /v1/agents, its shape checked. */
export async function readAgents(client: CollectorClient): Promise<AgentRow[]> {
  return checkList<AgentRow>(
    await client.json<unknown>('GET', '/v1/agents'),
    'agents',
    'GET /v1/agents',
    (a) =>
      typeof a['node'] === 'string' &&
      typeof a['connected'] === 'boolean' &&
      optString(a['version']) &&
      (a['identity'] === undefined ||
        (isObject(a['identity']) && optString(a['identity']['method']))),
    'an agent ({node, connected, version, identity})',
  );
}

/** GET /v1/captures, its shape checked. */
export async function readCaptures(client: CollectorClient): Promise<CaptureRow[]> {
  return checkList<CaptureRow>(
    await client.json<unknown>('GET', '/v1/captures'),
    'captures',
    'GET /v1/captures',
    (c) =>
      typeof c['id'] === 'string' &&
      typeof c['state'] === 'string' &&
      typeof c['createdAt'] === 'string' &&
      Array.isArray(c['points']) &&
      c['points'].every((p: unknown) => isObject(p) && typeof p['name'] === 'string'),
    'a capture ({id, state, createdAt, points: [{name}]})',
  );
}

/** Joins the API's nodes and agent pods with the collector's agents (pure). */
export function summarizeNodes(
  nodes: K8s.V1Node[],
  agentPods: K8s.V1Pod[],
  agents: readonly AgentRow[],
): NodeStatus[] {
  return nodes
    .map((n) => n.metadata?.name ?? '')
    .filter((name) => name !== '')
    .sort()
    .map((node) => {
      const pod = agentPods.find((p) => p.spec?.nodeName === node);
      const agent =
        agents.find((a) => a.node === node && a.connected) ?? agents.find((a) => a.node === node);
      return {
        node,
        agentPod: pod?.metadata?.name ?? null,
        agentPodPhase: pod?.status?.phase ?? null,
        connected: agent?.connected === true,
        version: agent?.version ?? null,
        identity: agent?.identity?.method ?? null,
      };
    });
}

/** The text `status` prints (pure). */
export function renderStatus(s: StatusSummary): string[] {
  const c = s.collector;
  const lines = [
    `cluster: ${s.server} (context ${s.context})`,
    `collector: pod ${c.pod}${c.node === null ? '' : ` on ${c.node}`}, ready, image ${c.image ?? 'unknown'}, ${c.agentsConnected ?? '?'} agents connected`,
  ];
  const withAgent = s.nodes.filter((n) => n.connected).length;
  lines.push(`agents: ${withAgent} of ${s.nodes.length} nodes connected`);
  const rows = s.nodes.map((n) => [
    n.node,
    n.agentPod === null ? '-' : `${n.agentPod} (${n.agentPodPhase ?? '?'})`,
    n.connected ? 'connected' : 'not connected',
    n.version ?? '-',
    n.identity ?? '-',
  ]);
  const head = ['NODE', 'AGENT POD', 'COLLECTOR', 'VERSION', 'IDENTITY'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  for (const r of [head, ...rows])
    lines.push(`  ${r.map((x, i) => x.padEnd(widths[i] ?? 0)).join('  ')}`.trimEnd());
  lines.push(`captures running: ${s.running.length}`);
  for (const r of s.running)
    lines.push(`  ${r.id} ${r.state} since ${r.createdAt} (${r.points.join(', ')})`);
  return lines;
}

export async function runStatus(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, kube, hoptraceNamespace } = parseKubectlArgs('status', USAGE, argv, {
    json: { type: 'boolean' },
  });
  const cluster = await deps.connect(kube);
  const link = await linkCollector(cluster, hoptraceNamespace);
  const [nodes, agentPods, agents, captures] = await Promise.all([
    cluster.listNodes(),
    cluster.listPods(hoptraceNamespace, AGENT_SELECTOR),
    readAgents(link.client),
    readCaptures(link.client),
  ]);
  const final = new Set<string>(FINAL_STATES);
  const summary: StatusSummary = {
    server: cluster.server,
    context: cluster.context,
    collector: {
      pod: `${hoptraceNamespace}/${link.podName}`,
      node: link.pod.spec?.nodeName ?? null,
      image: link.pod.spec?.containers[0]?.image ?? null,
      collectorId: link.health.collectorId ?? null,
      agentsConnected: link.health.agentsConnected ?? null,
    },
    nodes: summarizeNodes(nodes, agentPods, agents),
    running: captures
      .filter((c) => !final.has(c.state))
      .map((c) => ({
        id: c.id,
        state: c.state,
        points: c.points.map((p) => p.name),
        createdAt: c.createdAt,
      })),
  };
  if (values.json === true) deps.out(JSON.stringify(summary));
  else for (const l of renderStatus(summary)) deps.out(l);
  return summary.nodes.every((n) => n.connected) ? EXIT.ok : EXIT.inconclusive;
}

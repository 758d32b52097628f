/**
 * `kubectl hoptrace status`: the collector (pod, node, image, agents it counts), every node with
 * its agent pod and whether that agent is connected to the collector (and its version and
 * identity), and the captures still running. Exit 0 when the collector is ready and every node's
 * agent is connected, 3 when some node has none, 1 on an error (no collector: KUBECTL_NO_COLLECTOR).
 */
import type * as K8s from '@kubernetes/client-node';
import { FINAL_STATES } from '../../collector';
import type { CollectorClient } from '../collector-client';
import { AGENT_LIST, CAPTURE_LIST, type AgentRow, type CaptureRow } from '../collector-replies';
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
    /** Finished repros the collector holds in memory only, unsaved (null: it does not say). */
    reprosPinned: number | null;
  };
  nodes: NodeStatus[];
  running: { id: string; state: string; points: string[]; createdAt: string }[];
}

/** GET /v1/agents, its shape checked. */
export async function readAgents(client: CollectorClient): Promise<AgentRow[]> {
  return (await client.json('GET', '/v1/agents', AGENT_LIST)).agents;
}

/** GET /v1/captures, its shape checked. */
export async function readCaptures(client: CollectorClient): Promise<CaptureRow[]> {
  return (await client.json('GET', '/v1/captures', CAPTURE_LIST)).captures;
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
  if (c.reprosPinned !== null && c.reprosPinned > 0)
    lines.push(
      `collector: ${c.reprosPinned} finished repro${c.reprosPinned === 1 ? ' is' : 's are'} held in memory only: their bundle or view is not in the collector's data directory (writing it there failed: STORE_IO in its log), and what is not there is gone when the collector stops`,
    );
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
      reprosPinned: link.health.reprosPinned ?? null,
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

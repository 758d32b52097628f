/**
 * The inventory from what the agents reported, and which agent can reach a capture target.
 * Pure: agents and captured namespaces are passed in.
 *
 * nodes[node] = the node addresses from the agent's hello. A namespace captured for a point becomes
 * a pod with the point's role (decap/egress → vpn, backend → backend, else other); every other
 * namespace in a hello becomes a pod with role other (an address in a namespace on node X is a pod
 * on X). With the Kubernetes API (collector/k8s), its node addresses are added to the agents' and its
 * pods come first: an agent-seen namespace with a pod's IP keeps the pod's `namespace/name`, and a
 * role from the `hoptrace.io/role` annotation wins over the role inferred from a capture point.
 * An explicit inventory (POST body) wins over both.
 */

import { isIP } from 'node:net';
import type { ErrorCode } from '../common/errors';
import type { Inventory, InventoryPod, PodRole } from '../common/inventory';
import type { AgentInfo } from './hub-types';

/** The Kubernetes API's facts; `labeled` = the role comes from the `hoptrace.io/role` annotation. */
export interface ApiInventory {
  nodes: Record<string, string[]>;
  pods: Record<string, InventoryPod & { labeled: boolean }>;
}

/** The cluster as the collector knows it from the Kubernetes API (collector/k8s/source.ts). */
export interface ClusterFacts {
  /** The last listed inventory; undefined before the first successful list. */
  inventory(): ApiInventory | undefined;
  /** Lists again now (never rejects; a failure keeps the last list). */
  refresh(): Promise<void>;
  /**
   * `namespace/pod` → its IP and node, fresh from the API, or why not (K8S_POD_NOT_FOUND,
   * K8S_POD_NO_IP …); from the last list (`stale` says so) when reading it fails otherwise.
   */
  resolvePodTarget(namespace: string, name: string): Promise<PodTargetResolution>;
}

/** Where a `namespace/pod` capture target is now, or why it cannot be captured. */
export type PodTargetResolution =
  | { ok: true; ip: string; node: string; stale?: string }
  | { ok: false; code: ErrorCode; message: string };

/** A namespace a session point captured in, as the agent reported it. */
export interface CapturedNamespace {
  point: string;
  node: string;
  netns: string;
  addresses: string[];
}

export function roleForPoint(point: string): PodRole {
  if (point === 'decap' || point === 'egress') return 'vpn';
  if (point === 'backend') return 'backend';
  return 'other';
}

// Loopback and link-local addresses exist in every namespace and name no pod or node.
function usable(a: string): boolean {
  const v = isIP(a);
  if (v === 4) return !a.startsWith('127.') && !a.startsWith('169.254.');
  if (v === 6) return a !== '::1' && !a.toLowerCase().startsWith('fe80:');
  return false;
}

const ROLE_RANK: Record<PodRole, number> = { backend: 3, vpn: 2, proxy: 1, other: 0 };

/** Builds the inventory attribution uses. */
export function buildLiveInventory(
  agents: readonly AgentInfo[],
  captured: readonly CapturedNamespace[],
  explicit?: Inventory,
  cluster?: ApiInventory,
): Inventory {
  const inv: Inventory = { nodes: {}, pods: {} };
  const nodeAddrs = new Set<string>();
  for (const [node, addrs] of Object.entries(cluster?.nodes ?? {})) {
    inv.nodes[node] = addrs.filter(usable);
    for (const x of inv.nodes[node]) nodeAddrs.add(x);
  }
  for (const a of agents) {
    const addrs = a.hello.nodeAddresses.filter(usable);
    inv.nodes[a.node] = [...new Set([...(inv.nodes[a.node] ?? []), ...addrs])];
    for (const x of addrs) nodeAddrs.add(x);
  }
  const byIp = new Map<string, { name: string; pod: InventoryPod; labeled: boolean }>();
  for (const [name, p] of Object.entries(cluster?.pods ?? {})) {
    if (nodeAddrs.has(p.ip)) continue;
    byIp.set(p.ip, { name, pod: { ip: p.ip, node: p.node, role: p.role }, labeled: p.labeled });
  }
  const add = (name: string, pod: InventoryPod): void => {
    const prev = byIp.get(pod.ip);
    if (prev && (prev.labeled || ROLE_RANK[prev.pod.role] >= ROLE_RANK[pod.role])) return;
    // The API's node is the scheduler's word; an agent's is where it saw the address.
    byIp.set(pod.ip, {
      name: prev?.name ?? name,
      pod: { ...pod, node: prev?.pod.node ?? pod.node },
      labeled: false,
    });
  };
  for (const c of captured) {
    const ip = c.addresses.find(usable);
    if (ip === undefined || nodeAddrs.has(ip)) continue;
    add(`${c.node}:${c.netns}`, { ip, node: c.node, role: roleForPoint(c.point) });
  }
  for (const a of agents) {
    for (const ns of a.hello.namespaces) {
      const ip = ns.addresses.find(usable);
      // The host namespace carries the node's addresses: it is the node, not a pod.
      if (ip === undefined || ns.addresses.some((x) => nodeAddrs.has(x))) continue;
      add(`${a.node}:${ns.path}`, { ip, node: a.node, role: 'other' });
    }
  }
  if (explicit !== undefined) {
    Object.assign(inv.nodes, explicit.nodes);
    const explicitIps = new Set(Object.values(explicit.pods).map((p) => p.ip));
    for (const [ip, e] of byIp) if (!explicitIps.has(ip)) inv.pods[e.name] = e.pod;
    Object.assign(inv.pods, explicit.pods);
  } else {
    for (const e of byIp.values()) inv.pods[e.name] = e.pod;
  }
  return inv;
}

export type TargetResolution =
  { ok: true; agent: AgentInfo } | { ok: false; code: ErrorCode; message: string };

/**
 * Which agent captures `target`. A pod IP: the agent whose hello lists it (in a namespace or as a
 * node address); a path or PID: the agent on `node`, or the only connected one.
 */
export function resolveTarget(
  target: string,
  node: string | undefined,
  agents: readonly AgentInfo[],
): TargetResolution {
  const connected = agents.filter((a) => a.connected);
  if (node !== undefined) {
    const onNode = agents.filter((a) => a.node === node);
    const live = onNode.find((a) => a.connected);
    if (live) return { ok: true, agent: live };
    return {
      ok: false,
      code: 'AGENT_NOT_CONNECTED',
      message:
        onNode.length > 0
          ? `the agent on node ${node} (${onNode.map((a) => a.agentId).join(', ')}) is not connected`
          : `no agent on node ${node} has connected (connected nodes: ${nodeList(connected)})`,
    };
  }
  if (isIP(target) !== 0) {
    const holders = connected.filter(
      (a) =>
        a.hello.nodeAddresses.includes(target) ||
        a.hello.namespaces.some((ns) => ns.addresses.includes(target)),
    );
    const [only] = holders;
    if (holders.length === 1 && only) return { ok: true, agent: only };
    if (holders.length > 1) {
      return {
        ok: false,
        code: 'TARGET_AMBIGUOUS',
        message: `${target} is reported by several agents (${holders.map((a) => a.node).join(', ')}); give node`,
      };
    }
    // The agent resolves pod IPs itself too; with a single agent there is no choice to make.
    const [single] = connected;
    if (connected.length === 1 && single) return { ok: true, agent: single };
    return {
      ok: false,
      code: connected.length === 0 ? 'AGENT_NOT_CONNECTED' : 'TARGET_NOT_FOUND',
      message:
        connected.length === 0
          ? `no agent is connected to capture ${target}`
          : `no connected agent reports a namespace with ${target} (connected nodes: ${nodeList(connected)}); give node`,
    };
  }
  const [single] = connected;
  if (connected.length === 1 && single) return { ok: true, agent: single };
  return {
    ok: false,
    code: connected.length === 0 ? 'AGENT_NOT_CONNECTED' : 'TARGET_NOT_FOUND',
    message:
      connected.length === 0
        ? `no agent is connected to capture ${target}`
        : `${target} is a path or PID and ${connected.length} agents are connected; give node (one of ${nodeList(connected)})`,
  };
}

function nodeList(agents: readonly AgentInfo[]): string {
  return agents.length === 0 ? 'none' : agents.map((a) => a.node).join(', ');
}

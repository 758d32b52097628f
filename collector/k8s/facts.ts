/**
 * What the Kubernetes API says about nodes and pods, reduced to the facts attribution needs. Pure:
 * the objects come in as plain JSON (the shape of `GET /api/v1/nodes` and `/api/v1/pods` items), so
 * this file does not depend on the client library.
 *
 * Node addresses = status.addresses (InternalIP, ExternalIP) + the first address of every pod CIDR:
 * bridge CNIs (the bridge plugin with host-local IPAM, flannel's cni0, kubenet's cbr0) put the
 * gateway there, and a masquerade that leaves through the pod bridge makes the backend see it.
 */
import { isIP } from 'node:net';
import type { ErrorCode } from '../../common/errors';
import type { PodRole } from '../../common/inventory';
import type { ApiInventory } from '../inventory-live';

/** The annotation (or label) that names a pod's role on the path. */
export const ROLE_KEY = 'hoptrace.io/role';

/** The fields of a v1 Node that are read (everything else is ignored). */
export interface NodeObject {
  metadata?: { name?: string };
  spec?: { podCIDR?: string; podCIDRs?: string[] };
  status?: { addresses?: { type?: string; address?: string }[] };
}

/** The fields of a v1 Pod that are read. */
export interface PodObject {
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    uid?: string;
    creationTimestamp?: string | Date;
    deletionTimestamp?: string | Date;
    ownerReferences?: { kind?: string; name?: string; uid?: string; controller?: boolean }[];
  };
  spec?: { nodeName?: string; hostNetwork?: boolean };
  status?: { phase?: string; podIP?: string; podIPs?: { ip?: string }[] };
}

export interface ClusterNode {
  name: string;
  addresses: string[];
  podCIDRs: string[];
}

export interface ClusterPod {
  namespace: string;
  name: string;
  /** Primary first (status.podIPs order); empty while pending. */
  ips: string[];
  node: string | null;
  hostNetwork: boolean;
  phase: string;
  /** From the `hoptrace.io/role` annotation or label; null when absent or not a role. */
  role: PodRole | null;
  /** The controlling owner (ReplicaSet, StatefulSet, DaemonSet …), to find a replacement pod. */
  owner: { kind: string; name: string } | null;
  labels: Record<string, string>;
}

export interface ClusterSnapshot {
  nodes: ClusterNode[];
  pods: ClusterPod[];
  /** When the lists were taken (wall-clock ms). */
  takenAtMs: number;
}

const ROLES: readonly PodRole[] = ['vpn', 'backend', 'proxy', 'other'];

function roleOf(meta: PodObject['metadata']): PodRole | null {
  const v = meta?.annotations?.[ROLE_KEY] ?? meta?.labels?.[ROLE_KEY];
  return v !== undefined && (ROLES as readonly string[]).includes(v) ? (v as PodRole) : null;
}

/**
 * The first host address of a CIDR (`10.244.2.0/24` → `10.244.2.1`, `fd00:10:244:2::/64` →
 * `fd00:10:244:2::1`); null when it is not a CIDR or has no host part.
 */
export function firstHostAddress(cidr: string): string | null {
  const [base, bitsText] = cidr.split('/');
  const v = isIP(base ?? '');
  const bits = Number(bitsText);
  if (base === undefined || v === 0 || !Number.isInteger(bits) || bitsText === '') return null;
  const width = v === 4 ? 32 : 128;
  if (bits < 0 || bits >= width - 1) return null;
  const value = v === 4 ? ipv4ToBigInt(base) : ipv6ToBigInt(base);
  if (value === null) return null;
  const mask = ((1n << BigInt(bits)) - 1n) << BigInt(width - bits);
  const first = (value & mask) + 1n;
  return v === 4 ? bigIntToIPv4(first) : bigIntToIPv6(first);
}

function ipv4ToBigInt(a: string): bigint | null {
  const parts = a.split('.').map(Number);
  if (parts.length !== 4) return null;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n);
}

function bigIntToIPv4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => ((n >> s) & 0xffn).toString()).join('.');
}

function ipv6ToBigInt(a: string): bigint | null {
  if (a.includes('.')) return null; // IPv4-mapped forms are not pod CIDRs
  const [head = '', tail] = a.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) return null;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function bigIntToIPv6(n: bigint): string {
  const groups: number[] = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(Number((n >> s) & 0xffffn));
  // RFC 5952 §4.2: compress the longest run (≥ 2) of zero groups, the first one on a tie.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** A v1 Node as the addresses attribution needs. */
export function nodeFacts(o: NodeObject): ClusterNode | null {
  const name = o.metadata?.name;
  if (name === undefined) return null;
  const cidrs = [
    ...new Set([...(o.spec?.podCIDRs ?? []), ...(o.spec?.podCIDR ? [o.spec.podCIDR] : [])]),
  ];
  const addrs = (o.status?.addresses ?? [])
    .map((a) => a.address ?? '')
    .filter((a) => isIP(a) !== 0); // type Hostname/InternalDNS entries are names
  for (const c of cidrs) {
    const gw = firstHostAddress(c);
    if (gw !== null) addrs.push(gw);
  }
  return { name, addresses: [...new Set(addrs)], podCIDRs: cidrs };
}

/** A v1 Pod as the facts hoptrace uses. */
export function podFacts(o: PodObject): ClusterPod | null {
  const m = o.metadata;
  if (m?.name === undefined || m.namespace === undefined) return null;
  const ips = (o.status?.podIPs ?? []).map((p) => p.ip ?? '').filter((ip) => isIP(ip) !== 0);
  const primary = o.status?.podIP;
  if (primary !== undefined && isIP(primary) !== 0 && !ips.includes(primary)) ips.unshift(primary);
  const ctl = m.ownerReferences?.find((r) => r.controller === true) ?? m.ownerReferences?.[0];
  return {
    namespace: m.namespace,
    name: m.name,
    ips,
    node: o.spec?.nodeName ?? null,
    hostNetwork: o.spec?.hostNetwork === true,
    phase: o.status?.phase ?? 'Unknown',
    role: roleOf(m),
    owner:
      ctl?.kind !== undefined && ctl.name !== undefined ? { kind: ctl.kind, name: ctl.name } : null,
    labels: m.labels ?? {},
  };
}

/** Pods whose addresses can be on a path: running or pending with an IP, in their own namespace. */
function holdsAddress(p: ClusterPod): boolean {
  // A finished pod's IP may already belong to a new pod; a hostNetwork pod's IP is its node's.
  return (
    !p.hostNetwork &&
    p.ips.length > 0 &&
    p.node !== null &&
    (p.phase === 'Running' || p.phase === 'Pending')
  );
}

/**
 * The snapshot as inventory facts: node addresses, and one pod entry per pod IP (`ns/name`, and
 * `ns/name@IP` for the second address of a dual-stack pod).
 */
export function clusterInventory(s: ClusterSnapshot): ApiInventory {
  const inv: ApiInventory = { nodes: {}, pods: {} };
  for (const n of s.nodes) inv.nodes[n.name] = [...n.addresses];
  for (const p of s.pods) {
    if (!holdsAddress(p) || p.node === null) continue;
    p.ips.forEach((ip, i) => {
      const key = i === 0 ? `${p.namespace}/${p.name}` : `${p.namespace}/${p.name}@${ip}`;
      inv.pods[key] = { ip, node: p.node ?? '', role: p.role ?? 'other', labeled: p.role !== null };
    });
  }
  return inv;
}

export type PodResolution =
  | { ok: true; ip: string; node: string; pod: ClusterPod }
  | { ok: false; code: ErrorCode; message: string };

/** `namespace/name` is not a pod: K8S_POD_NOT_FOUND, naming the namespace's other pods in `pods`. */
export function podNotFound(
  pods: readonly ClusterPod[],
  namespace: string,
  name: string,
): Extract<PodResolution, { ok: false }> {
  const inNs = pods.filter((p) => p.namespace === namespace && p.name !== name).map((p) => p.name);
  const listed =
    inNs.length === 0
      ? `no pods at all in namespace ${namespace}`
      : `pods in ${namespace}: ${inNs.slice(0, 8).join(', ')}${inNs.length > 8 ? ', …' : ''}`;
  return {
    ok: false,
    code: 'K8S_POD_NOT_FOUND',
    message: `no pod ${namespace}/${name} (${listed}); check with \`kubectl -n ${namespace} get pods\``,
  };
}

/** Finds `namespace/name` in a snapshot: its primary IP and node, or why not. */
export function findPod(s: ClusterSnapshot, namespace: string, name: string): PodResolution {
  const pod = s.pods.find((p) => p.namespace === namespace && p.name === name);
  return pod === undefined ? podNotFound(s.pods, namespace, name) : runningPod(pod);
}

/** A pod as a capture target: its primary IP and node, or K8S_POD_NO_IP while it cannot be one. */
export function runningPod(pod: ClusterPod): PodResolution {
  const { namespace, name } = pod;
  const [ip] = pod.ips;
  if (
    ip === undefined ||
    pod.node === null ||
    pod.phase === 'Succeeded' ||
    pod.phase === 'Failed'
  ) {
    return {
      ok: false,
      code: 'K8S_POD_NO_IP',
      message: `pod ${namespace}/${name} is ${pod.phase}${pod.node === null ? ', not scheduled' : ` on ${pod.node}`}${ip === undefined ? ', without an IP' : ''}; wait until it runs (\`kubectl -n ${namespace} get pod ${name} -o wide\`)`,
    };
  }
  return { ok: true, ip, node: pod.node, pod };
}

/**
 * `hoptrace doctor --collector`: the collector asks the agents of the VPN pod's node and of the
 * backend's node for the facts of their namespaces (the pod's and the node's own), then runs the
 * pure checks with everything agents report (every namespace's addresses = the pods that exist).
 */
import { familyOf, firstHost, isIP } from '../common/cidr';
import { HoptraceError } from '../common/errors';
import type { DoctorTarget, NamespaceFacts } from '../common/wire';
import type { AgentRequests } from './agent-requests';
import { runDoctorChecks, type DoctorResult } from '../core/doctor/checks';
import type { AgentInfo } from './hub-types';

/** POST /v1/doctor body. Targets are pod IPs, or `NODE/PATH|PID` for a namespace on a node. */
export interface DoctorSpec {
  vpn: string;
  backend: string;
  /** IPv4 or IPv6; client and dst, when given, are of its family. */
  tunnelRange: string;
  client?: string | undefined;
  dst?: string | undefined;
  podCidrs?: string[] | undefined;
}

/** The agent that holds `target` and the target as that agent resolves it. */
export function agentFor(
  agents: readonly AgentInfo[],
  target: string,
): { agent: AgentInfo; target: string } {
  const live = agents.filter((a) => a.connected);
  const slash = target.indexOf('/');
  if (isIP(target) === 0 && slash > 0) {
    const node = target.slice(0, slash);
    const agent = live.find((a) => a.node === node);
    if (agent !== undefined) return { agent, target: target.slice(slash + 1) };
  } else {
    const agent = live.find((a) => a.hello.namespaces.some((n) => n.addresses.includes(target)));
    if (agent !== undefined) return { agent, target };
  }
  throw new HoptraceError('DOCTOR_NO_AGENT', `no connected agent holds ${target}`, {
    where: 'doctor',
    hint: 'give the pod IP of a pod on a node with an agent, or NODE/PATH; check GET /v1/agents',
  });
}

/** Runs the doctor through the agents. */
export async function doctorViaAgents(
  agents: readonly AgentInfo[],
  requests: AgentRequests,
  spec: DoctorSpec,
): Promise<DoctorResult> {
  const vpn = agentFor(agents, spec.vpn);
  const backend = agentFor(agents, spec.backend);
  const family = familyOf(spec.tunnelRange);
  const client = spec.client ?? firstHost(spec.tunnelRange);
  if (family === null || client === null)
    throw new HoptraceError(
      'API_BAD_REQUEST',
      `tunnelRange '${spec.tunnelRange}' is not an IPv4 or IPv6 CIDR`,
    );
  // A backend pod IP of the other family is no destination for this request.
  const dst = spec.dst ?? (isIP(backend.target) === family ? backend.target : undefined);
  const both = [client, ...(dst === undefined ? [] : [dst])];
  const plan = new Map<string, DoctorTarget[]>();
  const add = (agentId: string, t: DoctorTarget): void => {
    plan.set(agentId, [...(plan.get(agentId) ?? []), t]);
  };
  add(vpn.agent.agentId, {
    name: 'vpn',
    target: vpn.target,
    routeTo: dst === undefined ? [] : [dst],
  });
  add(vpn.agent.agentId, { name: 'vpn-node', target: '', routeTo: both });
  add(backend.agent.agentId, { name: 'backend-node', target: '', routeTo: both });
  const facts: NamespaceFacts[] = [];
  for (const [agentId, targets] of plan)
    facts.push(...(await requests.doctor(agentId, targets, family)).facts);
  const nodeAddresses: Record<string, string[]> = {};
  for (const a of agents) nodeAddresses[a.node] = a.hello.nodeAddresses;
  return runDoctorChecks({
    facts,
    tunnelRange: spec.tunnelRange,
    client,
    dst,
    liveAddresses: [
      ...new Set(agents.flatMap((a) => a.hello.namespaces.flatMap((n) => n.addresses))),
    ],
    nodeAddresses,
    podCidrs: spec.podCidrs,
  });
}

/** Validates a POST /v1/doctor body; throws API_BAD_REQUEST naming the field. */
export function parseDoctorSpec(body: string): DoctorSpec {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    throw new HoptraceError('API_BAD_REQUEST', 'the body is not JSON', { where: '/v1/doctor' });
  }
  const bad = (field: string, what: string): HoptraceError =>
    new HoptraceError('API_BAD_REQUEST', `${field} ${what}`, {
      where: '/v1/doctor',
      hint: '{"vpn": POD_IP|NODE/PATH, "backend": POD_IP|NODE/PATH, "tunnelRange"?: CIDR, "client"?: IP, "dst"?: IP, "podCidrs"?: [CIDR]}',
    });
  if (typeof v !== 'object' || v === null) throw bad('body', 'must be an object');
  const o = v as Record<string, unknown>;
  const str = (k: string, required: boolean): string | undefined => {
    const x = o[k];
    if (x === undefined && !required) return undefined;
    if (typeof x !== 'string' || x === '') throw bad(k, 'must be a non-empty string');
    return x;
  };
  const tunnelRange = str('tunnelRange', false) ?? '10.90.0.0/24';
  const family = familyOf(tunnelRange);
  if (family === null) throw bad('tunnelRange', 'must be an IPv4 or IPv6 CIDR');
  const sameFamily = (k: 'client' | 'dst'): string | undefined => {
    const v = str(k, false);
    if (v !== undefined && isIP(v) !== family)
      throw bad(k, `must be an IPv${family} address, like tunnelRange ${tunnelRange}`);
    return v;
  };
  const podCidrs = o['podCidrs'];
  if (
    podCidrs !== undefined &&
    !(Array.isArray(podCidrs) && podCidrs.every((c) => typeof c === 'string'))
  )
    throw bad('podCidrs', 'must be a list of CIDRs');
  return {
    vpn: str('vpn', true) ?? '',
    backend: str('backend', true) ?? '',
    tunnelRange,
    client: sameFamily('client'),
    dst: sameFamily('dst'),
    podCidrs: podCidrs,
  };
}

/**
 * Conntrack evidence for a finished live capture: ask the agent of the VPN egress point and the
 * agent of the backend point for the flow's entries in the pod's namespace and in the node's own
 * (where a node's masquerade or kube-proxy leaves its entry), then judge them against the verdict.
 */
import { addCount } from '../common/counters';
import type { ConntrackEntry, DoctorTarget } from '../common/wire';
import type { AgentRequests } from './agent-requests';
import type { Verdict } from '../core/attribute/attribute';
import { flowTuples } from '../core/attribute/conntrack-evidence';

/** A capture point as the session records it. */
export interface ConntrackPoint {
  name: string;
  agentId: string | null;
  target: string;
}

/**
 * The entries of the verdict's flow on the path; errors are returned, never thrown — each a read
 * that did not happen (an agent's error, no answer, a point without an agent), judged as entries
 * not seen. `leftOut`: entries the agents listed beyond what the collector keeps of one reply
 * (REPLY_LIMITS.entries).
 */
export async function conntrackForCapture(
  requests: AgentRequests,
  captureId: string,
  points: readonly ConntrackPoint[],
  verdict: Verdict,
): Promise<{ entries: ConntrackEntry[]; errors: string[]; leftOut: number }> {
  const egress = points.find((p) => p.name === 'egress') ?? points[1];
  const backend = points.find((p) => p.name === 'backend') ?? points[points.length - 1];
  const tuples = flowTuples(verdict);
  const plan = new Map<string, DoctorTarget[]>();
  const add = (agentId: string | null | undefined, t: DoctorTarget): void => {
    if (agentId === null || agentId === undefined) return;
    plan.set(agentId, [...(plan.get(agentId) ?? []), t]);
  };
  // One node for both: its namespace is both the VPN node and the backend node ('node').
  const oneNode = egress?.agentId != null && egress.agentId === backend?.agentId;
  add(egress?.agentId, { name: 'vpn', target: egress?.target ?? '', routeTo: [] });
  add(egress?.agentId, { name: oneNode ? 'node' : 'vpn-node', target: '', routeTo: [] });
  if (!oneNode) add(backend?.agentId, { name: 'backend-node', target: '', routeTo: [] });
  const entries: ConntrackEntry[] = [];
  const errors: string[] = [];
  // A point with no agent leaves its namespaces unread: said, not passed over.
  if (egress !== undefined && egress.agentId === null)
    errors.push(`vpn, vpn-node: no agent captured the ${egress.name} point`);
  if (!oneNode && backend !== undefined && backend !== egress && backend.agentId === null)
    errors.push(`backend-node: no agent captured the ${backend.name} point`);
  let leftOut = 0;
  if (tuples.length === 0)
    return { entries, errors: ['no tuple of the flow was observed'], leftOut };
  await Promise.all(
    [...plan].map(async ([agentId, targets]) => {
      try {
        const r = await requests.conntrack(agentId, captureId, targets, tuples);
        entries.push(...r.entries);
        errors.push(...r.errors);
        leftOut = addCount(leftOut, r.entriesLeftOut ?? 0);
      } catch (e) {
        errors.push(e instanceof Error ? e.message : String(e));
      }
    }),
  );
  return { entries, errors, leftOut };
}

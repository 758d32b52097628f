/**
 * The agent's side of `hoptrace doctor` and of conntrack evidence: answers the collector's
 * DoctorRequest / ConntrackQuery by reading the named namespaces (agent/doctor/read.ts). A target
 * '' is the node's own namespace, where the node's NAT and routes live.
 */
import type { CollectorRequest, AgentReplyBody } from '../link/collector-link';
import type { ConntrackEntry } from '../../common/wire';
import { readConntrack, readNamespaceFacts, type ReadContext } from './read';

/** Answers one request; never throws (failures travel inside the report). */
export async function answerRequest(
  req: Exclude<CollectorRequest, { kind: 'framesRequest' }>,
  agentId: string,
  ctx: ReadContext,
): Promise<AgentReplyBody> {
  switch (req.kind) {
    case 'doctorRequest': {
      const facts = [];
      const { targets, family } = req.doctorRequest;
      for (const t of targets) facts.push(await readNamespaceFacts(t, family, ctx));
      return {
        kind: 'doctorReport',
        doctorReport: { requestId: req.doctorRequest.requestId, agentId, node: ctx.node, facts },
      };
    }
    case 'conntrackQuery': {
      const q = req.conntrackQuery;
      const entries: ConntrackEntry[] = [];
      const errors: string[] = [];
      for (const t of q.targets) {
        try {
          entries.push(...(await readConntrack(t, q.tuples, ctx)));
        } catch (e) {
          errors.push(`${t.name}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
      return {
        kind: 'conntrackReport',
        conntrackReport: {
          requestId: q.requestId,
          captureId: q.captureId,
          agentId,
          entries,
          errors,
        },
      };
    }
  }
}

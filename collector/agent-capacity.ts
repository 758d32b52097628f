/**
 * How many captures each agent runs for this collector, and the refusal of a capture or repro that
 * would need more of an agent than it takes. An agent runs at most its --max-captures at once
 * (said in its hello; 4 for an agent that does not say) and fails the point of one more with
 * AGENT_BUSY: with the collector's own cap (32 live captures) far above it, a fifth capture on one
 * node read as a point that said AGENT_BUSY after the capture had started. Refused up front
 * instead, naming the node and its limit.
 */
import { HoptraceError } from '../common/errors';
import { helloMaxCaptures } from '../common/hello-limits';
import type { AgentInfo } from './hub-types';

/** How often each agent id occurs in `agentIds` (one entry per capture point on it). */
export function countByAgent(agentIds: Iterable<string>): Map<string, number> {
  const n = new Map<string, number>();
  for (const id of agentIds) n.set(id, (n.get(id) ?? 0) + 1);
  return n;
}

/** What asks for the capture points: a capture (POST /v1/captures) or a repro (POST /v1/repros). */
export type CapacityRequest = 'capture' | 'repro';

/**
 * Throws API_AGENT_BUSY when a new capture or repro whose points go to `wanted` (one entry per
 * point: two points on one node take two of its captures) would take an agent past its max
 * captures, with `live` (capture points live on each agent now, countByAgent) counted.
 */
export function refuseBeyondAgentCapacity(
  wanted: readonly AgentInfo[],
  live: ReadonlyMap<string, number>,
  request: CapacityRequest = 'capture',
): void {
  const need = countByAgent(wanted.map((a) => a.agentId));
  for (const [agentId, n] of need) {
    const agent = wanted.find((a) => a.agentId === agentId);
    if (agent === undefined) continue;
    const max = helloMaxCaptures(agent.hello);
    const running = live.get(agentId) ?? 0;
    if (running + n <= max) continue;
    const said =
      agent.hello.maxCaptures === undefined
        ? 'the default of an agent that does not say its --max-captures'
        : 'its --max-captures';
    throw new HoptraceError(
      'API_AGENT_BUSY',
      `node ${agent.node} runs ${running} capture point${running === 1 ? '' : 's'} for this collector and its agent ${agentId} takes ${max} at once (${said}); this ${request} needs ${n} more there`,
      {
        where: `POST /v1/${request}s`,
        hint: `wait for a capture on ${agent.node} to finish (GET /v1/captures lists them, DELETE /v1/captures/:id cancels one; a repro's points count too, POST /v1/repros/:id/finish ends one), or start that node's agent with a higher --max-captures (and a memory limit ~85 MiB higher a capture)`,
      },
    );
  }
}

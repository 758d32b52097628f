/**
 * A finished repro's return routes when its prober sent none: the agents of the nodes on the path
 * read the routes toward the client in their node namespaces (a doctor request), all at once. A node
 * whose table was not read in full — no agent connected, a request refused or unanswered, the
 * routes part unread or cut (core/repro/return-routes.ts) — is named, never taken for a table
 * without the route.
 */
import { familyOf } from '../common/cidr';
import {
  returnRoutesOf,
  type ReturnRouteRead,
  type RouteTableGap,
} from '../core/repro/return-routes';
import type { AgentRequests } from './agent-requests';
import type { AgentInfo } from './hub-types';

/**
 * Routes toward `client` in the node namespaces of these nodes and agents, with the tables not read
 * in full. Never throws: a failed request is one node's gap.
 */
export async function readReturnRoutes(
  agents: readonly AgentInfo[],
  requests: Pick<AgentRequests, 'doctor'>,
  nodes: readonly string[],
  agentIds: readonly string[],
  client: string,
): Promise<ReturnRouteRead> {
  const asked = agents.filter(
    (a) => a.connected && (nodes.includes(a.node) || agentIds.includes(a.agentId)),
  );
  const unread: RouteTableGap[] = [];
  for (const node of nodes)
    if (!asked.some((a) => a.node === node))
      unread.push({ node, detail: 'not read (no agent of that node is connected)' });
  for (const id of agentIds) {
    if (asked.some((a) => a.agentId === id)) continue;
    const node = agents.find((a) => a.agentId === id)?.node;
    if (node !== undefined && unread.some((g) => g.node === node)) continue;
    // An agent the hub forgot: its id is all there is to name it by.
    unread.push({ node: node ?? id, detail: `not read (agent ${id} is not connected)` });
  }
  const reads = await Promise.all(
    asked.map(async (a): Promise<ReturnRouteRead> => {
      try {
        const report = await requests.doctor(
          a.agentId,
          [{ name: 'node', target: '', routeTo: [client] }],
          familyOf(client) ?? 4,
        );
        return returnRoutesOf(a.node, report.facts, client);
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        return { routes: [], unread: [{ node: a.node, detail: `not read (${why})` }] };
      }
    }),
  );
  return {
    routes: reads.flatMap((r) => r.routes),
    unread: [...unread, ...reads.flatMap((r) => r.unread)],
  };
}

/**
 * The return routes a repro's summary checks (a route toward the client still pointing at the
 * deleted pod's address), as the agents read them in their nodes' namespaces: the routes that carry
 * the client, and every node whose route table was not read in full — read in part (the collector
 * keeps REPLY_LIMITS.routes of one namespace, NamespaceFacts.leftOut), or not at all (no agent, a
 * refused or unanswered request, the part unread). A route missing from a table read in part was
 * not read, not absent: the summary names such a table rather than concluding from it.
 */
import { familyOf, inCidr } from '../../common/cidr';
import type { NamespaceFacts } from '../../common/wire';
import { unreadParts } from '../doctor/checks';

/** A route on a node that carries the tunnel range back (read by the lab or an agent). */
export interface ReturnRoute {
  node: string;
  dst: string;
  /** Next hop, null for a device route. */
  via: string | null;
  dev: string | null;
}

/** A node whose route table was not read in full, and in words why. */
export interface RouteTableGap {
  node: string;
  /** `read only in part (routes: 5 left out (at most 16384 kept))`, `not read (…)`. */
  detail: string;
}

/** The return routes read, and the route tables not read in full. */
export interface ReturnRouteRead {
  routes: ReturnRoute[];
  unread: RouteTableGap[];
}

/** The routes toward `client` of one agent's answer about its node namespace (`node`). */
export function returnRoutesOf(
  node: string,
  facts: readonly NamespaceFacts[],
  client: string,
): ReturnRouteRead {
  const family = familyOf(client) ?? 4;
  const routes: ReturnRoute[] = [];
  const unread: RouteTableGap[] = [];
  if (facts.length === 0)
    unread.push({ node, detail: 'not read (the agent answered with no facts of its namespace)' });
  for (const f of facts) {
    for (const r of f.routes)
      if (r.dst !== 'default' && inCidr(client, r.dst))
        routes.push({
          node,
          dst: r.dst,
          via: r.gateway === '' ? null : r.gateway,
          dev: r.dev === '' ? null : r.dev,
        });
    if (!unreadParts(f, family).has('routes')) continue;
    // The part's own left-out lines name the routes and lookups the collector did not keep.
    const cut = (f.leftOut ?? []).filter((l) => l.part === 'routes').map((l) => l.detail);
    unread.push({
      node,
      detail:
        cut.length > 0
          ? `read only in part (${[...new Set(cut)].join('; ')})`
          : `not read (${f.message || f.errorCode || `the agent read IPv${f.family} routes, not IPv${family}`})`,
    });
  }
  return { routes, unread };
}

/** The gaps in words: `node vpn-node's route table was read only in part (…)`. */
export function routeGapsText(unread: readonly RouteTableGap[]): string {
  return unread.map((g) => `node ${g.node}'s route table was ${g.detail}`).join('; ');
}

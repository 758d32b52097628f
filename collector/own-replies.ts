/**
 * What an agent's doctor or conntrack reply may speak for: only the namespaces the collector asked
 * THAT agent about, and only as its own node (the one its authenticated hello bound). An agent
 * holding a valid token is not trusted: a fact or entry it names after another agent's role
 * (`backend-node` from the VPN node's agent) would otherwise be checked, or read as conntrack
 * evidence, as that node's. (Events get the same treatment: agent-messages.ts ownEvents.)
 */
import type { ConntrackEntry, DoctorTarget, NamespaceFacts } from '../common/wire';

/** The kept items, and the names of the dropped ones (what the caller counts and logs). */
export interface Owned<T> {
  kept: T[];
  dropped: string[];
}

/**
 * The facts that answer a target sent to the agent (its name and target), at most one per target,
 * each as `node`'s. `node` null (the agent is no longer known): none is kept.
 */
export function ownFacts(
  facts: readonly NamespaceFacts[],
  targets: readonly DoctorTarget[],
  node: string | null,
): Owned<NamespaceFacts> {
  const open = new Set(targets.map((t) => JSON.stringify([t.name, t.target])));
  const kept: NamespaceFacts[] = [];
  const dropped: string[] = [];
  for (const f of facts) {
    const key = JSON.stringify([f.name, f.target]);
    if (node === null || !open.delete(key)) dropped.push(f.name);
    else kept.push(f.node === node ? f : { ...f, node });
  }
  return { kept, dropped };
}

/** The entries read in a namespace whose role was sent to the agent, each as `node`'s. */
export function ownEntries(
  entries: readonly ConntrackEntry[],
  targets: readonly DoctorTarget[],
  node: string | null,
): Owned<ConntrackEntry> {
  const asked = new Set(targets.map((t) => t.name));
  const kept: ConntrackEntry[] = [];
  const dropped: string[] = [];
  for (const e of entries) {
    if (node === null || !asked.has(e.name)) dropped.push(e.name);
    else kept.push(e.node === node ? e : { ...e, node });
  }
  return { kept, dropped };
}

/**
 * One `hoptrace agent` per lab node, scoped to what a real node agent sees: the node's own
 * namespace and the pods on that node, never the client or the other node.
 *
 * The agent's `--netns-glob` matches names in one directory (`*`/`?` in the last segment only),
 * and the lab's namespace names do not split into the two nodes with one such pattern. So each
 * node gets a view directory of symlinks to its namespaces — what `/run/netns` holds on a real
 * node — and its agent scans only that (`--no-proc-scan`: no process's namespace either).
 *
 * Each agent runs as the DaemonSet runs it: uid 0 with only the agent's capabilities
 * (agent/capabilities.ts) and no_new_privs, through setpriv (util-linux). The bounding set is what
 * holds for its children: a uid-0 exec gets its bounding set as permitted and effective set, so
 * nsenter, the capture workers, iptables-save and conntrack get no more than the agent.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_CAPABILITIES } from '../agent';
import { collect, stopChild } from './child';
import { CLI_MAIN, waitAgents, type LAB_NODE_NAMES, type LiveCollector } from './live-collector';
import { spawnTracked } from './live-procs';
import type { Netns } from './netns';
import { NS } from './topology';

/** A lab node: its agent's node name, its own namespace and the pods on it (short names). */
export interface LabNode {
  node: (typeof LAB_NODE_NAMES)[number];
  nodeNs: string;
  pods: string[];
}

/** The lab's two nodes. The client is remote: no agent sees it. */
export function labNodes(withProxy: boolean): LabNode[] {
  return [
    { node: 'vpn-node', nodeNs: NS.vpnNode, pods: [NS.vpnPod] },
    {
      node: 'backend-node',
      nodeNs: NS.backendNode,
      pods: [NS.backendPod, ...(withProxy ? [NS.proxyPod] : [])],
    },
  ];
}

/**
 * The agents' environment, without an inherited NODE_OPTIONS: a test runner's instrumentation
 * (tap's `--import` hook) has no business in the agents or their capture workers.
 */
function agentEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  return env;
}

/** A running agent subprocess. */
export interface LiveAgent {
  agentId: string;
  node: string;
  child: ChildProcess;
  /** What it printed (its pino log and the "connected" line). */
  output: () => string;
  stop(): Promise<void>;
}

/** Options for startAgent. */
export interface AgentStartOptions {
  /** Token file (default: the node's own, from the collector's agent token file). */
  tokenFile?: string;
  agentId?: string;
  /** `--refresh-ms`: how often the agent re-reads its namespaces (default: the agent's 5 s). */
  refreshMs?: number;
  /**
   * The capabilities it runs with, as Kubernetes names them (default: the agent's, the
   * DaemonSet's `capabilities.add`); every other one is dropped.
   */
  capabilities?: readonly string[];
}

/** The agent's capabilities by name (`NET_RAW`, …), what deploy/base/agent.yaml adds. */
export const AGENT_CAPABILITY_NAMES: readonly string[] = AGENT_CAPABILITIES.map((c) => c.name);

/**
 * `setpriv` arguments that leave a uid-0 process only `caps` (inheritable, ambient and bounding
 * sets; permitted and effective follow from the bounding set at exec) and set no_new_privs, like
 * `capabilities: {drop: [ALL], add: caps}` and `allowPrivilegeEscalation: false`.
 */
export function setprivArgs(caps: readonly string[]): string[] {
  const list = ['-all', ...caps.map((c) => `+${c.toLowerCase()}`)].join(',');
  return [
    'setpriv',
    `--inh-caps=${list}`,
    `--ambient-caps=${list}`,
    `--bounding-set=${list}`,
    '--no-new-privs',
    '--',
  ];
}

/** The view directory of node `node` under `viewRoot` (what `/run/netns` is on a real node). */
export function viewDir(viewRoot: string, node: string): string {
  return join(viewRoot, node);
}

/** A pod namespace appears on a node (the CNI created it): its agent will report it. */
export function addToView(viewRoot: string, node: string, lab: Netns, ns: string): void {
  symlinkSync(`/run/netns/${lab.full(ns)}`, join(viewDir(viewRoot, node), lab.full(ns)));
}

/** A pod namespace is gone from a node. */
export function removeFromView(viewRoot: string, node: string, lab: Netns, ns: string): void {
  rmSync(join(viewDir(viewRoot, node), lab.full(ns)), { force: true });
}

/**
 * Starts the agent of `n` for the namespaces of `lab`, with a view directory under `viewRoot`.
 * Does not wait for it to connect (see waitConnected).
 */
export function startAgent(
  collector: LiveCollector,
  lab: Netns,
  n: LabNode,
  viewRoot: string,
  opts: AgentStartOptions = {},
): LiveAgent {
  const view = join(viewRoot, n.node);
  rmSync(view, { recursive: true, force: true });
  mkdirSync(view, { recursive: true });
  for (const ns of [n.nodeNs, ...n.pods])
    symlinkSync(`/run/netns/${lab.full(ns)}`, join(view, lab.full(ns)));
  const agentId = opts.agentId ?? `${n.node}-${lab.prefix.slice(2, 8)}`;
  const child = spawnTracked(
    [
      CLI_MAIN,
      'agent',
      '--collector',
      collector.agentsUrl,
      '--node',
      n.node,
      '--agent-id',
      agentId,
      '--token-file',
      opts.tokenFile ?? collector.nodeTokenFile(n.node),
      '--node-netns',
      `/run/netns/${lab.full(n.nodeNs)}`,
      '--netns-glob',
      `${view}/${lab.prefix}*`,
      '--no-proc-scan',
      '--log-level',
      'info',
      ...(opts.refreshMs === undefined ? [] : ['--refresh-ms', String(opts.refreshMs)]),
    ],
    agentEnv(),
    setprivArgs(opts.capabilities ?? AGENT_CAPABILITY_NAMES),
  );
  const out = collect(child.stdout);
  const err = collect(child.stderr);
  return {
    agentId,
    node: n.node,
    child,
    output: () => out() + err(),
    stop: async () => {
      await stopChild(child, 'SIGTERM', 5000);
    },
  };
}

/**
 * Waits until every agent in `agents` is listed as connected — and no other agent is, so a pod IP
 * cannot be claimed by an agent of an earlier scenario that is still closing.
 */
export async function waitConnected(
  collector: LiveCollector,
  agents: readonly LiveAgent[],
): Promise<void> {
  const ids = new Set(agents.map((a) => a.agentId));
  await waitAgents(
    collector,
    (list) => {
      const connected = list.filter((a) => a.connected);
      return (
        connected.length === ids.size &&
        connected.every((a) => ids.has(a.agentId)) &&
        // Each agent reported the namespaces of its node (its hello is built from a scan).
        connected.every((a) => a.namespaces.length > 0 && a.nodeAddresses.length > 0)
      );
    },
    `agents ${[...ids].join(', ')} connected`,
  ).catch((e: unknown) => {
    const dead = agents.filter((a) => a.child.exitCode !== null || a.child.signalCode !== null);
    if (e instanceof Error && dead.length > 0)
      e.message += `; exited: ${dead.map((a) => `${a.agentId}: ${a.output().trim().slice(-600)}`).join(' | ')}`;
    throw e;
  });
}

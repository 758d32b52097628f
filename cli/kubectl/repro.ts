/**
 * `kubectl hoptrace repro`: exactly `hoptrace repro --collector` (cli/repro.ts) against the
 * collector pod through the API server's port-forward, with the token of its Secret. The VPN
 * workload is written as kubectl users write one (`vpn/sts/wg`, `deploy/vpn` in -n's namespace) or
 * as NAMESPACE/LABELSELECTOR; the backend is a kubectl target (targets.ts) resolved here to the pod
 * IP and node the agents know it by. Runs on the VPN client machine: the probes leave this machine
 * through its tunnel. The collector deletes the attached pod through the API (its own RBAC) and
 * follows the replacement; once finished, the repro's bundle goes into `./hoptrace-<id>/`.
 * Exit codes as `hoptrace repro`: 0 the repro ran (its timeline is the finding), 1 an error, 2 a bad
 * command line.
 */
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { HoptraceError } from '../../common/errors';
import { EXIT } from '../exit-codes';
import {
  parseProbePlan,
  PROBE_FLAGS,
  PROBE_OPTIONS,
  requireFlags,
  runClusterRepro,
} from '../repro';
import type { Cluster } from './cluster';
import { linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';
import { downloadBundle, downloadedLines } from './bundle-download';
import { parseKubeRef, parseKubeTarget, resolvePodIp, workloadSelector } from './targets';

export const USAGE =
  'kubectl hoptrace repro --vpn-workload WORKLOAD --decap-iface IFACE --egress-iface IFACE ' +
  '--backend TARGET:IFACE --client IP --url http://BACKEND/PATH [--delete-after N] ' +
  `[--interval 1s] [--count 20] [--max-time 2s] [--out DIR] [--no-download] ${KUBE_USAGE}`;

const WHERE = 'kubectl hoptrace repro';
const WORKLOAD_HINT =
  '[NAMESPACE/]sts/NAME (also deploy/, ds/), or NAMESPACE/LABELSELECTOR such as vpn/app=wireguard';

/** The VPN workload: its namespace and pod selector. */
export interface VpnWorkload {
  namespace: string;
  /** A workload to read the selector of, or the selector as given. */
  ref: { kind: 'deployment' | 'statefulset' | 'daemonset'; name: string } | { selector: string };
}

/** Parses --vpn-workload (no API call): a workload reference, or NAMESPACE/LABELSELECTOR. */
export function parseVpnWorkload(value: string, defaultNamespace: string): VpnWorkload {
  const bad = (detail: string): HoptraceError =>
    new HoptraceError('CLI_USAGE', `'${value}': ${detail}`, {
      where: '--vpn-workload',
      hint: WORKLOAD_HINT,
    });
  if (value.includes('=')) {
    const m = /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/(.+)$/.exec(value);
    if (m === null) throw bad('a label selector needs its namespace in front: NAMESPACE/k=v');
    return { namespace: m[1] ?? '', ref: { selector: m[3] ?? '' } };
  }
  let r;
  try {
    r = parseKubeRef('--vpn-workload', value, defaultNamespace);
  } catch (e) {
    if (e instanceof HoptraceError) throw bad(e.message.replace(/^'[^']*': /, ''));
    throw e;
  }
  if (r.kind === 'ip' || r.kind === 'pod')
    throw bad(
      'is not a workload: the repro deletes a pod and follows the one its controller makes; give the StatefulSet, Deployment or DaemonSet',
    );
  return { namespace: r.namespace, ref: { kind: r.kind, name: r.name } };
}

/** The backend as the repro core takes it: its pod IP (of the client's family) and node. */
async function backendOf(
  cluster: Cluster,
  value: string,
  defaultNamespace: string,
  family: 4 | 6,
  note: (l: string) => void,
): Promise<{ target: string; iface: string; node?: string }> {
  const t = parseKubeTarget('--backend', value, defaultNamespace);
  const r = await resolvePodIp(cluster, t, family);
  if (r.note !== undefined) note(r.note);
  return { target: r.ip, iface: t.iface, ...(r.node === undefined ? {} : { node: r.node }) };
}

export async function runKubeRepro(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, positionals, kube, namespace, hoptraceNamespace } = parseKubectlArgs(
    'repro',
    USAGE,
    argv,
    {
      ...PROBE_OPTIONS,
      out: { type: 'string' },
      'no-download': { type: 'boolean' },
    },
  );
  if (positionals.length > 0)
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: WHERE,
      hint: `usage: ${USAGE}`,
    });
  const flags = values as Record<string, string | boolean | undefined>;
  requireFlags(flags, ['vpn-workload', 'backend', ...PROBE_FLAGS], WHERE, USAGE);
  // Everything checked before the cluster is asked: a bad flag reaches no API server.
  const plan = parseProbePlan(flags);
  const nsGiven = namespace ?? 'default';
  parseVpnWorkload(values['vpn-workload'] ?? '', nsGiven);
  parseKubeTarget('--backend', values.backend ?? '', nsGiven);

  const cluster = await deps.connect(kube);
  const ns = namespace ?? cluster.defaultNamespace;
  const wl = parseVpnWorkload(values['vpn-workload'] ?? '', ns);
  const labelSelector =
    'selector' in wl.ref
      ? wl.ref.selector
      : await workloadSelector(cluster, { ...wl.ref, namespace: wl.namespace });
  const family = isIP(plan.client) === 6 ? 6 : 4;
  const backend = await backendOf(cluster, values.backend ?? '', ns, family, deps.err);
  const link = await linkCollector(cluster, hoptraceNamespace);
  const view = await runClusterRepro(
    {
      collector: link.base,
      token: link.token,
      fetch: link.fetch,
      limits: link.limits,
      workload: { namespace: wl.namespace, labelSelector },
      backend,
      ...plan,
    },
    (l) => {
      deps.out(l.split(link.base).join(link.label));
    },
  );
  if (values['no-download'] !== true) {
    const dir = resolve(deps.cwd, values.out ?? `hoptrace-${view.id}`);
    // The collector answers `finish` once the repro's bundle is written: nothing to wait for.
    const d = await downloadBundle(link.client, view.id, dir, { evidenceWaitMs: 0 });
    for (const l of downloadedLines(d)) deps.out(l);
  }
  // As hoptrace repro: the timeline is the finding, whatever it shows.
  return EXIT.ok;
}

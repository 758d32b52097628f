/**
 * Capture targets as kubectl users write them, turned into what the collector takes:
 *
 *   vpn/wg-0:wg0          pod wg-0 of namespace vpn (passed on: the collector reads the pod)
 *   wg-0:wg0              pod wg-0 of -n's namespace (else the context's)
 *   deploy/web:eth0       a pod of Deployment web in -n's namespace (also sts/, ds/, pod/ and
 *   web/deploy/web:eth0   their long names), or with its namespace in front
 *   10.244.2.5:eth0       a pod IP, passed on as it is ([fd00::5]:eth0 for IPv6)
 *
 * A two-part `deploy/web` is the workload, not a namespace `deploy`: write `deploy/pod/web` for that.
 * A workload is resolved here to one running pod with an IP (Ready ones first, then by name), and
 * the choice is said.
 */
import { isIP } from 'node:net';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import type { Cluster, WorkloadKind } from './cluster';

export type KubeTarget =
  | { kind: 'ip'; ip: string; iface: string }
  | { kind: 'pod'; namespace: string; name: string; iface: string }
  | { kind: WorkloadKind; namespace: string; name: string; iface: string };

const KINDS: Record<string, WorkloadKind | 'pod'> = {
  pod: 'pod',
  po: 'pod',
  pods: 'pod',
  deploy: 'deployment',
  deployment: 'deployment',
  deployments: 'deployment',
  sts: 'statefulset',
  statefulset: 'statefulset',
  statefulsets: 'statefulset',
  ds: 'daemonset',
  daemonset: 'daemonset',
  daemonsets: 'daemonset',
};

// RFC 1123 labels and subdomains, as Kubernetes names namespaces and pods.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** A target without its interface (doctor's `--vpn`, `--backend`). */
export type KubeRef = DistributiveOmit<KubeTarget, 'iface'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const HINT =
  'NAMESPACE/POD:IFACE, POD:IFACE (in -n), [NAMESPACE/]deploy/NAME:IFACE (also sts/, ds/), or POD-IP:IFACE';

/** Parses `TARGET:IFACE` (see the file comment); CLI_BAD_POINT saying what is wrong. */
export function parseKubeTarget(flag: string, value: string, defaultNamespace: string): KubeTarget {
  const colon = value.lastIndexOf(':');
  const fail = badTarget(flag, value, HINT);
  if (colon < 0) throw fail('no :IFACE');
  const iface = value.slice(colon + 1);
  if (!/^[A-Za-z0-9_.@-]{1,15}$/.test(iface)) throw fail(`'${iface}' is not an interface name`);
  return { ...parseRef(value.slice(0, colon), defaultNamespace, fail), iface };
}

/** Parses a target without `:IFACE`: NAMESPACE/POD, POD, a workload or a pod IP (bare IPv6 too). */
export function parseKubeRef(flag: string, value: string, defaultNamespace: string): KubeRef {
  const fail = badTarget(
    flag,
    value,
    'NAMESPACE/POD, POD (in -n), [NAMESPACE/]deploy/NAME (also sts/, ds/), or a pod IP',
  );
  return isIP(value) === 6 ? { kind: 'ip', ip: value } : parseRef(value, defaultNamespace, fail);
}

function badTarget(flag: string, value: string, hint: string): (detail: string) => HoptraceError {
  return (detail) =>
    new HoptraceError('CLI_BAD_POINT', `'${value}': ${detail}`, { where: flag, hint });
}

function parseRef(
  target: string,
  defaultNamespace: string,
  fail: (detail: string) => HoptraceError,
): KubeRef {
  const v6 = /^\[([^\]]+)\]$/.exec(target);
  if (v6 !== null) {
    if (isIP(v6[1] ?? '') !== 6) throw fail(`'${v6[1] ?? ''}' in brackets is not an IPv6 address`);
    return { kind: 'ip', ip: v6[1] ?? '' };
  }
  if (isIP(target) === 4) return { kind: 'ip', ip: target };
  if (target.includes(':')) throw fail('write an IPv6 target in brackets: [fd00::5]:eth0');
  const parts = target.split('/');
  let namespace = defaultNamespace;
  let kind: WorkloadKind | 'pod' = 'pod';
  let name: string;
  if (parts.length === 1) {
    name = parts[0] ?? '';
  } else if (parts.length === 2) {
    const k = KINDS[parts[0] ?? ''];
    if (k !== undefined) kind = k;
    else namespace = parts[0] ?? '';
    name = parts[1] ?? '';
  } else if (parts.length === 3) {
    namespace = parts[0] ?? '';
    const k = KINDS[parts[1] ?? ''];
    if (k === undefined) throw fail(`'${parts[1] ?? ''}' is not pod, deploy, sts or ds`);
    kind = k;
    name = parts[2] ?? '';
  } else {
    throw fail('too many slashes');
  }
  if (!DNS_LABEL.test(namespace)) throw fail(`'${namespace}' is not a namespace name`);
  if (!DNS_NAME.test(name)) throw fail(`'${name}' is not a Kubernetes name`);
  return kind === 'pod' ? { kind: 'pod', namespace, name } : { kind, namespace, name };
}

const SHORT: Record<WorkloadKind, string> = {
  deployment: 'deploy',
  statefulset: 'sts',
  daemonset: 'ds',
};

/** A workload's pod selector (`k=v,…`); K8S_POD_NOT_FOUND when there is no such workload. */
export async function workloadSelector(
  cluster: Cluster,
  t: { kind: WorkloadKind; namespace: string; name: string },
): Promise<string> {
  const selector = await cluster.readWorkloadSelector(t.kind, t.namespace, t.name);
  if (selector === null) {
    throw new HoptraceError('K8S_POD_NOT_FOUND', `no ${t.kind} ${t.namespace}/${t.name}`, {
      where: `${t.namespace}/${SHORT[t.kind]}/${t.name}`,
      hint: `kubectl -n ${t.namespace} get ${t.kind}s`,
    });
  }
  return selector;
}

/** What the collector is given: `namespace/pod` or the IP. `note` says which pod a workload gave. */
export async function resolveKubeTarget(
  cluster: Cluster,
  t: KubeRef,
): Promise<{ target: string; note?: string }> {
  if (t.kind === 'ip') return { target: t.ip.includes(':') ? `[${t.ip}]` : t.ip };
  if (t.kind === 'pod') return { target: `${t.namespace}/${t.name}` };
  const what = `${t.namespace}/${SHORT[t.kind]}/${t.name}`;
  const selector = await workloadSelector(cluster, t);
  const ready = (p: K8s.V1Pod): boolean =>
    (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
  const pods = (await cluster.listPods(t.namespace, selector))
    .filter(
      (p) =>
        p.status?.phase === 'Running' &&
        p.status.podIP !== undefined &&
        p.metadata?.deletionTimestamp === undefined &&
        (p.metadata?.name ?? '') !== '',
    )
    .sort(
      (a, b) =>
        Number(ready(b)) - Number(ready(a)) ||
        (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''),
    )
    .map((p) => p.metadata?.name ?? '');
  const [first] = pods;
  if (first === undefined) {
    throw new HoptraceError('K8S_POD_NO_IP', `${what} has no running pod (selector ${selector})`, {
      where: what,
      hint: `kubectl -n ${t.namespace} get pods -l ${selector}`,
    });
  }
  return {
    target: `${t.namespace}/${first}`,
    ...(pods.length > 1
      ? {
          note: `${what}: ${pods.length} running pods, using ${first} (name a pod to choose)`,
        }
      : {}),
  };
}

/**
 * The pod IP a target stands for (the agents find a pod's namespace by its address): of `family`
 * when the pod has one, else its primary IP; `node` the pod's node when the API names one (not for
 * a target given as an IP). `note` as resolveKubeTarget's.
 */
export async function resolvePodIp(
  cluster: Cluster,
  t: KubeRef,
  family: 4 | 6,
): Promise<{ ip: string; node?: string; note?: string }> {
  if (t.kind === 'ip') return { ip: t.ip };
  const r = await resolveKubeTarget(cluster, t);
  const [ns = '', name = ''] = r.target.split('/');
  const p = await cluster.readPod(ns, name);
  if (p === null)
    throw new HoptraceError('K8S_POD_NOT_FOUND', `no pod ${r.target}`, {
      where: r.target,
      hint: `kubectl -n ${ns} get pods`,
    });
  const ips = [...(p.status?.podIPs ?? []).map((x) => x.ip), p.status?.podIP ?? ''].filter(
    (ip) => isIP(ip) !== 0,
  );
  const ip = ips.find((x) => isIP(x) === family) ?? ips[0];
  if (ip === undefined)
    throw new HoptraceError(
      'K8S_POD_NO_IP',
      `pod ${r.target} has no IP (${p.status?.phase ?? 'unknown'})`,
      {
        where: r.target,
        hint: `kubectl -n ${ns} describe pod ${name}`,
      },
    );
  const node = p.spec?.nodeName;
  return {
    ip,
    ...(node === undefined ? {} : { node }),
    ...(r.note === undefined ? {} : { note: r.note }),
  };
}

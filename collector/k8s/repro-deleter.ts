/**
 * `hoptrace repro` on a cluster: the VPN workload is the pods of one namespace that match a label
 * selector, listed through the API; deleting the attached one is a DELETE through the API (RBAC:
 * deploy/optional/repro-rbac.yaml grants it per namespace). The replacement is not awaited here:
 * the repro manager lists the workload every second and re-attaches decap/egress to the new pod
 * (same controller, different uid, Running with an IP) once its node's agent reports the namespace
 * that holds the pod IP (core/repro/repro-core.ts matchK8sWorkload, findReplacement).
 */
import { HoptraceError } from '../../common/errors';
import type {
  PodDeleter,
  WorkloadInstance,
  WorkloadLister,
  WorkloadPod,
} from '../../core/repro/repro-core';
import type { KubeApi } from './client';
import type { PodObject } from './facts';

/** A pod object → the facts a repro needs (null when it has no name, namespace or uid). */
export function workloadPod(p: PodObject): WorkloadPod | null {
  const m = p.metadata;
  if (m?.name === undefined || m.namespace === undefined || m.uid === undefined) return null;
  const ctl = m.ownerReferences?.find((r) => r.controller === true);
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid,
    node: p.spec?.nodeName ?? null,
    ip: p.status?.podIP ?? null,
    phase: p.status?.phase ?? 'Unknown',
    terminating: m.deletionTimestamp !== undefined,
    owner:
      ctl === undefined
        ? null
        : `${ctl.kind ?? '?'}/${ctl.name ?? '?'}/${ctl.uid ?? ctl.name ?? '?'}`,
  };
}

export class K8sPodDeleter implements PodDeleter, WorkloadLister {
  constructor(
    private readonly api: KubeApi,
    private readonly nowMs: () => number = Date.now,
  ) {}

  async listWorkload(namespace: string, labelSelector: string): Promise<WorkloadPod[]> {
    const pods = await this.api.listPodsBySelector(namespace, labelSelector);
    return pods.flatMap((p) => {
      const w = workloadPod(p);
      return w === null ? [] : [w];
    });
  }

  /** Deletes the attached pod through the API (the pod of a `kubernetes` workload only). */
  async deletePod(pod: WorkloadInstance): Promise<{ deletedAtMs: number; detail: string }> {
    const k = pod.k8s;
    if (k === undefined) {
      throw new HoptraceError(
        'REPRO_NOT_SUPPORTED',
        `${pod.name} was selected by namespace name, not through the Kubernetes API: the collector cannot delete it`,
        {
          where: 'POST /v1/repros/:id/delete',
          hint: 'select the workload with {kubernetes: {namespace, labelSelector}}',
        },
      );
    }
    const deletedAtMs = this.nowMs();
    await this.api.deletePod(k.namespace, k.name);
    return {
      deletedAtMs,
      detail: `pod ${k.namespace}/${k.name} (${pod.ip}, uid ${k.uid}) deleted through the API on ${pod.node}`,
    };
  }
}

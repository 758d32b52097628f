/**
 * What `kubectl hoptrace` asks of the API server, with the user's kubeconfig: pods, nodes,
 * Secrets, port-forwards. The one place in cli/ that touches @kubernetes/client-node. Failures are
 * K8S_FORBIDDEN (401/403, naming what was refused), K8S_API_UNREACHABLE (no answer, 5xx) or, for
 * what was asked by name, null on 404.
 */
import type { Duplex } from 'node:stream';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import { loadClientLibrary } from '../../collector';
import { loadKubeConfig, type KubeFlags } from './kube-config';
import type { Manifest } from './manifests';
import { openPortForward } from './port-forward';

export interface Cluster {
  /** The API server's URL and the context, for messages. */
  readonly server: string;
  readonly context: string;
  /** The context's namespace (targets without one are in it). */
  readonly defaultNamespace: string;
  listPods(namespace: string, labelSelector: string): Promise<K8s.V1Pod[]>;
  readPod(namespace: string, name: string): Promise<K8s.V1Pod | null>;
  listNodes(): Promise<K8s.V1Node[]>;
  /** A Secret's data, decoded; null when there is no such Secret. */
  readSecret(namespace: string, name: string): Promise<Map<string, Buffer> | null>;
  /** A workload's pod selector (`deploy`, `sts`, `ds`), null when there is no such workload. */
  readWorkloadSelector(kind: WorkloadKind, namespace: string, name: string): Promise<string | null>;
  /** One connection to a pod's port through the API server. */
  portForward(namespace: string, pod: string, port: number): Duplex;
  /** Server-side apply (`kubectl apply --server-side`): creates or updates the object. */
  apply(o: Manifest): Promise<void>;
  /** Deletes the object; false when it was not there. */
  remove(o: Manifest): Promise<boolean>;
}

export type WorkloadKind = 'deployment' | 'statefulset' | 'daemonset';

const TIMEOUT_MS = 15_000;
/** Who owns the fields install applies (server-side apply's field manager). */
const FIELD_MANAGER = 'kubectl-hoptrace';

export async function connectCluster(
  flags: KubeFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Cluster> {
  const k8s = await loadClientLibrary();
  const cfg = loadKubeConfig(k8s, flags, env);
  const core = cfg.kc.makeApiClient(k8s.CoreV1Api);
  const apps = cfg.kc.makeApiClient(k8s.AppsV1Api);
  const objects = k8s.KubernetesObjectApi.makeApiClient(cfg.kc);
  const named = (o: Manifest): string =>
    `${o.kind} ${o.metadata.namespace === undefined ? '' : `${o.metadata.namespace}/`}${o.metadata.name}`;
  const where = `${cfg.server} (context ${cfg.context})`;

  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`no answer within ${TIMEOUT_MS / 1000} s`));
      }, TIMEOUT_MS);
    });
    try {
      return await Promise.race([fn(), timeout]);
    } catch (e) {
      throw apiError(k8s, e, what, where);
    } finally {
      clearTimeout(timer);
    }
  };
  const orNull = async <T>(p: Promise<T>): Promise<T | null> => {
    try {
      return await p;
    } catch (e) {
      if (e instanceof HoptraceError && e.code === 'API_NOT_FOUND') return null;
      throw e;
    }
  };

  return {
    server: cfg.server,
    context: cfg.context,
    defaultNamespace: cfg.namespace,
    listPods: async (namespace, labelSelector) =>
      (
        await call(`list pods in ${namespace} (${labelSelector})`, () =>
          core.listNamespacedPod({ namespace, labelSelector }),
        )
      ).items,
    readPod: (namespace, name) =>
      orNull(
        call(`get pod ${namespace}/${name}`, () => core.readNamespacedPod({ namespace, name })),
      ),
    listNodes: async () => (await call('list nodes', () => core.listNode())).items,
    readSecret: async (namespace, name) => {
      const s = await orNull(
        call(`get secret ${namespace}/${name}`, () =>
          core.readNamespacedSecret({ namespace, name }),
        ),
      );
      if (s === null) return null;
      return new Map(
        Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')] as const),
      );
    },
    readWorkloadSelector: async (kind, namespace, name) => {
      const what = `get ${kind} ${namespace}/${name}`;
      const w = await orNull(
        call(what, (): Promise<{ spec?: { selector?: K8s.V1LabelSelector } }> =>
          kind === 'deployment'
            ? apps.readNamespacedDeployment({ namespace, name })
            : kind === 'statefulset'
              ? apps.readNamespacedStatefulSet({ namespace, name })
              : apps.readNamespacedDaemonSet({ namespace, name }),
        ),
      );
      if (w === null) return null;
      const labels = w.spec?.selector?.matchLabels ?? {};
      return Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
    },
    portForward: (namespace, pod, port) => openPortForward(k8s, cfg.kc, namespace, pod, port),
    apply: async (o) => {
      await call(`apply ${named(o)}`, () =>
        objects.patch(
          o as K8s.KubernetesObject,
          undefined,
          undefined,
          FIELD_MANAGER,
          true,
          k8s.PatchStrategy.ServerSideApply,
        ),
      );
    },
    remove: async (o) =>
      (await orNull(
        call(`delete ${named(o)}`, () => objects.delete(o as K8s.KubernetesObject)),
      )) !== null,
  };
}

/** 401/403 → K8S_FORBIDDEN naming what; 404 → API_NOT_FOUND (turned into null above); else unreachable. */
function apiError(k8s: typeof K8s, e: unknown, what: string, where: string): HoptraceError {
  if (e instanceof k8s.ApiException) {
    const code = (e as K8s.ApiException<unknown>).code;
    if (code === 401 || code === 403) {
      return new HoptraceError('K8S_FORBIDDEN', `${what}: HTTP ${code}`, {
        where,
        hint: `your kubeconfig user may not ${what.split(' ').slice(0, 2).join(' ')} (kubectl auth can-i); kubectl hoptrace needs get/list on pods, nodes and the hoptrace Secrets, and create on pods/portforward in the hoptrace namespace`,
      });
    }
    if (code === 404) return new HoptraceError('API_NOT_FOUND', `${what}: HTTP 404`, { where });
    return new HoptraceError('K8S_API_UNREACHABLE', `${what}: HTTP ${code}`, {
      where,
      hint: 'the API server answered with an error; check its health (kubectl get --raw /readyz)',
    });
  }
  const text = e instanceof Error ? e.message : String(e);
  return new HoptraceError('K8S_API_UNREACHABLE', `${what}: ${text}`, {
    where,
    hint: 'check the cluster is up and reachable from here (kubectl cluster-info)',
  });
}

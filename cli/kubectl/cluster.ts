/**
 * What `kubectl hoptrace` asks of the API server, with the user's kubeconfig: pods, nodes,
 * Secrets, port-forwards. The one place in cli/ that touches @kubernetes/client-node. Failures are
 * K8S_FORBIDDEN (401/403, naming what was refused), K8S_API_UNREACHABLE (no answer, 5xx),
 * K8S_BAD_RESPONSE (a reply past API_MAX_REPLY_BYTES: collector/k8s/api-http.ts, the transport
 * the collector's client uses too) or, for what was asked by name, null on 404; a credential that
 * cannot be had (an exec plugin that is missing, fails, prints no ExecCredential or does not
 * finish) is K8S_CONFIG.
 *
 * Nothing outlives its deadline: each request carries an AbortSignal (set on the library's request
 * where the credentials are applied, from an AsyncLocalStorage, so every API class gets it) that
 * destroys its socket at `--request-timeout`; an exec credential plugin still running then is
 * killed with what it started (exec-plugins.ts); `close()` ends whatever is still open when the
 * command is done.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Duplex } from 'node:stream';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import { API_MAX_REPLY_BYTES, apiConfiguration, loadClientLibrary } from '../../collector';
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  loadKubeConfig,
  type KubeFlags,
  type LoadedConfig,
} from './kube-config';
import type { Manifest } from './manifests';
import { byDeadline } from './deadline';
import { MAX_PLUGIN_OUTPUT, watchExecPlugins, type ExecPlugins } from './exec-plugins';
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
  /** The longest one request may take (`--request-timeout`); the collector's requests use it too. */
  readonly requestTimeoutMs: number;
  /** Ends what is still open: aborts API requests, destroys port-forwards, kills exec plugins. */
  close(): void;
}

export type WorkloadKind = 'deployment' | 'statefulset' | 'daemonset';

/** What K8S_BAD_RESPONSE tells the plugin's user to check. */
const BAD_REPLY_HINT =
  "no reply of a real API server to what kubectl hoptrace asks comes near this: check the kubeconfig's server (and proxy-url) lead to the Kubernetes API server (kubectl get --raw /readyz); for a workload of tens of thousands of pods, name one of its pods instead";

/** Who owns the fields install applies (server-side apply's field manager). */
const FIELD_MANAGER = 'kubectl-hoptrace';

/** What connectCluster bounds beyond the flags (tests give a smaller cap). */
export interface ApiLimits {
  /** The longest API server reply read (API_MAX_REPLY_BYTES). */
  maxReplyBytes: number;
}

export async function connectCluster(
  flags: KubeFlags,
  env: NodeJS.ProcessEnv = process.env,
  limits: ApiLimits = { maxReplyBytes: API_MAX_REPLY_BYTES },
): Promise<Cluster> {
  const k8s = await loadClientLibrary();
  const cfg = loadKubeConfig(k8s, flags, env);
  const timeoutMs = flags.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const plugins = watchExecPlugins(cfg.kc, timeoutMs);
  const inflight = new Set<AbortController>();
  const forwards = new Set<Duplex>();
  // The request's signal, set on the library's RequestContext where it applies the credentials:
  // every API class (core, apps, the object API) passes there, inside the call's async context.
  const signals = new AsyncLocalStorage<AbortSignal>();
  const applyAuth = cfg.kc.applySecurityAuthentication.bind(cfg.kc);
  cfg.kc.applySecurityAuthentication = async (context) => {
    await applyAuth(context);
    const signal = signals.getStore();
    if (signal !== undefined) context.setSignal(signal);
  };
  await checkCredentials(cfg, plugins, timeoutMs);
  const config = apiConfiguration(k8s, cfg.kc, cfg.server, {
    timeoutMs,
    maxReplyBytes: limits.maxReplyBytes,
    hint: BAD_REPLY_HINT,
  });
  const core = new k8s.CoreV1Api(config);
  const apps = new k8s.AppsV1Api(config);
  // KubernetesObjectApi.makeApiClient's work: the context's namespace for objects without one.
  const objects = new (class extends k8s.KubernetesObjectApi {
    constructor() {
      super(config);
      this.setDefaultNamespace(cfg.kc);
    }
  })();
  const named = (o: Manifest): string =>
    `${o.kind} ${o.metadata.namespace === undefined ? '' : `${o.metadata.namespace}/`}${o.metadata.name}`;
  const where = `${cfg.server} (context ${cfg.context})`;

  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const ac = new AbortController();
    inflight.add(ac);
    try {
      // Settles at the deadline even while the library is still inside an exec plugin.
      return await byDeadline(signals.run(ac.signal, fn), timeoutMs, () => {
        const e = new Error(`no answer within ${seconds(timeoutMs)}`);
        ac.abort(e);
        throw e;
      });
    } catch (e) {
      // A reply the transport refused (K8S_BAD_RESPONSE, collector/k8s/api-http.ts) says what was asked, where, what to do.
      if (e instanceof HoptraceError && !ac.signal.aborted)
        throw new HoptraceError(e.code, `${what}: ${e.detail}`, {
          where,
          ...(e.hint === undefined ? {} : { hint: e.hint }),
        });
      throw apiError(k8s, ac.signal.aborted ? (ac.signal.reason as unknown) : e, what, where);
    } finally {
      inflight.delete(ac);
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
    portForward: (namespace, pod, port) => {
      const d = openPortForward(k8s, cfg.kc, namespace, pod, port, timeoutMs);
      forwards.add(d);
      d.once('close', () => forwards.delete(d));
      return d;
    },
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
    requestTimeoutMs: timeoutMs,
    close: () => {
      for (const ac of inflight) ac.abort(new Error('the command ended'));
      for (const d of forwards) d.destroy();
      plugins.killAll();
    },
  };
}

const seconds = (ms: number): string => `${ms % 1000 === 0 ? ms / 1000 : (ms / 1000).toFixed(1)} s`;

/**
 * The credentials, got once before any request (the exec plugin run, the files read): what fails
 * here is the configuration's — K8S_CONFIG naming the user's exec plugin or the source — not an
 * API server that does not answer.
 */
async function checkCredentials(
  cfg: LoadedConfig,
  plugins: ExecPlugins,
  timeoutMs: number,
): Promise<void> {
  try {
    await byDeadline(cfg.kc.applyToHTTPSOptions({}), timeoutMs, () => {
      plugins.killAll();
      throw new Error(`did not finish within ${seconds(timeoutMs)} (killed)`);
    });
  } catch (e) {
    const user = cfg.kc.getCurrentUser();
    const exec = user?.exec as { command?: unknown; args?: unknown } | null | undefined;
    const text = e instanceof Error ? e.message : String(e);
    if (user === null || exec === undefined || exec === null) {
      throw new HoptraceError('K8S_CONFIG', `cannot use the credentials (${text})`, {
        where: cfg.source,
        hint: 'check the user of the context (kubectl config view --minify)',
      });
    }
    const run = plugins.last();
    const args = Array.isArray(exec.args) ? exec.args.map(String) : [];
    const command = [String(exec.command), ...args].join(' ');
    const reason =
      run?.overflow !== undefined
        ? `printed more than ${MAX_PLUGIN_OUTPUT} bytes on ${run.overflow} (killed)`
        : run?.killed === true
          ? `did not finish within ${seconds(timeoutMs)} (killed)`
          : e instanceof SyntaxError
            ? `printed something that is not JSON, not an ExecCredential: '${(run?.stdout ?? '').trim().slice(0, 80)}'`
            : run?.code !== null && run?.code !== undefined && run.code !== 0
              ? `exited with code ${run.code}${run.stderr.trim() === '' ? '' : `: ${run.stderr.trim().slice(0, 200)}`}`
              : e instanceof TypeError
                ? `printed JSON that is not an ExecCredential (${text})`
                : text;
    throw new HoptraceError('K8S_CONFIG', `users[${user.name}].exec (${command}): ${reason}`, {
      where: cfg.source,
      hint: 'the credential plugin must print an ExecCredential (client.authentication.k8s.io) on stdout and exit 0; run it by hand to see why it does not',
    });
  }
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

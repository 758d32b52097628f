/**
 * The one place that touches @kubernetes/client-node: list nodes and pods, read one pod. Every
 * failure becomes a HoptraceError (K8S_CONFIG, K8S_FORBIDDEN, K8S_API_UNREACHABLE,
 * K8S_POD_NOT_FOUND, K8S_BAD_RESPONSE) that says what to do. Requests go through api-http.ts, as
 * the kubectl plugin's do: each under the deadline and the reply cap (API_MAX_REPLY_BYTES), so an
 * API server (or a proxy in front of it) that streams an endless reply is K8S_BAD_RESPONSE, its
 * socket closed, not a collector that grows until it is killed.
 *
 * @kubernetes/client-node 1.x is an ES module only, and this project compiles to CommonJS, where
 * TypeScript rewrites `import()` into `require()` (which loads an ES module only from Node 20.19
 * on). The library is therefore loaded with a real dynamic import, and only when the collector runs
 * with --kubernetes/--kubeconfig. 2.x needs Node 22 (undici 8), hence the 1.x pin.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import { API_MAX_REPLY_BYTES, apiConfiguration } from './api-http';
import type { NodeObject, PodObject } from './facts';

/** Where the client configuration comes from. */
export type KubeSource = { kind: 'in-cluster' } | { kind: 'kubeconfig'; file: string };

/** What the collector asks of the API server. */
export interface KubeApi {
  /** Where the API server is (for messages). */
  readonly server: string;
  listNodes(): Promise<NodeObject[]>;
  listPods(): Promise<PodObject[]>;
  /** One pod, fresh from the API; K8S_POD_NOT_FOUND on 404. */
  readPod(namespace: string, name: string): Promise<PodObject>;
  /** The pods of one namespace that match a label selector (`app=wg,tier!=x`), paged. */
  listPodsBySelector(namespace: string, labelSelector: string): Promise<PodObject[]>;
  /**
   * Deletes one pod (graceful, the pod's own grace period). K8S_FORBIDDEN on 401/403 with the
   * hint to grant `delete` in that namespace (deploy/optional/repro-rbac.yaml); K8S_POD_NOT_FOUND on 404.
   */
  deletePod(namespace: string, name: string): Promise<void>;
  /**
   * Asks the API server who a bearer token belongs to (TokenReview, authentication.k8s.io/v1),
   * for these audiences. K8S_FORBIDDEN when the collector may not create TokenReviews.
   */
  reviewToken(token: string, audiences: string[]): Promise<TokenReviewStatus>;
}

/** What a TokenReview answers (the fields that are read). */
export interface TokenReviewStatus {
  authenticated?: boolean;
  audiences?: string[];
  error?: string;
  user?: { username?: string; uid?: string; extra?: Record<string, string[]> };
}

// A Function body keeps `import()` as written (tsc's CommonJS output would turn it into require()).
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const dynamicImport = new Function('url', 'return import(url)') as (
  url: string,
) => Promise<unknown>;

let loaded: Promise<typeof K8s> | undefined;

/** Loads @kubernetes/client-node once (absolute URL: a Function has no module to resolve from). */
export function loadClientLibrary(): Promise<typeof K8s> {
  loaded ??= (async () => {
    const path = createRequire(__filename).resolve('@kubernetes/client-node');
    return (await dynamicImport(pathToFileURL(path).href)) as typeof K8s;
  })();
  return loaded;
}

const PAGE = 500;

const BAD_REPLY_HINT =
  'no reply of a real API server to what the collector asks (pages of 500 objects, one pod) comes near this: check that the in-cluster API address or --kubeconfig (its server and proxy-url) lead to the Kubernetes API server';

/** How long a request may take (default 10 s) and how long its reply may be (tests: smaller). */
export interface KubeApiOptions {
  timeoutMs?: number;
  /** The longest reply read (API_MAX_REPLY_BYTES). */
  maxReplyBytes?: number;
}

/** Creates the API client; K8S_CONFIG when the configuration cannot be loaded. */
export async function createKubeApi(
  source: KubeSource,
  opts: KubeApiOptions = {},
): Promise<KubeApi> {
  const k8s = await loadClientLibrary();
  const kc = new k8s.KubeConfig();
  const where = source.kind === 'in-cluster' ? '--kubernetes' : `--kubeconfig ${source.file}`;
  try {
    if (source.kind === 'in-cluster') {
      // loadFromCluster does not check; without these the collector is not in a pod.
      if (process.env['KUBERNETES_SERVICE_HOST'] === undefined)
        throw new Error('KUBERNETES_SERVICE_HOST is not set: not running in a pod');
      kc.loadFromCluster();
    } else {
      kc.loadFromFile(source.file);
    }
  } catch (e) {
    throw new HoptraceError('K8S_CONFIG', errText(e), {
      where,
      hint:
        source.kind === 'in-cluster'
          ? 'in a pod, the service account token is mounted at /var/run/secrets/kubernetes.io/serviceaccount; outside a cluster use --kubeconfig FILE'
          : 'give a readable kubeconfig (kubectl config view --minify --raw > FILE)',
    });
  }
  const cluster = kc.getCurrentCluster();
  if (cluster === null) {
    throw new HoptraceError('K8S_CONFIG', 'the configuration names no current cluster', {
      where,
      hint: 'set current-context in the kubeconfig',
    });
  }
  const server = cluster.server;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const config = apiConfiguration(k8s, kc, server, {
    timeoutMs,
    maxReplyBytes: opts.maxReplyBytes ?? API_MAX_REPLY_BYTES,
    hint: BAD_REPLY_HINT,
  });
  const core = new k8s.CoreV1Api(config);
  const authn = new k8s.AuthenticationV1Api(config);

  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([fn(), timeout]);
    } catch (e) {
      throw apiError(k8s, e, what, server);
    } finally {
      clearTimeout(timer);
    }
  };

  // Lists are paged (limit/continue) so a large cluster is not one huge response.
  const listAll = async <T>(
    what: string,
    page: (cont: string | undefined) => Promise<{ items: T[]; metadata?: { _continue?: string } }>,
  ): Promise<T[]> => {
    const out: T[] = [];
    let cont: string | undefined;
    do {
      const res = await call(what, () => page(cont));
      out.push(...res.items);
      cont = res.metadata?._continue;
    } while (cont !== undefined && cont !== '');
    return out;
  };

  return {
    server,
    listNodes: () =>
      listAll<NodeObject>('list nodes', (cont) =>
        core.listNode(cont === undefined ? { limit: PAGE } : { limit: PAGE, _continue: cont }),
      ),
    listPods: () =>
      listAll<PodObject>('list pods', (cont) =>
        core.listPodForAllNamespaces(
          cont === undefined ? { limit: PAGE } : { limit: PAGE, _continue: cont },
        ),
      ),
    readPod: async (namespace, name) => {
      try {
        return await call(`read pod ${namespace}/${name}`, () =>
          core.readNamespacedPod({ namespace, name }),
        );
      } catch (e) {
        if (e instanceof HoptraceError && e.code === 'K8S_POD_NOT_FOUND') {
          throw new HoptraceError('K8S_POD_NOT_FOUND', `no pod ${namespace}/${name}`, {
            where: server,
            hint: `check the name with \`kubectl -n ${namespace} get pods\``,
          });
        }
        throw e;
      }
    },
    listPodsBySelector: (namespace, labelSelector) =>
      listAll<PodObject>(`list pods in ${namespace} (${labelSelector})`, (cont) =>
        core.listNamespacedPod(
          cont === undefined
            ? { namespace, labelSelector, limit: PAGE }
            : { namespace, labelSelector, limit: PAGE, _continue: cont },
        ),
      ),
    deletePod: async (namespace, name) => {
      try {
        await call(`delete pod ${namespace}/${name}`, () =>
          core.deleteNamespacedPod({ namespace, name }),
        );
      } catch (e) {
        if (e instanceof HoptraceError && e.code === 'K8S_FORBIDDEN') {
          throw new HoptraceError(
            'K8S_FORBIDDEN',
            `${e.message}: the collector may not delete pods in ${namespace}`,
            {
              where: server,
              hint: `grant it in that namespace only: kubectl -n ${namespace} apply -f deploy/optional/repro-rbac.yaml`,
            },
          );
        }
        if (e instanceof HoptraceError && e.code === 'K8S_POD_NOT_FOUND') {
          throw new HoptraceError('K8S_POD_NOT_FOUND', `no pod ${namespace}/${name} to delete`, {
            where: server,
            hint: `it may already be gone: kubectl -n ${namespace} get pods`,
          });
        }
        throw e;
      }
    },
    reviewToken: async (token, audiences) => {
      const body = new k8s.V1TokenReview();
      body.apiVersion = 'authentication.k8s.io/v1';
      body.kind = 'TokenReview';
      body.spec = new k8s.V1TokenReviewSpec();
      body.spec.token = token;
      body.spec.audiences = audiences;
      const review = await call('create a TokenReview', () => authn.createTokenReview({ body }));
      const st = review.status;
      return {
        ...(st?.authenticated !== undefined ? { authenticated: st.authenticated } : {}),
        ...(st?.audiences !== undefined ? { audiences: st.audiences } : {}),
        ...(st?.error !== undefined ? { error: st.error } : {}),
        ...(st?.user !== undefined
          ? {
              user: {
                ...(st.user.username !== undefined ? { username: st.user.username } : {}),
                ...(st.user.uid !== undefined ? { uid: st.user.uid } : {}),
                ...(st.user.extra !== undefined ? { extra: st.user.extra } : {}),
              },
            }
          : {}),
      };
    },
  };
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Maps a client failure to a code: 401/403 → K8S_FORBIDDEN, 404 → K8S_POD_NOT_FOUND, a reply the
 * transport refused keeps its own (K8S_BAD_RESPONSE) with what was asked, else unreachable.
 */
function apiError(k8s: typeof K8s, e: unknown, what: string, server: string): HoptraceError {
  if (e instanceof HoptraceError)
    return new HoptraceError(e.code, `${what}: ${e.detail}`, {
      where: server,
      ...(e.hint === undefined ? {} : { hint: e.hint }),
    });
  if (e instanceof k8s.ApiException) {
    const code = (e as K8s.ApiException<unknown>).code;
    if (code === 401 || code === 403) {
      return new HoptraceError('K8S_FORBIDDEN', `${what}: HTTP ${code}`, {
        where: server,
        hint: 'apply deploy/base/rbac.yaml (the collector needs get/list/watch on pods and nodes), or check the kubeconfig credentials',
      });
    }
    if (code === 404)
      return new HoptraceError('K8S_POD_NOT_FOUND', `${what}: HTTP 404`, { where: server });
    return new HoptraceError('K8S_API_UNREACHABLE', `${what}: HTTP ${code}`, {
      where: server,
      hint: 'the API server answered with an error; check its health (kubectl get --raw /readyz)',
    });
  }
  return new HoptraceError('K8S_API_UNREACHABLE', `${what}: ${errText(e)}`, {
    where: server,
    hint: 'check the API server address and the network path to it (kubectl cluster-info)',
  });
}

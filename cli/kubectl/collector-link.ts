/**
 * The collector as `kubectl hoptrace` reaches it: its ready pod in the hoptrace namespace, the API
 * token read from the Secret `hoptrace-token`, the CA from `hoptrace-tls` when the collector
 * serves TLS (its args carry --tls-cert), every request over a port-forward to the pod through
 * the API server. No Service is exposed and no token is copied by hand.
 */
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import {
  CollectorClient,
  DEFAULT_COLLECTOR_LIMITS,
  type CollectorLimits,
} from '../collector-client';
import type { Cluster } from './cluster';
import type { Connector } from '../../common/stream-request';
import { streamFetch, withTls } from './stream-fetch';

export const COLLECTOR_SELECTOR =
  'app.kubernetes.io/name=hoptrace,app.kubernetes.io/component=collector';
export const AGENT_SELECTOR = 'app.kubernetes.io/name=hoptrace,app.kubernetes.io/component=agent';
export const TOKEN_SECRET = 'hoptrace-token';
export const TLS_SECRET = 'hoptrace-tls';
const SERVICE = 'hoptrace-collector';
const DEFAULT_PORT = 7070;

export interface CollectorLink {
  namespace: string;
  pod: K8s.V1Pod;
  podName: string;
  /** The URL requests are written against (the Service's name, which the certificate carries). */
  base: string;
  /** Where it is, for people: `pod hoptrace/NAME via port-forward`. */
  label: string;
  fetch: typeof fetch;
  /** Each request's deadline (the cluster's request timeout) and reply cap. */
  limits: CollectorLimits;
  client: CollectorClient;
  /** The API token from the Secret (for `hoptrace capture`, which reads it from HOPTRACE_TOKEN). */
  token: string;
  /** GET /healthz. */
  health: { collectorId?: string; agentsConnected?: number; reprosPinned?: number };
}

/** Ready: running, not being deleted, condition Ready true. */
export function isReady(p: K8s.V1Pod): boolean {
  return (
    p.status?.phase === 'Running' &&
    p.metadata?.deletionTimestamp === undefined &&
    (p.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
  );
}

function noCollector(namespace: string, pods: K8s.V1Pod[]): HoptraceError {
  const seen = pods.map((p) => `${p.metadata?.name ?? '?'} ${p.status?.phase ?? 'unknown'}`);
  return new HoptraceError(
    'KUBECTL_NO_COLLECTOR',
    pods.length === 0
      ? `no collector pod (${COLLECTOR_SELECTOR}) in namespace ${namespace}`
      : `no ready collector pod in namespace ${namespace} (${seen.join(', ')})`,
    {
      where: `namespace ${namespace}`,
      hint:
        pods.length === 0
          ? 'install it (kubectl hoptrace install --image IMAGE), or give the namespace it runs in with --hoptrace-namespace'
          : `wait for it, or look why: kubectl -n ${namespace} describe pod -l app.kubernetes.io/component=collector`,
    },
  );
}

async function secretKey(
  cluster: Cluster,
  namespace: string,
  name: string,
  key: string,
): Promise<Buffer> {
  const data = await cluster.readSecret(namespace, name);
  const v = data?.get(key);
  if (v === undefined || v.toString('utf8').trim() === '') {
    throw new HoptraceError(
      'KUBECTL_NO_SECRET',
      data === null
        ? `no Secret ${namespace}/${name}`
        : `Secret ${namespace}/${name} has no '${key}'`,
      {
        where: `namespace ${namespace}`,
        hint: 'kubectl hoptrace install creates it; by hand: README "Kubernetes"',
      },
    );
  }
  return v;
}

function apiPort(pod: K8s.V1Pod): number {
  const ports = (pod.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
  return ports.find((p) => p.name === 'api')?.containerPort ?? DEFAULT_PORT;
}

function servesTls(pod: K8s.V1Pod): boolean {
  return (pod.spec?.containers ?? []).some((c) => (c.args ?? []).includes('--tls-cert'));
}

export async function linkCollector(cluster: Cluster, namespace: string): Promise<CollectorLink> {
  const pods = await cluster.listPods(namespace, COLLECTOR_SELECTOR);
  const pod = pods.find(isReady);
  if (pod === undefined) throw noCollector(namespace, pods);
  const podName = pod.metadata?.name ?? '';
  const port = apiPort(pod);
  const token = (await secretKey(cluster, namespace, TOKEN_SECRET, 'token'))
    .toString('utf8')
    .trim();
  const tls = servesTls(pod);
  let open: Connector = () => cluster.portForward(namespace, podName, port);
  const host = `${SERVICE}.${namespace}.svc`;
  if (tls) open = withTls(open, await secretKey(cluster, namespace, TLS_SECRET, 'ca.crt'), host);
  // Each request to the collector ends within the request timeout, its reply capped.
  const limits: CollectorLimits = {
    timeoutMs: cluster.requestTimeoutMs,
    maxReplyBytes: DEFAULT_COLLECTOR_LIMITS.maxReplyBytes,
  };
  const doFetch = streamFetch(open, limits);
  const base = `${tls ? 'https' : 'http'}://${host}:${port}`;
  const link: CollectorLink = {
    namespace,
    pod,
    podName,
    base,
    label: `pod ${namespace}/${podName} via port-forward`,
    fetch: doFetch,
    limits,
    client: new CollectorClient(base, token, doFetch, limits),
    token,
    health: {},
  };
  // One request first, so a refused forward or a certificate says so with its own code.
  let res: Response;
  let text: string;
  try {
    res = await doFetch(`${base}/healthz`);
    text = await res.text();
  } catch (e) {
    const cause = e instanceof TypeError ? e.cause : e;
    if (cause instanceof HoptraceError) throw cause;
    throw new HoptraceError(
      'KUBECTL_PORT_FORWARD',
      `GET /healthz through the port-forward failed (${cause instanceof Error ? cause.message : String(cause)})`,
      {
        where: link.label,
        hint: tls
          ? `the collector's certificate must name ${host} and be issued by hoptrace-tls's ca.crt (scripts/deploy-tls.sh)`
          : 'check the collector pod answers on its api port',
      },
    );
  }
  link.health = healthOf(res.status, text, link.label);
  return link;
}

/** GET /healthz's reply: 200 and a JSON object, else COLLECTOR_BAD_RESPONSE (never a TypeError later). */
function healthOf(status: number, text: string, where: string): CollectorLink['health'] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (status !== 200 || typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HoptraceError(
      'COLLECTOR_BAD_RESPONSE',
      `GET /healthz answered HTTP ${status}${body === undefined ? ', not JSON' : ', not a JSON object'}`,
      {
        where,
        hint: 'the pod behind the port-forward is not this version of the hoptrace collector; check its image and its api port',
      },
    );
  }
  const h = body as Record<string, unknown>;
  const health: CollectorLink['health'] = {};
  if (typeof h['collectorId'] === 'string') health.collectorId = h['collectorId'];
  if (typeof h['agentsConnected'] === 'number') health.agentsConnected = h['agentsConnected'];
  // Not a count (an older collector says nothing): not shown, never a guess.
  const pinned = h['reprosPinned'];
  if (typeof pinned === 'number' && Number.isSafeInteger(pinned) && pinned >= 0)
    health.reprosPinned = pinned;
  return health;
}

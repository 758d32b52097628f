/**
 * How the Kubernetes API clients of the collector (client.ts) and of the kubectl plugin
 * (cli/kubectl/cluster.ts) send their requests: through streamRequest (common/stream-request.ts)
 * — a deadline and a reply cap — along the http.Agent client-node builds for each request (the
 * cluster's CA, the client certificate, proxy-url), in place of client-node's own transport
 * (node-fetch), which reads a reply whole however long it is: an API server, or a proxy in front of
 * it, that streams an endless body would grow the process until it is killed. A reply past the
 * cap, or with a status outside 200-599, is K8S_BAD_RESPONSE naming the URL; the request and its
 * socket are destroyed.
 */
import { globalAgent as httpAgent } from 'node:http';
import { globalAgent as httpsAgent } from 'node:https';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';
import { streamRequest, type BadReply, type StreamFetchLimits } from '../../common/stream-request';

/**
 * The longest reply read from the API server. The longest the plugin asks for are lists it does
 * not page: every Node (status, install) and the pods of one label selector (the agents, one per
 * node; the pods of a target workload). Kubernetes is tested up to 5,000 nodes; a heavy Node
 * object (status.images, which the kubelet caps at 50 images, many labels, managedFields) is about
 * 50 KB, a heavy pod no more, so 5,000 of them make about 240 MiB. 384 MiB leaves half as much
 * again and stays below the longest string V8 makes (2^29 - 24 characters, 512 MiB), past which
 * the reply could not be read as text anyway. One object (a pod, a Secret, a workload) is far
 * below: etcd refuses to store one above 1.5 MiB. The collector pages its lists (500 objects a
 * reply, some 25 MB at most), but a server may answer a page with the whole list (one that
 * ignores `limit`), so it takes the same cap.
 */
export const API_MAX_REPLY_BYTES = 384 * 1024 * 1024;

/** The deadline and the cap of every request, and what a refused reply's error tells to do. */
export interface ApiHttpLimits extends StreamFetchLimits {
  /** The hint of K8S_BAD_RESPONSE: which client asked, and what to check. */
  hint: string;
}

/** client-node's HttpLibrary over streamRequest, `limits` on every request. */
function apiHttpLibrary(k8s: typeof K8s, limits: ApiHttpLimits): K8s.HttpLibrary {
  const badReply: BadReply = (problem, method, url) =>
    new HoptraceError('K8S_BAD_RESPONSE', `the reply to ${method} ${url.href} ${problem}`, {
      where: url.origin,
      hint: limits.hint,
    });
  const send = async (req: K8s.RequestContext): Promise<K8s.ResponseContext> => {
    const url = new URL(req.getUrl());
    const body = req.getBody();
    // client-node sends JSON (and the YAML of a server-side apply) as a string; nothing else here.
    if (body !== undefined && typeof body !== 'string')
      throw new Error(`${req.getHttpMethod()} ${url.href}: a request body that is not text`);
    const agent = req.getAgent() ?? (url.protocol === 'https:' ? httpsAgent : httpAgent);
    const reply = await streamRequest(
      agent,
      limits,
      badReply,
    )(url, {
      method: req.getHttpMethod(),
      headers: req.getHeaders(),
      body,
      signal: req.getSignal(),
    });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(reply.headers)) {
      if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    }
    return new k8s.ResponseContext(reply.status, headers, {
      text: () => Promise.resolve(reply.body.toString('utf8')),
      binary: () => Promise.resolve(reply.body),
    });
  };
  return k8s.wrapHttpLibrary({ send });
}

/**
 * The configuration of API classes (`new k8s.CoreV1Api(config)`) for `kc`'s `server`, as
 * kc.makeApiClient builds it but over apiHttpLibrary: each reply under its deadline and cap.
 */
export function apiConfiguration(
  k8s: typeof K8s,
  kc: K8s.KubeConfig,
  server: string,
  limits: ApiHttpLimits,
): K8s.Configuration {
  return k8s.createConfiguration({
    baseServer: new k8s.ServerConfiguration(server, {}),
    authMethods: { default: kc },
    httpApi: apiHttpLibrary(k8s, limits),
  });
}

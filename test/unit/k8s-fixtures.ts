/**
 * A simulated Kubernetes API server on 127.0.0.1:0 (plain HTTP), serving recorded-style JSON for
 * the calls the collector makes: GET /api/v1/nodes, /api/v1/pods (paged with limit/continue),
 * /api/v1/namespaces/NS/pods (labelSelector k=v,…) and /api/v1/namespaces/NS/pods/NAME, and
 * DELETE /api/v1/namespaces/NS/pods/NAME (sets deletionTimestamp; `onDelete` plays the controller),
 * with a kubeconfig file pointing at it.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { NodeObject, PodObject } from '../../collector/k8s/facts';

export const KUBE_TOKEN = 'test-bearer-token';

// Shapes as `kubectl get --raw /api/v1/nodes` prints them (fields the collector ignores trimmed).
export const NODES: NodeObject[] = [
  {
    metadata: { name: 'vpn-node' },
    spec: { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] },
    status: {
      addresses: [
        { type: 'InternalIP', address: '192.168.50.1' },
        { type: 'Hostname', address: 'vpn-node' },
      ],
    },
  },
  {
    metadata: { name: 'backend-node' },
    spec: { podCIDR: '10.244.2.0/24', podCIDRs: ['10.244.2.0/24'] },
    status: {
      addresses: [
        { type: 'InternalIP', address: '192.168.50.2' },
        { type: 'ExternalIP', address: '203.0.113.7' },
      ],
    },
  },
];

export function pod(
  namespace: string,
  name: string,
  o: {
    ip?: string;
    ips?: string[];
    node?: string;
    phase?: string;
    hostNetwork?: boolean;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    owner?: { kind: string; name: string };
  },
): PodObject {
  return {
    metadata: {
      name,
      namespace,
      labels: o.labels ?? {},
      ...(o.annotations ? { annotations: o.annotations } : {}),
      ...(o.owner ? { ownerReferences: [{ ...o.owner, controller: true }] } : {}),
    },
    spec: {
      ...(o.node ? { nodeName: o.node } : {}),
      ...(o.hostNetwork ? { hostNetwork: true } : {}),
    },
    status: {
      phase: o.phase ?? 'Running',
      ...(o.ip ? { podIP: o.ip } : {}),
      ...(o.ips ? { podIPs: o.ips.map((ip) => ({ ip })) } : o.ip ? { podIPs: [{ ip: o.ip }] } : {}),
    },
  };
}

export const PODS: PodObject[] = [
  pod('vpn', 'wg-0', {
    ips: ['10.244.1.10', 'fd00:10:244:1::a'],
    ip: '10.244.1.10',
    node: 'vpn-node',
    annotations: { 'hoptrace.io/role': 'vpn' },
    owner: { kind: 'StatefulSet', name: 'wg' },
  }),
  pod('web', 'web-1', {
    ip: '10.244.2.5',
    node: 'backend-node',
    labels: { app: 'web', 'hoptrace.io/role': 'backend' },
    owner: { kind: 'ReplicaSet', name: 'web-6d4b' },
  }),
  pod('web', 'envoy-0', { ip: '10.244.2.9', node: 'backend-node', labels: { app: 'envoy' } }),
  pod('web', 'pending-0', { phase: 'Pending' }),
  pod('kube-system', 'kube-proxy-x', {
    ip: '192.168.50.2',
    node: 'backend-node',
    hostNetwork: true,
  }),
  pod('batch', 'done-1', { ip: '10.244.2.77', node: 'backend-node', phase: 'Succeeded' }),
];

export interface FakeApiServer {
  url: string;
  kubeconfig: string;
  /** Request paths with their query, in order. */
  requests: string[];
  /** Authorization headers seen. */
  auth: Set<string>;
  /** 'ok' answers; 'forbidden' answers 403 to everything; 'no-delete' 403 to DELETE only. */
  mode: 'ok' | 'forbidden' | 'no-delete';
  /** Called after a DELETE marked the pod terminating (a test creates the replacement here). */
  onDelete: ((pod: PodObject) => void) | undefined;
  nodes: NodeObject[];
  pods: PodObject[];
  /**
   * ServiceAccount tokens the fake TokenReview knows: token → its user (username, bound pod) and
   * audiences. Anything else is answered `authenticated: false`.
   */
  tokens: Map<string, { username: string; pod: string; podUid: string; audiences: string[] }>;
  close(): Promise<void>;
}

function status(res: ServerResponse, code: number, reason: string, message: string): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason, code }),
  );
}

/** Pages `items` by `limit`/`continue` (the continue token is the next index). */
function list(res: ServerResponse, kind: string, items: unknown[], q: URLSearchParams): void {
  const limit = Number(q.get('limit') ?? items.length) || items.length;
  const from = Number(q.get('continue') ?? 0);
  const page = items.slice(from, from + limit);
  const next = from + limit < items.length ? String(from + limit) : undefined;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      kind,
      apiVersion: 'v1',
      metadata: { resourceVersion: '4242', ...(next ? { continue: next } : {}) },
      items: page,
    }),
  );
}

export async function startFakeApiServer(dir: string): Promise<FakeApiServer> {
  const fake: FakeApiServer = {
    url: '',
    kubeconfig: join(dir, 'kubeconfig'),
    requests: [],
    auth: new Set(),
    mode: 'ok',
    nodes: NODES,
    pods: PODS,
    tokens: new Map(),
    onDelete: undefined,
    close: () => Promise.resolve(),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url ?? '/', 'http://x');
    fake.requests.push(`${req.method ?? ''} ${u.pathname}${u.search}`);
    fake.auth.add(req.headers.authorization ?? '');
    if (fake.mode === 'forbidden') {
      status(
        res,
        403,
        'Forbidden',
        'pods is forbidden: User "system:serviceaccount:x" cannot list',
      );
      return;
    }
    const one = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(u.pathname);
    if (req.method === 'DELETE' && one) {
      if (fake.mode === 'no-delete') {
        status(res, 403, 'Forbidden', `pods "${one[2] ?? ''}" is forbidden: cannot delete`);
        return;
      }
      const p = fake.pods.find(
        (x) => x.metadata?.namespace === one[1] && x.metadata?.name === one[2],
      );
      if (p === undefined || p.metadata === undefined) {
        status(res, 404, 'NotFound', `pods "${one[2] ?? ''}" not found`);
        return;
      }
      p.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Pod', apiVersion: 'v1', ...p }));
      fake.onDelete?.(p);
      return;
    }
    if (req.method === 'POST' && u.pathname === '/apis/authentication.k8s.io/v1/tokenreviews') {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const spec = (JSON.parse(body) as { spec: { token: string; audiences?: string[] } }).spec;
        const known = fake.tokens.get(spec.token);
        const audiences = (spec.audiences ?? []).filter((a) => known?.audiences.includes(a));
        const ok = known !== undefined && audiences.length > 0;
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            kind: 'TokenReview',
            apiVersion: 'authentication.k8s.io/v1',
            spec,
            status: ok
              ? {
                  authenticated: true,
                  audiences,
                  user: {
                    username: known.username,
                    uid: 'sa-uid',
                    groups: ['system:serviceaccounts'],
                    extra: {
                      'authentication.kubernetes.io/pod-name': [known.pod],
                      'authentication.kubernetes.io/pod-uid': [known.podUid],
                    },
                  },
                }
              : { authenticated: false, error: 'invalid bearer token' },
          }),
        );
      });
      return;
    }
    if (req.method !== 'GET') {
      status(res, 405, 'MethodNotAllowed', 'only GET here');
      return;
    }
    if (u.pathname === '/api/v1/nodes') {
      list(res, 'NodeList', fake.nodes, u.searchParams);
      return;
    }
    if (u.pathname === '/api/v1/pods') {
      list(res, 'PodList', fake.pods, u.searchParams);
      return;
    }
    const inNs = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/.exec(u.pathname);
    if (inNs) {
      const sel = (u.searchParams.get('labelSelector') ?? '')
        .split(',')
        .filter((x) => x !== '')
        .map((x) => x.split('='));
      const items = fake.pods.filter(
        (x) =>
          x.metadata?.namespace === inNs[1] &&
          sel.every(([k = '', v]) => x.metadata?.labels?.[k] === v),
      );
      list(res, 'PodList', items, u.searchParams);
      return;
    }
    const m = one;
    if (m) {
      const p = fake.pods.find((x) => x.metadata?.namespace === m[1] && x.metadata?.name === m[2]);
      if (p) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Pod', apiVersion: 'v1', ...p }));
      } else {
        status(res, 404, 'NotFound', `pods "${m[2] ?? ''}" not found`);
      }
      return;
    }
    status(res, 404, 'NotFound', 'the server could not find the requested resource');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  fake.url = `http://127.0.0.1:${port}`;
  writeKubeconfig(fake.kubeconfig, fake.url);
  fake.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => {
        resolve();
      });
    });
  return fake;
}

/** A kubeconfig (JSON is YAML) for `server` (plain http) with a bearer token. */
export function writeKubeconfig(file: string, server: string): void {
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node 1.x refuses plain http unless TLS verification is explicitly off.
      clusters: [{ name: 'sim', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'sim', user: { token: KUBE_TOKEN } }],
      contexts: [{ name: 'sim', context: { cluster: 'sim', user: 'sim' } }],
      'current-context': 'sim',
    }),
  );
}

/** A pod of the VPN workload (`app=wg` in namespace vpn), with the uid and owner uid a repro reads. */
export function wgPod(
  name: string,
  uid: string,
  o: {
    ip?: string;
    phase?: string;
    owner?: { kind: string; name: string; uid: string } | null;
  } = {},
): PodObject {
  const owner =
    o.owner === undefined ? { kind: 'StatefulSet', name: 'wg', uid: 'ss-wg-1' } : o.owner;
  return {
    metadata: {
      name,
      namespace: 'vpn',
      uid,
      labels: { app: 'wg' },
      ...(owner === null ? {} : { ownerReferences: [{ ...owner, controller: true }] }),
    },
    spec: { nodeName: 'vpn-node' },
    status: {
      phase: o.phase ?? 'Running',
      ...(o.ip === undefined ? {} : { podIP: o.ip, podIPs: [{ ip: o.ip }] }),
    },
  };
}

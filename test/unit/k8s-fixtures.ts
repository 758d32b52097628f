/**
 * A simulated Kubernetes API server on 127.0.0.1:0 (plain HTTP), serving recorded-style JSON for
 * the calls the collector and kubectl hoptrace make: GET /api/v1/nodes, /api/v1/pods (paged with
 * limit/continue), /api/v1/namespaces/NS/pods (labelSelector k=v,…) and
 * /api/v1/namespaces/NS/pods/NAME, DELETE /api/v1/namespaces/NS/pods/NAME (sets
 * deletionTimestamp; `onDelete` plays the controller), GET /api/v1/namespaces/NS/secrets/NAME,
 * GET /apis/apps/v1/namespaces/NS/{deployments,statefulsets,daemonsets}/NAME, and the WebSocket
 * port-forward (GET /api/v1/namespaces/NS/pods/NAME/portforward?ports=P, `v4.channel.k8s.io`: as
 * the kubelet, the first frame of channel 0 (data) and of channel 1 (errors) is the port as two
 * little-endian bytes; the data goes to `forwards`' address for that pod and port, a refused
 * connection is reported as text on channel 1); for install, API discovery (GET /api/v1,
 * /apis/apps/v1, /apis/rbac.authorization.k8s.io/v1), server-side apply (PATCH
 * application/apply-patch+yaml: any object, kept in `objects` by its path; a Secret also in
 * `secrets`; `onApply` plays the controllers) and DELETE of what was applied; with a kubeconfig
 * file pointing at it.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
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
  /** Secrets by `namespace/name`: their data, values not yet base64-encoded. */
  secrets: Map<string, Record<string, string | Buffer>>;
  /** Workloads by `kind/namespace/name` (kind: deployments, statefulsets, daemonsets): matchLabels. */
  workloads: Map<string, Record<string, string>>;
  /** Where a port-forward to `namespace/pod:port` connects. */
  forwards: Map<string, { host: string; port: number }>;
  /** Port-forwards opened (WebSocket upgrades accepted). */
  forwardsOpened: number;
  /** Objects applied (server-side apply), by their API path. */
  objects: Map<string, Record<string, unknown>>;
  /** Called after an object was applied (a test starts pods here, as the controllers would). */
  onApply: ((path: string, o: Record<string, unknown>) => void) | undefined;
  /** Requests (`METHOD /path`) answered 403 whatever the mode (RBAC that lacks one verb). */
  refuse: RegExp | undefined;
  close(): Promise<void>;
}

/** The API discovery of the kinds deploy/ holds: [resource, kind, namespaced]. */
const DISCOVERY: Record<string, [string, string, boolean][]> = {
  '/api/v1': [
    ['namespaces', 'Namespace', false],
    ['nodes', 'Node', false],
    ['pods', 'Pod', true],
    ['secrets', 'Secret', true],
    ['serviceaccounts', 'ServiceAccount', true],
    ['services', 'Service', true],
  ],
  '/apis/apps/v1': [
    ['daemonsets', 'DaemonSet', true],
    ['deployments', 'Deployment', true],
    ['statefulsets', 'StatefulSet', true],
  ],
  '/apis/networking.k8s.io/v1': [['networkpolicies', 'NetworkPolicy', true]],
  '/apis/rbac.authorization.k8s.io/v1': [
    ['clusterrolebindings', 'ClusterRoleBinding', false],
    ['clusterroles', 'ClusterRole', false],
    ['rolebindings', 'RoleBinding', true],
    ['roles', 'Role', true],
  ],
};

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
    secrets: new Map(),
    workloads: new Map(),
    forwards: new Map(),
    forwardsOpened: 0,
    objects: new Map(),
    onApply: undefined,
    refuse: undefined,
    onDelete: undefined,
    close: () => Promise.resolve(),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url ?? '/', 'http://x');
    fake.requests.push(`${req.method ?? ''} ${u.pathname}${u.search}`);
    fake.auth.add(req.headers.authorization ?? '');
    if (fake.mode === 'forbidden' || fake.refuse?.test(`${req.method ?? ''} ${u.pathname}`)) {
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
    const secretPath = /^\/api\/v1\/namespaces\/([^/]+)\/secrets\/([^/]+)$/.exec(u.pathname);
    if (req.method === 'PATCH') {
      if (req.headers['content-type'] !== 'application/apply-patch+yaml') {
        status(res, 415, 'UnsupportedMediaType', 'only server-side apply here');
        return;
      }
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const o = JSON.parse(body) as Record<string, unknown>;
        fake.objects.set(u.pathname, o);
        if (secretPath) {
          const data = (o['data'] ?? {}) as Record<string, string>;
          fake.secrets.set(
            `${secretPath[1] ?? ''}/${secretPath[2] ?? ''}`,
            Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
          );
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(o));
        fake.onApply?.(u.pathname, o);
      });
      return;
    }
    if (req.method === 'DELETE') {
      const key = secretPath ? `${secretPath[1] ?? ''}/${secretPath[2] ?? ''}` : '';
      const had = fake.objects.delete(u.pathname) || (secretPath !== null && fake.secrets.has(key));
      if (secretPath) fake.secrets.delete(key);
      if (!had) {
        status(res, 404, 'NotFound', `${u.pathname} not found`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Success' }));
      return;
    }
    if (req.method !== 'GET') {
      status(res, 405, 'MethodNotAllowed', 'only GET here');
      return;
    }
    const discovery = DISCOVERY[u.pathname];
    if (discovery !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: u.pathname.replace(/^\/apis?\//, ''),
          resources: discovery.map(([name, kind, namespaced]) => ({
            name,
            singularName: kind.toLowerCase(),
            namespaced,
            kind,
            verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
          })),
        }),
      );
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
    const secret = /^\/api\/v1\/namespaces\/([^/]+)\/secrets\/([^/]+)$/.exec(u.pathname);
    if (secret) {
      const data = fake.secrets.get(`${secret[1] ?? ''}/${secret[2] ?? ''}`);
      if (data === undefined) {
        status(res, 404, 'NotFound', `secrets "${secret[2] ?? ''}" not found`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Secret',
          apiVersion: 'v1',
          metadata: { name: secret[2], namespace: secret[1] },
          type: 'Opaque',
          data: Object.fromEntries(
            Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
          ),
        }),
      );
      return;
    }
    const workload =
      /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|statefulsets|daemonsets)\/([^/]+)$/.exec(
        u.pathname,
      );
    if (workload) {
      const [, wns = '', kind = '', wname = ''] = workload;
      const labels = fake.workloads.get(`${kind}/${wns}/${wname}`);
      if (labels === undefined) {
        status(res, 404, 'NotFound', `${kind}.apps "${wname}" not found`);
        return;
      }
      const kinds: Record<string, string> = {
        deployments: 'Deployment',
        statefulsets: 'StatefulSet',
        daemonsets: 'DaemonSet',
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: kinds[kind],
          apiVersion: 'apps/v1',
          metadata: { name: wname, namespace: wns },
          spec: { selector: { matchLabels: labels }, template: { metadata: { labels } } },
        }),
      );
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
  const wss = new WebSocketServer({
    noServer: true,
    // The kubelet's port-forward speaks v4 of the channel protocol (binary frames).
    handleProtocols: (offered) => (offered.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false),
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const u = new URL(req.url ?? '/', 'http://x');
    fake.requests.push(`${req.method ?? ''} ${u.pathname}${u.search}`);
    fake.auth.add(req.headers.authorization ?? '');
    const pf = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/portforward$/.exec(u.pathname);
    const refused =
      fake.mode === 'forbidden' || fake.refuse?.test(`${req.method ?? ''} ${u.pathname}`);
    const port = Number(u.searchParams.get('ports'));
    if (pf === null || refused === true || !Number.isInteger(port) || port <= 0) {
      const line =
        refused === true ? '403 Forbidden' : pf === null ? '404 Not Found' : '400 Bad Request';
      socket.end(`HTTP/1.1 ${line}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      fake.forwardsOpened++;
      forwardPort(ws, port, fake.forwards.get(`${pf[1] ?? ''}/${pf[2] ?? ''}:${port}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  fake.url = `http://127.0.0.1:${port}`;
  writeKubeconfig(fake.kubeconfig, fake.url);
  fake.close = () =>
    new Promise<void>((resolve) => {
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      server.close(() => {
        resolve();
      });
    });
  return fake;
}

/** One port-forward stream: channel 0 carries the bytes, channel 1 the error text (v4). */
function forwardPort(
  ws: WebSocket,
  port: number,
  to: { host: string; port: number } | undefined,
): void {
  const portBytes = [port & 0xff, port >> 8];
  ws.send(Buffer.from([0, ...portBytes]));
  ws.send(Buffer.from([1, ...portBytes]));
  const fail = (text: string): void => {
    ws.send(Buffer.concat([Buffer.from([1]), Buffer.from(text)]));
    ws.close();
  };
  if (to === undefined) {
    fail(`error forwarding port ${port}: nothing listens on it in the pod`);
    return;
  }
  const tcp: Socket = connect(to.port, to.host);
  const early: Buffer[] = [];
  let open = false;
  tcp.on('connect', () => {
    open = true;
    for (const b of early.splice(0)) tcp.write(b);
  });
  tcp.on('data', (b: Buffer) => {
    ws.send(Buffer.concat([Buffer.from([0]), b]));
  });
  tcp.on('error', (e) => {
    fail(`error forwarding port ${port}: ${e.message}`);
  });
  tcp.on('close', () => {
    if (ws.readyState === ws.OPEN) ws.close();
  });
  ws.on('message', (data: Buffer) => {
    if (data[0] !== 0) return;
    const bytes = data.subarray(1);
    if (open) tcp.write(bytes);
    else early.push(bytes);
  });
  ws.on('close', () => {
    tcp.destroy();
  });
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

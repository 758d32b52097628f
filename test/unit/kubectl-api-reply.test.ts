/**
 * What `kubectl hoptrace` reads from the API server is bounded like what it reads from the
 * collector: a reply longer than the cap (an API server, or a proxy in front of it, that streams
 * an endless body), one that declares such a length, or one with a status no fetch Response
 * carries is K8S_BAD_RESPONSE naming the request and its URL, its socket closed — not a process
 * that grows until it is killed. The transport that does it (collector/k8s/api-http.ts over
 * common/stream-request.ts, shared with the collector's client) also carries the cluster's CA and
 * the user's client certificate, checked here over TLS.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';
import t from 'tap';
import { API_MAX_REPLY_BYTES } from '../../collector/k8s/api-http';
import { connectCluster } from '../../cli/kubectl/cluster';
import { makeTlsMaterial } from '../../cli/kubectl/tls-material';
import { kubeconfig, spawnPlugin } from './kubectl-spawn';

const JSON_TYPE = { 'content-type': 'application/json' };
const NODE_LIST = JSON.stringify({
  kind: 'NodeList',
  apiVersion: 'v1',
  items: [{ metadata: { name: 'n1' } }],
});

/**
 * A body of spaces, written as fast as the client reads, until it goes away or `max` bytes are out
 * (a bound of the test's own, so a client without a cap fails the test instead of the machine).
 */
function endless(res: ServerResponse, max: number): void {
  res.writeHead(200, JSON_TYPE);
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let sent = 0;
  const more = (): void => {
    while (sent < max) {
      sent += chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', more);
        return;
      }
    }
    res.end();
  };
  more();
}

/** How the fake API server answers a request path. */
function answer(path: string, res: ServerResponse): void {
  if (path.startsWith('/api/v1/nodes')) {
    endless(res, 64 << 20);
  } else if (path.startsWith('/api/v1/namespaces/ns1/pods')) {
    res.writeHead(200, { ...JSON_TYPE, 'content-length': '999999999' });
    res.write('{');
  } else if (path.startsWith('/api/v1/namespaces/ns1/secrets/')) {
    res.writeHead(999, JSON_TYPE);
    res.end('{}');
  } else if (path.startsWith('/api/v1/namespaces/ok/')) {
    res.writeHead(200, JSON_TYPE);
    res.end(path.includes('/pods?') ? '{"kind":"PodList","items":[]}' : NODE_LIST);
  } else {
    res.writeHead(404, JSON_TYPE);
    res.end('{"kind":"Status","code":404}');
  }
}

/** `server` listening on loopback, closed at the end; its connections closed so far, counted. */
async function listen(
  t: { teardown(fn: () => unknown): void },
  server: Server,
): Promise<{ port: number; closed: () => number }> {
  let closed = 0;
  server.on('connection', (c: Socket) => {
    c.once('close', () => closed++);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    (server as unknown as { closeAllConnections(): void }).closeAllConnections();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, closed: () => closed };
}

async function eventually(ok: () => boolean, ms = 5000): Promise<boolean> {
  const until = Date.now() + ms;
  while (!ok() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  return ok();
}

void t.test(
  'a reply longer than the cap: K8S_BAD_RESPONSE naming the URL, the socket closed',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-apireply-'));
    const api = await listen(
      t,
      createHttpServer((req, res) => {
        answer(req.url ?? '', res);
      }),
    );
    const server = `http://127.0.0.1:${api.port}`;
    const file = kubeconfig(
      dir,
      'plain',
      { server, 'insecure-skip-tls-verify': true },
      { token: 'a' },
    );
    const cluster = await connectCluster(
      { kubeconfig: file, requestTimeoutMs: 20_000 },
      {},
      { maxReplyBytes: 1 << 20 },
    );
    t.teardown(() => {
      cluster.close();
    });
    const at = server.replace(/[.:/]/g, '\\$&');

    const started = Date.now();
    await t.rejects(cluster.listNodes(), {
      code: 'K8S_BAD_RESPONSE',
      message: new RegExp(
        `^K8S_BAD_RESPONSE: ${at} \\(context ctx\\): list nodes: the reply to GET ${at}/api/v1/nodes is longer than 1048576 bytes \\(no reply of a real API server .*kubectl get --raw /readyz`,
      ),
    });
    t.ok(Date.now() - started < 15_000, 'cut at the cap, not at the request timeout');
    t.ok(await eventually(() => api.closed() >= 1), 'its connection was closed');

    // A declared length over the cap is refused before its body.
    await t.rejects(cluster.listPods('ns1', 'app=x'), {
      code: 'K8S_BAD_RESPONSE',
      message:
        /list pods in ns1 \(app=x\): the reply to GET .*\/api\/v1\/namespaces\/ns1\/pods\?labelSelector=app%3Dx is longer than 1048576 bytes/,
    });
    // A status no fetch Response can carry: an error, not a RangeError from a socket callback.
    await t.rejects(cluster.readSecret('ns1', 's'), {
      code: 'K8S_BAD_RESPONSE',
      message: /get secret ns1\/s: the reply to GET .*\/secrets\/s has HTTP status 999/,
    });
    // Under the cap, replies are read as before.
    t.strictSame((await cluster.listPods('ok', 'app=x')).length, 0);
  },
);

void t.test(
  'over TLS: the CA and the client certificate are used, and the cap holds',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-apireply-tls-'));
    const tls = await makeTlsMaterial(dir, 'hoptrace');
    const ssl = (...args: string[]): void => {
      execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
    };
    ssl(
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'client.key',
      '-out',
      'client.csr',
      '-subj',
      '/CN=kube-tester',
    );
    ssl(
      'x509',
      '-req',
      '-in',
      'client.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-out',
      'client.crt',
    );
    const seen: string[] = [];
    const api = await listen(
      t,
      createHttpsServer(
        {
          cert: tls['tls.crt'],
          key: tls['tls.key'],
          ca: tls['ca.crt'],
          requestCert: true,
          rejectUnauthorized: true,
        },
        (req, res) => {
          if (req.socket instanceof TLSSocket)
            seen.push(String(req.socket.getPeerCertificate().subject.CN));
          if (req.url?.startsWith('/api/v1/nodes')) {
            res.writeHead(200, JSON_TYPE);
            res.end(NODE_LIST);
          } else answer(`/api/v1/nodes${req.url ?? ''}`, res);
        },
      ),
    );
    const b64 = (f: string): string => readFileSync(join(dir, f)).toString('base64');
    const file = kubeconfig(
      dir,
      'tls',
      {
        server: `https://127.0.0.1:${api.port}`,
        'certificate-authority-data': tls['ca.crt'].toString('base64'),
      },
      { 'client-certificate-data': b64('client.crt'), 'client-key-data': b64('client.key') },
    );
    const cluster = await connectCluster(
      { kubeconfig: file, requestTimeoutMs: 20_000 },
      {},
      { maxReplyBytes: 1 << 20 },
    );
    t.teardown(() => {
      cluster.close();
    });
    const nodes = await cluster.listNodes();
    t.strictSame(
      nodes.map((n) => n.metadata?.name),
      ['n1'],
      'the list is read over TLS',
    );
    t.strictSame(seen, ['kube-tester'], 'the client certificate was presented');
    await t.rejects(cluster.listPods('x', 'a=b'), {
      code: 'K8S_BAD_RESPONSE',
      message: /is longer than 1048576 bytes/,
    });
  },
);

void t.test(
  'kubectl hoptrace, as a process, against an endless reply: the default cap ends it',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-apireply-'));
    // The first request (list pods in hoptrace) never ends, up to a bit past the default cap.
    const api = await listen(
      t,
      createHttpServer((_req, res) => {
        endless(res, API_MAX_REPLY_BYTES + (8 << 20));
      }),
    );
    const file = kubeconfig(
      dir,
      'endless',
      { server: `http://127.0.0.1:${api.port}`, 'insecure-skip-tls-verify': true },
      { token: 'a' },
    );
    const r = await spawnPlugin(['status', '--kubeconfig', file, '--request-timeout', '40s'], {});
    t.notOk(r.hung, `the process exits by itself (${r.ms} ms)`);
    t.equal(r.code, 1);
    t.match(
      r.stderr,
      /^kubectl hoptrace: K8S_BAD_RESPONSE: .*list pods in hoptrace .*the reply to GET http:\/\/127\.0\.0\.1:\d+\/api\/v1\/namespaces\/hoptrace\/pods\?labelSelector=\S+ is longer than 402653184 bytes/,
    );
  },
);

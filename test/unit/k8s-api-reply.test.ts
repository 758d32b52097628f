/**
 * The collector's own Kubernetes client reads the API server under the same cap as the kubectl
 * plugin (collector/k8s/api-http.ts): a list longer than the cap is K8S_BAD_RESPONSE naming what
 * was asked and the URL, its socket closed — not a collector that reads it whole, however long,
 * until it is killed. Before, client-node's own transport read any reply to its end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createKubeApi } from '../../collector/k8s/client';
import { KUBE_TOKEN, writeKubeconfig } from './k8s-fixtures';

/** The cap the test gives the client: small, so the list past it is small too. */
const CAP = 256 * 1024;

/** A NodeList of `n` nodes, each with a 1 KiB label (a real list, only longer). */
function nodeList(n: number): string {
  const items = Array.from({ length: n }, (_, i) => ({
    metadata: { name: `node-${i}`, labels: { pad: 'x'.repeat(1024) } },
    status: { addresses: [{ type: 'InternalIP', address: `10.0.${i >> 8}.${i & 0xff}` }] },
  }));
  return JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: {}, items });
}

/** Writes `body` in 16 KiB chunks with no declared length, as a server streaming a list does. */
function chunked(res: ServerResponse, body: string): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  const bytes = Buffer.from(body);
  let at = 0;
  const more = (): void => {
    while (at < bytes.length) {
      const ok = res.write(bytes.subarray(at, at + 16 * 1024));
      at += 16 * 1024;
      if (!ok) {
        res.once('drain', more);
        return;
      }
    }
    res.end();
  };
  more();
}

void t.test(
  "a list longer than the cap: K8S_BAD_RESPONSE from the collector's client, its socket closed",
  async (t) => {
    const big = nodeList(400); // some 430 KB, past the 256 KiB cap
    t.ok(Buffer.byteLength(big) > CAP);
    const small = nodeList(3);
    const auth = new Set<string>();
    let closed = 0;
    const server = createServer((req, res) => {
      auth.add(req.headers.authorization ?? '');
      if (req.url?.startsWith('/api/v1/nodes')) chunked(res, big);
      else if (req.url?.startsWith('/api/v1/pods')) chunked(res, small.replace('Node', 'Pod'));
      else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"kind":"Status","code":404}');
      }
    });
    server.on('connection', (c: Socket) => {
      c.once('close', () => closed++);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-k8s-reply-'));
    t.teardown(() => {
      server.closeAllConnections();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const file = join(dir, 'kubeconfig');
    writeKubeconfig(file, url);

    const api = await createKubeApi(
      { kind: 'kubeconfig', file },
      { timeoutMs: 20_000, maxReplyBytes: CAP },
    );
    const at = url.replace(/[.:/]/g, '\\$&');
    const started = Date.now();
    await t.rejects(api.listNodes(), {
      code: 'K8S_BAD_RESPONSE',
      message: new RegExp(
        `^K8S_BAD_RESPONSE: ${at}: list nodes: the reply to GET ${at}/api/v1/nodes\\?limit=500 is longer than ${CAP} bytes \\(no reply of a real API server to what the collector asks`,
      ),
    });
    t.ok(Date.now() - started < 10_000, 'cut at the cap, not at the deadline');
    const until = Date.now() + 5000;
    while (closed < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    t.ok(closed >= 1, 'its connection was closed');

    // Under the cap, a list is read as before, with the kubeconfig's credentials.
    t.equal((await api.listPods()).length, 3);
    t.strictSame([...auth], [`Bearer ${KUBE_TOKEN}`]);
  },
);

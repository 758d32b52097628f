/**
 * The plugin's port-forward takes WebSocket messages up to PORT_FORWARD_MAX_MESSAGE_BYTES (8 MiB),
 * not ws's default 100 MiB: a real forward's messages are one read of the pod's socket each. A peer
 * that sends a longer one fails the stream with KUBECTL_PORT_FORWARD saying so, its socket closed
 * at once — not a message held whole in memory, nor a stream that ends as if the reply were done.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import t from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import { openPortForward, PORT_FORWARD_MAX_MESSAGE_BYTES } from '../../cli/kubectl/port-forward';
import { loadClientLibrary } from '../../collector/k8s/client';
import { isHoptraceError } from '../../common/errors';
import { writeKubeconfig } from './k8s-fixtures';

const PORT = 7070;

/**
 * A loopback API server whose port-forward (v4.channel.k8s.io, as the kubelet: each channel opened
 * by the port's two bytes) sends channel 0 messages of the given data lengths, one after another.
 */
async function forwardServer(
  t: { teardown(fn: () => unknown): void },
  lengths: number[],
): Promise<{ kubeconfig: string; peerClosed: Promise<number> }> {
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => (offered.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false),
  });
  let closed: (code: number) => void = () => undefined;
  const peerClosed = new Promise<number>((resolve) => (closed = resolve));
  const server = createServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      ws.on('close', (code) => {
        closed(code);
      });
      const port = [PORT & 0xff, PORT >> 8];
      ws.send(Buffer.from([0, ...port]));
      ws.send(Buffer.from([1, ...port]));
      for (const n of lengths) ws.send(Buffer.concat([Buffer.from([0]), Buffer.alloc(n, 0x61)]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-pf-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeKubeconfig(kubeconfig, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  t.teardown(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { kubeconfig, peerClosed };
}

/** The bytes the stream gave before it ended or failed (or 15 s passed), and how it did. */
function drain(stream: Duplex): Promise<{ bytes: number; error: unknown }> {
  return new Promise((resolve) => {
    let bytes = 0;
    setTimeout(() => {
      resolve({ bytes, error: 'still open after 15 s' });
    }, 15_000).unref();
    stream.on('data', (b: Buffer) => (bytes += b.length));
    stream.on('error', (error) => {
      resolve({ bytes, error });
    });
    stream.on('end', () => {
      resolve({ bytes, error: undefined });
    });
  });
}

void t.test(
  'a message past the bound fails the port-forward with KUBECTL_PORT_FORWARD, its socket closed',
  async (t) => {
    t.equal(PORT_FORWARD_MAX_MESSAGE_BYTES, 8 * 1024 * 1024);
    // A real forward's messages (32 KiB reads), one of the bound exactly (the channel byte
    // included), then one byte more.
    const lengths = [32 * 1024, 32 * 1024, PORT_FORWARD_MAX_MESSAGE_BYTES - 1];
    const { kubeconfig, peerClosed } = await forwardServer(t, [
      ...lengths,
      PORT_FORWARD_MAX_MESSAGE_BYTES,
    ]);
    const k8s = await loadClientLibrary();
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    const stream = openPortForward(k8s, kc, 'hoptrace', 'collector-0', PORT, 10_000);
    const started = Date.now();
    const { bytes, error } = await drain(stream);
    t.equal(
      bytes,
      lengths.reduce((a, b) => a + b),
      'the messages within the bound came through',
    );
    t.ok(isHoptraceError(error), 'the stream failed with a coded error');
    t.match(error, {
      code: 'KUBECTL_PORT_FORWARD',
      message:
        /^KUBECTL_PORT_FORWARD: port-forward hoptrace\/collector-0:7070: a WebSocket message longer than 8388608 bytes \(8 MiB\) came through the port-forward, not read.*kubectl -n hoptrace port-forward pod\/collector-0 7070/,
    });
    // ws answers 1009 and would wait 30 s for the peer's close frame; the stream does not.
    const code = await Promise.race([
      peerClosed,
      new Promise<string>((resolve) => setTimeout(resolve, 10_000, 'still open').unref()),
    ]);
    t.ok(code === 1006 || code === 1009, `the peer's socket was closed (${code})`);
    t.ok(Date.now() - started < 15_000, 'at once, not after a close timeout');
  },
);

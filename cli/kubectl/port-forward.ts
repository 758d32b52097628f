/**
 * One TCP connection to a pod's port through the API server, as a Duplex stream: client-node's
 * `PortForward` (the WebSocket port-forward, `v4.channel.k8s.io`: channel 0 the data, channel 1
 * the kubelet's error text, each opened by two bytes naming the port). Nothing listens on a local
 * port, so no other process on this machine can use the forward.
 *
 * client-node never ends its output when the WebSocket closes (only v5's close frame would), so
 * the stream ends itself on the socket's close; an error text on channel 1 makes it fail with
 * KUBECTL_PORT_FORWARD, a refused upgrade (401/403) with K8S_FORBIDDEN.
 *
 * The WebSocket is made here (forwardSocketHandler, given to client-node's PortForward) rather than
 * inside client-node, so that it is held from the start: destroying the stream terminates it even
 * while its handshake is under way, and a handshake that does not finish within the request
 * timeout fails (ws's handshakeTimeout) instead of waiting for ever. A message longer than
 * PORT_FORWARD_MAX_MESSAGE_BYTES is not read (ws refuses it from its header, close code 1009): the
 * stream fails with KUBECTL_PORT_FORWARD saying so and the socket is terminated.
 */
import { Duplex, PassThrough, Writable } from 'node:stream';
import type * as K8s from '@kubernetes/client-node';
import WebSocket from 'ws';
import { HoptraceError } from '../../common/errors';

/** The subprotocols client-node's WebSocketHandler offers, in its order. */
const PROTOCOLS = [
  'v5.channel.k8s.io',
  'v4.channel.k8s.io',
  'v3.channel.k8s.io',
  'v2.channel.k8s.io',
  'channel.k8s.io',
];

type ForwardHandler = NonNullable<ConstructorParameters<typeof K8s.PortForward>[2]>;

/**
 * The longest WebSocket message read from a port-forward (ws's default, 100 MiB, is held whole
 * before it is handed on). What flows in is the collector's HTTP replies, capped at 256 MiB each by
 * stream-fetch.ts, but never as one message: the runtime on the pod's node copies the pod's socket
 * to the forward with io.Copy (containerd's portForward, CRI-O's alike), and the kubelet's
 * WebSocket streams (wsstream) send each write as one message — one read of at most 32 KiB (Go's
 * copy buffer) behind the channel byte. Even a copy with an unbounded buffer reads no more at once
 * than the socket's receive buffer holds, which Linux caps at net.ipv4.tcp_rmem's max (6 MiB by
 * default). 8 MiB is above both: only a peer that is not a port-forward sends more.
 */
export const PORT_FORWARD_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/**
 * client-node's WebSocketHandler.connect as port-forward uses it (binary frames: the first byte is
 * the channel), with the socket handed to `onSocket` as soon as it exists and a handshake timeout.
 */
function forwardSocketHandler(
  kc: K8s.KubeConfig,
  timeoutMs: number,
  onSocket: (ws: WebSocket) => void,
): ForwardHandler {
  return {
    connect: async (path, _textHandler, binaryHandler) => {
      const cluster = kc.getCurrentCluster();
      if (cluster === null) throw new Error('no cluster in the kubeconfig');
      const uri = cluster.server.replace(/^http/, 'ws') + path;
      const opts: WebSocket.ClientOptions = {};
      await kc.applyToHTTPSOptions(opts);
      const ws = new WebSocket(uri, PROTOCOLS, {
        ...opts,
        handshakeTimeout: timeoutMs,
        maxPayload: PORT_FORWARD_MAX_MESSAGE_BYTES,
      });
      onSocket(ws);
      return new Promise((resolve, reject) => {
        let open = false;
        ws.once('open', () => {
          open = true;
          resolve(ws);
        });
        // Before the open: the forward fails with it; after: the 'close' that follows ends it.
        ws.on('error', (e) => {
          if (!open) reject(e);
        });
        ws.on('message', (data: Buffer, isBinary) => {
          if (!isBinary || data.length < 1) return;
          if (binaryHandler !== null && !binaryHandler(data.readUint8(0), data.subarray(1)))
            ws.close();
        });
      });
    },
  };
}

/** The failure of opening the forward, as a coded error. */
export function forwardError(e: unknown, where: string): HoptraceError {
  const text = e instanceof Error ? e.message : String(e);
  if (/\b40[13]\b/.test(text)) {
    return new HoptraceError('K8S_FORBIDDEN', `port-forward refused: ${text}`, {
      where,
      hint: 'your kubeconfig user needs `create` on pods/portforward in the hoptrace namespace (kubectl auth can-i create pods/portforward -n hoptrace)',
    });
  }
  return new HoptraceError('KUBECTL_PORT_FORWARD', text, {
    where,
    hint: 'check the collector pod runs (kubectl hoptrace status) and that `kubectl port-forward` works to it',
  });
}

/** A message past PORT_FORWARD_MAX_MESSAGE_BYTES, as ws reports it (its receiver's error). */
function isTooLong(e: unknown): boolean {
  return (e as { code?: unknown }).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
}

/** Opens a connection to `port` of pod `namespace/name`; the stream fails with a coded error. */
export function openPortForward(
  k8s: typeof K8s,
  kc: K8s.KubeConfig,
  namespace: string,
  name: string,
  port: number,
  timeoutMs: number,
): Duplex {
  const where = `port-forward ${namespace}/${name}:${port}`;
  const input = new PassThrough(); // written before the socket is open: buffered until then
  let socket: WebSocket | undefined;
  let errorText = '';
  const stream = new Duplex({
    write(chunk: Buffer, _enc, cb) {
      input.write(chunk, cb);
    },
    final(cb) {
      input.end();
      cb();
    },
    read() {
      // pushed as it arrives (the replies read here are small)
    },
    destroy(err, cb) {
      input.destroy();
      // terminate(): also while the handshake is under way (it is aborted), and without waiting
      // for the peer's close frame, which a silent server never sends (also once ws has begun a
      // close of its own, after a message too long).
      if (socket !== undefined && socket.readyState !== WebSocket.CLOSED) socket.terminate();
      cb(err);
    },
  });
  const output = new Writable({
    write(chunk: Buffer, _enc, cb) {
      stream.push(chunk);
      cb();
    },
  });
  const errors = new Writable({
    write(chunk: Buffer, _enc, cb) {
      errorText += chunk.toString('utf8');
      cb();
    },
  });
  const forward = new k8s.PortForward(
    kc,
    true,
    forwardSocketHandler(kc, timeoutMs, (ws) => {
      socket = ws;
      if (stream.destroyed) ws.terminate();
      ws.on('error', (e) => {
        if (!isTooLong(e)) return;
        stream.destroy(
          new HoptraceError(
            'KUBECTL_PORT_FORWARD',
            `a WebSocket message longer than ${PORT_FORWARD_MAX_MESSAGE_BYTES} bytes (8 MiB) came through the port-forward, not read: a port-forward's messages are one read of the pod's socket each (32 KiB)`,
            {
              where,
              hint: `the kubeconfig's server (or a proxy in front of it) does not forward as the API server does: check \`kubectl -n ${namespace} port-forward pod/${name} ${port}\` through it`,
            },
          ),
        );
      });
    }),
  );
  forward.portForward(namespace, name, [port], output, errors, input).then(
    (ws) => {
      if (stream.destroyed) return;
      (ws as unknown as WebSocket).on('close', () => {
        if (stream.destroyed) return; // already failed (a message too long) or destroyed
        if (errorText !== '') stream.destroy(forwardError(new Error(errorText.trim()), where));
        else stream.push(null);
      });
    },
    (e: unknown) => {
      // ws reports a refused upgrade as an ErrorEvent whose message carries the status.
      const err = (e as { message?: unknown; error?: unknown }).error ?? e;
      stream.destroy(forwardError(err, where));
    },
  );
  return stream;
}

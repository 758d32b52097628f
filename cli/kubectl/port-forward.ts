/**
 * One TCP connection to a pod's port through the API server, as a Duplex stream: client-node's
 * `PortForward` (the WebSocket port-forward, `v4.channel.k8s.io`: channel 0 the data, channel 1
 * the kubelet's error text, each opened by two bytes naming the port). Nothing listens on a local
 * port, so no other process on this machine can use the forward.
 *
 * client-node never ends its output when the WebSocket closes (only v5's close frame would), so
 * the stream ends itself on the socket's close; an error text on channel 1 makes it fail with
 * KUBECTL_PORT_FORWARD, a refused upgrade (401/403) with K8S_FORBIDDEN.
 */
import { Duplex, PassThrough, Writable } from 'node:stream';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';

/** What of the WebSocket client-node returns is used here (isomorphic-ws is ws in Node). */
interface ForwardSocket {
  readyState: number;
  close(): void;
  on(event: 'close', fn: () => void): void;
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

/** Opens a connection to `port` of pod `namespace/name`; the stream fails with a coded error. */
export function openPortForward(
  k8s: typeof K8s,
  kc: K8s.KubeConfig,
  namespace: string,
  name: string,
  port: number,
): Duplex {
  const where = `port-forward ${namespace}/${name}:${port}`;
  const input = new PassThrough(); // written before the socket is open: buffered until then
  let socket: ForwardSocket | undefined;
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
      if (socket !== undefined && socket.readyState <= 1) socket.close();
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
  const forward = new k8s.PortForward(kc, true);
  forward.portForward(namespace, name, [port], output, errors, input).then(
    (ws) => {
      socket = ws as unknown as ForwardSocket;
      if (stream.destroyed) {
        socket.close();
        return;
      }
      socket.on('close', () => {
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

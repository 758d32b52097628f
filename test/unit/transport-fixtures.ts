/**
 * Shared pieces of the transport tests: events, a loopback server, a hand-driven agent speaking
 * raw Envelopes, and a condition signal (tests wait for events, never for time).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import { isHoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import type { Envelope, EventBatch, Hello } from '../../common/wire';

export const TOKEN = 'test-token-0123456789';

export function event(frame: number): PacketEvent {
  return {
    point: 'decap',
    node: 'vpn-node',
    iface: 'vxlan0',
    linktype: 'ethernet',
    tsNs: 1_764_452_477_123_456_789n + BigInt(frame),
    frame,
    outer: null,
    inner: {
      proto: 'tcp',
      ipProto: 6,
      src: '10.90.0.42',
      dst: '10.244.2.5',
      sport: 40000,
      dport: 80,
    },
    tunnels: [{ kind: 'vxlan', id: 42 }],
    keys: { payloadLength: 0, tcpSeq: frame, tcpFlags: 0x02 },
    truncated: false,
    wireLength: 74,
  };
}

/** A batch of `n` events with frames first..first+n-1. */
export function batch(first: number, n: number, captureId = 'cap1'): EventBatch {
  return {
    captureId,
    point: 'decap',
    events: Array.from({ length: n }, (_, i) => event(first + i)),
  };
}

export function hello(agentId: string): Hello {
  return {
    agentId,
    node: `node-${agentId}`,
    version: '0.1.0',
    nodeAddresses: ['192.168.50.1'],
    namespaces: [],
    spoolFirstSeq: 0,
  };
}

/** An HTTP server listening on 127.0.0.1 (port 0 = any); resolves once listening. */
export async function listen(port = 0): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => res.writeHead(404).end());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

export async function closeServer(server: Server): Promise<void> {
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}

/** Resolves waiters whose condition became true; call notify() whenever state changes. */
export class Signal {
  private waiters: { pred: () => boolean; resolve: () => void }[] = [];
  wait(pred: () => boolean): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }
  notify(): void {
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred()) return true;
      w.resolve();
      return false;
    });
  }
}

/** A hand-driven agent: sends chosen Envelopes or raw frames, records what it receives. */
export class RawAgent {
  readonly received: Envelope[] = [];
  readonly signal = new Signal();
  closeCode: number | undefined;
  closeReason = '';
  status: number | undefined;
  readonly opened: Promise<boolean>;
  readonly closed: Promise<void>;

  constructor(readonly ws: WebSocket) {
    this.opened = new Promise((resolve) => {
      ws.once('open', () => {
        resolve(true);
      });
      ws.once('unexpected-response', (_req, res) => {
        this.status = res.statusCode;
        res.resume();
        resolve(false);
        ws.terminate();
      });
    });
    ws.on('error', () => undefined);
    ws.on('message', (data: Buffer) => {
      this.received.push(decodeEnvelope(data));
      this.signal.notify();
    });
    this.closed = new Promise((resolve) => {
      ws.once('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        this.signal.notify();
        resolve();
      });
    });
  }

  static connect(port: number, token: string | undefined, path = '/v1/agents'): RawAgent {
    const headers: Record<string, string> = {};
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    return new RawAgent(new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers }));
  }

  send(env: Envelope): void {
    this.ws.send(encodeEnvelope(env));
  }

  /** Waits until an Envelope matching `pred` arrived; returns it. */
  async next(pred: (e: Envelope) => boolean): Promise<Envelope> {
    await this.signal.wait(() => this.received.some(pred));
    const found = this.received.find(pred);
    if (!found) throw new Error('unreachable');
    return found;
  }

  acks(): number[] {
    return this.received.flatMap((e) => (e.kind === 'ack' ? [e.ack.seq] : []));
  }
}

/** The error code decodeEnvelope throws for `bytes`; 'decoded' when it did not throw. */
export function decodeFailure(bytes: Uint8Array): string {
  try {
    decodeEnvelope(bytes);
    return 'decoded';
  } catch (e) {
    return isHoptraceError(e) ? e.code : `other exception: ${String(e)}`;
  }
}

/**
 * A simulated agent: the agent's half of the protocol as agent/link/collector-link.ts and
 * agent/link/spool.ts speak it, with no capture behind it — the scenario decides what it
 * "captured". One agent id and one node each; seq from 1, one more per spooled message; hello →
 * helloAck{lastSeq} → everything up to lastSeq forgotten, the rest resent in order; a message is
 * forgotten only when the collector acknowledged it; reconnects with the agent's backoff.
 *
 * The spool keeps the agent's overflow policy: past `spoolLimit` event batches a NEW batch is
 * dropped and counted in one Lost per capture and point, updated in place until it is sent; while
 * it is on the wire (sent, unacknowledged) further drops are counted aside and become the next Lost
 * once it is acknowledged. So what the collector stores plus what it is told was lost is exactly
 * what was captured. For the
 * read-back, every event batch remembers its frames (stream events are unique by node and frame,
 * sim-events.ts), and the frames of acknowledged batches are tallied per capture and point.
 */
import WebSocket from 'ws';
import { decodeEnvelope, encodeEnvelope, type SpooledKind } from '../../common/envelope';
import type { PacketEvent } from '../../common/event';
import type {
  CaptureCommand,
  CaptureState,
  Envelope,
  Hello,
  Lost,
  StopCommand,
} from '../../common/wire';

export interface SimAgentOptions {
  /** ws:// URL of the collector's agent endpoint. */
  url: string;
  token: string;
  agentId: string;
  node: string;
  /** The address of the agent's one pod namespace: what a capture point targets. */
  podIp: string;
  /** The node's own address (default: none). */
  nodeIp?: string;
  /** Most event batches spooled (the agent's default: 10,000). */
  spoolLimit?: number;
  /** Stop writing while the socket buffers more (the agent's default: 4 MiB). */
  highWaterBytes?: number;
  /** Reconnect backoff (the agent's default: 200 ms doubling to 10 s, equal jitter). */
  backoff?: { minMs: number; maxMs: number };
  /** Ping interval; a collector silent for a whole one is dead (the agent's default: 10 s). */
  heartbeatMs?: number;
  /** Time the collector has to answer hello (the agent's default: 10 s). */
  helloTimeoutMs?: number;
}

interface Entry {
  seq: number;
  kind: SpooledKind;
  bytes: Uint8Array;
  /** `captureId/point` of an events or lost message. */
  stream: string;
  /** Events of a batch, and its first and last frame (stream events are numbered in order). */
  events: number;
  first: number;
  last: number;
  /** A Lost not yet on the wire: further drops add to it. */
  lost?: Lost;
}

/** What became of one capture point's events. */
export interface StreamTally {
  /** Events put in the spool (sent, or to be sent). */
  spooled: number;
  /** Events of batches the collector acknowledged. */
  acked: number;
  /** Events dropped by the full spool (told to the collector in Lost messages). */
  lost: number;
  /** Frames of the acknowledged batches, as [first, last] runs. */
  ackedRuns: [number, number][];
}

type Phase = 'idle' | 'connecting' | 'handshake' | 'ready' | 'closed';

/** A command from the collector: start or stop capturing a point. */
export type SimCommand =
  { kind: 'capture'; capture: CaptureCommand } | { kind: 'stop'; stop: StopCommand };

export class SimAgent {
  readonly agentId: string;
  readonly node: string;
  readonly podIp: string;
  /** Per `captureId/point`. */
  readonly tallies = new Map<string, StreamTally>();
  /**
   * Connections that completed hello, close codes seen, messages written (resends included), Lost
   * messages spooled.
   */
  readonly counts = { helloAcks: 0, sent: 0, lostMessages: 0, closes: new Map<number, number>() };
  private readonly opts: Required<SimAgentOptions>;
  private entries: Entry[] = [];
  private head = 0;
  private cursor = 0;
  private batches = 0;
  private nextSeq = 1;
  private readonly pendingLost = new Map<string, Entry>();
  /** Lost entries sent and not yet acknowledged, by stream. */
  private readonly inFlightLost = new Map<string, Entry>();
  /** Drops counted while the stream's Lost was on the wire (agent/link/spool.ts does the same). */
  private readonly deferredLost = new Map<
    string,
    { captureId: string; point: string; count: number }
  >();
  private ws: WebSocket | undefined;
  private phase: Phase = 'idle';
  private attempt = 0;
  private alive = true;
  private blocked = false;
  private timers: { reconnect?: NodeJS.Timeout; hello?: NodeJS.Timeout; beat?: NodeJS.Timeout } =
    {};
  private readonly commandHandlers: ((cmd: SimCommand) => void)[] = [];

  constructor(opts: SimAgentOptions) {
    this.agentId = opts.agentId;
    this.node = opts.node;
    this.podIp = opts.podIp;
    this.opts = {
      nodeIp: '',
      spoolLimit: 10_000,
      highWaterBytes: 4 * 1024 * 1024,
      backoff: { minMs: 200, maxMs: 10_000 },
      heartbeatMs: 10_000,
      helloTimeoutMs: 10_000,
      ...opts,
    };
  }

  /** Starts connecting (and reconnecting until close). */
  start(): void {
    this.connect();
  }

  /** helloAck received on the current connection. */
  get connected(): boolean {
    return this.phase === 'ready';
  }

  /** Messages not yet acknowledged. */
  get spooled(): number {
    return this.entries.length - this.head;
  }

  /** A new event batch would be dropped. */
  spoolFull(): boolean {
    return this.batches >= this.opts.spoolLimit;
  }

  onCommand(handler: (cmd: SimCommand) => void): void {
    this.commandHandlers.push(handler);
  }

  tally(captureId: string, point: string): StreamTally {
    const key = `${captureId}/${point}`;
    let t = this.tallies.get(key);
    if (t === undefined) {
      t = { spooled: 0, acked: 0, lost: 0, ackedRuns: [] };
      this.tallies.set(key, t);
    }
    return t;
  }

  /** Spools a batch; false when the spool was full and it was dropped (counted in a Lost). */
  sendEvents(captureId: string, point: string, events: PacketEvent[]): boolean {
    if (this.spoolFull()) {
      this.drop(captureId, point, events.length);
      return false;
    }
    const first = events[0]?.frame ?? 0;
    const last = events[events.length - 1]?.frame ?? 0;
    this.push({ seq: 0, kind: 'events', events: { captureId, point, events } }, events.length, [
      first,
      last,
    ]);
    this.tally(captureId, point).spooled += events.length;
    this.pump();
    return true;
  }

  /**
   * What the spool does with a batch it has no room for, without building the batch: its events
   * are counted lost and told to the collector.
   */
  drop(captureId: string, point: string, count: number): void {
    if (count <= 0) return;
    this.tally(captureId, point).lost += count;
    this.spoolLost(captureId, point, count);
  }

  private spoolLost(captureId: string, point: string, count: number): void {
    const stream = `${captureId}/${point}`;
    if (!this.pendingLost.has(stream) && this.inFlightLost.has(stream)) {
      const d = this.deferredLost.get(stream);
      if (d === undefined) this.deferredLost.set(stream, { captureId, point, count });
      else d.count += count;
      return;
    }
    const pending = this.pendingLost.get(stream);
    if (pending?.lost !== undefined) {
      pending.lost.count += count;
      pending.bytes = encodeEnvelope({ seq: pending.seq, kind: 'lost', lost: pending.lost });
      return;
    }
    const lost: Lost = { captureId, point, count, reason: 'spool overflow' };
    const entry = this.push({ seq: 0, kind: 'lost', lost }, 0, [0, 0]);
    entry.lost = lost;
    this.counts.lostMessages++;
    this.pendingLost.set(stream, entry);
    this.pump();
  }

  /** Spools a status of a capture point, as agent/runtime.ts reports one. */
  sendStatus(captureId: string, point: string, state: CaptureState, packets: number): void {
    this.push(
      {
        seq: 0,
        kind: 'status',
        status: {
          captureId,
          point,
          state,
          packets,
          kernelDrops: 0,
          ifaceDrops: null,
          queueDrops: 0,
          errorCode: '',
          message: '',
          netns: `/run/netns/${this.node}`,
          netnsAddresses: [this.podIp],
          iface: 'eth0',
          linkType: '',
        },
      },
      0,
      [0, 0],
    );
    this.pump();
  }

  /** Stops reconnecting and closes; unacknowledged messages are abandoned. */
  close(): void {
    this.phase = 'closed';
    clearTimeout(this.timers.reconnect);
    this.clearTimers();
    this.ws?.terminate();
    this.ws = undefined;
  }

  private push(
    env: Envelope & { kind: SpooledKind },
    events: number,
    frames: [number, number],
  ): Entry {
    env.seq = this.nextSeq++;
    const stream =
      env.kind === 'events'
        ? `${env.events.captureId}/${env.events.point}`
        : env.kind === 'lost'
          ? `${env.lost.captureId}/${env.lost.point}`
          : '';
    const entry: Entry = {
      seq: env.seq,
      kind: env.kind,
      bytes: encodeEnvelope(env),
      stream,
      events,
      first: frames[0],
      last: frames[1],
    };
    this.entries.push(entry);
    if (env.kind === 'events') this.batches++;
    return entry;
  }

  /** Forgets every entry with seq <= `seq` (the collector stored it). */
  private ackThrough(seq: number): void {
    let n = 0;
    for (;;) {
      const e = this.entries[this.head];
      if (!e || e.seq > seq) break;
      this.head++;
      n++;
      if (e.kind === 'events') {
        this.batches--;
        const t = this.tallies.get(e.stream);
        if (t !== undefined) {
          t.acked += e.events;
          const run = t.ackedRuns[t.ackedRuns.length - 1];
          if (run !== undefined && run[1] + 1 === e.first) run[1] = e.last;
          else t.ackedRuns.push([e.first, e.last]);
        }
      }
      if (e.lost !== undefined && this.pendingLost.get(e.stream) === e)
        this.pendingLost.delete(e.stream);
      if (e.lost !== undefined && this.inFlightLost.get(e.stream) === e)
        this.inFlightLost.delete(e.stream);
    }
    this.cursor = Math.max(0, this.cursor - n);
    for (const [stream, d] of this.deferredLost) {
      if (this.inFlightLost.has(stream)) continue;
      this.deferredLost.delete(stream);
      this.spoolLost(d.captureId, d.point, d.count);
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /** The collector holds seqs beyond ours (an earlier run with this id): renumber, as the agent. */
  private renumberFrom(first: number): void {
    this.nextSeq = first;
    for (let i = this.head; i < this.entries.length; i++) {
      const e = this.entries[i];
      if (!e) continue;
      const env = decodeEnvelope(e.bytes);
      e.seq = env.seq = this.nextSeq++;
      e.bytes = encodeEnvelope(env);
    }
  }

  private hello(): Hello {
    return {
      agentId: this.agentId,
      node: this.node,
      version: 'reliability-sim',
      nodeAddresses: this.opts.nodeIp === '' ? [] : [this.opts.nodeIp],
      namespaces: [
        {
          path: `/run/netns/${this.node}`,
          inode: 4_026_531_840,
          addresses: [this.podIp],
          interfaces: ['eth0', 'tun0'],
        },
      ],
      spoolFirstSeq: this.entries[this.head]?.seq ?? 0,
    };
  }

  private clearTimers(): void {
    clearTimeout(this.timers.hello);
    clearInterval(this.timers.beat);
  }

  private connect(): void {
    if (this.phase === 'closed') return;
    this.phase = 'connecting';
    const ws = new WebSocket(this.opts.url, {
      headers: { Authorization: `Bearer ${this.opts.token}` },
      perMessageDeflate: false,
      handshakeTimeout: this.opts.helloTimeoutMs,
    });
    this.ws = ws;
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      ws.terminate();
    });
    ws.on('open', () => {
      this.onOpen(ws);
    });
    ws.on('message', (data: Buffer, isBinary) => {
      this.alive = true;
      if (ws === this.ws && isBinary) this.onEnvelope(ws, data);
    });
    ws.on('ping', () => (this.alive = true));
    ws.on('pong', () => (this.alive = true));
    ws.on('error', () => undefined);
    ws.on('close', (code) => {
      this.counts.closes.set(code, (this.counts.closes.get(code) ?? 0) + 1);
      if (ws !== this.ws) return;
      this.clearTimers();
      this.ws = undefined;
      this.blocked = false;
      if (this.phase === 'closed') return;
      this.phase = 'idle';
      const { minMs, maxMs } = this.opts.backoff;
      const step = Math.min(maxMs, minMs * 2 ** Math.min(this.attempt++, 30));
      this.timers.reconnect = setTimeout(
        () => {
          this.connect();
        },
        Math.round(step / 2 + (Math.random() * step) / 2),
      );
    });
  }

  private onOpen(ws: WebSocket): void {
    this.phase = 'handshake';
    this.alive = true;
    ws.send(encodeEnvelope({ seq: 0, kind: 'hello', hello: this.hello() }));
    this.timers.hello = setTimeout(() => {
      ws.terminate();
    }, this.opts.helloTimeoutMs);
    this.timers.beat = setInterval(() => {
      if (!this.alive) {
        ws.terminate();
        return;
      }
      this.alive = false;
      ws.ping();
    }, this.opts.heartbeatMs);
  }

  private onEnvelope(ws: WebSocket, data: Buffer): void {
    let env: Envelope;
    try {
      env = decodeEnvelope(data);
    } catch {
      ws.terminate();
      return;
    }
    switch (env.kind) {
      case 'helloAck': {
        const lastSeq = env.helloAck.lastSeq;
        if (lastSeq >= this.nextSeq) this.renumberFrom(lastSeq + 1);
        this.ackThrough(lastSeq);
        if (this.phase !== 'handshake') return;
        clearTimeout(this.timers.hello);
        this.phase = 'ready';
        this.attempt = 0;
        this.counts.helloAcks++;
        this.cursor = 0;
        this.pump();
        return;
      }
      case 'ack':
        this.ackThrough(env.ack.seq);
        this.pump();
        return;
      case 'capture':
      case 'stop':
        for (const h of this.commandHandlers) h(env);
        return;
      case 'conntrackQuery': {
        // No kernel behind this agent: no entries, said so.
        const q = env.conntrackQuery;
        ws.send(
          encodeEnvelope({
            seq: 0,
            kind: 'conntrackReport',
            conntrackReport: {
              requestId: q.requestId,
              captureId: q.captureId,
              agentId: this.agentId,
              entries: [],
              errors: [],
            },
          }),
        );
        return;
      }
      case 'framesRequest': {
        // No capture behind this agent: nothing retained, said so.
        const q = env.framesRequest;
        ws.send(
          encodeEnvelope({
            seq: 0,
            kind: 'framesReply',
            framesReply: {
              requestId: q.requestId,
              captureId: q.captureId,
              point: q.point,
              linkType: null,
              snaplen: 0,
              records: [],
              missing: q.frames.map((frame) => ({ frame, reason: 'RETENTION_OFF' })),
              retained: 0,
              retentionDropped: 0,
              errorCode: 'RETENTION_OFF',
              message: 'a simulated agent retains nothing',
            },
          }),
        );
        return;
      }
      case 'error':
      case 'heartbeat':
      case 'doctorRequest':
      case 'hello':
      case 'events':
      case 'status':
      case 'lost':
      case 'doctorReport':
      case 'conntrackReport':
      case 'framesReply':
        return;
    }
  }

  /** Writes spooled messages while connected and below the high-water mark. */
  private pump(): void {
    const ws = this.ws;
    if (this.phase !== 'ready' || !ws || ws.readyState !== WebSocket.OPEN) return;
    while (ws.bufferedAmount < this.opts.highWaterBytes) {
      const e = this.entries[this.head + this.cursor];
      if (!e) return;
      this.cursor++;
      if (e.lost !== undefined && this.pendingLost.get(e.stream) === e) {
        this.pendingLost.delete(e.stream);
        this.inFlightLost.set(e.stream, e);
      }
      this.counts.sent++;
      ws.send(e.bytes, () => {
        if (this.blocked && ws === this.ws && ws.bufferedAmount < this.opts.highWaterBytes / 2) {
          this.blocked = false;
          this.pump();
        }
      });
    }
    this.blocked = true;
  }
}

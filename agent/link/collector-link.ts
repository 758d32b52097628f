/**
 * The agent's link to the collector: one WebSocket, reconnected with backoff, carrying a bounded
 * spool of messages (agent/link/spool.ts) that stay until the collector acknowledges them.
 *
 * On every connection: hello → helloAck{lastSeq} → drop the spool up to lastSeq → resend the rest
 * in order. send() only spools and, when connected and the socket is not backed up, writes: it
 * never waits for the network, so the capture path is never slowed down by the collector.
 */
import pino from 'pino';
import WebSocket from 'ws';
import { MAX_MESSAGE_BYTES } from '../../common/command-limits';
import type { SpooledKind } from '../../common/envelope';
import { decodeEnvelope, encodeEnvelope, MAX_SEQ, refusedEnvelopeOf } from '../../common/envelope';
import { ERRORS, HoptraceError, isHoptraceError, type ErrorCode } from '../../common/errors';
import type {
  CaptureCommand,
  ConntrackQuery,
  ConntrackReport,
  DoctorReport,
  DoctorRequest,
  CaptureStatus,
  Envelope,
  ErrorReport,
  EventBatch,
  FramesReply,
  FramesRequest,
  Hello,
  HelloAck,
  Lost,
  StopCommand,
} from '../../common/wire';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './backoff';
import { Spool } from './spool';
import { maskOptionsFor } from './frame-mask';
import { requestRefused } from './request-refusal';

export interface CollectorLinkOptions {
  /** ws:// or wss:// URL of the collector's agent endpoint (…/v1/agents). */
  url: string;
  /**
   * The bearer token, or a function read on every connection (a projected ServiceAccount token
   * is rotated by the kubelet; a file read fails with AUTH_NO_TOKEN and the link retries).
   */
  token: string | (() => string);
  /** CA certificate(s) to verify a wss:// collector. */
  ca?: Buffer;
  /** A TLS client certificate and its key (the collector's --client-ca identifies the node by it). */
  cert?: Buffer;
  key?: Buffer;
  /**
   * The collector holds a seq for our agent id so high that ours cannot continue above it (only a
   * peer that spoke under our id could have put it there): the agent takes a new id (called before
   * the next hello) and the link renumbers its spool.
   */
  onSeqExhausted?: () => void;
  /** The hello sent on every connection (called each time: namespaces may have changed). */
  hello: () => Hello;
  /** Most event batches spooled (default 10000); beyond it new batches are dropped and counted. */
  spoolLimit?: number;
  /** Most bytes spooled (default 256 MiB, spool.ts); beyond it new batches are dropped likewise. */
  spoolBytes?: number;
  /** Ping interval; a collector silent for a whole interval is considered dead (default 10 s). */
  heartbeatMs?: number;
  backoff?: BackoffOptions;
  /**
   * How long a connection must stay up before the backoff starts again from its minimum and
   * lastError is cleared (default 30 s): a collector that answers hello and then drops or refuses
   * the link every time is retried ever more slowly, not ~6 times a second, and stays visible.
   */
  healthyMs?: number;
  /** Largest message taken from the collector (default 16 MiB, what the collector takes). */
  maxPayloadBytes?: number;
  /** Time the collector has to answer hello (default 10 s). */
  helloTimeoutMs?: number;
  /** Stop writing while the socket buffers more than this many bytes (default 4 MiB). */
  highWaterBytes?: number;
  /** First seq of this run (default: microseconds since the epoch, so a restarted agent continues above its previous run). */
  firstSeq?: number;
  logger?: pino.Logger;
}

export type CollectorCommand =
  { kind: 'capture'; capture: CaptureCommand } | { kind: 'stop'; stop: StopCommand };

/** Requests from the collector that the agent answers once (doctor facts, conntrack, frames). */
export type CollectorRequest =
  | { kind: 'doctorRequest'; doctorRequest: DoctorRequest }
  | { kind: 'conntrackQuery'; conntrackQuery: ConntrackQuery }
  | { kind: 'framesRequest'; framesRequest: FramesRequest };

/** The agent's answer to a CollectorRequest. */
export type AgentReplyBody =
  | { kind: 'doctorReport'; doctorReport: DoctorReport }
  | { kind: 'conntrackReport'; conntrackReport: ConntrackReport }
  | { kind: 'framesReply'; framesReply: FramesReply };

export interface LinkStats {
  /** helloAck received on the current connection. */
  connected: boolean;
  /** Messages waiting for the collector's ack. */
  spooled: number;
  spoolBytes: number;
  /** Messages written to the socket (resends included). */
  sent: number;
  /** Messages the collector acknowledged. */
  acked: number;
  /** Events dropped because the spool was full (each reported in a Lost message). */
  lostEvents: number;
  /** Connection attempts after the first. */
  reconnects: number;
  /**
   * Code of the last link problem (cannot connect, refused, an undecodable message, a message too
   * large); null once a connection has stayed up for healthyMs (30 s).
   */
  lastError: ErrorCode | null;
  /**
   * Messages from the collector whose body kind this version does not know (a newer collector's:
   * ignored, logged once per kind with code WIRE_UNKNOWN_KIND; the collector does the same with a
   * newer agent's, its agent record's unknownMessages).
   */
  unknownMessages: number;
  /** Messages from the collector that did not decode or broke a bound (ignored, reported). */
  malformed: number;
}

type Phase = 'idle' | 'connecting' | 'handshake' | 'ready' | 'closed';

interface SpooledBodies {
  events: EventBatch;
  status: CaptureStatus;
  lost: Lost;
  error: ErrorReport;
}

function spooledEnvelope(
  kind: SpooledKind,
  body: SpooledBodies[SpooledKind],
): Envelope & { kind: SpooledKind } {
  switch (kind) {
    case 'events':
      return { seq: 0, kind, events: body as EventBatch };
    case 'status':
      return { seq: 0, kind, status: body as CaptureStatus };
    case 'lost':
      return { seq: 0, kind, lost: body as Lost };
    case 'error':
      return { seq: 0, kind, error: body as ErrorReport };
  }
}

/** The agent's connection to the collector. Starts connecting on construction. */
export class CollectorLink {
  private readonly log: pino.Logger;
  private readonly spool: Spool;
  private readonly heartbeatMs: number;
  private readonly helloTimeoutMs: number;
  private readonly highWater: number;
  private readonly backoff: BackoffOptions;
  private ws: WebSocket | undefined;
  private phase: Phase = 'idle';
  private attempt = 0;
  private alive = true;
  private blocked = false;
  private timers: {
    reconnect?: NodeJS.Timeout;
    hello?: NodeJS.Timeout;
    beat?: NodeJS.Timeout;
    healthy?: NodeJS.Timeout;
  } = {};
  private counts = { sent: 0, acked: 0, reconnects: 0, unknownMessages: 0, malformed: 0 };
  /** Unknown body field numbers already logged (each once; a few dozen at most). */
  private readonly unknownLogged = new Set<number>();
  private lastError: ErrorCode | null = null;
  private readonly commandHandlers: ((cmd: CollectorCommand) => void)[] = [];
  private readonly requestHandlers: ((req: CollectorRequest) => void)[] = [];
  private readonly errorHandlers: ((err: HoptraceError) => void)[] = [];
  private readonly connectHandlers: ((ack: HelloAck) => void)[] = [];
  private closedPromise: Promise<void> = Promise.resolve();
  private flushWaiters: (() => void)[] = [];

  constructor(private readonly opts: CollectorLinkOptions) {
    this.log = opts.logger ?? pino({ enabled: false });
    this.spool = new Spool(
      opts.spoolLimit ?? 10_000,
      opts.firstSeq ?? Date.now() * 1000,
      opts.spoolBytes,
    );
    this.heartbeatMs = opts.heartbeatMs ?? 10_000;
    this.helloTimeoutMs = opts.helloTimeoutMs ?? 10_000;
    this.highWater = opts.highWaterBytes ?? 4 * 1024 * 1024;
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.connect();
  }

  /**
   * Spools a message for the collector and transmits it when possible. Returns its seq, or 0 when
   * the spool was full and the batch was dropped (counted, reported in a Lost message).
   */
  send(kind: 'events', body: EventBatch): number;
  send(kind: 'status', body: CaptureStatus): number;
  send(kind: 'lost', body: Lost): number;
  send(kind: 'error', body: ErrorReport): number;
  send(kind: SpooledKind, body: SpooledBodies[SpooledKind]): number {
    if (this.phase === 'closed') return 0;
    const seq = this.spool.add(spooledEnvelope(kind, body));
    this.pump();
    return seq;
  }

  /** Commands from the collector (capture, stop). */
  onCommand(handler: (cmd: CollectorCommand) => void): void {
    this.commandHandlers.push(handler);
  }

  /** Doctor and conntrack requests from the collector. */
  onRequest(handler: (req: CollectorRequest) => void): void {
    this.requestHandlers.push(handler);
  }

  /**
   * Sends a reply to a request, unspooled: a reply lost with the connection is not resent (the
   * collector's request times out and can be repeated). False when not connected.
   */
  reply(body: AgentReplyBody): boolean {
    const ws = this.ws;
    if (this.phase !== 'ready' || ws === undefined || ws.readyState !== WebSocket.OPEN)
      return false;
    ws.send(encodeEnvelope({ seq: 0, ...body }));
    return true;
  }

  /**
   * Link problems (AUTH_REFUSED, LINK_UNREACHABLE, WIRE_HELLO_TIMEOUT, WIRE_MALFORMED,
   * WIRE_TOO_LARGE, a code the collector closed with, …), reported and logged by the link once per
   * change of code: the link keeps retrying by itself.
   */
  onError(handler: (err: HoptraceError) => void): void {
    this.errorHandlers.push(handler);
  }

  /** Each completed hello (the collector answered). */
  onConnected(handler: (ack: HelloAck) => void): void {
    this.connectHandlers.push(handler);
  }

  stats(): LinkStats {
    return {
      connected: this.phase === 'ready',
      spooled: this.spool.length,
      spoolBytes: this.spool.bytes,
      sent: this.counts.sent,
      acked: this.counts.acked,
      lostEvents: this.spool.droppedEvents,
      reconnects: this.counts.reconnects,
      lastError: this.lastError,
      unknownMessages: this.counts.unknownMessages,
      malformed: this.counts.malformed,
    };
  }

  /**
   * Sends a fresh hello on the open connection (the agent's namespaces changed: a pod appeared),
   * so the collector can resolve new pod IPs without a reconnect. No-op while not connected: the
   * next connection sends a fresh hello anyway.
   */
  refreshHello(): boolean {
    const ws = this.ws;
    if (this.phase !== 'ready' || ws?.readyState !== WebSocket.OPEN) return false;
    const hello = { ...this.opts.hello(), spoolFirstSeq: this.spool.firstSeq };
    ws.send(encodeEnvelope({ seq: 0, kind: 'hello', hello }));
    return true;
  }

  /** Resolves once the collector acknowledged everything spooled (e.g. before a clean exit). */
  flush(): Promise<void> {
    if (this.spool.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.flushWaiters.push(resolve));
  }

  private acked(n: number): void {
    this.counts.acked += n;
    if (this.spool.length > 0) return;
    const waiters = this.flushWaiters;
    this.flushWaiters = [];
    for (const w of waiters) w();
  }

  /** Closes the connection and stops reconnecting; unacknowledged messages are abandoned. */
  async close(): Promise<void> {
    if (this.phase === 'closed') return this.closedPromise;
    this.phase = 'closed';
    this.clearTimers();
    clearTimeout(this.timers.reconnect);
    const ws = this.ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      this.closedPromise = new Promise((resolve) => {
        ws.once('close', () => {
          resolve();
        });
      });
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000, 'agent shutting down');
      const t = setTimeout(() => {
        ws.terminate();
      }, 2_000);
      t.unref();
    }
    return this.closedPromise;
  }

  private report(code: ErrorCode, detail: string): void {
    if (this.lastError === code) {
      this.log.debug({ code, url: this.opts.url }, detail);
      return;
    }
    this.lastError = code;
    const err = new HoptraceError(code, detail, { where: this.opts.url });
    this.log.error({ code, url: this.opts.url }, err.message);
    for (const h of this.errorHandlers) h(err);
  }

  private clearTimers(): void {
    clearTimeout(this.timers.hello);
    clearInterval(this.timers.beat);
    clearTimeout(this.timers.healthy);
  }

  private connect(): void {
    if (this.phase === 'closed') return;
    let token: string;
    try {
      token = typeof this.opts.token === 'string' ? this.opts.token : this.opts.token();
    } catch (e) {
      this.report(
        isHoptraceError(e) ? e.code : 'AUTH_NO_TOKEN',
        isHoptraceError(e) ? e.message : String(e),
      );
      this.phase = 'idle';
      this.scheduleReconnect();
      return;
    }
    this.phase = 'connecting';
    const ws = new WebSocket(this.opts.url, {
      headers: token === '' ? {} : { Authorization: `Bearer ${token}` },
      ...(this.opts.ca ? { ca: this.opts.ca } : {}),
      ...(this.opts.cert && this.opts.key ? { cert: this.opts.cert, key: this.opts.key } : {}),
      perMessageDeflate: false,
      // ws's default is 100 MiB: a collector (or whoever holds its side) could make the agent
      // buffer that much per message. Larger messages close the link (1009, WIRE_TOO_LARGE).
      maxPayload: this.opts.maxPayloadBytes ?? MAX_MESSAGE_BYTES,
      ...maskOptionsFor(this.opts.url),
      handshakeTimeout: this.helloTimeoutMs,
    });
    this.ws = ws;
    let reported = false;
    ws.on('unexpected-response', (_req, res) => {
      reported = true;
      res.resume();
      if (res.statusCode === 401) {
        this.report('AUTH_REFUSED', 'the collector refused our token (HTTP 401)');
      } else {
        this.report('LINK_UNREACHABLE', `the collector answered HTTP ${res.statusCode ?? 0}`);
      }
      ws.terminate();
    });
    ws.on('open', () => {
      this.onOpen(ws);
    });
    ws.on('message', (data: Buffer, isBinary) => {
      this.alive = true;
      if (ws === this.ws && isBinary) this.onEnvelope(data);
    });
    ws.on('ping', () => (this.alive = true));
    ws.on('pong', () => (this.alive = true));
    ws.on('error', (err: Error & { code?: string }) => {
      if (reported || ws !== this.ws) return;
      if (ws.readyState === WebSocket.CONNECTING || this.phase === 'connecting') {
        this.report('LINK_UNREACHABLE', err.message);
      } else if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
        const limit = this.opts.maxPayloadBytes ?? MAX_MESSAGE_BYTES;
        this.report('WIRE_TOO_LARGE', `the collector sent a message larger than ${limit} bytes`);
      } else {
        // ws's own protocol errors (WS_ERR_*) are the peer's framing; the rest is the network.
        const code =
          err.code?.startsWith('WS_ERR_') === true ? 'WIRE_MALFORMED' : 'LINK_UNREACHABLE';
        this.report(code, err.message);
      }
    });
    ws.on('close', (code, reason) => {
      if (ws !== this.ws) return;
      this.clearTimers();
      this.ws = undefined;
      this.blocked = false;
      if (this.phase === 'closed') return;
      if (this.phase === 'ready' || this.phase === 'handshake') {
        // The collector closes with its error code as the reason (common/envelope.ts CLOSE_CODES).
        const why = reason.toString();
        if (why in ERRORS)
          this.report(
            why as ErrorCode,
            `the collector closed the connection (${code}); reconnecting`,
          );
        else
          this.log.warn(
            { code: why || 'LINK_UNREACHABLE', closeCode: code, url: this.opts.url },
            'connection to the collector closed; reconnecting',
          );
      }
      this.phase = 'idle';
      this.scheduleReconnect();
    });
  }

  private scheduleReconnect(): void {
    const delay = backoffDelay(this.attempt++, this.backoff);
    this.timers.reconnect = setTimeout(() => {
      this.counts.reconnects++;
      this.connect();
    }, delay);
  }

  private onOpen(ws: WebSocket): void {
    this.phase = 'handshake';
    this.alive = true;
    const hello = { ...this.opts.hello(), spoolFirstSeq: this.spool.firstSeq };
    ws.send(encodeEnvelope({ seq: 0, kind: 'hello', hello }));
    this.timers.hello = setTimeout(() => {
      this.report('WIRE_HELLO_TIMEOUT', 'the collector did not answer hello in time');
      ws.terminate();
    }, this.helloTimeoutMs);
    this.timers.beat = setInterval(() => {
      if (!this.alive) {
        this.report('LINK_HEARTBEAT_TIMEOUT', 'the collector stopped answering heartbeats');
        ws.terminate();
        return;
      }
      this.alive = false;
      ws.ping();
    }, this.heartbeatMs);
  }

  private onEnvelope(data: Buffer): void {
    let env: Envelope;
    try {
      env = decodeEnvelope(data);
    } catch (e) {
      this.refused(e);
      return;
    }
    switch (env.kind) {
      case 'helloAck':
        this.onHelloAck(env.helloAck);
        return;
      case 'ack':
        this.acked(this.spool.ackThrough(env.ack.seq));
        this.pump();
        return;
      case 'capture':
      case 'stop':
        for (const h of this.commandHandlers) h(env);
        return;
      case 'doctorRequest':
      case 'conntrackQuery':
      case 'framesRequest':
        for (const h of this.requestHandlers) h(env);
        return;
      case 'error': {
        const code = env.error.code in ERRORS ? (env.error.code as ErrorCode) : 'WIRE_UNEXPECTED';
        this.report(code, `the collector says: ${env.error.message}`);
        return;
      }
      case 'heartbeat':
        return;
      case 'hello':
      case 'events':
      case 'status':
      case 'lost':
      case 'doctorReport':
      case 'conntrackReport':
      case 'framesReply':
        this.log.warn(
          { code: 'WIRE_UNEXPECTED', url: this.opts.url },
          `the collector sent ${env.kind}`,
        );
        return;
    }
  }

  /**
   * A message that did not decode. Messages are independent (ws frames them), so the link stays:
   * cutting it made a reconnect storm, since the collector sends the same thing again. A body kind
   * of a newer collector is ignored (logged once per kind, counted); anything else is reported
   * (lastError) and counted, and what it asked is answered when it can be told which it was: a
   * capture command fails its point with the reason, a doctor, conntrack or frames request gets
   * a refused reply (request-refusal.ts), so the collector does not wait for either.
   */
  private refused(e: unknown): void {
    const what = refusedEnvelopeOf(e);
    const field = what?.unknownField;
    if (field !== undefined) {
      this.counts.unknownMessages++;
      if (this.unknownLogged.size < 64 && !this.unknownLogged.has(field)) {
        this.unknownLogged.add(field);
        this.log.warn(
          { code: 'WIRE_UNKNOWN_KIND', url: this.opts.url, unknownField: field },
          `the collector sent a message of a kind this agent does not know (Envelope field ${field}: a newer collector?); ignored, and so are later ones of it`,
        );
      }
      return;
    }
    this.counts.malformed++;
    const code: ErrorCode = isHoptraceError(e) ? e.code : 'WIRE_MALFORMED';
    const detail = isHoptraceError(e) ? e.detail : 'undecodable message from the collector';
    this.report(code, `${detail}; the message was ignored`);
    if (what === undefined) return;
    if (what.kind === 'capture') {
      if (what.captureId !== undefined && what.point !== undefined)
        this.send('error', {
          code,
          message: `${code}: the capture command was refused: ${detail}`,
          captureId: what.captureId,
          point: what.point,
        });
      return;
    }
    const hello = this.opts.hello();
    const reply = requestRefused(what, { agentId: hello.agentId, node: hello.node }, code, detail);
    if (reply !== null) this.reply(reply);
  }

  private onHelloAck(ack: HelloAck): void {
    if (ack.lastSeq >= this.spool.nextSeq && ack.lastSeq + this.spool.length + 1 > MAX_SEQ) {
      this.report(
        'WIRE_SEQ_EXHAUSTED',
        `the collector holds seq ${ack.lastSeq} for our agent id, too close to 2^52 to continue; taking a new id`,
      );
      this.opts.onSeqExhausted?.();
      this.spool.renumberFrom(Date.now() * 1000);
      this.ws?.terminate();
      return;
    }
    if (ack.lastSeq >= this.spool.nextSeq) {
      // The collector remembers more than this run ever numbered: an earlier run of this agent.
      this.log.warn(
        { code: 'WIRE_UNEXPECTED', url: this.opts.url },
        `the collector holds seq ${ack.lastSeq} beyond ours; renumbering the spool`,
      );
      this.spool.renumberFrom(ack.lastSeq + 1);
    }
    this.acked(this.spool.ackThrough(ack.lastSeq));
    if (this.phase !== 'handshake') return; // a repeated hello: only trims
    clearTimeout(this.timers.hello);
    this.phase = 'ready';
    // Healthy only once it stays up: a collector that acknowledges hello and then drops the link
    // every time keeps the backoff growing and its last error visible.
    this.timers.healthy = setTimeout(() => {
      this.attempt = 0;
      this.lastError = null;
    }, this.opts.healthyMs ?? 30_000);
    this.timers.healthy.unref();
    this.spool.rewind();
    this.log.info(
      { url: this.opts.url, collectorId: ack.collectorId, spooled: this.spool.length },
      'connected to the collector',
    );
    for (const h of this.connectHandlers) h(ack);
    this.pump();
  }

  /** Writes spooled messages while connected and the socket buffer is below the high-water mark. */
  private pump(): void {
    const ws = this.ws;
    if (this.phase !== 'ready' || !ws || ws.readyState !== WebSocket.OPEN) return;
    while (ws.bufferedAmount < this.highWater) {
      const e = this.spool.takeNext();
      if (!e) return;
      this.counts.sent++;
      ws.send(e.bytes, () => {
        // Written out: if we stopped for backpressure and the buffer drained, continue.
        if (this.blocked && ws === this.ws && ws.bufferedAmount < this.highWater / 2) {
          this.blocked = false;
          this.pump();
        }
      });
    }
    this.blocked = true;
  }
}

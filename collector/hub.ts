/**
 * The collector's WebSocket endpoint for agents (implements AgentHub, collector/hub-types.ts).
 *
 * Agents authenticate on the HTTP upgrade (an AgentAuthenticator, collector/agent-auth.ts: refused
 * with 401 or 503 before a WebSocket exists), say hello, and then stream spooled messages with
 * increasing seq. The identity decides what the hello may claim: a node identity speaks only for
 * its node and for agent ids bound to that node (bound at first use, persisted); one agent per node
 * is connected at a time. A hello repeated on its connection (the agent's namespaces changed) is
 * kept and acknowledged, and told to onAgent only when it changed, at most once a second
 * (hello-repeats.ts). The hub hands each one
 * to the onMessage handler strictly in order per agent and acknowledges it only after the handler
 * resolved and lastSeqStore recorded it, so a collector restart loses nothing and a resend after
 * a reconnect is recognised as a duplicate. Close codes: CLOSE_CODES in common/envelope.ts.
 */
import { requestUrl } from './request-url';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import pino from 'pino';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { sharedTokenAuth, type AgentAuthenticator, type AgentIdentity } from './agent-auth';
import { MAX_MESSAGE_BYTES } from '../common/command-limits';
import {
  AGENT_KINDS,
  CLOSE_CODES,
  decodeEnvelope,
  encodeEnvelope,
  refusedEnvelopeOf,
} from '../common/envelope';
import { isHoptraceError, type ErrorCode } from '../common/errors';
import { agentIdProblem, nodeNameProblem } from '../common/agent-names';
import { HELLO_MAX_BYTES, helloHeapBytes, helloTooLarge } from '../common/hello-limits';
import { HelloPacer, helloChanged } from './hello-repeats';
import type { Envelope, Hello } from '../common/wire';
import type {
  AgentHub,
  AgentInfo,
  AgentMessage,
  AgentReply,
  HubCounters,
  LastSeqStore,
} from './hub-types';

export type { LastSeqStore } from './hub-types';
import { refuseUpgrade, remoteOf } from './hub-upgrade';

export interface AgentHubOptions {
  server: HttpServer | HttpsServer;
  /** URL path agents connect to (default '/v1/agents'). */
  path?: string;
  /** Who may connect (default: the shared `tokens`). */
  auth?: AgentAuthenticator;
  /** Accepted shared bearer tokens when no `auth` is given; an empty list refuses everyone. */
  tokens?: string[];
  /** Upgrades being authenticated at once (default 64); more are answered 503. */
  maxPendingAuth?: number;
  collectorId: string;
  lastSeqStore: LastSeqStore;
  /** Largest accepted message (default 16 MiB); larger ones close the connection with 1009 (WIRE_TOO_LARGE). */
  maxPayloadBytes?: number;
  /** Ping interval; a peer silent for a whole interval is dropped (default 10 s). */
  heartbeatMs?: number;
  /** Time an agent has to send hello after the upgrade (default 5 s). */
  helloTimeoutMs?: number;
  /**
   * Bytes that may wait in a connection's send queue (default 4 MiB). A peer that stops reading
   * its socket makes every ack and heartbeat queue up in the collector; past this, the
   * connection is cut (WIRE_NOT_READING, logged and counted) and its memory freed. It is
   * terminated, not closed with a code: a close frame would wait behind the unread bytes, which
   * such a peer never reads, so the peer sees 1006 (abnormal closure).
   */
  maxSendQueueBytes?: number;
  /**
   * A disconnected agent is forgotten this long after it was last seen (default 15 min): its
   * hello is dropped from memory and from GET /v1/agents. Its last stored seq stays in the data
   * directory, so a later reconnect resumes exactly.
   */
  forgetAfterMs?: number;
  /**
   * Disconnected agents remembered at most (default 1,024): past it the one seen longest ago is
   * forgotten at once, so ids that come and go faster than forgetAfterMs cannot grow the collector.
   */
  maxRememberedAgents?: number;
  /**
   * Heap the hellos of disconnected agents may hold together, estimated (common/hello-limits.ts
   * helloHeapBytes; default 64 MiB, ~750 agents of 110-pod nodes): past it the ones seen longest
   * ago are forgotten at once, so the remembered agents' memory is bounded in bytes, not only in
   * count (1,024 hellos of ~5 MB each, within every per-hello limit, would be 5 GB).
   */
  maxRememberedBytes?: number;
  /**
   * Bytes of one connection's received messages waiting in its agent's chain (decoded, not yet
   * stored) above which the collector stops reading that socket until half of them are done
   * (default 64 KiB; also at most 4 messages). The agent's own window is its socket buffer, so
   * without this a collector slower than its agents held every batch they spooled, decoded
   * (~600 B an event: 300,000 events, most of the main thread's heap, with 50 agents; with the
   * bound, the reliability load's peak RSS went from 958 to 422 MiB and its stored rate doubled).
   */
  maxPendingBytes?: number;
  logger?: pino.Logger;
}

/** A LastSeqStore in memory (tests; a collector without a data directory). */
export function memoryLastSeqStore(): LastSeqStore & { map: Map<string, number> } {
  const map = new Map<string, number>();
  const nodes = new Map<string, string>();
  return {
    map,
    get: (id) => map.get(id) ?? 0,
    set: (id, seq) => map.set(id, seq),
    nodeOf: (id) => nodes.get(id),
    bind: (id, node) => {
      // As CaptureStore's: one id a node, the node's earlier ids dropped.
      for (const [other, n] of nodes)
        if (n === node && other !== id) {
          nodes.delete(other);
          map.delete(other);
        }
      nodes.set(id, node);
    },
  };
}

interface Conn {
  ws: WebSocket;
  remote: string;
  identity: AgentIdentity;
  agentId: string | undefined;
  node: string | undefined;
  alive: boolean;
  /** Set once the connection is being refused: its queued messages are neither processed nor acked. */
  failed: boolean;
  helloTimer: NodeJS.Timeout | undefined;
  closed: Promise<void>;
  /** Received spooled messages in the chain, not yet done: their bytes and count. */
  pendingBytes: number;
  pendingMsgs: number;
  /** Reading is paused until the chain has done enough of them (maxPendingBytes). */
  paused: boolean;
  /** Messages of an unknown kind before the hello: its agent's record counts them then. */
  unknownBeforeHello: number;
}

interface AgentState {
  info: AgentInfo;
  /** What keeping info.hello costs (helloHeapBytes). */
  heapBytes: number;
  conn: Conn | undefined;
  /** Every message of this agent, across its connections, is processed in this one chain. */
  chain: Promise<void>;
  /** A message of an unknown kind was logged for this agent (once per agent). */
  unknownLogged: boolean;
  /** Tells a changed repeated hello to onAgent at most once a second (hello-repeats.ts). */
  pacer: HelloPacer;
}

type Spooled = Extract<Envelope, { kind: AgentMessage['kind'] }>;

function toAgentMessage(agentId: string, env: Spooled): AgentMessage {
  const seq = env.seq;
  switch (env.kind) {
    case 'events':
      return { kind: 'events', agentId, seq, batch: env.events };
    case 'status':
      return { kind: 'status', agentId, seq, status: env.status };
    case 'lost':
      return { kind: 'lost', agentId, seq, lost: env.lost };
    case 'error':
      return { kind: 'error', agentId, seq, error: env.error };
  }
}

function rawBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
}

/** Starts accepting agents on `opts.server` (which the caller owns, listens and closes). */
export function createAgentHub(opts: AgentHubOptions): AgentHub {
  const path = opts.path ?? '/v1/agents';
  const log = opts.logger ?? pino({ enabled: false });
  const heartbeatMs = opts.heartbeatMs ?? 10_000;
  const helloTimeoutMs = opts.helloTimeoutMs ?? 5_000;
  const store = opts.lastSeqStore;
  const maxPayload = opts.maxPayloadBytes ?? MAX_MESSAGE_BYTES;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload,
    perMessageDeflate: false,
    // One message per turn of the event loop: a socket whose buffer holds many batches would
    // otherwise have them all decoded and stored back to back (~200 ms measured with three agents
    // sending 1,000-event batches), and /healthz and the API wait behind them.
    allowSynchronousEvents: false,
  });
  const conns = new Set<Conn>();
  const agents = new Map<string, AgentState>();
  const counters: Omit<HubCounters, 'connected'> = {
    refusedUnauthenticated: 0,
    refusedMalformed: 0,
    messagesIn: 0,
    duplicatesDropped: 0,
    readPauses: 0,
  };
  let handler: ((msg: AgentMessage) => Promise<void>) | undefined;
  const replyHandlers: ((reply: AgentReply) => void)[] = [];
  const agentHandlers: ((agent: AgentInfo) => void)[] = [];
  let closing = false;
  const auth = opts.auth ?? sharedTokenAuth(opts.tokens ?? []);
  if (opts.auth === undefined && (opts.tokens ?? []).every((t) => t === '')) {
    log.warn({ code: 'AUTH_NO_TOKEN' }, 'no agent token configured: every agent is refused');
  }
  const maxPendingAuth = opts.maxPendingAuth ?? 64;
  let pendingAuth = 0;

  const emitAgent = (a: AgentState): void => {
    a.pacer.told();
    for (const h of agentHandlers) h({ ...a.info });
  };

  const maxQueue = opts.maxSendQueueBytes ?? 4 * 1024 * 1024;
  const maxPendingBytes = opts.maxPendingBytes ?? 64 * 1024;
  const MAX_PENDING_MSGS = 4;
  const forgetAfterMs = opts.forgetAfterMs ?? 15 * 60_000;
  const maxRemembered = opts.maxRememberedAgents ?? 1024;
  const maxRememberedBytes = opts.maxRememberedBytes ?? 64 * 1024 * 1024;
  /** Forgets the disconnected agents seen longest ago beyond maxRemembered(Bytes). */
  const forgetExcess = (): void => {
    const gone = [...agents.values()].filter((a) => a.conn === undefined);
    let bytes = gone.reduce((n, a) => n + a.heapBytes, 0);
    if (gone.length <= maxRemembered && bytes <= maxRememberedBytes) return;
    gone.sort((a, b) => a.info.lastSeenMs - b.info.lastSeenMs);
    let count = gone.length;
    for (const a of gone) {
      if (count <= maxRemembered && bytes <= maxRememberedBytes) break;
      agents.delete(a.info.agentId);
      count--;
      bytes -= a.heapBytes;
    }
  };
  /** Sends one Envelope; false (and the connection cut) when the peer does not read. */
  const sendEnv = (conn: Conn, env: Envelope): boolean => {
    if (conn.ws.readyState !== WebSocket.OPEN) return false;
    if (conn.ws.bufferedAmount > maxQueue) {
      if (!conn.failed) {
        conn.failed = true;
        counters.refusedMalformed++;
        log.warn(
          { agentId: conn.agentId, remote: conn.remote, code: 'WIRE_NOT_READING' },
          `the peer left ${conn.ws.bufferedAmount} bytes unread; connection cut`,
        );
      }
      // A peer that does not read would never complete a close handshake either.
      conn.ws.terminate();
      return false;
    }
    conn.ws.send(encodeEnvelope(env));
    return true;
  };

  /** Refuses a connection: error reply, close with the code's close code, counted. */
  const refuse = (conn: Conn, code: ErrorCode, closeCode: number, detail: string): void => {
    if (conn.failed) return;
    conn.failed = true;
    counters.refusedMalformed++;
    log.warn({ agentId: conn.agentId, remote: conn.remote, code }, detail);
    sendEnv(conn, {
      seq: 0,
      kind: 'error',
      error: { code, message: `${code}: ${detail}`, captureId: '', point: '' },
    });
    conn.ws.close(closeCode, code);
  };

  /** Refuses a hello the collector would not keep (HELLO_TOO_LARGE), saying what to narrow. */
  const refuseLargeHello = (conn: Conn, what: string): void => {
    const why = `hello too large: ${what}; narrow the agent's namespaces (--netns-glob, --no-proc-scan)`;
    refuse(conn, 'HELLO_TOO_LARGE', CLOSE_CODES.HELLO_TOO_LARGE, why);
  };

  const enqueue = (agent: AgentState, conn: Conn, step: () => Promise<void> | void): void => {
    agent.chain = agent.chain
      .then(async () => {
        if (!conn.failed) await step();
      })
      .catch((e: unknown) => {
        // Steps handle their own failures; this only keeps the chain alive.
        log.error({ agentId: conn.agentId, remote: conn.remote, err: e }, 'hub step failed');
      });
  };

  /**
   * Applies one spooled message (`env`; null: one of a kind this collector does not know, only
   * recorded, so the agent does not keep it) and acknowledges it.
   */
  const processSpooled = async (
    conn: Conn,
    agentId: string,
    seq: number,
    env: Spooled | null,
  ): Promise<void> => {
    const ack = (): void => {
      sendEnv(conn, { seq: 0, kind: 'ack', ack: { seq } });
    };
    if (seq <= store.get(agentId)) {
      counters.duplicatesDropped++;
      ack();
      return;
    }
    try {
      if (env !== null) {
        if (!handler) throw new Error('no message handler is registered');
        await handler(toAgentMessage(agentId, env));
      }
      // Not for an id whose node bound a newer one meanwhile: its record is gone for good.
      if (store.nodeOf(agentId) !== undefined) store.set(agentId, seq);
    } catch (e) {
      // Not acknowledged: the agent keeps it and resends after reconnecting. Later messages of
      // this connection are skipped (conn.failed) so the stored seq never jumps over this one.
      conn.failed = true;
      log.error(
        { agentId, remote: conn.remote, code: 'HUB_HANDLER_FAILED', seq, err: e },
        'storing an agent message failed; closing so the agent resends it',
      );
      conn.ws.close(CLOSE_CODES.HANDLER_FAILED, 'HUB_HANDLER_FAILED');
      return;
    }
    ack();
  };

  /** Closes `old` for `by`, which takes over its agent id or its node. */
  const replace = (old: Conn, by: Conn): void => {
    counters.refusedMalformed++;
    log.warn(
      { agentId: old.agentId, remote: old.remote, code: 'AGENT_REPLACED' },
      `replaced by a new connection from ${by.remote}`,
    );
    sendEnv(old, {
      seq: 0,
      kind: 'error',
      error: { code: 'AGENT_REPLACED', message: 'AGENT_REPLACED', captureId: '', point: '' },
    });
    old.failed = true;
    old.ws.close(CLOSE_CODES.REPLACED, 'AGENT_REPLACED');
  };

  /** helloAck through the agent's chain: lastSeq must include every message still queued. */
  const ackHello = (agent: AgentState, conn: Conn, agentId: string): void => {
    enqueue(agent, conn, () => {
      sendEnv(conn, {
        seq: 0,
        kind: 'helloAck',
        helloAck: { collectorId: opts.collectorId, lastSeq: store.get(agentId) },
      });
    });
  };

  /**
   * A hello again on the agent's current connection (its namespaces changed): kept and
   * acknowledged, told to onAgent only when it changed anything but the spool position, and then
   * at most once a second (hello-repeats.ts): back-to-back hellos made every repro re-plan.
   */
  const onRepeatHello = (conn: Conn, agent: AgentState, hello: Hello): void => {
    const changed = helloChanged(agent.info.hello, hello);
    agent.info = { ...agent.info, hello, lastSeenMs: Date.now() };
    if (changed) agent.heapBytes = helloHeapBytes(hello);
    ackHello(agent, conn, hello.agentId);
    if (changed) agent.pacer.changed();
  };

  const onHello = (conn: Conn, hello: Hello): void => {
    // Checked before anything is kept or bound: agents.json takes only names that load again.
    const badName = agentIdProblem(hello.agentId) ?? nodeNameProblem(hello.node);
    if (badName !== null) {
      const why = `hello: ${badName}; give the agent a valid --node (or --agent-id)`;
      refuse(conn, 'AGENT_BAD_NAME', CLOSE_CODES.MALFORMED, why);
      return;
    }
    const tooLarge = helloTooLarge(hello);
    if (tooLarge !== null) {
      refuseLargeHello(conn, tooLarge);
      return;
    }
    if (conn.agentId !== undefined && conn.agentId !== hello.agentId) {
      refuse(conn, 'WIRE_UNEXPECTED', CLOSE_CODES.UNEXPECTED, 'the agent id changed');
      return;
    }
    if (conn.node !== undefined && conn.node !== hello.node) {
      refuse(conn, 'WIRE_UNEXPECTED', CLOSE_CODES.UNEXPECTED, 'the node changed');
      return;
    }
    const id = conn.identity;
    if (id.node !== null && hello.node !== id.node) {
      const why = `${id.subject} may speak for node ${id.node}, not ${hello.node}`;
      refuse(conn, 'AUTH_WRONG_NODE', CLOSE_CODES.WRONG_NODE, why);
      return;
    }
    const current = conn.agentId === undefined ? undefined : agents.get(conn.agentId);
    if (current?.conn === conn) {
      onRepeatHello(conn, current, hello);
      return;
    }
    const owner = store.nodeOf(hello.agentId);
    if (owner !== undefined && owner !== hello.node) {
      const why = `agent id ${hello.agentId} belongs to node ${owner}`;
      refuse(conn, 'AUTH_WRONG_NODE', CLOSE_CODES.WRONG_NODE, why);
      return;
    }
    // One agent per node: commands for a node go to exactly one peer.
    const rival = [...agents.values()].find(
      (a) =>
        a.conn !== undefined &&
        a.conn !== conn &&
        a.info.agentId !== hello.agentId &&
        a.info.node === hello.node,
    );
    if (rival?.conn !== undefined && id.node === null) {
      // The shared token proves nothing about the node: the agent already there stays.
      const why = `node ${hello.node} already has agent ${rival.info.agentId} connected (from ${rival.conn.remote})`;
      refuse(conn, 'AGENT_NODE_TAKEN', CLOSE_CODES.NODE_TAKEN, why);
      return;
    }
    if (owner === undefined) {
      try {
        store.bind(hello.agentId, hello.node);
      } catch (e) {
        // Disk full or gone (agents.json): refused like a message that could not be stored, so
        // the agent retries later; nothing of this hello is kept.
        const why = isHoptraceError(e)
          ? `${e.detail}${e.where === undefined ? '' : ` (${e.where})`}`
          : String(e);
        refuse(
          conn,
          isHoptraceError(e) ? e.code : 'STORE_IO',
          CLOSE_CODES.HANDLER_FAILED,
          `cannot record that agent id ${hello.agentId} is node ${hello.node}'s: ${why}`,
        );
        return;
      }
    }
    clearTimeout(conn.helloTimer);
    const now = Date.now();
    let agent = agents.get(hello.agentId);
    // Newest wins: a reconnect whose old socket is not yet known dead, two agents sharing an id
    // (then they keep replacing each other, visible in refusedMalformed and the log), or a new
    // agent of a node identity (a restarted agent: its predecessor's connection is over).
    for (const old of [agent?.conn, rival?.conn]) if (old && old !== conn) replace(old, conn);
    // The node's earlier agent ids (a restarted agent with a new id, or the one just replaced)
    // are over: only the newest is remembered for the node.
    for (const [otherId, a] of agents)
      if (
        otherId !== hello.agentId &&
        a.info.node === hello.node &&
        (a.conn === undefined || a.conn === rival?.conn)
      ) {
        agents.delete(otherId);
        // The replaced one's close then finds no entry: its disconnection is told now.
        if (a.conn !== undefined) {
          a.conn = undefined;
          a.info = { ...a.info, connected: false, lastSeenMs: Date.now() };
          emitAgent(a);
        }
      }
    const first = conn.agentId === undefined;
    conn.agentId = hello.agentId;
    conn.node = hello.node;
    const info: AgentInfo = {
      agentId: hello.agentId,
      node: hello.node,
      identity: { method: id.method, subject: id.subject },
      hello,
      connected: true,
      connectedAtMs: first ? now : (agent?.info.connectedAtMs ?? now),
      lastSeenMs: now,
      unknownMessages: (agent?.info.unknownMessages ?? 0) + conn.unknownBeforeHello,
    };
    conn.unknownBeforeHello = 0;
    const heapBytes = helloHeapBytes(hello);
    if (agent) {
      agent.info = info;
      agent.conn = conn;
      agent.heapBytes = heapBytes;
    } else {
      const agentId = hello.agentId;
      const state: AgentState = {
        info,
        conn,
        heapBytes,
        chain: Promise.resolve(),
        unknownLogged: false,
        pacer: new HelloPacer(() => {
          // Told later: only while it is still this agent's connection (a disconnect was told).
          if (agents.get(agentId) === state && state.conn !== undefined) emitAgent(state);
        }),
      };
      agent = state;
      agents.set(agentId, agent);
    }
    if (first) log.info({ agentId: hello.agentId, remote: conn.remote }, 'agent connected');
    ackHello(agent, conn, hello.agentId);
    emitAgent(agent);
  };

  /**
   * A well-formed Envelope whose body kind this collector does not know (a newer agent's; proto
   * Envelope): ignored, never a refusal — a rolling upgrade that reaches the agents first would
   * otherwise cut every upgraded agent off. Counted on the agent's record (before its hello: once
   * it said hello), logged once per agent; a spooled one (seq > 0) is acknowledged in its turn,
   * so the agent's spool does not hold it and resend it at every reconnect.
   */
  const onUnknownKind = (conn: Conn, field: number, seq: number): void => {
    const agentId = conn.agentId;
    const agent = agentId === undefined ? undefined : agents.get(agentId);
    if (agentId === undefined || agent === undefined) {
      conn.unknownBeforeHello++;
      return;
    }
    agent.info.unknownMessages++;
    agent.info.lastSeenMs = Date.now();
    if (!agent.unknownLogged) {
      agent.unknownLogged = true;
      log.warn(
        { agentId, remote: conn.remote, code: 'WIRE_UNKNOWN_KIND', unknownField: field },
        `the agent sent a message of a kind this collector does not know (Envelope field ${field}: a newer agent?); ignored and counted in its unknownMessages, logged once per agent`,
      );
    }
    if (seq > 0)
      enqueue(agent, conn, async () => {
        await processSpooled(conn, agentId, seq, null);
      });
  };

  const onFrame = (conn: Conn, data: RawData, isBinary: boolean): void => {
    conn.alive = true;
    if (conn.failed) return;
    if (!isBinary) {
      refuse(conn, 'WIRE_MALFORMED', CLOSE_CODES.MALFORMED, 'a text frame (Envelopes are binary)');
      return;
    }
    const bytes = rawBytes(data);
    // The first message must be a hello: one too large is refused before it is decoded.
    const helloTooBig = (): boolean => {
      if (bytes.byteLength <= HELLO_MAX_BYTES) return false;
      refuseLargeHello(conn, `${bytes.byteLength} bytes (at most ${HELLO_MAX_BYTES})`);
      return true;
    };
    if (conn.agentId === undefined && helloTooBig()) return;
    let env: Envelope;
    try {
      env = decodeEnvelope(bytes);
    } catch (e) {
      const unknown = refusedEnvelopeOf(e);
      if (unknown?.unknownField !== undefined) {
        onUnknownKind(conn, unknown.unknownField, unknown.seq ?? 0);
        return;
      }
      // The decoder's own error, without its code: refuse() puts the code in front once.
      const detail = isHoptraceError(e)
        ? `${e.where === undefined ? '' : `${e.where}: `}${e.detail}`
        : 'undecodable message';
      // WIRE_MALFORMED, or the code of the body's own bounds (FRAMES_MALFORMED).
      refuse(conn, isHoptraceError(e) ? e.code : 'WIRE_MALFORMED', CLOSE_CODES.MALFORMED, detail);
      return;
    }
    counters.messagesIn++;
    if (!AGENT_KINDS.includes(env.kind)) {
      refuse(conn, 'WIRE_UNEXPECTED', CLOSE_CODES.UNEXPECTED, `an agent must not send ${env.kind}`);
      return;
    }
    if (env.kind === 'hello') {
      if (helloTooBig()) return;
      onHello(conn, env.hello);
      return;
    }
    const agentId = conn.agentId;
    const agent = agentId === undefined ? undefined : agents.get(agentId);
    if (agentId === undefined || !agent) {
      refuse(conn, 'WIRE_UNEXPECTED', CLOSE_CODES.UNEXPECTED, `${env.kind} before hello`);
      return;
    }
    agent.info.lastSeenMs = Date.now();
    if (env.kind === 'heartbeat') {
      sendEnv(conn, { seq: 0, kind: 'heartbeat', heartbeat: { unixMs: Date.now() } });
      return;
    }
    if (
      env.kind === 'doctorReport' ||
      env.kind === 'conntrackReport' ||
      env.kind === 'framesReply'
    ) {
      // Replies to a request: not spooled, matched by requestId by whoever asked.
      const reply: AgentReply =
        env.kind === 'doctorReport'
          ? { kind: 'doctorReport', agentId, report: env.doctorReport }
          : env.kind === 'conntrackReport'
            ? { kind: 'conntrackReport', agentId, report: env.conntrackReport }
            : { kind: 'framesReply', agentId, report: env.framesReply };
      for (const h of replyHandlers) h(reply);
      return;
    }
    if (
      env.kind === 'capture' ||
      env.kind === 'stop' ||
      env.kind === 'ack' ||
      env.kind === 'doctorRequest' ||
      env.kind === 'conntrackQuery' ||
      env.kind === 'framesRequest'
    )
      return; // excluded above
    if (env.kind === 'helloAck') return;
    if (env.seq <= 0) {
      refuse(conn, 'WIRE_UNEXPECTED', CLOSE_CODES.UNEXPECTED, `${env.kind} without seq`);
      return;
    }
    // Backpressure: a connection's messages wait decoded in the chain, so past the bound the
    // socket is not read (TCP then holds the agent, whose spool keeps and counts what it must).
    const size = bytes.byteLength;
    conn.pendingBytes += size;
    conn.pendingMsgs++;
    if (
      !conn.paused &&
      (conn.pendingBytes > maxPendingBytes || conn.pendingMsgs > MAX_PENDING_MSGS)
    ) {
      conn.paused = true;
      counters.readPauses++;
      conn.ws.pause();
    }
    enqueue(agent, conn, async () => {
      try {
        await processSpooled(conn, agentId, env.seq, env);
      } finally {
        conn.pendingBytes -= size;
        conn.pendingMsgs--;
        // Progress is liveness: a paused socket's pongs wait unread behind the stored batches.
        conn.alive = true;
        if (
          conn.paused &&
          conn.pendingBytes <= maxPendingBytes / 2 &&
          conn.pendingMsgs <= MAX_PENDING_MSGS / 2
        ) {
          conn.paused = false;
          conn.ws.resume();
        }
      }
    });
  };

  const onClose = (conn: Conn): void => {
    conns.delete(conn);
    clearTimeout(conn.helloTimer);
    const agent = conn.agentId === undefined ? undefined : agents.get(conn.agentId);
    if (agent?.conn !== conn) return;
    agent.conn = undefined;
    agent.info = { ...agent.info, connected: false, lastSeenMs: Date.now() };
    log.info({ agentId: conn.agentId, remote: conn.remote }, 'agent disconnected');
    emitAgent(agent);
    forgetExcess();
  };

  const accept = (ws: WebSocket, remote: string, identity: AgentIdentity): void => {
    let resolveClosed = (): void => undefined;
    const conn: Conn = {
      ws,
      remote,
      identity,
      agentId: undefined,
      node: undefined,
      alive: true,
      failed: false,
      helloTimer: undefined,
      closed: new Promise((r) => (resolveClosed = r)),
      pendingBytes: 0,
      pendingMsgs: 0,
      paused: false,
      unknownBeforeHello: 0,
    };
    conns.add(conn);
    conn.helloTimer = setTimeout(() => {
      refuse(conn, 'WIRE_HELLO_TIMEOUT', CLOSE_CODES.HELLO_TIMEOUT, 'no hello in time');
    }, helloTimeoutMs);
    ws.on('message', (data, isBinary) => {
      onFrame(conn, data, isBinary);
    });
    ws.on('pong', () => (conn.alive = true));
    ws.on('ping', () => (conn.alive = true));
    // ws closes a connection whose message exceeds maxPayload by itself, with 1009 and no
    // reason, before it emits 'error'. Its receiver's error comes first: the connection is
    // refused there like any other (an error reply, the code as the close reason), and ws's own
    // close then finds it closing. `_receiver` is ws 8's own field (hub.test.ts checks the
    // reason): without it, ws's bare 1009 stands.
    const receiver = (ws as unknown as { _receiver?: unknown })._receiver;
    if (receiver instanceof EventEmitter)
      receiver.prependListener('error', (err: Error & { code?: string }) => {
        if (err.code !== 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') return;
        const why = `a message larger than ${maxPayload} bytes`;
        refuse(conn, 'WIRE_TOO_LARGE', CLOSE_CODES.TOO_LARGE, why);
      });
    ws.on('error', (err: Error & { code?: string }) => {
      // ws reports protocol violations here and closes the socket itself.
      if (conn.failed) return; // refused already: counted and logged then
      const code: ErrorCode =
        err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'WIRE_TOO_LARGE' : 'WIRE_MALFORMED';
      counters.refusedMalformed++;
      conn.failed = true;
      log.warn({ agentId: conn.agentId, remote, code }, err.message);
    });
    ws.on('close', () => {
      onClose(conn);
      resolveClosed();
    });
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = requestUrl(req.url ?? '/');
    if (url.pathname !== path) {
      // Leave other paths to other upgrade listeners, if there are any.
      if (opts.server.listenerCount('upgrade') === 1) refuseUpgrade(socket, 404);
      return;
    }
    const remote = remoteOf(req);
    if (closing) {
      refuseUpgrade(socket, 503);
      return;
    }
    if (pendingAuth >= maxPendingAuth) {
      counters.refusedUnauthenticated++;
      refuseUpgrade(socket, 503);
      return;
    }
    pendingAuth++;
    // A peer that resets while it is being authenticated must not crash the collector.
    socket.on('error', () => undefined);
    void Promise.resolve()
      .then(() => auth.authenticate(req))
      .catch((e: unknown) => ({
        ok: false as const,
        status: 503 as const,
        reason: `authenticating failed (${e instanceof Error ? e.message : String(e)})`,
      }))
      .then((r) => {
        pendingAuth--;
        if (socket.destroyed) return;
        if (!r.ok) {
          counters.refusedUnauthenticated++;
          const code = r.status === 503 ? 'AUTH_UNAVAILABLE' : 'AUTH_REFUSED';
          log.warn({ remote, code }, `agent refused: ${r.reason}`);
          refuseUpgrade(socket, r.status);
          return;
        }
        if (closing) {
          refuseUpgrade(socket, 503);
          return;
        }
        wss.handleUpgrade(req, socket, head, (ws) => {
          accept(ws, remote, r.identity);
        });
      });
  };
  opts.server.on('upgrade', onUpgrade);

  const heartbeat = setInterval(() => {
    for (const conn of conns) {
      if (!conn.alive) {
        log.warn(
          { agentId: conn.agentId, remote: conn.remote, code: 'LINK_HEARTBEAT_TIMEOUT' },
          'agent silent for a heartbeat interval; dropping the connection',
        );
        conn.failed = true;
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      conn.ws.ping();
    }
    // Agents that left long ago: forgotten, so ids that come and go cannot grow the collector.
    const now = Date.now();
    for (const [id, a] of agents)
      if (a.conn === undefined && now - a.info.lastSeenMs > forgetAfterMs) agents.delete(id);
  }, heartbeatMs);
  heartbeat.unref();

  return {
    agents: () => [...agents.values()].map((a) => ({ ...a.info })),
    send(agentId, cmd) {
      const conn = agents.get(agentId)?.conn;
      if (!conn || conn.failed) return false;
      return sendEnv(conn, { seq: 0, ...cmd });
    },
    onMessage(h) {
      handler = h;
    },
    onAgent(h) {
      agentHandlers.push(h);
    },
    onReply(h) {
      replyHandlers.push(h);
    },
    counters: () => ({
      connected: [...agents.values()].filter((a) => a.conn !== undefined).length,
      ...counters,
    }),
    async close() {
      closing = true;
      opts.server.off('upgrade', onUpgrade);
      clearInterval(heartbeat);
      for (const a of agents.values()) a.pacer.cancel();
      const open = [...conns];
      for (const conn of open) conn.ws.close(CLOSE_CODES.GOING_AWAY, 'collector shutting down');
      // Messages being stored finish (and get their lastSeq) before close resolves.
      await Promise.all([...agents.values()].map((a) => a.chain));
      const grace = setTimeout(() => {
        for (const conn of open) conn.ws.terminate();
      }, 2_000);
      await Promise.all(open.map((c) => c.closed));
      clearTimeout(grace);
      wss.close();
    },
  };
}

/**
 * The contract between the collector's WebSocket endpoint for agents (collector/hub.ts) and the
 * rest of the collector (sessions, HTTP API).
 */
import type {
  CaptureCommand,
  ConntrackQuery,
  ConntrackReport,
  DoctorReport,
  DoctorRequest,
  CaptureStatus,
  ErrorReport,
  EventBatch,
  FramesReply,
  FramesRequest,
  Hello,
  Lost,
  StopCommand,
} from '../common/wire';
import type { IdentityMethod } from './agent-auth';

/** What the collector has stored per agent; persisted by the caller (survives a restart). */
export interface LastSeqStore {
  get(agentId: string): number;
  set(agentId: string, seq: number): void;
  /**
   * The node an agent id was first accepted for: it stays that node's until the node binds a newer
   * id (then it is unbound, its seq forgotten).
   */
  nodeOf(agentId: string): string | undefined;
  /**
   * Binds an id to its node, dropping the node's earlier ids (one id a node, as the hub keeps one
   * agent a node), persisted before it returns; throws (STORE_IO) when it cannot be.
   */
  bind(agentId: string, node: string): void;
}

/** An agent as the collector knows it. */
export interface AgentInfo {
  agentId: string;
  node: string;
  /** How the agent proved who it is (collector/agent-auth.ts); never a secret. */
  identity: { method: IdentityMethod; subject: string };
  hello: Hello;
  connected: boolean;
  connectedAtMs: number;
  lastSeenMs: number;
  /**
   * Well-formed messages of a kind this collector does not know (a newer agent's, in a rolling
   * upgrade): ignored, counted here, logged once per agent (WIRE_UNKNOWN_KIND).
   */
  unknownMessages: number;
}

/**
 * Everything an agent sends that the collector acts on; `agentId` says who sent it, `seq` is its
 * spool number (increasing per agent id: a message at or below one already applied is a resend).
 */
export type AgentMessage =
  | { kind: 'events'; agentId: string; seq: number; batch: EventBatch }
  | { kind: 'status'; agentId: string; seq: number; status: CaptureStatus }
  | { kind: 'lost'; agentId: string; seq: number; lost: Lost }
  | { kind: 'error'; agentId: string; seq: number; error: ErrorReport };

/** A command the collector sends to one agent. */
export type AgentCommand =
  | { kind: 'capture'; capture: CaptureCommand }
  | { kind: 'stop'; stop: StopCommand }
  | { kind: 'doctorRequest'; doctorRequest: DoctorRequest }
  | { kind: 'conntrackQuery'; conntrackQuery: ConntrackQuery }
  | { kind: 'framesRequest'; framesRequest: FramesRequest };

/** An agent's (unspooled) answer to a doctor, conntrack or frames request. */
export type AgentReply =
  | { kind: 'doctorReport'; agentId: string; report: DoctorReport }
  | { kind: 'conntrackReport'; agentId: string; report: ConntrackReport }
  | { kind: 'framesReply'; agentId: string; report: FramesReply };

export interface HubCounters {
  connected: number;
  refusedUnauthenticated: number;
  refusedMalformed: number;
  messagesIn: number;
  duplicatesDropped: number;
  /** Times a connection's socket was paused because its stored-not-yet messages reached the bound. */
  readPauses: number;
}

export interface AgentHub {
  /** Known agents (connected or seen before). */
  agents(): AgentInfo[];
  /** Sends a command; false when the agent is not connected. */
  send(agentId: string, cmd: AgentCommand): boolean;
  /** Handler for agents' replies to requests (optional: test fakes omit it). */
  onReply?(handler: (reply: AgentReply) => void): void;
  /**
   * Handler for spooled agent messages. The hub acknowledges a message to the agent only after the
   * returned promise resolves (the caller has stored it), so a collector crash loses nothing.
   */
  onMessage(handler: (msg: AgentMessage) => Promise<void>): void;
  /** Called when an agent connects (after hello) or disconnects. */
  onAgent(handler: (agent: AgentInfo) => void): void;
  counters(): HubCounters;
  close(): Promise<void>;
}

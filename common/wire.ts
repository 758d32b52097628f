/**
 * TypeScript shapes of the agent <-> collector messages (proto/hoptrace.proto, Envelope).
 * common/envelope.ts encodes and decodes them.
 */
import type { PacketEvent } from './event';

export interface NamespaceInfo {
  path: string;
  inode: number;
  addresses: string[];
  interfaces: string[];
}

export interface Hello {
  agentId: string;
  node: string;
  version: string;
  nodeAddresses: string[];
  namespaces: NamespaceInfo[];
  spoolFirstSeq: number;
}

export interface HelloAck {
  collectorId: string;
  lastSeq: number;
}

export interface CaptureCommand {
  captureId: string;
  point: string;
  target: string;
  iface: string;
  filter: string;
  snaplen: number;
  deadlineUnixMs: number;
}

export interface StopCommand {
  captureId: string;
  point: string;
}

export interface EventBatch {
  captureId: string;
  point: string;
  events: PacketEvent[];
}

export type CaptureState = 'arming' | 'capturing' | 'stopped' | 'failed';

export interface CaptureStatus {
  captureId: string;
  point: string;
  state: CaptureState;
  packets: number;
  /** null = the capture source cannot know (never reported as 0). */
  kernelDrops: number | null;
  ifaceDrops: number | null;
  queueDrops: number;
  errorCode: string;
  message: string;
  netns: string;
  netnsAddresses: string[];
  iface: string;
  linkType: string;
}

export interface Lost {
  captureId: string;
  point: string;
  count: number;
  reason: string;
}

export interface ErrorReport {
  code: string;
  message: string;
  captureId: string;
  point: string;
}

/** One WebSocket message: `seq` > 0 for spooled (acknowledged, resent) messages. */
export type Envelope = { seq: number } & (
  | { kind: 'hello'; hello: Hello }
  | { kind: 'helloAck'; helloAck: HelloAck }
  | { kind: 'capture'; capture: CaptureCommand }
  | { kind: 'stop'; stop: StopCommand }
  | { kind: 'events'; events: EventBatch }
  | { kind: 'status'; status: CaptureStatus }
  | { kind: 'lost'; lost: Lost }
  | { kind: 'error'; error: ErrorReport }
  | { kind: 'heartbeat'; heartbeat: { unixMs: number } }
  | { kind: 'ack'; ack: { seq: number } }
);

export type EnvelopeKind = Envelope['kind'];

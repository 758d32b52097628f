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
  /**
   * Captures the agent runs at once at most (its --max-captures); absent from an agent older than
   * the field (the collector takes HELLO_DEFAULT_MAX_CAPTURES, common/hello-limits.ts).
   */
  maxCaptures?: number;
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
  /** Bytes of each frame retained for the evidence; absent (0 on the wire) = the agent's default. */
  retainSnaplen?: number;
  /**
   * Retain frames whole, payload included (the capture's evidencePayload); absent (false on the
   * wire): headers only, each frame cut where its innermost transport header ends.
   */
  retainPayload?: boolean;
  /**
   * Fold flows into counters past their first packets (PacketEvent.fold): what this collector
   * asks unless the capture's perPacket; absent (false on the wire, an older collector): every
   * packet an event.
   */
  foldFlows?: boolean;
}

export interface StopCommand {
  captureId: string;
  point: string;
}

export interface EventBatch {
  captureId: string;
  point: string;
  events: PacketEvent[];
  /**
   * Agent side only: events already encoded (agent/capture/summary-wire.ts), sent after `events`
   * as more entries of the same repeated field. Never set by a decoder: the collector reads them
   * as ordinary `events`.
   */
  encoded?: EncodedEvents;
  /**
   * Collector side only: each event's protobuf bytes as received, views into the WebSocket frame
   * (common/events-wire.ts sets them, not enumerable: never compared, cloned or serialized), so
   * the store writes them without encoding the events again. They must not outlive the message's
   * handling.
   */
  raw?: Uint8Array[];
}

/** PacketEvents as protobuf bytes: `count` entries of EventBatch's repeated `events` field. */
export interface EncodedEvents {
  bytes: Uint8Array;
  count: number;
}

/** Events in a batch, counting the encoded ones. */
export function batchEventCount(b: EventBatch): number {
  return b.events.length + (b.encoded?.count ?? 0);
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
  /**
   * Of `packets`: those delivered inside flow counters (PacketEvent.fold), and packets sent whole
   * only because the agent's flow table was full. Absent (0 on the wire): none.
   */
  foldedPackets?: number;
  foldFullSent?: number;
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
  | { kind: 'doctorRequest'; doctorRequest: DoctorRequest }
  | { kind: 'doctorReport'; doctorReport: DoctorReport }
  | { kind: 'conntrackQuery'; conntrackQuery: ConntrackQuery }
  | { kind: 'conntrackReport'; conntrackReport: ConntrackReport }
  | { kind: 'framesRequest'; framesRequest: FramesRequest }
  | { kind: 'framesReply'; framesReply: FramesReply }
);

export type EnvelopeKind = Envelope['kind'];

// --- doctor and conntrack (issue 4) -----------------------------------------------------------

/** One namespace the doctor asks an agent about. */
export interface DoctorTarget {
  /** Role on the path: vpn, vpn-node, backend-node, backend, client, … */
  name: string;
  /** A namespace path, a PID or a pod IP (like a capture target); '' = the agent's node namespace. */
  target: string;
  /** Addresses to look up with `ip route get` in that namespace (the client tunnel IP, the backend). */
  routeTo: string[];
}

/** Collector -> agent: read the path facts of some namespaces. */
export interface DoctorRequest {
  requestId: string;
  targets: DoctorTarget[];
  /**
   * The tunnel range's address family: the routes and nat rules read are this family's
   * (`ip -6 route`, ip6tables, nft `ip6`/`inet` for 6). 4 when an older collector leaves it out.
   */
  family: 4 | 6;
}

/** One `ip -j route` entry, reduced to what the checks use. */
export interface RouteEntry {
  /** `default`, `10.90.0.0/24`, or a host address. */
  dst: string;
  gateway: string;
  dev: string;
  /** unicast, unreachable, blackhole, prohibit, local, … ('' = unicast). */
  type: string;
  prefsrc: string;
  flags: string[];
}

/** `ip -j route get ADDR` in one namespace: the route, or the kernel's refusal. */
export interface RouteLookup {
  to: string;
  route: RouteEntry | null;
  error: string;
}

/** One rule of `iptables-save -t nat`: its chain, the argument vector after `-A CHAIN`, the text. */
export interface NatRule {
  chain: string;
  args: string[];
  text: string;
}

/** One IPVS virtual service and its real servers (core/doctor/ipvs.ts reads them). */
export interface IpvsService {
  proto: string;
  address: string;
  port: number;
  scheduler: string;
  reals: { address: string; port: number; forward: string }[];
}

/** What an agent read in one namespace. */
export interface NamespaceFacts {
  name: string;
  target: string;
  /** The namespace file read (after resolving the target). */
  netns: string;
  node: string;
  addresses: string[];
  /** rp_filter sysctls by interface (`all`, `default`, interfaces), as read. */
  rpFilter: { iface: string; value: number }[];
  routes: RouteEntry[];
  lookups: RouteLookup[];
  /** User-defined and built-in chains of the nat table. */
  natChains: string[];
  natRules: NatRule[];
  /**
   * IPVS: `read` (the services below), `absent` (no /proc/net/ip_vs: not in this kernel or not
   * loaded), `unread` (an older agent, or the read failed: then 'ipvs' is in `unread`).
   */
  ipvsState: 'read' | 'absent' | 'unread';
  ipvs: IpvsService[];
  /**
   * The family the routes, lookups and nat rules were read for (DoctorRequest.family); 4 in an
   * older agent's report, which never reads IPv6. rp_filter is read for 4 only (Linux has no
   * IPv6 rp_filter).
   */
  family: 4 | 6;
  /** A stable error code when a read failed ('' = every read worked); facts are then partial. */
  errorCode: string;
  message: string;
  /**
   * The parts that could not be read (FACT_PARTS); every part when the namespace could not be
   * opened. Empty with an errorCode (an older agent's report): every part counts as unread.
   */
  unread: FactPart[];
  /**
   * What the collector left out of the agent's report (common/report-limits.ts REPLY_LIMITS),
   * part by part: such a part counts as not read in full, so no check judges it. Absent: nothing.
   */
  leftOut?: FactLeftOut[];
}

/** Entries of one part of an agent's facts that the collector left out, in words. */
export interface FactLeftOut {
  part: FactPart;
  /** `routes: 3616 left out (at most 16384 kept)`. */
  detail: string;
}

/** The parts of a namespace's facts, each read by one command. */
export const FACT_PARTS = ['addresses', 'rp_filter', 'routes', 'nat', 'nft', 'ipvs'] as const;
export type FactPart = (typeof FACT_PARTS)[number];

/** A namespace's facts before anything is read: every list empty, nothing marked unread yet. */
export function emptyNamespaceFacts(
  t: { name: string; target: string },
  node: string,
  family: 4 | 6,
): NamespaceFacts {
  return {
    name: t.name,
    target: t.target,
    netns: '',
    node,
    addresses: [],
    rpFilter: [],
    routes: [],
    lookups: [],
    natChains: [],
    natRules: [],
    ipvsState: 'unread',
    ipvs: [],
    family,
    errorCode: '',
    message: '',
    unread: [],
  };
}

/** Agent -> collector: the facts for one DoctorRequest. */
export interface DoctorReport {
  requestId: string;
  agentId: string;
  node: string;
  facts: NamespaceFacts[];
  /** The request was refused whole, nothing read (facts empty): its stable code and why. */
  errorCode?: string;
  message?: string;
}

/** An address:port pair in one direction of a conntrack entry. */
export interface ConntrackTuple {
  src: string;
  dst: string;
  sport: number;
  dport: number;
}

/** One conntrack entry: original vs reply direction, NAT status derived from the two. */
export interface ConntrackEntry {
  /** Role name of the namespace it was read in (vpn, vpn-node, backend-node, …). */
  name: string;
  netns: string;
  node: string;
  proto: string;
  state: string;
  orig: ConntrackTuple;
  reply: ConntrackTuple;
  /** The reply goes to another address/port than the original came from: source NAT. */
  snat: boolean;
  /** The reply comes from another address/port than the original went to: destination NAT. */
  dnat: boolean;
  raw: string;
}

/** Collector -> agent: list the conntrack entries of a flow in some namespaces. */
export interface ConntrackQuery {
  requestId: string;
  captureId: string;
  targets: DoctorTarget[];
  /** The flow as seen at the capture points (request direction); an entry matches any of them. */
  tuples: ConntrackTuple[];
}

/** Agent -> collector: the entries found for one ConntrackQuery. */
export interface ConntrackReport {
  requestId: string;
  captureId: string;
  agentId: string;
  entries: ConntrackEntry[];
  /** Per namespace read errors: `name: CODE message`. */
  errors: string[];
  /**
   * Entries the collector left out of the agent's report, beyond REPLY_LIMITS.entries
   * (common/report-limits.ts); absent: none.
   */
  entriesLeftOut?: number;
  /** The query was refused whole, nothing read: its stable code and why. */
  errorCode?: string;
  message?: string;
}

// --- evidence frames (issue 16) ---------------------------------------------------------------

/** Collector -> agent: the retained bytes of some frames of one capture point. */
export interface FramesRequest {
  requestId: string;
  captureId: string;
  point: string;
  /** Frame numbers as the point's events carry them (1-based), at most FRAMES_LIMITS.frames. */
  frames: number[];
  /** Drop the point's retention once every frame asked for has been answered. */
  release: boolean;
}

/** One retained frame: its first `snaplen` bytes. */
export interface FrameRecord {
  frame: number;
  /** Nanoseconds since the Unix epoch. */
  tsNs: bigint;
  /** The frame's length on the wire. */
  origLen: number;
  data: Uint8Array;
}

/** A frame without bytes, and why (a stable code of common/errors.ts). */
export interface MissingFrame {
  frame: number;
  reason: string;
}

/** Agent -> collector: the answer to one FramesRequest. */
export interface FramesReply {
  requestId: string;
  captureId: string;
  point: string;
  /** LINKTYPE_* of the records; null when nothing was retained. */
  linkType: number | null;
  snaplen: number;
  records: FrameRecord[];
  /** Frames asked for that are in neither list did not fit this reply: ask again. */
  missing: MissingFrame[];
  retained: number;
  retentionDropped: number;
  /** Set when nothing could be answered. */
  errorCode: string;
  message: string;
}

/** The data model of correlation: what one request looked like at each capture point. */

import type { PacketEvent, TunnelKind } from '../../common/event';
import type { TimeSpan } from '../../common/time-span';

/** The request direction of a flow (a TCP connection or a UDP exchange) as seen at one point. */
export interface Endpoint {
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

/**
 * Why a packet at a point is the same as the request at the first point. Strongest first:
 * `tcp-isn` (SYN seq), `tcp-seq` (a later segment's seq), `tsval` (RFC 7323 TSval with equal seq),
 * `ip-id`, the payload keys (over TCP they alone mean a proxied, new connection; a UDP datagram is
 * recognised by them, its length and its IP ID), and for the reply direction `syn-ack`
 * (ack = ISN+1), `tcp-ack` (a reply acknowledging a request segment: the handshake was not
 * captured) and `reverse-tuple`. `selector` marks the first point.
 */
export type MatchKey =
  | 'selector'
  | 'tcp-isn'
  | 'tcp-seq'
  | 'tsval'
  | 'ip-id'
  | 'probe-marker'
  | 'request-line'
  | 'payload-hash'
  | 'dns-id'
  | 'dns-question'
  | 'syn-ack'
  | 'tcp-ack'
  | 'icmp-echo'
  | 'reverse-tuple';

/**
 * What was selected as the request at the first point:
 * - `tcp-syn`: a new TCP connection (SYN without ACK), followed by its ISN — the strongest case;
 * - `tcp-established`: no new connection fitted the selector, so the first data segment of a
 *   connection already open when the capture started (keep-alive, HTTP/2, gRPC): followed by
 *   absolute sequence numbers, TSval and IP ID; the handshake was not captured;
 * - `udp`: the first UDP datagram (a DNS query, QUIC): followed by its payload fingerprint, length
 *   and IP ID; its reply by the reversed tuple at each point.
 * - `icmp-echo`: the first ICMP or ICMPv6 echo request: followed by its sequence number, data and
 *   IP ID; the identifier, which conntrack rewrites like a port, stands for both ports of its tuple.
 */
export type RequestShape = 'tcp-syn' | 'tcp-established' | 'udp' | 'icmp-echo';

/** The transports a request can be followed over (ICMP: echo request and reply). */
export type FlowProto = 'tcp' | 'udp' | 'icmp' | 'icmpv6';

/** Which request to follow; fields narrow the first SYN (else data segment, datagram) at the first point. */
export interface RequestSelector {
  client?: string | undefined;
  dst?: string | undefined;
  dport?: number | undefined;
}

/** The request's first data segment (or datagram) at the first point (what a proxy forwards). */
export interface DataIdentity {
  /** TCP: the segment's seq; ICMP echo: the sequence number; UDP: 0. */
  seq: number;
  payloadLength: number;
  probeMarker: string | null;
  payloadHash: number | null;
  requestLineHash: number | null;
  /** A DNS query's transaction id and question hash (core/decode/dns.ts). */
  dnsId: number | null;
  dnsQuestion: number | null;
  frame: number;
}

/** The selected request as seen at the first point. */
export interface RequestIdentity {
  point: string;
  shape: RequestShape;
  proto: FlowProto;
  tuple: Endpoint;
  /** The SYN's sequence number; null when no SYN was captured (`tcp-established`, `udp`). */
  isn: number | null;
  tsVal: number | null;
  ipId: number | null;
  /** When the request's first packet (the SYN, else the data segment or datagram) was captured. */
  startTsNs: bigint;
  /** Its frame number. */
  frame: number;
  data: DataIdentity | null;
}

export type PointStatus = 'matched' | 'not-seen' | 'no-capture' | 'ambiguous';

/** The packet that proved a match. */
export interface PacketRef {
  frame: number;
  tsNs: bigint;
  node: string;
  iface: string;
  tuple: Endpoint;
  tcpFlags: number | null;
  seq: number | null;
}

/**
 * One packet of the matched connection at a point (request or reply direction), for the evidence:
 * the sequence picture, the per-hop times, the clock offset between nodes and evidence.pcapng
 * (which re-reads the frame by its number).
 */
export interface FlowPacket {
  frame: number;
  tsNs: bigint;
  dir: 'request' | 'reply';
  tuple: Endpoint;
  /** TCP flags (0 for UDP and ICMP). */
  flags: number;
  seq: number | null;
  ack: number | null;
  payloadLength: number;
  /** The point captured the packet inside a tunnel (the VPN's own outer packets on that interface). */
  tunneled: boolean;
}

/** At most this many packets of the matched connection are kept per point (the first ones in time). */
export const MAX_FLOW_PACKETS = 256;

/** One ICMP error about the request or its reply, as captured at a point. */
export interface IcmpErrorRef {
  frame: number;
  tsNs: bigint;
  /** The router (or host) that sent the error. */
  from: string;
  /** Which direction the quoted packet went: the request's or the reply's. */
  about: 'request' | 'reply';
  family: 4 | 6;
  type: number;
  code: number;
}

/** What one capture point saw of the request. */
export interface PointMatch {
  point: string;
  status: PointStatus;
  /** All events handed in for this point (0 means the point captured nothing at all). */
  capturedEvents: number;
  /** Every frame the point captured, when known (PointEvents.capturedFrames). */
  capturedFrames?: number;
  /** When its frames were captured, when known (PointEvents.capturedSpan; null: none). */
  capturedSpan?: TimeSpan | null;
  matchedBy: MatchKey[];
  replyMatchedBy: MatchKey[];
  /** True when the point saw a different connection (or query) carrying the same request bytes. */
  proxied: boolean;
  /** Any request-direction packet of the connection was seen. */
  seenRequest: boolean;
  /** The connection's SYN was seen (always false for UDP, and when the handshake was not captured). */
  seenSyn: boolean;
  seenReply: boolean;
  /** Request-direction tuple as observed here. */
  observed: Endpoint | null;
  /** The ISN of the connection seen here (differs from the request's when proxied). */
  isn: number | null;
  firstTsNs: bigint | null;
  lastTsNs: bigint | null;
  requestPackets: number;
  replyPackets: number;
  retransmits: number;
  packet: PacketRef | null;
  /**
   * The matched connection's packets here in time order, at most MAX_FLOW_PACKETS (the first);
   * `flowOmitted` counts the rest.
   */
  flow: FlowPacket[];
  flowOmitted: number;
  /** The tuples that matched equally when `status` is 'ambiguous'. */
  candidates: Endpoint[];
  /** ICMP errors captured here that quote the request or its reply (core/correlate/icmp-errors.ts). */
  icmpErrors: IcmpErrorRef[];
  /** One sentence: why this point's packet is the request (or why not). */
  detail: string;
  /**
   * Set when the request was found here only outside the window around its time at the first
   * point (core/correlate/far-syn.ts): how far from that time its SYN is on this point's clock.
   */
  outsideWindowNs?: bigint;
}

/**
 * The tunnel packet that carried the request to the VPN pod, as a point captured it
 * (core/correlate/outer.ts): `inner-tuple` — a transparent tunnel with the request inside;
 * `nearest` — an opaque tunnel's packet captured last before the request (`peers`: how many
 * distinct outer flows of an opaque tunnel were seen in that lead).
 */
export interface OuterSighting {
  point: string;
  node: string;
  iface: string;
  frame: number;
  tsNs: bigint;
  tunnel: TunnelKind;
  /** The outer tuple as captured: `src` is the peer the VPN pod sees. */
  outer: Endpoint;
  by: 'inner-tuple' | 'nearest';
  peers: number;
}

/** One request followed across all points. */
export interface Journey {
  request: RequestIdentity | null;
  /** Why `request` is null. */
  reason: string | null;
  points: PointMatch[];
  windowNs: bigint;
  /** The request's tunnel packet, when a point captured one (absent or null: none). */
  outer?: OuterSighting | null;
}

/** Result of `correlateRequest`: a journey (with `request: null` and a reason when none). */
export type CorrelationResult = Journey;

export interface PointEvents {
  name: string;
  events: PacketEvent[];
  /**
   * How many events the point captured in all, when `events` holds only those that can matter
   * (streaming analysis keeps a filtered subset); default `events.length`.
   */
  capturedEvents?: number | undefined;
  /**
   * Every frame the point captured, whatever it holds (a file's frames, an agent's packets), when
   * known: a point with frames but no event correlation can read is not an empty capture.
   */
  capturedFrames?: number | undefined;
  /**
   * The earliest and latest time of every frame the point captured (its own clock), when known:
   * null when it holds none. Unknown (absent) for a live capture, which the collector armed before
   * the request and stopped after it; known for a capture file, which may hold another time.
   */
  capturedSpan?: TimeSpan | null | undefined;
}

/** |a − b| of two timestamps (ns): how far apart, whichever is first. */
export const absDiff = (a: bigint, b: bigint): bigint => (a > b ? a - b : b - a);

/** Events captured at a point: `capturedEvents` when given, else the events handed in. */
export function capturedCount(p: PointEvents): number {
  return p.capturedEvents ?? p.events.length;
}

const KEY_ORDER: readonly MatchKey[] = [
  'selector',
  'tcp-isn',
  'tcp-seq',
  'tsval',
  'ip-id',
  'probe-marker',
  'request-line',
  'payload-hash',
  'dns-id',
  'dns-question',
  'syn-ack',
  'tcp-ack',
  'icmp-echo',
  'reverse-tuple',
];

/** Match keys in a stable order, strongest first. */
export function sortMatchKeys(keys: Iterable<MatchKey>): MatchKey[] {
  const set = new Set(keys);
  return KEY_ORDER.filter((k) => set.has(k));
}

/** Text key of a request-direction tuple. */
export function endpointKey(e: Endpoint): string {
  return `${e.src}:${e.sport}>${e.dst}:${e.dport}`;
}

export function sameEndpoint(a: Endpoint, b: Endpoint): boolean {
  return a.src === b.src && a.sport === b.sport && a.dst === b.dst && a.dport === b.dport;
}

export function reverseEndpoint(e: Endpoint): Endpoint {
  return { src: e.dst, sport: e.dport, dst: e.src, dport: e.sport };
}

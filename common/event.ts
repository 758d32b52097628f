/**
 * The PacketEvent every part of hoptrace speaks (mirrors `hoptrace.v1.PacketEvent` in
 * proto/hoptrace.proto). Plain numbers and strings only: no Buffer outlives the capture callback.
 */

/**
 * Transport protocol names as they appear in tuples and in `hoptrace decode --json`. The order is
 * the wire order (protobuf enum value - 1, and the worker's batch frames): append only.
 */
export const TRANSPORT_NAMES = [
  'tcp',
  'udp',
  'icmp',
  'icmpv6',
  'sctp',
  'gre',
  'esp',
  'other',
] as const;
export type TransportName = (typeof TRANSPORT_NAMES)[number];

/** A 5-tuple. Addresses are canonical text (dotted quad; RFC 5952 for IPv6). */
export interface Tuple {
  proto: TransportName;
  /** IP protocol number (6, 17, 1, 58, 132, ...), kept so 'other' stays informative. */
  ipProto: number;
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
}

/**
 * Tunnel kinds the decoder names. WireGuard and ESP are opaque: recognised, not decrypted. The
 * order is the wire order (protobuf enum value - 1, and the worker's batch frames): append only.
 */
export const TUNNEL_KINDS = [
  'vxlan',
  'vxlan-gpe',
  'geneve',
  'gre',
  'erspan',
  'ipip',
  '6in4',
  '4in6',
  '6in6',
  'mpls-udp',
  'wireguard',
  'esp',
] as const;
export type TunnelKind = (typeof TUNNEL_KINDS)[number];

/** One level of encapsulation, outermost first. `id` is the VNI, GRE key, SPI or WG receiver index. */
export interface TunnelInfo {
  kind: TunnelKind;
  id?: number;
  /** WireGuard message type (1 initiation, 2 response, 3 cookie, 4 data). */
  messageType?: number;
}

/**
 * Keys that survive NAT: address and port rewrites leave these alone, so the same packet can be
 * recognised at several capture points.
 */
export interface PacketKeys {
  /** IPv4 identification of the innermost IPv4 header (absent for IPv6). */
  ipId?: number;
  tcpSeq?: number;
  tcpAck?: number;
  /** TCP flags byte (FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 ...). */
  tcpFlags?: number;
  tcpWindow?: number;
  /** RFC 7323 timestamp option. */
  tsVal?: number;
  tsEcr?: number;
  /** Transport payload length on the wire (not the captured length). */
  payloadLength: number;
  /** xxHash32 (seed 0) of the first (up to 64) captured payload bytes; absent when there is no payload. */
  payloadHash?: number;
  /** xxHash32 of the payload's first line (up to CRLF / 128 bytes) with a trailing " HTTP/1.x" removed. */
  requestLineHash?: number;
  /** The id from a `hoptrace-probe-<id>` marker found in the first payload bytes. */
  probeMarker?: string;
  /** ICMP/ICMPv6 type and code of the innermost packet (an error's quoted packet is `related`). */
  icmpType?: number;
  icmpCode?: number;
  /**
   * Echo request/reply (ICMP 8/0, ICMPv6 128/129): identifier — which conntrack rewrites like a
   * port — and sequence number, which no NAT touches.
   */
  icmpId?: number;
  icmpSeq?: number;
  /** A DNS query's transaction id (core/decode/dns.ts). */
  dnsId?: number;
  /** xxHash32 of a DNS query's first question (lowercased QNAME, QTYPE, QCLASS). */
  dnsQuestion?: number;
}

/**
 * The keys after the probe marker (ICMP, DNS), in the order of their field numbers (12–17) in
 * proto/hoptrace.proto.
 */
export const EXTRA_KEYS = [
  'icmpType',
  'icmpCode',
  'icmpId',
  'icmpSeq',
  'dnsId',
  'dnsQuestion',
] as const satisfies readonly (keyof PacketKeys)[];

/** PacketKeys' numeric fields, in the order of their field numbers (1–10) in proto/hoptrace.proto. */
export const NUMERIC_KEYS = [
  'ipId',
  'tcpSeq',
  'tcpAck',
  'tcpFlags',
  'tcpWindow',
  'tsVal',
  'tsEcr',
  'payloadLength',
  'payloadHash',
  'requestLineHash',
] as const satisfies readonly (keyof PacketKeys)[];

/** Well-known capture point names; more points are allowed (e.g. 'uplink'). */
export type PointName = string;

export interface PacketEvent {
  point: PointName;
  node: string;
  iface: string;
  /** Link type name ('ethernet', 'raw', 'linux-sll2', ...). */
  linktype: string;
  /** Kernel (or file) timestamp, nanoseconds since the Unix epoch. */
  tsNs: bigint;
  /** 1-based frame number within its source (file or live stream). */
  frame: number;
  /** Outermost IP tuple when the frame is encapsulated, else null. */
  outer: Tuple | null;
  /** Innermost IP layer and its transport. */
  inner: Tuple | null;
  /** For ICMP errors: the tuple quoted inside the error (the flow it refers to). */
  related?: Tuple;
  tunnels: TunnelInfo[];
  keys: PacketKeys;
  truncated: boolean;
  /** Decoder error code from common/errors.ts, when the frame was malformed. */
  error?: string;
  /** Wire length of the frame. */
  wireLength: number;
  /**
   * Set: not a packet but a flow's counter (a live agent's per-flow counters, issue 20): `packets`
   * packets of this flow and direction (tuples and tunnels as above, keys empty) were counted
   * between this event's tsNs/frame (the first) and lastTsNs/lastFrame, not sent one by one.
   */
  fold?: FlowFold;
}

/** Packets of one flow and direction counted instead of sent (PacketEvent.fold). */
export interface FlowFold {
  packets: number;
  /** Their wire bytes. */
  bytes: number;
  lastTsNs: bigint;
  lastFrame: number;
}

/** Whether an event is a packet (not a flow's counter). */
export const isPacket = (e: PacketEvent): boolean => e.fold === undefined;

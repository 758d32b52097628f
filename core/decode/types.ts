/**
 * Public shapes of the decoder: options, the flat layer list and the decoded frame.
 * Layers are small plain objects so a frame costs a handful of allocations.
 */
import type { ErrorCode } from '../../common/errors';
import type { PacketKeys, Tuple, TunnelInfo } from '../../common/event';

/** Port tables for UDP-carried protocols ("Decode As"): UDP itself knows none of them. */
export interface DecodeOptions {
  /** Default [4789, 8472] (IANA VXLAN and the Linux/flannel legacy port). */
  vxlanPorts?: number[];
  /** Default [6081]. */
  genevePorts?: number[];
  /** Default [51820]. */
  wireguardPorts?: number[];
  /** Default [4790]. */
  vxlanGpePorts?: number[];
  /** Default [6635] (RFC 7510 MPLS-in-UDP). */
  mplsUdpPorts?: number[];
  /** Default [4500] (RFC 3948 UDP-encapsulated ESP, NAT-T). */
  espUdpPorts?: number[];
  /** Default [53, 5353]: DNS queries give the dnsId and dnsQuestion keys. */
  dnsPorts?: number[];
  /** Most layers followed before the decoder gives up with DECODE_TOO_DEEP. Default 32. */
  maxDepth?: number;
}

export type Layer =
  | { kind: 'ethernet'; etherType: number }
  | { kind: 'llc'; dsap: number; ssap: number; control: number }
  | { kind: 'snap'; oui: number; protocol: number }
  | { kind: 'vlan'; id: number; pcp: number; etherType: number }
  | { kind: 'linux-sll'; packetType: number; arphrd: number; protocol: number }
  | { kind: 'linux-sll2'; packetType: number; arphrd: number; ifindex: number; protocol: number }
  | { kind: 'null'; family: number }
  | { kind: 'ppp'; protocol: number }
  | { kind: 'mpls'; label: number; tc: number; bottom: boolean; ttl: number }
  | { kind: 'arp'; operation: number }
  | {
      kind: 'ipv4';
      src: string;
      dst: string;
      id: number;
      ttl: number;
      proto: number;
      fragOffset: number;
      moreFragments: boolean;
    }
  | {
      kind: 'ipv6';
      src: string;
      dst: string;
      nextHeader: number;
      hopLimit: number;
      flowLabel: number;
    }
  | { kind: 'ipv6-hopopts' | 'ipv6-route' | 'ipv6-dstopts'; nextHeader: number; length: number }
  | {
      kind: 'ipv6-frag';
      nextHeader: number;
      id: number;
      fragOffset: number;
      moreFragments: boolean;
    }
  | { kind: 'ah'; nextHeader: number; spi: number }
  | {
      kind: 'tcp';
      sport: number;
      dport: number;
      seq: number;
      ack: number;
      flags: number;
      window: number;
      mss?: number;
      wscale?: number;
      tsVal?: number;
      tsEcr?: number;
    }
  | { kind: 'udp'; sport: number; dport: number; length: number }
  | { kind: 'sctp'; sport: number; dport: number; vtag: number }
  | { kind: 'icmp' | 'icmpv6'; type: number; code: number }
  | { kind: 'vxlan'; flags: number; vni: number }
  | { kind: 'vxlan-gpe'; flags: number; vni: number; nextProtocol: number }
  | { kind: 'nsh'; spi: number; si: number; nextProtocol: number }
  | { kind: 'geneve'; vni: number; protocol: number; optionsLength: number }
  | { kind: 'gre'; version: number; protocol: number; key?: number; seq?: number }
  | { kind: 'erspan'; type: number; sessionId: number; vlan: number }
  | { kind: 'wireguard'; messageType: number; receiver: number }
  | { kind: 'esp'; spi: number; seq: number };

export type LayerKind = Layer['kind'];

/** Everything the decoder learned from one frame. */
export interface DecodedFrame {
  /** Link type name ('ethernet', 'linux-sll2', 'raw', ... or 'other'). */
  linktype: string;
  layers: Layer[];
  /** Outermost IP tuple when the frame is encapsulated (several IP layers or a tunnel), else null. */
  outer: Tuple | null;
  /** Innermost IP layer and the transport directly after it. */
  inner: Tuple | null;
  /** ICMP errors: the tuple quoted inside the error. */
  related?: Tuple;
  tunnels: TunnelInfo[];
  keys: PacketKeys;
  /** A header ran past the captured bytes. */
  truncated: boolean;
  error?: ErrorCode;
}

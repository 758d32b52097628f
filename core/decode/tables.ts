/**
 * Dissector tables (Wireshark style): which decoder follows is looked up here by EtherType, IP
 * protocol, PPP protocol, NSH/VXLAN-GPE next protocol or UDP port, never written as an if-chain.
 * Decoders return a `Next`; frame.ts maps each `Next` to its decode function.
 */
import type { DecodeOptions } from './types';

export enum Next {
  None = 0,
  Ethernet,
  VLAN,
  LLC,
  LinuxSLL,
  LinuxSLL2,
  Null,
  Loop,
  PPP,
  Raw,
  MPLS,
  ARP,
  IPv4,
  IPv6,
  IPv6Ext,
  IPv6Frag,
  AH,
  TCP,
  UDP,
  SCTP,
  ICMP,
  ICMPv6,
  GRE,
  ERSPAN2,
  ERSPAN3,
  VXLAN,
  VXLANGPE,
  NSH,
  Geneve,
  MPLSUDP,
  WireGuard,
  ESP,
  ESPUDP,
  DNS,
  Count,
}

function table(entries: [number, Next][]): Map<number, Next> {
  return new Map(entries);
}

/** EtherType → decoder (also used by GRE, Geneve, SLL and SNAP, which carry EtherTypes). */
export const ETHERTYPE = table([
  [0x0800, Next.IPv4],
  [0x86dd, Next.IPv6],
  [0x0806, Next.ARP],
  [0x8100, Next.VLAN],
  [0x88a8, Next.VLAN],
  [0x9100, Next.VLAN],
  [0x9200, Next.VLAN],
  [0x8847, Next.MPLS],
  [0x8848, Next.MPLS],
  [0x6558, Next.Ethernet], // transparent Ethernet bridging (GRE, Geneve)
  [0x880b, Next.PPP], // GREv1 / PPTP
  [0x88be, Next.ERSPAN2], // ERSPAN type I and II (type I has no header: see erspan.ts)
  [0x22eb, Next.ERSPAN3],
  [0x894f, Next.NSH],
]);

/** IP protocol / IPv6 next header → decoder. */
export const IPPROTO = table([
  [0, Next.IPv6Ext], // hop-by-hop options
  [43, Next.IPv6Ext], // routing
  [60, Next.IPv6Ext], // destination options
  [44, Next.IPv6Frag],
  [51, Next.AH],
  [4, Next.IPv4],
  [41, Next.IPv6],
  [6, Next.TCP],
  [17, Next.UDP],
  [132, Next.SCTP],
  [1, Next.ICMP],
  [58, Next.ICMPv6],
  [47, Next.GRE],
  [50, Next.ESP],
]);

/** PPP protocol field (RFC 1661 §2; assigned numbers) → decoder. */
export const PPP_PROTOCOL = table([
  [0x0021, Next.IPv4],
  [0x0057, Next.IPv6],
  [0x0281, Next.MPLS],
  [0x0283, Next.MPLS],
]);

/** NSH (RFC 8300 §2.2) and VXLAN-GPE next-protocol values → decoder. */
export const NSH_PROTOCOL = table([
  [1, Next.IPv4],
  [2, Next.IPv6],
  [3, Next.Ethernet],
  [4, Next.NSH],
  [5, Next.MPLS],
]);

/** BSD loopback address families (AF_INET everywhere; AF_INET6 is 24, 28 or 30 by OS). */
export const BSD_AF = table([
  [2, Next.IPv4],
  [24, Next.IPv6],
  [28, Next.IPv6],
  [30, Next.IPv6],
]);

const DEFAULTS = {
  vxlanPorts: [4789, 8472],
  genevePorts: [6081],
  wireguardPorts: [51820],
  vxlanGpePorts: [4790],
  mplsUdpPorts: [6635],
  espUdpPorts: [4500],
  dnsPorts: [53, 5353],
};

/** Build the `udp.port` table from options ("Decode As"). */
export function buildUDPPortTable(opts: DecodeOptions | undefined): Map<number, Next> {
  const m = new Map<number, Next>();
  const add = (ports: number[] | undefined, fallback: number[], next: Next): void => {
    for (const p of ports ?? fallback) m.set(p, next);
  };
  // Tunnels are added after DNS, so a port in both tables stays a tunnel port.
  add(opts?.dnsPorts, DEFAULTS.dnsPorts, Next.DNS);
  add(opts?.espUdpPorts, DEFAULTS.espUdpPorts, Next.ESPUDP);
  add(opts?.mplsUdpPorts, DEFAULTS.mplsUdpPorts, Next.MPLSUDP);
  add(opts?.wireguardPorts, DEFAULTS.wireguardPorts, Next.WireGuard);
  add(opts?.vxlanGpePorts, DEFAULTS.vxlanGpePorts, Next.VXLANGPE);
  add(opts?.genevePorts, DEFAULTS.genevePorts, Next.Geneve);
  add(opts?.vxlanPorts, DEFAULTS.vxlanPorts, Next.VXLAN);
  return m;
}

const DEFAULT_UDP_PORTS = buildUDPPortTable(undefined);
const udpTableCache = new WeakMap<DecodeOptions, Map<number, Next>>();

/** The port table for these options, built once per options object. */
export function udpPortTable(opts: DecodeOptions | undefined): Map<number, Next> {
  if (opts === undefined) return DEFAULT_UDP_PORTS;
  let m = udpTableCache.get(opts);
  if (m === undefined) {
    m = buildUDPPortTable(opts);
    udpTableCache.set(opts, m);
  }
  return m;
}

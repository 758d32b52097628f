/**
 * The lab's address plan, shaped like a two-node cluster: pod CIDR 10.244.<node>.0/24 behind a
 * `cni0` bridge per node, nodes joined by an uplink veth, a tunnel range the cluster does not own.
 * Every address lives inside namespaces the lab creates; none is routed anywhere else.
 */
export const ADDR = {
  /** Client underlay (outer) ↔ VPN pod underlay, a /30 on a veth between the two namespaces. */
  clientOuter: '172.31.255.2',
  vpnOuter: '172.31.255.1',
  /**
   * The "public" link of the scenarios whose tunnel reaches the VPN pod through its Service
   * (TEST-NET-3, RFC 5737: never routed anywhere, it exists only between two lab namespaces):
   * the client's underlay address, and the VPN Service's address on the VPN node (what a
   * LoadBalancer or NodePort Service gives the client to connect to).
   */
  clientPublic: '203.0.113.2',
  vpnService: '203.0.113.1',
  publicPrefixLen: 24,
  tunnelCidr: '10.90.0.0/24',
  clientTunnel: '10.90.0.42',
  vpnTunnel: '10.90.0.1',
  vxlanId: 42,
  vxlanPort: 4789,
  tunPort: 51900,
  vpnNodeBridge: '10.244.1.1',
  vpnPod: '10.244.1.10',
  backendNodeBridge: '10.244.2.1',
  backendPod: '10.244.2.5',
  backendPort: 8080,
  /** The backend pod's UDP DNS responder (lab/dns-server.ts), started for DNS scenarios. */
  backendDnsPort: 5353,
  proxyPod: '10.244.2.9',
  proxyPort: 8080,
  vpnNodeUplink: '192.168.50.1',
  backendNodeUplink: '192.168.50.2',
  /**
   * The nodes' default gateway. Nothing in the lab owns it: a packet routed there dies on an
   * unanswered ARP inside the uplink veth, like a reply sent toward a datacenter router that does
   * not know the tunnel range.
   */
  uplinkGateway: '192.168.50.254',
  clusterCidr: '10.244.0.0/16',
  serviceCidr: '10.96.0.0/12',
  clusterIp: '10.96.0.10',
} as const;

/**
 * The IPv6 half of the plan, given to every link of a scenario with `ipv6: true` next to its IPv4
 * address (ULA, RFC 5952 text as the decoder prints it). The cluster CIDR is a /48 that holds each
 * node's /64 pod bridge; the Service range and the tunnel range lie outside it, as in IPv4.
 */
export const ADDR6 = {
  tunnelCidr: 'fd00:10:90::/64',
  clientTunnel: 'fd00:10:90::42',
  vpnTunnel: 'fd00:10:90::1',
  clusterCidr: 'fd00:10:244::/48',
  vpnNodePodCidr: 'fd00:10:244:1::/64',
  vpnNodeBridge: 'fd00:10:244:1::1',
  vpnPod: 'fd00:10:244:1::a',
  backendNodePodCidr: 'fd00:10:244:2::/64',
  backendNodeBridge: 'fd00:10:244:2::1',
  backendPod: 'fd00:10:244:2::5',
  proxyPod: 'fd00:10:244:2::9',
  uplinkCidr: 'fd00:192:168:50::/64',
  vpnNodeUplink: 'fd00:192:168:50::1',
  backendNodeUplink: 'fd00:192:168:50::2',
  /** Owned by nothing, like ADDR.uplinkGateway: a packet routed there dies on an unanswered NDP. */
  uplinkGateway: 'fd00:192:168:50::fe',
  serviceCidr: 'fd00:10:96::/112',
  clusterIp: 'fd00:10:96::a',
} as const;

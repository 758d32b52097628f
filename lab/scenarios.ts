/**
 * The lab's scenarios: which layer of the path is configured to replace the client's tunnel
 * address, and what the analyzer must conclude from the three captures. Addresses follow
 * lab/topology.ts (ADDR, and ADDR6 for the scenarios that give every link an IPv6 address too).
 */
import { isIPv6 } from 'node:net';
import { ADDR, ADDR6 } from './addresses';

/** How the client's packets reach the VPN pod: kernel VXLAN (Ethernet) or a tun device (RAW). */
export type DecapKind = 'vxlan' | 'tun';

/**
 * How the tunnel's outer packets reach the VPN pod. `direct`: a veth between the client and the
 * VPN pod (ul0). `service-cluster` / `service-local`: the client's underlay ends on the VPN node,
 * which DNATs the tunnel port to the VPN pod like a LoadBalancer/NodePort Service's kube-proxy
 * rule, so the outer packets cross the VPN pod's eth0 (the egress point). With externalTrafficPolicy
 * `Cluster` the node masquerades them too (the pod sees the node's bridge address as its peer);
 * with `Local` it does not (the pod sees the client's own address).
 */
export type OuterPath = 'direct' | 'service-cluster' | 'service-local';

/**
 * What the client sends, each carrying the probe marker `hoptrace-probe-<id>` (lab/probe.ts):
 * `http` one curl request on a fresh connection; `http-keepalive` a request on a keep-alive
 * connection opened before the captures start (no SYN is captured); `dns` one A query over UDP
 * for `hoptrace-probe-<id>.lab.` to the backend pod's DNS responder; `icmp` one ping (ICMP echo;
 * its data carries no marker, so the selector alone picks it).
 */
export type RequestShape = 'http' | 'http-keepalive' | 'dns' | 'icmp';

/** A source-rewriting (or dropping) configuration applied to one namespace. */
export type PathRule =
  /** MASQUERADE in the VPN pod out its eth0 (the VPN software's own NAT). */
  | { kind: 'vpn-pod-masquerade' }
  /** MASQUERADE on the VPN node for the tunnel range out the uplink (ip-masq-agent without the exclusion). */
  | { kind: 'cni-masquerade' }
  /** The same masquerade as native nftables (`table ip cni-nat`), no iptables rule. */
  | { kind: 'cni-masquerade-nft' }
  /**
   * kube-proxy on the backend node: DNAT of a Service address to the backend pod + KUBE-MARK-MASQ +
   * MASQUERADE of marked packets. `protocol` defaults to tcp, `targetPort` to ADDR.backendPort.
   * An IPv6 `serviceIp` gets the same chains with ip6tables, DNAT to the pod's IPv6 address.
   */
  | {
      kind: 'kube-proxy';
      serviceIp: string;
      servicePort: number;
      randomFully: boolean;
      protocol?: 'tcp' | 'udp';
      targetPort?: number;
    }
  /**
   * kube-proxy's nftables mode on the backend node (lab/nft-rules.ts): the TCP Service port
   * `serviceIp:servicePort` to the backend pod, sources outside the cluster CIDR marked and
   * masqueraded fully-random. No iptables rule.
   */
  | { kind: 'kube-proxy-nft'; serviceIp: string; servicePort: number }
  /** FORWARD DROP on the backend node for the tunnel range. */
  | { kind: 'forward-drop' };

/** What a scenario must produce. */
export interface Expectation {
  /** verdict.layer */
  layer: string;
  /** verdict.rewrittenBetween */
  rewrittenBetween: [string, string] | null;
  /** Source the backend point observes; null when the request never reaches it. */
  backendSrc: string | null;
  /** Whether the client gets its answer (HTTP 200; for DNS a response with the query's id). */
  answered: boolean;
  /**
   * Whether the backend application logs the probe; default: `answered`. A UDP query is delivered
   * even when its reply dies, a TCP request without a completed handshake never is.
   */
  appSeesProbe?: boolean;
  /** The source port differs between egress and backend (MASQUERADE --random-fully). */
  sportChanges?: boolean;
  /** verdict.outer.src: the outer source the VPN pod sees for the client's tunnel. */
  outerSrc?: string;
  /** verdict.outer.class: that source is a node's address or one from outside the cluster. */
  outerClass?: 'node' | 'external';
}

/** One end-to-end lab run. */
export interface Scenario {
  name: string;
  description: string;
  decap: DecapKind;
  /** Interface captured in the backend pod: its eth0 (Ethernet) or `any` (LINUX_SLL2). */
  backendIface: 'eth0' | 'any';
  /** What the client requests. */
  target: { ip: string; port: number };
  /** How the client sends its probe (default `http`). */
  request: RequestShape;
  /** Backend node routes the tunnel range back via the VPN node. */
  returnRoute: boolean;
  /** rp_filter on the node namespaces: 1 strict, 2 loose. */
  rpFilter: 1 | 2;
  rules: PathRule[];
  /** Run the L7 proxy pod (lab/proxy.ts) in front of the backend. */
  proxyPod: boolean;
  /**
   * Every link gets its ADDR6 address too, with IPv6 routes and forwarding mirroring IPv4's;
   * without it IPv6 is disabled in every namespace. The request's family is the target's.
   */
  ipv6: boolean;
  /** How the tunnel's outer packets reach the VPN pod (default `direct`). */
  outerVia: OuterPath;
  /** `http`: bytes the backend pads its answer with (`?bytes=N`): a long reply. Default none. */
  responseBytes?: number;
  expect: Expectation;
}

const backend = { ip: ADDR.backendPod, port: ADDR.backendPort };

function scenario(
  s: Omit<
    Scenario,
    | 'decap'
    | 'backendIface'
    | 'target'
    | 'request'
    | 'returnRoute'
    | 'rpFilter'
    | 'rules'
    | 'proxyPod'
    | 'ipv6'
    | 'outerVia'
  > &
    Partial<Scenario>,
): Scenario {
  return {
    decap: 'vxlan',
    backendIface: 'eth0',
    target: backend,
    request: 'http',
    returnRoute: true,
    rpFilter: 2,
    rules: [],
    proxyPod: false,
    ipv6: false,
    outerVia: 'direct',
    ...s,
  };
}

/** Every scenario, in the order `npm run lab` prints them. */
export const SCENARIOS: readonly Scenario[] = [
  scenario({
    name: 'preserve',
    description: 'return routes for 10.90.0.0/24, loose rp_filter: nothing rewrites the source',
    expect: {
      layer: 'preserved',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: true,
    },
  }),
  scenario({
    name: 'preserve-tun',
    description: 'preserve, decapsulated by a tun device (RAW link type)',
    decap: 'tun',
    expect: {
      layer: 'preserved',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: true,
    },
  }),
  scenario({
    name: 'preserve-strict-rpf',
    description:
      'preserve with strict rp_filter: the return route matches the ingress uplink, so it still passes',
    rpFilter: 1,
    backendIface: 'any',
    expect: {
      layer: 'preserved',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: true,
    },
  }),
  scenario({
    name: 'vpn-pod-masquerade',
    description: 'MASQUERADE in the VPN pod out eth0',
    returnRoute: false,
    rules: [{ kind: 'vpn-pod-masquerade' }],
    expect: {
      layer: 'vpn-pod',
      rewrittenBetween: ['decap', 'egress'],
      backendSrc: ADDR.vpnPod,
      answered: true,
    },
  }),
  scenario({
    name: 'vpn-pod-masquerade-tun',
    description: 'MASQUERADE in the VPN pod, decapsulated by a tun device',
    decap: 'tun',
    returnRoute: false,
    rules: [{ kind: 'vpn-pod-masquerade' }],
    expect: {
      layer: 'vpn-pod',
      rewrittenBetween: ['decap', 'egress'],
      backendSrc: ADDR.vpnPod,
      answered: true,
    },
  }),
  scenario({
    name: 'cni-masquerade',
    description:
      'VPN node MASQUERADE for -s 10.90.0.0/24 out the uplink (ip-masq-agent without the exclusion)',
    returnRoute: false,
    rules: [{ kind: 'cni-masquerade' }],
    expect: {
      layer: 'cni-masquerade',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.vpnNodeUplink,
      answered: true,
    },
  }),
  scenario({
    name: 'cni-masquerade-any',
    description: 'cni-masquerade, backend captured on `any` (LINUX_SLL2)',
    returnRoute: false,
    backendIface: 'any',
    rules: [{ kind: 'cni-masquerade' }],
    expect: {
      layer: 'cni-masquerade',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.vpnNodeUplink,
      answered: true,
    },
  }),
  scenario({
    name: 'kube-proxy-nodeport',
    description: 'NodePort 192.168.50.2:30080 on the backend node: DNAT + mark 0x4000 + MASQUERADE',
    target: { ip: ADDR.backendNodeUplink, port: 30080 },
    rules: [
      {
        kind: 'kube-proxy',
        serviceIp: ADDR.backendNodeUplink,
        servicePort: 30080,
        randomFully: false,
      },
    ],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
    },
  }),
  scenario({
    name: 'kube-proxy-random-fully',
    description: 'ClusterIP 10.96.0.10:80 handled on the backend node, MASQUERADE --random-fully',
    target: { ip: ADDR.clusterIp, port: 80 },
    rules: [{ kind: 'kube-proxy', serviceIp: ADDR.clusterIp, servicePort: 80, randomFully: true }],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
      sportChanges: true,
    },
  }),
  scenario({
    name: 'kube-proxy-tun',
    description: 'kube-proxy NodePort, decapsulated by a tun device',
    decap: 'tun',
    target: { ip: ADDR.backendNodeUplink, port: 30080 },
    rules: [
      {
        kind: 'kube-proxy',
        serviceIp: ADDR.backendNodeUplink,
        servicePort: 30080,
        randomFully: false,
      },
    ],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
    },
  }),
  scenario({
    name: 'proxy-pod',
    description:
      'an L7 proxy pod terminates the connection and opens its own (HTTP/1.0, Host and Connection rewritten)',
    target: { ip: ADDR.proxyPod, port: ADDR.proxyPort },
    proxyPod: true,
    expect: {
      layer: 'proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.proxyPod,
      answered: true,
    },
  }),
  scenario({
    name: 'no-return',
    description:
      'preserve without a 10.90.0.0/24 route on the backend node: the SYN arrives, the SYN-ACK dies',
    returnRoute: false,
    expect: {
      layer: 'no-return',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: false,
    },
  }),
  scenario({
    name: 'dropped',
    description: 'FORWARD DROP on the backend node for -s 10.90.0.0/24',
    rules: [{ kind: 'forward-drop' }],
    expect: { layer: 'dropped', rewrittenBetween: null, backendSrc: null, answered: false },
  }),
  scenario({
    name: 'kube-proxy-keepalive',
    description:
      'ClusterIP 10.96.0.10:80 via kube-proxy, the request on a keep-alive connection opened before the captures (no SYN captured)',
    target: { ip: ADDR.clusterIp, port: 80 },
    request: 'http-keepalive',
    rules: [{ kind: 'kube-proxy', serviceIp: ADDR.clusterIp, servicePort: 80, randomFully: false }],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
    },
  }),
  scenario({
    name: 'dns-kube-proxy',
    description: `DNS over UDP to ClusterIP 10.96.0.10:53, kube-proxy DNAT to the pod's :${ADDR.backendDnsPort} + mark + MASQUERADE`,
    target: { ip: ADDR.clusterIp, port: 53 },
    request: 'dns',
    rules: [
      {
        kind: 'kube-proxy',
        serviceIp: ADDR.clusterIp,
        servicePort: 53,
        randomFully: false,
        protocol: 'udp',
        targetPort: ADDR.backendDnsPort,
      },
    ],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
    },
  }),
  scenario({
    name: 'dns-no-return',
    description:
      'DNS over UDP straight to the backend pod, no 10.90.0.0/24 route on the backend node: the query arrives, the reply dies',
    target: { ip: ADDR.backendPod, port: ADDR.backendDnsPort },
    request: 'dns',
    returnRoute: false,
    expect: {
      layer: 'no-return',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: false,
      appSeesProbe: true,
    },
  }),
  scenario({
    name: 'icmp-cni-masquerade',
    description:
      'one ping (ICMP echo) from the client to the backend pod through the VPN node masquerade of 10.90.0.0/24',
    target: { ip: ADDR.backendPod, port: 0 },
    request: 'icmp',
    returnRoute: false,
    rules: [{ kind: 'cni-masquerade' }],
    expect: {
      layer: 'cni-masquerade',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.vpnNodeUplink,
      answered: true,
      // No application answers a ping: the kernel does.
      appSeesProbe: false,
    },
  }),
  scenario({
    name: 'kube-proxy-nft',
    description:
      'ClusterIP 10.96.0.10:80 via kube-proxy in nftables mode (native nft: service-ips verdict map, mark-for-masquerade, masquerade fully-random; no iptables rule)',
    target: { ip: ADDR.clusterIp, port: 80 },
    rules: [{ kind: 'kube-proxy-nft', serviceIp: ADDR.clusterIp, servicePort: 80 }],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.backendNodeBridge,
      answered: true,
      sportChanges: true,
    },
  }),
  scenario({
    name: 'cni-masquerade-nft',
    description:
      'VPN node masquerade of 10.90.0.0/24 out the uplink as native nftables (table ip cni-nat; no iptables rule)',
    returnRoute: false,
    rules: [{ kind: 'cni-masquerade-nft' }],
    expect: {
      layer: 'cni-masquerade',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR.vpnNodeUplink,
      answered: true,
    },
  }),
  scenario({
    name: 'kube-proxy-ipv6',
    description:
      'IPv6: ClusterIP [fd00:10:96::a]:80 via kube-proxy (ip6tables DNAT + mark 0x4000 + MASQUERADE) from fd00:10:90::42',
    ipv6: true,
    target: { ip: ADDR6.clusterIp, port: 80 },
    rules: [
      { kind: 'kube-proxy', serviceIp: ADDR6.clusterIp, servicePort: 80, randomFully: false },
    ],
    expect: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      backendSrc: ADDR6.backendNodeBridge,
      answered: true,
    },
  }),
  scenario({
    name: 'outer-cluster',
    description:
      'preserve, the tunnel through the VPN Service with externalTrafficPolicy Cluster: the VPN node DNATs udp 4789 to the pod and masquerades it (the pod sees 10.244.1.1 as its peer)',
    outerVia: 'service-cluster',
    expect: {
      layer: 'preserved',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: true,
      outerSrc: ADDR.vpnNodeBridge,
      outerClass: 'node',
    },
  }),
  scenario({
    name: 'outer-local',
    description:
      "preserve, the tunnel through the VPN Service with externalTrafficPolicy Local: DNAT only (the pod sees the client's 203.0.113.2 as its peer)",
    outerVia: 'service-local',
    expect: {
      layer: 'preserved',
      rewrittenBetween: null,
      backendSrc: ADDR.clientTunnel,
      answered: true,
      outerSrc: ADDR.clientPublic,
      outerClass: 'external',
    },
  }),
];

/** The client's tunnel address the request leaves from: the one of the target's family. */
export function clientAddress(s: Scenario): string {
  return isIPv6(s.target.ip) ? ADDR6.clientTunnel : ADDR.clientTunnel;
}

/** What the analysis selects the probe by: client, target and, but for a ping, its port. */
export function selectorOf(s: Scenario): { client: string; dst: string; dport?: number } {
  const sel = { client: clientAddress(s), dst: s.target.ip };
  return s.request === 'icmp' ? sel : { ...sel, dport: s.target.port };
}

/** Whether the backend application must log the probe under `expect`. */
export function appSeesProbe(expect: Expectation): boolean {
  return expect.appSeesProbe ?? expect.answered;
}

/** The scenario called `name`, or undefined. */
export function findScenario(name: string): Scenario | undefined {
  return SCENARIOS.find((s) => s.name === name);
}

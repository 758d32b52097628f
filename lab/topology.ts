/**
 * Builds one scenario's namespaces the way Kubernetes and a bridge CNI lay them out:
 *
 *   client ──ul0 (underlay veth)── vpn-pod ──eth0/veth── cni0@vpn-node ──up0══up0── be-node@cni0 ──veth── be-pod
 *     └ vx0 | tun0  (tunnel) ───────┘ vx0 | tun7                                              └──veth── proxy-pod
 *
 * or, with a tunnel through the VPN Service (`outerVia`), the client's underlay ends on the node:
 *
 *   client ──ul0 (public veth)── pub0@vpn-node (DNAT udp 4789 → vpn-pod) ──cni0── eth0@vpn-pod
 *
 * Every link is created inside a lab namespace (`ip -n NS link add ... peer name X netns NS2`),
 * so nothing ever appears in the host's namespace. Rules (NAT, drops) come from the scenario,
 * as iptables/ip6tables rules or native nftables rulesets (lab/nft-rules.ts). IPv4 only, unless
 * the scenario asks for IPv6 too (lab/ipv6-plan.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import type { Inventory, PodRole } from '../common/inventory';
import { ADDR, ADDR6 } from './addresses';
import { collect, waitForLine } from './child';
import { addIpv6Plan, quietIpv6 } from './ipv6-plan';
import type { Netns } from './netns';
import { cniMasqueradeNftRuleset, kubeProxyNftRuleset } from './nft-rules';
import { NS } from './ns-names';
import type { OuterPath, PathRule, Scenario } from './scenarios';

export { NS } from './ns-names';

/** A process the topology started (server, tunnel endpoint) and its collected stdout. */
export interface LabProcess {
  name: string;
  child: ChildProcess;
  stdout: () => string;
}

/** The built topology: where to capture, what the analyzer gets as inventory, what runs. */
export interface Topology {
  points: { name: 'decap' | 'egress' | 'backend'; ns: string; iface: string }[];
  inventory: Inventory;
  processes: LabProcess[];
  /** What the backend pod's applications (HTTP server, DNS responder) logged so far. */
  backendLog(): string;
}

/** The processes serving in the backend pod. */
const BACKEND_APPS = ['backend', 'backend-dns'];

/**
 * The inventory of the lab cluster (every address of each node, each pod's role). With `ipv6`
 * the nodes list their IPv6 addresses too, and each pod's IPv6 address is a second entry
 * `<pod>@<ip>`, the way the collector lists a dual-stack pod's second address. A tunnel through
 * the VPN Service (`outerVia`) adds the Service address on the VPN node's public link.
 */
export function labInventory(
  withProxy: boolean,
  ipv6: boolean,
  outerVia: OuterPath = 'direct',
): Inventory {
  const inv: Inventory = {
    nodes: {
      'vpn-node': [
        ADDR.vpnNodeUplink,
        ADDR.vpnNodeBridge,
        ...(outerVia === 'direct' ? [] : [ADDR.vpnService]),
        ...(ipv6 ? [ADDR6.vpnNodeUplink, ADDR6.vpnNodeBridge] : []),
      ],
      'backend-node': [
        ADDR.backendNodeUplink,
        ADDR.backendNodeBridge,
        ...(ipv6 ? [ADDR6.backendNodeUplink, ADDR6.backendNodeBridge] : []),
      ],
    },
    pods: {},
  };
  const pod = (name: string, ip: string, ip6: string, node: string, role: PodRole): void => {
    inv.pods[name] = { ip, node, role };
    if (ipv6) inv.pods[`${name}@${ip6}`] = { ip: ip6, node, role };
  };
  pod('vpn', ADDR.vpnPod, ADDR6.vpnPod, 'vpn-node', 'vpn');
  pod('backend', ADDR.backendPod, ADDR6.backendPod, 'backend-node', 'backend');
  if (withProxy) pod('proxy', ADDR.proxyPod, ADDR6.proxyPod, 'backend-node', 'proxy');
  return inv;
}

/**
 * Builds `scenario` in `lab`. Throws LAB_SETUP on the first failing command; the caller owns
 * `lab.destroy()`, which removes whatever was built up to that point.
 */
export async function buildTopology(
  lab: Netns,
  scenario: Scenario,
  distLabDir: string,
): Promise<Topology> {
  const all = [
    NS.client,
    NS.vpnPod,
    NS.vpnNode,
    NS.backendNode,
    NS.backendPod,
    ...(scenario.proxyPod ? [NS.proxyPod] : []),
  ];
  for (const ns of all) {
    await lab.add(ns);
    if (scenario.ipv6) {
      await quietIpv6(lab, ns);
      continue;
    }
    // No IPv6 unless asked: router solicitations and MLD reports would only be noise in the
    // captures. Set before any link exists so every new interface inherits it.
    await lab.sysctl(ns, 'net.ipv6.conf.default.disable_ipv6', '1');
    await lab.sysctl(ns, 'net.ipv6.conf.all.disable_ipv6', '1');
  }
  for (const ns of [NS.vpnPod, NS.vpnNode, NS.backendNode]) {
    await lab.sysctl(ns, 'net.ipv4.ip_forward', '1');
    if (scenario.ipv6) await lab.sysctl(ns, 'net.ipv6.conf.all.forwarding', '1');
  }
  // The effective rp_filter is max(all, <iface>); interfaces start at 0 in a new namespace.
  for (const ns of [NS.vpnNode, NS.backendNode])
    await lab.sysctl(ns, 'net.ipv4.conf.all.rp_filter', String(scenario.rpFilter));

  const processes: LabProcess[] = [];

  // VPN node: cni0 bridge, the VPN pod's eth0 on it, uplink to the backend node. Before the
  // tunnel: one that comes through the VPN Service runs over the pod's eth0.
  await bridge(lab, NS.vpnNode, `${ADDR.vpnNodeBridge}/24`);
  await podVeth(lab, NS.vpnNode, 'veth-vpn', NS.vpnPod, `${ADDR.vpnPod}/24`, ADDR.vpnNodeBridge);
  await veth(lab, NS.vpnNode, 'up0', NS.backendNode, 'up0');
  await addr(lab, NS.vpnNode, 'up0', `${ADDR.vpnNodeUplink}/24`);
  await addr(lab, NS.backendNode, 'up0', `${ADDR.backendNodeUplink}/24`);

  // The tunnel's outer (encrypted-in-real-life) path: a veth between the remote client and the
  // VPN pod, or through the VPN Service on the VPN node and the pod's eth0.
  const underlay =
    scenario.outerVia === 'direct'
      ? await linkUnderlay(lab, NS.vpnPod)
      : await linkServiceUnderlay(lab, scenario);

  // Tunnel.
  let decapIface: string;
  let clientTunnelIface: string;
  if (scenario.decap === 'vxlan') {
    await addVxlanTunnel(lab, NS.vpnPod, underlay);
    decapIface = 'vx0';
    clientTunnelIface = 'vx0';
  } else {
    // socat opens the tun device (Node has no ioctl) and carries raw IP packets over UDP; the
    // VPN pod's tun7 is RAW like wg0/tun0. Both ends are symmetric datagram sockets, so neither
    // blocks waiting for a peer and "starting data transfer loop" means the device is up.
    for (const [ns, ip, dev, { local, remote }] of [
      [NS.vpnPod, ADDR.vpnTunnel, 'tun7', underlay.vpn],
      [NS.client, ADDR.clientTunnel, 'tun0', underlay.client],
    ] as const) {
      const child = lab.spawn(ns, 'socat', [
        '-d',
        '-d',
        `TUN:${ip}/24,tun-name=${dev},tun-type=tun,iff-up,iff-no-pi`,
        `UDP-DATAGRAM:${remote}:${ADDR.tunPort},bind=${local}:${ADDR.tunPort}`,
      ]);
      child.stdout?.resume();
      processes.push({ name: `socat-${dev}`, child, stdout: collect(child.stderr) });
      await waitForLine(
        child,
        child.stderr,
        /starting data transfer loop/,
        `socat ${dev} in ${lab.full(ns)}`,
      );
    }
    decapIface = 'tun7';
    clientTunnelIface = 'tun0';
  }
  // The client sends everything cluster-bound into the tunnel.
  for (const cidr of [ADDR.clusterCidr, ADDR.serviceCidr, '192.168.50.0/24']) {
    await lab.ip(NS.client, 'route', 'add', cidr, 'via', ADDR.vpnTunnel, 'dev', clientTunnelIface);
  }

  // Backend node: cni0 bridge with the backend pod (and the proxy pod).
  await bridge(lab, NS.backendNode, `${ADDR.backendNodeBridge}/24`);
  await podVeth(
    lab,
    NS.backendNode,
    'veth-be',
    NS.backendPod,
    `${ADDR.backendPod}/24`,
    ADDR.backendNodeBridge,
  );
  if (scenario.proxyPod)
    await podVeth(
      lab,
      NS.backendNode,
      'veth-px',
      NS.proxyPod,
      `${ADDR.proxyPod}/24`,
      ADDR.backendNodeBridge,
    );

  // Node routes: pod CIDRs across the uplink (what a host-gw CNI installs), Service range toward
  // the backend node (where kube-proxy handles it in this lab), the tunnel range to the VPN pod.
  await lab.ip(NS.vpnNode, 'route', 'add', '10.244.2.0/24', 'via', ADDR.backendNodeUplink);
  await lab.ip(NS.vpnNode, 'route', 'add', ADDR.serviceCidr, 'via', ADDR.backendNodeUplink);
  await lab.ip(NS.vpnNode, 'route', 'add', ADDR.tunnelCidr, 'via', ADDR.vpnPod);
  await lab.ip(NS.backendNode, 'route', 'add', '10.244.1.0/24', 'via', ADDR.vpnNodeUplink);
  for (const ns of [NS.vpnNode, NS.backendNode])
    await lab.ip(ns, 'route', 'add', 'default', 'via', ADDR.uplinkGateway);
  if (scenario.returnRoute)
    await lab.ip(NS.backendNode, 'route', 'add', ADDR.tunnelCidr, 'via', ADDR.vpnNodeUplink);

  if (scenario.ipv6)
    await addIpv6Plan(lab, {
      tunnel: { client: clientTunnelIface, vpn: decapIface },
      proxyPod: scenario.proxyPod,
      returnRoute: scenario.returnRoute,
    });

  for (const rule of scenario.rules) await applyRule(lab, rule);

  // Servers, bound to their pod address(es); each prints a "listening" JSON line when bound.
  processes.push(
    await startNode(lab, NS.backendPod, 'backend', join(distLabDir, 'http-server.js'), [
      '--host',
      ADDR.backendPod,
      ...(scenario.ipv6 ? ['--host', ADDR6.backendPod] : []),
      '--port',
      String(ADDR.backendPort),
    ]),
  );
  if (scenario.request === 'dns') {
    processes.push(
      await startNode(lab, NS.backendPod, 'backend-dns', join(distLabDir, 'dns-server.js'), [
        '--host',
        ADDR.backendPod,
        '--port',
        String(ADDR.backendDnsPort),
      ]),
    );
  }
  if (scenario.proxyPod) {
    processes.push(
      await startNode(lab, NS.proxyPod, 'proxy', join(distLabDir, 'proxy.js'), [
        '--host',
        ADDR.proxyPod,
        '--port',
        String(ADDR.proxyPort),
        '--upstream',
        `${ADDR.backendPod}:${ADDR.backendPort}`,
      ]),
    );
  }

  return {
    points: [
      { name: 'decap', ns: NS.vpnPod, iface: decapIface },
      { name: 'egress', ns: NS.vpnPod, iface: 'eth0' },
      { name: 'backend', ns: NS.backendPod, iface: scenario.backendIface },
    ],
    inventory: labInventory(scenario.proxyPod, scenario.ipv6, scenario.outerVia),
    processes,
    backendLog: () =>
      processes
        .filter((p) => BACKEND_APPS.includes(p.name))
        .map((p) => p.stdout())
        .join(''),
  };
}

/** Exported for lab/repro-pod.ts (rebuilding a rescheduled VPN pod). */
export async function addr(lab: Netns, ns: string, dev: string, cidr: string): Promise<void> {
  await lab.ip(ns, 'addr', 'add', cidr, 'dev', dev);
  await lab.ip(ns, 'link', 'set', dev, 'up');
}

// Created inside nsA with its peer directly in nsB: the pair never exists in the host namespace.
/** Exported for lab/repro-pod.ts (rebuilding a rescheduled VPN pod). */
export async function veth(
  lab: Netns,
  nsA: string,
  devA: string,
  nsB: string,
  devB: string,
): Promise<void> {
  await lab.ip(
    nsA,
    'link',
    'add',
    devA,
    'type',
    'veth',
    'peer',
    'name',
    devB,
    'netns',
    lab.full(nsB),
  );
}

async function bridge(lab: Netns, ns: string, cidr: string): Promise<void> {
  await lab.ip(ns, 'link', 'add', 'cni0', 'type', 'bridge');
  await addr(lab, ns, 'cni0', cidr);
}

// A pod's eth0 with its host-side veth on the node's cni0 and a default route via the bridge.
async function podVeth(
  lab: Netns,
  nodeNs: string,
  hostDev: string,
  podNs: string,
  cidr: string,
  gateway: string,
): Promise<void> {
  await veth(lab, nodeNs, hostDev, podNs, 'eth0');
  await lab.ip(nodeNs, 'link', 'set', hostDev, 'master', 'cni0', 'up');
  await addr(lab, podNs, 'eth0', cidr);
  await lab.ip(podNs, 'route', 'add', 'default', 'via', gateway);
}

/** Exported for lab/repro-pod.ts (rebuilding a rescheduled VPN pod). */
export async function applyRule(lab: Netns, rule: PathRule): Promise<void> {
  switch (rule.kind) {
    case 'vpn-pod-masquerade':
      await masqueradeTunnelRange(lab, NS.vpnPod);
      return;
    case 'cni-masquerade':
      // An ip-masq-agent-style chain whose non-masquerade list covers the cluster but not the tunnel range.
      await lab.iptables(NS.vpnNode, '-t', 'nat', '-N', 'IP-MASQ-AGENT');
      await lab.iptables(
        NS.vpnNode,
        '-t',
        'nat',
        '-A',
        'IP-MASQ-AGENT',
        '-s',
        ADDR.clusterCidr,
        '-j',
        'RETURN',
      );
      await lab.iptables(NS.vpnNode, '-t', 'nat', '-A', 'IP-MASQ-AGENT', '-j', 'MASQUERADE');
      await lab.iptables(
        NS.vpnNode,
        '-t',
        'nat',
        '-A',
        'POSTROUTING',
        '-s',
        ADDR.tunnelCidr,
        '-o',
        'up0',
        '-j',
        'IP-MASQ-AGENT',
      );
      return;
    case 'cni-masquerade-nft':
      await lab.nft(NS.vpnNode, cniMasqueradeNftRuleset());
      return;
    case 'kube-proxy':
      await kubeProxy(lab, rule);
      return;
    case 'kube-proxy-nft':
      await lab.nft(NS.backendNode, kubeProxyNftRuleset(rule.serviceIp, rule.servicePort));
      return;
    case 'forward-drop':
      await lab.iptables(NS.backendNode, '-A', 'FORWARD', '-s', ADDR.tunnelCidr, '-j', 'DROP');
      return;
  }
}

// The chains kube-proxy (iptables mode) writes for one Service with one endpoint; an IPv6
// Service address gets them in ip6tables, with the IPv6 cluster CIDR and pod address.
async function kubeProxy(
  lab: Netns,
  rule: Extract<PathRule, { kind: 'kube-proxy' }>,
): Promise<void> {
  const { serviceIp: ip, servicePort: port, randomFully } = rule;
  const protocol = rule.protocol ?? 'tcp';
  const targetPort = rule.targetPort ?? ADDR.backendPort;
  const v6 = isIPv6(ip);
  const clusterCidr = v6 ? ADDR6.clusterCidr : ADDR.clusterCidr;
  const endpoint = v6 ? `[${ADDR6.backendPod}]:${targetPort}` : `${ADDR.backendPod}:${targetPort}`;
  const nat = (...args: string[]): Promise<void> =>
    v6
      ? lab.ip6tables(NS.backendNode, '-t', 'nat', ...args)
      : lab.iptables(NS.backendNode, '-t', 'nat', ...args);
  for (const chain of [
    'KUBE-SERVICES',
    'KUBE-MARK-MASQ',
    'KUBE-POSTROUTING',
    'KUBE-SVC-LAB',
    'KUBE-SEP-LAB',
  ])
    await nat('-N', chain);
  await nat('-A', 'PREROUTING', '-j', 'KUBE-SERVICES');
  await nat('-A', 'POSTROUTING', '-j', 'KUBE-POSTROUTING');
  await nat('-A', 'KUBE-MARK-MASQ', '-j', 'MARK', '--or-mark', '0x4000');
  await nat(
    '-A',
    'KUBE-SERVICES',
    '-d',
    `${ip}/${v6 ? 128 : 32}`,
    '-p',
    protocol,
    '--dport',
    String(port),
    '-j',
    'KUBE-SVC-LAB',
  );
  // Traffic from outside the cluster CIDR (here: the tunnel range) is marked for masquerade.
  await nat('-A', 'KUBE-SVC-LAB', '!', '-s', clusterCidr, '-j', 'KUBE-MARK-MASQ');
  await nat('-A', 'KUBE-SVC-LAB', '-j', 'KUBE-SEP-LAB');
  await nat('-A', 'KUBE-SEP-LAB', '-p', protocol, '-j', 'DNAT', '--to-destination', endpoint);
  await nat('-A', 'KUBE-POSTROUTING', '-m', 'mark', '!', '--mark', '0x4000/0x4000', '-j', 'RETURN');
  await nat('-A', 'KUBE-POSTROUTING', '-j', 'MARK', '--xor-mark', '0x4000');
  await nat(
    '-A',
    'KUBE-POSTROUTING',
    '-j',
    'MASQUERADE',
    ...(randomFully ? ['--random-fully'] : []),
  );
}

async function startNode(
  lab: Netns,
  ns: string,
  name: string,
  script: string,
  args: string[],
): Promise<LabProcess> {
  const child = lab.spawn(ns, process.execPath, [script, ...args]);
  const stdout = collect(child.stdout);
  const errText = collect(child.stderr);
  try {
    await waitForLine(
      child,
      child.stdout,
      /"event":"listening"/,
      `${name} server in ${lab.full(ns)}`,
    );
  } catch (e) {
    const err = errText().trim();
    if (err !== '' && e instanceof Error) e.message += ` stderr: ${err}`;
    throw e;
  }
  return { name, child, stdout };
}

/** One end of the tunnel's outer path: the device it runs over, its own address, its peer's. */
export interface UnderlayEnd {
  dev: string;
  local: string;
  remote: string;
}

/**
 * Both ends of the tunnel's outer path. `viaNat`: the outer packets cross the VPN Service's NAT,
 * so each VXLAN end
 * - keeps sending to its configured remote (`nolearning`): learning would make the peer's
 *   outer source as the VPN pod sees it (the node, for Cluster) the destination of its replies;
 * - sends no outer UDP checksum (`noudpcsum`): NAT's incremental update of one that covers an inner
 *   packet whose own checksum is offloaded breaks it (UdpInCsumErrors in the VPN pod, ARP passes,
 *   TCP does not; the kubernetes/kubernetes#88986 class of bug), and NAT leaves a zero one alone.
 */
export interface TunnelUnderlay {
  client: UnderlayEnd;
  vpn: UnderlayEnd;
  viaNat: boolean;
}

/** The underlay veth between the remote client and a VPN pod namespace (the outer path). */
export async function linkUnderlay(lab: Netns, vpnNs: string): Promise<TunnelUnderlay> {
  await veth(lab, NS.client, 'ul0', vpnNs, 'ul0');
  await addr(lab, NS.client, 'ul0', `${ADDR.clientOuter}/30`);
  await addr(lab, vpnNs, 'ul0', `${ADDR.vpnOuter}/30`);
  return {
    client: { dev: 'ul0', local: ADDR.clientOuter, remote: ADDR.vpnOuter },
    vpn: { dev: 'ul0', local: ADDR.vpnOuter, remote: ADDR.clientOuter },
    viaNat: false,
  };
}

/**
 * The outer path through the VPN's public Service: the client's underlay veth ends on the VPN
 * node (the "public" link, pub0 there), whose kube-proxy-style rule DNATs the tunnel port to the
 * VPN pod (lab/scenarios.ts, OuterPath). The VPN pod's end is its eth0, which must exist. The
 * VXLAN devices on ul0 and eth0 (both MTU 1500) get MTU 1450: the 50 bytes of outer headers fit.
 */
async function linkServiceUnderlay(lab: Netns, scenario: Scenario): Promise<TunnelUnderlay> {
  const publicCidr = (ip: string): string => `${ip}/${ADDR.publicPrefixLen}`;
  await veth(lab, NS.client, 'ul0', NS.vpnNode, 'pub0');
  await addr(lab, NS.client, 'ul0', publicCidr(ADDR.clientPublic));
  await addr(lab, NS.vpnNode, 'pub0', publicCidr(ADDR.vpnService));
  const port = scenario.decap === 'vxlan' ? ADDR.vxlanPort : ADDR.tunPort;
  await vpnServiceNat(lab, port, scenario.outerVia === 'service-cluster');
  return {
    client: { dev: 'ul0', local: ADDR.clientPublic, remote: ADDR.vpnService },
    vpn: { dev: 'eth0', local: ADDR.vpnPod, remote: ADDR.clientPublic },
    viaNat: true,
  };
}

/**
 * The VPN Service on the VPN node: DNAT of udp `port` arriving on the public link to the VPN pod
 * (what kube-proxy writes for a LoadBalancer/NodePort Service) and, with `masquerade`
 * (externalTrafficPolicy Cluster), MASQUERADE of that DNATed traffic out the pod bridge, so the
 * pod sees the node's bridge address. The pod's replies are a flow of their own: routed back out
 * pub0 (directly connected) untranslated, unless their ports make them the DNATed flow's reply.
 */
async function vpnServiceNat(lab: Netns, port: number, masquerade: boolean): Promise<void> {
  const nat = (...args: string[]): Promise<void> => lab.iptables(NS.vpnNode, '-t', 'nat', ...args);
  const udp = (dst: string): string[] => ['-d', dst, '-p', 'udp', '--dport', String(port)];
  await nat(
    '-A',
    'PREROUTING',
    '-i',
    'pub0',
    ...udp(ADDR.vpnService),
    '-j',
    'DNAT',
    '--to-destination',
    `${ADDR.vpnPod}:${port}`,
  );
  if (!masquerade) return;
  await nat(
    '-A',
    'POSTROUTING',
    '-o',
    'cni0',
    ...udp(ADDR.vpnPod),
    '-m',
    'conntrack',
    '--ctstate',
    'DNAT',
    '-j',
    'MASQUERADE',
  );
}

/** A kernel VXLAN tunnel (vx0, Ethernet link type) between the client and a VPN pod over `underlay`. */
export async function addVxlanTunnel(
  lab: Netns,
  vpnNs: string,
  underlay: TunnelUnderlay,
): Promise<void> {
  for (const [ns, end, ip] of [
    [NS.client, underlay.client, ADDR.clientTunnel],
    [vpnNs, underlay.vpn, ADDR.vpnTunnel],
  ] as const) {
    await lab.ip(
      ns,
      'link',
      'add',
      'vx0',
      'type',
      'vxlan',
      'id',
      String(ADDR.vxlanId),
      'local',
      end.local,
      'remote',
      end.remote,
      'dstport',
      String(ADDR.vxlanPort),
      'dev',
      end.dev,
      ...(underlay.viaNat ? ['nolearning', 'noudpcsum'] : []),
    );
    await addr(lab, ns, 'vx0', `${ip}/24`);
  }
}

/** The VPN software's own NAT: MASQUERADE the tunnel range out of the VPN pod's eth0. */
export async function masqueradeTunnelRange(lab: Netns, vpnNs: string): Promise<void> {
  await lab.iptables(
    vpnNs,
    '-t',
    'nat',
    '-A',
    'POSTROUTING',
    '-s',
    ADDR.tunnelCidr,
    '-o',
    'eth0',
    '-j',
    'MASQUERADE',
  );
}

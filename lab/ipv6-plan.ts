/**
 * The IPv6 half of a dual-stack lab (scenarios with `ipv6: true`, addresses in ADDR6): quiet
 * per-namespace sysctls set before any link exists, then an IPv6 address on every link of the
 * cluster path next to its IPv4 one, and IPv6 routes mirroring the IPv4 routes of lab/topology.ts.
 * The underlay (ul0) stays IPv4: it only carries the tunnel. DAD is off and addresses are added
 * `nodad`, so the request never races address setup; no router advertisement is accepted and no
 * solicitation sent, which keeps the captures free of everything but MLD reports at link-up.
 */
import { ADDR6 } from './addresses';
import type { Netns } from './netns';
import { NS } from './ns-names';

/** Tunnel interfaces of the scenario: the client's and the VPN pod's (vx0, or tun0 and tun7). */
export interface TunnelIfaces {
  client: string;
  vpn: string;
}

/** IPv6 on, but quiet: set in `ns` before its links exist, so every new interface inherits it. */
export async function quietIpv6(lab: Netns, ns: string): Promise<void> {
  for (const conf of ['default', 'all']) {
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.accept_dad`, '0');
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.accept_ra`, '0');
    await lab.sysctl(ns, `net.ipv6.conf.${conf}.router_solicitations`, '0');
  }
}

/** Adds the IPv6 addresses and routes once the IPv4 topology (every link) exists. */
export async function addIpv6Plan(
  lab: Netns,
  opts: { tunnel: TunnelIfaces; proxyPod: boolean; returnRoute: boolean },
): Promise<void> {
  const addr = (ns: string, dev: string, ip: string): Promise<unknown> =>
    lab.ip(ns, '-6', 'addr', 'add', `${ip}/64`, 'dev', dev, 'nodad');
  const route = (ns: string, dst: string, via: string, ...rest: string[]): Promise<unknown> =>
    lab.ip(ns, '-6', 'route', 'add', dst, 'via', via, ...rest);

  await addr(NS.client, opts.tunnel.client, ADDR6.clientTunnel);
  await addr(NS.vpnPod, opts.tunnel.vpn, ADDR6.vpnTunnel);
  await addr(NS.vpnNode, 'cni0', ADDR6.vpnNodeBridge);
  await addr(NS.vpnPod, 'eth0', ADDR6.vpnPod);
  await addr(NS.vpnNode, 'up0', ADDR6.vpnNodeUplink);
  await addr(NS.backendNode, 'up0', ADDR6.backendNodeUplink);
  await addr(NS.backendNode, 'cni0', ADDR6.backendNodeBridge);
  await addr(NS.backendPod, 'eth0', ADDR6.backendPod);
  if (opts.proxyPod) await addr(NS.proxyPod, 'eth0', ADDR6.proxyPod);

  // The client sends everything cluster-bound into the tunnel; pods route via their bridge.
  for (const cidr of [ADDR6.clusterCidr, ADDR6.serviceCidr, ADDR6.uplinkCidr])
    await route(NS.client, cidr, ADDR6.vpnTunnel, 'dev', opts.tunnel.client);
  await route(NS.vpnPod, 'default', ADDR6.vpnNodeBridge);
  await route(NS.backendPod, 'default', ADDR6.backendNodeBridge);
  if (opts.proxyPod) await route(NS.proxyPod, 'default', ADDR6.backendNodeBridge);

  // Nodes: pod CIDRs across the uplink, the Service range toward the backend node, the tunnel
  // range to the VPN pod, a default route nothing answers.
  await route(NS.vpnNode, ADDR6.backendNodePodCidr, ADDR6.backendNodeUplink);
  await route(NS.vpnNode, ADDR6.serviceCidr, ADDR6.backendNodeUplink);
  await route(NS.vpnNode, ADDR6.tunnelCidr, ADDR6.vpnPod);
  await route(NS.backendNode, ADDR6.vpnNodePodCidr, ADDR6.vpnNodeUplink);
  for (const ns of [NS.vpnNode, NS.backendNode]) await route(ns, 'default', ADDR6.uplinkGateway);
  if (opts.returnRoute) await route(NS.backendNode, ADDR6.tunnelCidr, ADDR6.vpnNodeUplink);
}

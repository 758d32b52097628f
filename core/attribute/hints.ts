/**
 * What to do next, per verdict layer. The advice follows the preserve-or-SNAT seed: the choice
 * between preserving the client address and SNAT belongs to the receiving service's owner, so each
 * hint says how to fix the path for preserve mode and what SNAT costs.
 */

import type { Layer } from './layer';

export interface HintContext {
  /** The client's tunnel address (the source at the first point). */
  clientSrc?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  node?: string | undefined;
  pod?: string | undefined;
  backendNode?: string | undefined;
  rewrittenTo?: string | undefined;
  /** unknown: the inventory names no node and no pod (none was given). */
  noInventory?: boolean | undefined;
  /** no-return: the reply came back past the backend's node to `from`, and not on to `to`. */
  replyStop?: { from: string; to: string } | undefined;
}

/**
 * What a return route for the tunnel range may point at. Never a pod IP (it moves with every
 * reschedule) and never a ClusterIP: a ClusterIP is a kube-proxy DNAT rule for connections to a
 * Service port, not an address that answers ARP or forwards packets, so `ip route … via` it fails.
 */
export const STABLE_NEXT_HOP =
  "a node address (the VPN pod's node), or an address that the active VPN pod holds and announces " +
  '(keepalived/kube-vip style, gratuitous ARP) — never a pod IP, which moves, nor a ClusterIP, which ' +
  'is a kube-proxy DNAT rule and no next hop';

/**
 * Where each common CNI (and kube-proxy) is told not to masquerade a range: the change belongs in
 * its own configuration, because the agent rewrites its chains on restart.
 */
export const MASQUERADE_KNOBS: readonly { cni: string; knob: string }[] = [
  {
    cni: 'ip-masq-agent',
    knob: '`nonMasqueradeCIDRs` in its ConfigMap (kube-system/ip-masq-agent, key `config`)',
  },
  {
    cni: 'Calico',
    knob:
      'IP pools / `natOutgoing`: Calico masquerades sources of a `natOutgoing: true` pool going outside ' +
      'every pool; declare the tunnel range as an IPPool with `disabled: true` and `natOutgoing: false`. ' +
      'A VPN pod sending sources other than its own IP also needs `workloadSourceSpoofing: Any` and the ' +
      '`cni.projectcalico.org/allowedSourcePrefixes` annotation, or Felix drops them',
  },
  {
    cni: 'Cilium',
    knob:
      '`ipv4-native-routing-cidr` (Helm `ipv4NativeRoutingCIDR`: no masquerade toward it), or its ' +
      'ip-masq-agent (`enable-ip-masq-agent`, `nonMasqueradeCIDRs`); its eBPF masquerade is not in iptables',
  },
  {
    cni: 'Flannel',
    knob: '`--ip-masq` of flanneld (its masquerade of traffic leaving the flannel network)',
  },
  {
    cni: 'kube-proxy',
    knob:
      '`detectLocalMode` / `clusterCIDR`: traffic it does not count as local is masqueraded on the ' +
      'Service hop; `detectLocalMode: InterfaceNamePrefix` (or `BridgeInterface`) counts traffic from ' +
      "the pods' interfaces as local whatever its source; `masqueradeAll` must stay false",
  },
];

/** An example tunnel range for the client address: its /24 (IPv4) or /64 (IPv6). */
export function exampleTunnelRange(addr: string | undefined): string {
  if (addr === undefined) return 'the tunnel range';
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.\d+$/.exec(addr);
  if (v4 !== null) return `${v4[1]}.${v4[2]}.${v4[3]}.0/24`;
  const groups = addr
    .split(':')
    .slice(0, 4)
    .filter((g) => g.length > 0);
  return groups.length === 4 ? `${groups.join(':')}::/64` : `the tunnel range around ${addr}`;
}

/** The hint text for `layer`. */
export function hintFor(layer: Layer, ctx: HintContext = {}): string {
  // The client's /24 (/64) is an example of the tunnel range, never the range itself: only the VPN's
  // configuration (or doctor's --tunnel-range) knows it.
  const range = exampleTunnelRange(ctx.clientSrc);
  const eg = ctx.clientSrc === undefined ? '' : ` (e.g. ${range})`;
  const on = (n: string | undefined, fallback: string): string =>
    n === undefined ? fallback : `node ${n}`;
  switch (layer) {
    case 'preserved':
      return (
        'the client address survives to the backend. Confirm the path is not just lucky: send one request ' +
        'from a source you expect to be denied and check the refusal comes from policy, not from a missing ' +
        'route; then delete the VPN pod and repeat while it reschedules (a return route pinned to a pod ' +
        'address breaks on eviction).'
      );
    case 'vpn-pod':
      return (
        'the VPN pod masquerades its clients (its own iptables/nft MASQUERADE or SNAT rule, or the VPN ' +
        `software's NAT option); remove it and route the tunnel range${eg} back to the pod instead if the backend must ` +
        'see client addresses, or keep it and document that the backend sees the pod address.'
      );
    case 'cni-masquerade':
      return (
        `the VPN node's masquerade rule does not exclude the tunnel range; exclude it${eg} in the CNI's own ` +
        "configuration (non-masquerade CIDRs, e.g. ip-masq-agent nonMasqueradeCIDRs or the CNI's " +
        'equivalent) rather than by hand in iptables, which the agent rewrites on restart; then add a return ' +
        'route for it on the backend nodes.'
      );
    case 'kube-proxy':
      return (
        `kube-proxy masqueraded the Service hop on ${on(ctx.node, "the backend's node")} ` +
        '(KUBE-MARK-MASQ / externalTrafficPolicy: Cluster, or a source outside --cluster-cidr); target the ' +
        'pod IP directly, use externalTrafficPolicy/internalTrafficPolicy: Local where it applies, or add ' +
        `the tunnel range${eg} to the cluster CIDR kube-proxy trusts; a return route for it is then required.`
      );
    case 'proxy':
      return (
        `a proxy${ctx.pod === undefined ? '' : ` (${ctx.pod})`} terminated the connection; the address will ` +
        'never survive; use X-Forwarded-For or the PROXY protocol from a proxy you control, and make sure the ' +
        'header cannot be set from the client side.'
      );
    case 'no-return':
      if (ctx.replyStop !== undefined) {
        const { from, to } = ctx.replyStop;
        return (
          `the reply came back as far as ${from} and never reached ${to}, so the route from the backend ` +
          `toward ${from} works and what lies between ${from} and ${to} dropped it; when these are the ` +
          `VPN pod's egress and its tunnel, that is the VPN pod: its route to the client over the tunnel, ` +
          'the addresses the VPN accepts for this client (WireGuard AllowedIPs, OpenVPN iroute), or ' +
          'rp_filter on its interfaces.'
        );
      }
      return (
        `no route back to the tunnel range${eg} on ${on(ctx.backendNode, "the backend's node")}, ` +
        `or strict rp_filter; add a route via a stable next hop — e.g. \`ip route replace ${range} via ` +
        `<next hop>\` — where the next hop is ${STABLE_NEXT_HOP}, and set rp_filter=2 (loose).`
      );
    case 'dropped':
      return (
        `check NetworkPolicy and FORWARD drops between ${ctx.from ?? 'the last point that saw it'} and ` +
        `${ctx.to ?? 'the backend'} (kubectl get networkpolicy, iptables -S FORWARD, conntrack -S for ` +
        'insert_failed/drop); NetworkPolicy is access control, not routing.'
      );
    case 'unknown':
      if (ctx.noInventory === true)
        return (
          'give an inventory (`--inventory inventory.json`: every address of every node, including ' +
          'CNI bridge/gateway addresses, and the pods of the path with their roles) so the rewritten ' +
          'address can be tied to a node or pod, then analyze again.'
        );
      return (
        'add the missing addresses to the inventory (every address of every node, including CNI ' +
        'bridge/gateway addresses) or capture at the missing point, then analyze again.'
      );
  }
}

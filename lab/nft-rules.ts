/**
 * Native nftables rulesets for the lab's nft scenarios, loaded with `nft -f -` (lab/netns.ts), so
 * no iptables rule exists and `iptables-save` shows nothing:
 *
 * - kube-proxy's nftables mode (pkg/proxy/nftables): a `table ip kube-proxy` whose `services`
 *   chain looks the packet up in the `service-ips` verdict map (`ip daddr . meta l4proto . th
 *   dport`), a per-Service chain that marks sources outside the cluster CIDR for masquerade and
 *   picks an endpoint with `numgen`, a per-endpoint chain that DNATs, and a `masquerading` chain
 *   that clears the mark and masquerades `fully-random`. Chain names follow kube-proxy's
 *   `service-<HASH>-<namespace>/<name>/<proto>/<port name>` shape with a fixed tag for the hash.
 * - A CNI / ip-masq-agent masquerade of the tunnel range out of the VPN node's uplink, the same
 *   rule as the iptables `cni-masquerade` scenario (lab/topology.ts) in a `table ip cni-nat`.
 */
import { ADDR } from './addresses';

/** One TCP Service port with one endpoint, as kube-proxy's nftables mode writes it. */
export function kubeProxyNftRuleset(serviceIp: string, servicePort: number): string {
  const endpoint = `${ADDR.backendPod}:${ADDR.backendPort}`;
  const svcChain = 'service-LAB0SVC0-default/lab/tcp/http';
  const epChain = `endpoint-LAB0EP00-default/lab/tcp/http__${ADDR.backendPod}/${ADDR.backendPort}`;
  // nft 1.0.6 refuses `priority dstnat` on the nat output hook; -100 is its value.
  return `table ip kube-proxy {
	comment "rules for kube-proxy"
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}
	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}
	chain mark-for-masquerade {
		meta mark set meta mark or 0x4000
	}
	chain masquerading {
		meta mark & 0x4000 == 0 return
		meta mark set meta mark ^ 0x4000
		masquerade fully-random
	}
	chain ${svcChain} {
		ip daddr ${serviceIp} tcp dport ${servicePort} ip saddr != ${ADDR.clusterCidr} jump mark-for-masquerade
		numgen random mod 1 vmap { 0 : goto ${epChain} }
	}
	chain ${epChain} {
		ip saddr ${ADDR.backendPod} jump mark-for-masquerade
		meta l4proto tcp dnat to ${endpoint}
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { ${serviceIp} . tcp . ${servicePort} : goto ${svcChain} }
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
}
`;
}

/**
 * The VPN node's masquerade of the tunnel range out of the uplink, mirroring the iptables
 * `cni-masquerade` rule: POSTROUTING sends tunnel-range packets leaving up0 to an ip-masq-agent
 * chain whose non-masquerade list holds the cluster CIDR but not the tunnel range.
 */
export function cniMasqueradeNftRuleset(): string {
  return `table ip cni-nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr ${ADDR.tunnelCidr} oifname "up0" jump ip-masq-agent
	}
	chain ip-masq-agent {
		ip saddr ${ADDR.clusterCidr} return
		masquerade
	}
}
`;
}

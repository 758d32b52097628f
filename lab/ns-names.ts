/** The short names of the lab's namespaces (each run prefixes them, lab/netns.ts). */
export const NS = {
  client: 'client',
  vpnPod: 'vpn-pod',
  vpnNode: 'vpn-node',
  backendNode: 'be-node',
  backendPod: 'be-pod',
  proxyPod: 'proxy-pod',
} as const;

/**
 * The repro of the lab's layout the repro unit tests drive: a VPN pod (`vpn-pod*`, decap on vx0,
 * egress on eth0) on vpn-node, the web pod as the backend on backend-node, and the two agents.
 */
import { parseReproRequest } from '../../collector/repro-requests';
import type { NamespaceInfo } from '../../common/wire';
import { FakeHub } from './collector-fixtures';
import { ADDR, CLIENT, INVENTORY } from './fixtures-events';

/** A namespace as an agent's hello lists it: loopback and eth0, these addresses. */
export function labNamespace(path: string, ...ips: string[]): NamespaceInfo {
  return { path, inode: 1, addresses: ['127.0.0.1', ...ips], interfaces: ['lo', 'eth0'] };
}

export const LAB_REPRO = parseReproRequest({
  workload: { netns: 'vpn-pod*', podCidr: '10.244.0.0/16' },
  decapIface: 'vx0',
  egressIface: 'eth0',
  backend: { target: ADDR.backendPod, iface: 'eth0' },
  client: CLIENT,
  inventory: INVENTORY,
});

/** The VPN node's agent (the VPN pod's namespace) and the backend node's (the web pod's). */
export function labReproHub(): FakeHub {
  const hub = new FakeHub();
  hub.addAgent(
    'a-vpn',
    'vpn-node',
    [ADDR.vpnNodeUplink],
    [labNamespace('/run/netns/vpn-pod', ADDR.vpnPod)],
  );
  hub.addAgent(
    'a-web',
    'backend-node',
    [ADDR.backendNodeUplink],
    [labNamespace('/run/netns/web', ADDR.backendPod)],
  );
  return hub;
}

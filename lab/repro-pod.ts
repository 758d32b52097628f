/**
 * The VPN pod's life cycle in the lab, as a reschedule does it: the pod is deleted (its processes
 * ended by PID, its interfaces removed the way a CNI DEL does, its namespace gone from the node's
 * view and deleted), then a replacement comes up with a new namespace and a NEW address, attached
 * to the VPN node's bridge and to the client's tunnel (the VPN Service's endpoint moves with it).
 */
import type { ChildProcess } from 'node:child_process';
import type { PodDeleter, WorkloadInstance } from '../core/repro/repro-core';
import { ADDR } from './addresses';
import { stopChild } from './child';
import { addToView, removeFromView } from './live-agents';
import { runCommand, type Netns } from './netns';
import { addVxlanTunnel, linkUnderlay, masqueradeTunnelRange, NS, veth } from './topology';

/** One incarnation of the VPN pod. */
export interface VpnPodSpec {
  /** Short namespace name (`vpn-pod`, `vpn-pod-r1`). */
  ns: string;
  ip: string;
  /** Host-side veth name on the VPN node. */
  hostDev: string;
  /** A stable gateway address the active VPN pod holds (keepalived/kube-vip style), if any. */
  vip?: string;
  /** The VPN software masquerades the tunnel range out eth0 (SNAT mode). */
  masquerade: boolean;
}

/** The lab's VPN pods: their "VPN daemon" processes, and the node view their agent scans. */
export class LabVpnPods implements PodDeleter {
  private readonly daemons = new Map<string, ChildProcess>();

  constructor(
    private readonly lab: Netns,
    private readonly viewRoot: string,
  ) {}

  /** Starts the pod's main process (a stand-in for the VPN daemon: ended by PID on deletion). */
  startDaemon(ns: string): void {
    const child = this.lab.spawn(ns, 'sleep', ['3600']);
    child.stdout?.resume();
    child.stderr?.resume();
    this.daemons.set(this.lab.full(ns), child);
  }

  /** Deletes the pod whose namespace is `pod.name` (a full lab namespace name). */
  async deletePod(pod: WorkloadInstance): Promise<{ deletedAtMs: number; detail: string }> {
    const full = pod.name;
    if (!full.startsWith(this.lab.prefix))
      throw new Error(`${full} is not a namespace of lab ${this.lab.prefix}`);
    const short = full.slice(this.lab.prefix.length);
    // The moment the deletion starts (what `kubectl delete pod` would stamp), not when it is done.
    const deletedAtMs = Date.now();
    const daemon = this.daemons.get(full);
    if (daemon !== undefined) await stopChild(daemon, 'SIGTERM', 1000);
    this.daemons.delete(full);
    // CNI DEL: the pod's interfaces go first (a veth takes its peer along: cni0's port, the client's
    // underlay), so a capture still inside the namespace sees its interface disappear.
    for (const dev of ['vx0', 'ul0', 'eth0'])
      await this.lab.ip(short, 'link', 'del', dev).catch(() => undefined);
    removeFromView(this.viewRoot, pod.node, this.lab, short);
    await runCommand('ip', ['netns', 'del', full]).catch(() => undefined);
    return { deletedAtMs, detail: `${full} (${pod.ip}) deleted on ${pod.node}` };
  }

  /** Builds the VPN pod `spec` (a replacement) and makes it visible to the VPN node's agent. */
  async createPod(spec: VpnPodSpec): Promise<void> {
    const { lab } = this;
    await lab.add(spec.ns);
    for (const [k, v] of [
      ['net.ipv6.conf.default.disable_ipv6', '1'],
      ['net.ipv6.conf.all.disable_ipv6', '1'],
      ['net.ipv4.ip_forward', '1'],
      // A gratuitous ARP for every address when eth0 comes up: the node learns who holds the VIP.
      ['net.ipv4.conf.all.arp_notify', '1'],
    ] as const)
      await lab.sysctl(spec.ns, k, v);
    // The client's side of the old tunnel died with the old pod's underlay.
    await lab.ip(NS.client, 'link', 'del', 'vx0').catch(() => undefined);
    await addVxlanTunnel(lab, spec.ns, await linkUnderlay(lab, spec.ns));
    for (const cidr of [ADDR.clusterCidr, ADDR.serviceCidr, '192.168.50.0/24'])
      await lab.ip(NS.client, 'route', 'replace', cidr, 'via', ADDR.vpnTunnel, 'dev', 'vx0');
    // eth0 on the VPN node's cni0; addresses before link up, so arp_notify announces all of them.
    await veth(lab, NS.vpnNode, spec.hostDev, spec.ns, 'eth0');
    await lab.ip(NS.vpnNode, 'link', 'set', spec.hostDev, 'master', 'cni0', 'up');
    await lab.ip(spec.ns, 'addr', 'add', `${spec.ip}/24`, 'dev', 'eth0');
    if (spec.vip !== undefined)
      await lab.ip(spec.ns, 'addr', 'add', `${spec.vip}/24`, 'dev', 'eth0');
    await lab.ip(spec.ns, 'link', 'set', 'eth0', 'up');
    await lab.ip(spec.ns, 'route', 'add', 'default', 'via', ADDR.vpnNodeBridge);
    if (spec.masquerade) await masqueradeTunnelRange(lab, spec.ns);
    this.startDaemon(spec.ns);
    addToView(this.viewRoot, 'vpn-node', lab, spec.ns);
  }

  /** Ends every daemon still running (teardown; `Netns.destroy` removes the namespaces). */
  async stopAll(): Promise<void> {
    for (const c of this.daemons.values()) await stopChild(c).catch(() => undefined);
    this.daemons.clear();
  }
}

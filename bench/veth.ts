/**
 * The veth pair of the capture benchmarks, in two namespaces of a bench run (lab/netns.ts names
 * them per run and removes them in `finally`):
 *
 *   <prefix>tx: vtx 10.77.0.1 ══ veth ══ vrx 10.77.0.2 :<prefix>rx
 *
 * IPv6 is off in both (no router solicitations or DAD on the wire being measured), and the
 * receiver drops UDP in raw PREROUTING, so it neither answers the flood (ICMP) nor spends on it.
 */
import type { Netns } from '../lab/netns';

export const TX = 'tx';
export const RX = 'rx';

/** Packet counters of one interface (`ip -s -j link`). */
export interface LinkCounters {
  rxPackets: number;
  txPackets: number;
  txDropped: number;
}

export async function counters(lab: Netns, ns: string, dev: string): Promise<LinkCounters> {
  const { stdout } = await lab.ip(ns, '-s', '-j', 'link', 'show', 'dev', dev);
  const [link] = JSON.parse(stdout) as {
    stats64?: { rx?: { packets?: number }; tx?: { packets?: number; dropped?: number } };
  }[];
  const s = link?.stats64;
  return {
    rxPackets: s?.rx?.packets ?? 0,
    txPackets: s?.tx?.packets ?? 0,
    txDropped: s?.tx?.dropped ?? 0,
  };
}

/** Creates both namespaces and the pair; returns vrx's MAC address (the flood's destination). */
export async function setupVeth(lab: Netns): Promise<string> {
  await lab.add(TX);
  await lab.add(RX);
  for (const ns of [TX, RX]) {
    await lab.sysctl(ns, 'net.ipv6.conf.all.disable_ipv6', '1');
    await lab.sysctl(ns, 'net.ipv6.conf.default.disable_ipv6', '1');
  }
  await lab.ip(
    TX,
    'link',
    'add',
    'vtx',
    'type',
    'veth',
    'peer',
    'name',
    'vrx',
    'netns',
    lab.full(RX),
  );
  await lab.ip(TX, 'addr', 'add', '10.77.0.1/24', 'dev', 'vtx');
  await lab.ip(RX, 'addr', 'add', '10.77.0.2/24', 'dev', 'vrx');
  await lab.ip(TX, 'link', 'set', 'vtx', 'up');
  await lab.ip(RX, 'link', 'set', 'vrx', 'up');
  await lab.iptables(RX, '-t', 'raw', '-A', 'PREROUTING', '-p', 'udp', '-j', 'DROP');
  const { stdout } = await lab.ip(RX, '-j', 'link', 'show', 'dev', 'vrx');
  const rxMac = (JSON.parse(stdout) as { address?: string }[])[0]?.address ?? '';
  if (!/^[0-9a-f:]{17}$/.test(rxMac)) throw new Error(`no MAC address on vrx: ${stdout}`);
  return rxMac;
}

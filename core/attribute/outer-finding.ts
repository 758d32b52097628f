/**
 * The outer connection as a finding of its own (issue 15): which peer the VPN pod sees for the
 * client's tunnel, and what that says about the VPN's public Service. Seed (kubernetes-nat-notes):
 * externalTrafficPolicy: Cluster lets the receiving node masquerade the traffic it forwards, so the
 * pod sees a node address; Local keeps the client's address (and only nodes with a VPN pod answer
 * the load balancer). Speaks only of what was captured: the tunnel packet and the inventory.
 */
import type { OuterSighting } from '../correlate/journey';
import { hostPort } from '../../common/endpoint';

/** The verdict's `outer`: the tunnel's outer flow as the VPN pod saw it, classified. */
export interface OuterFinding {
  point: string;
  tunnel: string;
  src: string;
  sport: number;
  dst: string;
  dport: number;
  /** node: an address of a node (masqueraded); pod: another pod's; external: neither. */
  class: 'node' | 'pod' | 'external';
  node?: string;
  pod?: string;
  by: OuterSighting['by'];
  frame: number;
  detail: string;
}

/** What the inventory says of addresses (attribute.ts's normalized form). */
export interface AddressBook {
  nodes: [string, string[]][];
  pods: { name: string; ip: string }[];
}

/** Classifies the sighting's peer against the inventory. */
export function outerFinding(s: OuterSighting, { nodes, pods }: AddressBook): OuterFinding {
  const src = s.outer.src;
  const node = nodes.find(([, addrs]) => addrs.includes(src))?.[0];
  const pod = node === undefined ? pods.find((p) => p.ip === src)?.name : undefined;
  const seen =
    `the client's ${s.tunnel} tunnel reaches ${hostPort(s.outer.dst, s.outer.dport)} at ${s.point} ` +
    `from ${hostPort(src, s.outer.sport)} (frame ${s.frame}` +
    (s.by === 'inner-tuple'
      ? ', the tunnel packet with the request inside)'
      : `, the tunnel packet captured last before the request; ${s.peers} tunnel flow${s.peers === 1 ? '' : 's'} seen in that second)`);
  const base = {
    point: s.point,
    tunnel: s.tunnel,
    src,
    sport: s.outer.sport,
    dst: s.outer.dst,
    dport: s.outer.dport,
    by: s.by,
    frame: s.frame,
  };
  if (node !== undefined) {
    return {
      ...base,
      class: 'node',
      node,
      detail:
        `${seen}: an address of node ${node}, so the VPN pod does not see its peers' own addresses — the VPN's ` +
        'public Service masqueraded them (externalTrafficPolicy: Cluster) or the node SNATs them; peer allowlists ' +
        'and logs see the node. externalTrafficPolicy: Local keeps the peer address (only nodes with a VPN pod then answer).',
    };
  }
  if (pod !== undefined) {
    return {
      ...base,
      class: 'pod',
      pod,
      detail: `${seen}: the address of pod ${pod}, which relays the tunnel to the VPN pod`,
    };
  }
  return {
    ...base,
    class: 'external',
    detail:
      `${seen}: not an address of any node or pod in the inventory — the peer's own address, preserved ` +
      '(externalTrafficPolicy: Local, or a path without SNAT)',
  };
}

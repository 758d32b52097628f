/**
 * The outer connection: the tunnel packets that carried the client's request to the VPN pod, as a
 * capture point there saw them (the VPN pod's eth0 carries them besides the forwarded requests).
 * Their outer source is the peer the VPN software sees — the client's own address, or a node's
 * when the VPN's public Service masqueraded it (externalTrafficPolicy: Cluster). Attribution
 * classifies it (core/attribute/outer-finding.ts); this file only finds it.
 *
 * Two ways to find it:
 * - a transparent tunnel (VXLAN, Geneve, GRE, IP-in-IP …) shows the request inside: the tunnel
 *   packet whose inner tuple is the request's at the first point (`inner-tuple`);
 * - an opaque one (WireGuard, ESP) hides it: the tunnel packet captured last before the request
 *   appeared decapsulated, within OPAQUE_LEAD_NS (`nearest`). Sound when one peer is active; the
 *   sighting counts the peers seen, so a reader can tell.
 */
import type { PacketEvent, TunnelKind } from '../../common/event';
import type { Endpoint, OuterSighting, PointEvents, RequestIdentity } from './journey';
import { sameEndpoint } from './journey';

/** How long before the decapsulated request its opaque tunnel packet may have been captured. */
export const OPAQUE_LEAD_NS = 1_000_000_000n;

const OPAQUE: ReadonlySet<TunnelKind> = new Set<TunnelKind>(['wireguard', 'esp']);

/** The opaque tunnel of an event, when its outermost tunnel is one. */
export function opaqueTunnel(ev: PacketEvent): TunnelKind | null {
  const t = ev.tunnels[0];
  return t !== undefined && OPAQUE.has(t.kind) && ev.outer !== null ? t.kind : null;
}

/** Whether `ev` can be the request's opaque tunnel packet: before it, within the lead. */
export function inOpaqueLead(ev: PacketEvent, startTsNs: bigint): boolean {
  return ev.tsNs <= startTsNs && startTsNs - ev.tsNs <= OPAQUE_LEAD_NS;
}

function outerEndpoint(ev: PacketEvent): Endpoint | null {
  const o = ev.outer;
  if (o === null) return null;
  return { src: o.src, sport: o.sport ?? 0, dst: o.dst, dport: o.dport ?? 0 };
}

function sighting(
  p: PointEvents,
  ev: PacketEvent,
  outer: Endpoint,
  by: OuterSighting['by'],
  peers: number,
): OuterSighting {
  return {
    point: p.name,
    node: ev.node,
    iface: ev.iface,
    frame: ev.frame,
    tsNs: ev.tsNs,
    tunnel: ev.tunnels[0]?.kind ?? 'vxlan',
    outer,
    by,
    peers,
  };
}

/** The request's tunnel packet at the points, or null when no point captured one. */
export function findOuter(
  id: RequestIdentity,
  points: readonly PointEvents[],
): OuterSighting | null {
  // 1. A transparent tunnel with the request inside: its inner tuple is the first point's.
  for (const p of points) {
    let best: PacketEvent | null = null;
    for (const ev of p.events) {
      const i = ev.inner;
      if (ev.outer === null || ev.tunnels.length === 0 || opaqueTunnel(ev) !== null || i === null)
        continue;
      if (ev.fold !== undefined) continue; // a flow counter, not a packet (folds.ts)
      if (i.proto !== id.proto || i.sport === undefined || i.dport === undefined) continue;
      const inner = { src: i.src, sport: i.sport, dst: i.dst, dport: i.dport };
      if (!sameEndpoint(inner, id.tuple)) continue;
      if (best === null || ev.tsNs < best.tsNs) best = ev;
    }
    const outer = best === null ? null : outerEndpoint(best);
    if (best !== null && outer !== null) return sighting(p, best, outer, 'inner-tuple', 1);
  }
  // 2. An opaque tunnel: the packet captured last before the request, within the lead.
  let nearest: { p: PointEvents; ev: PacketEvent } | null = null;
  const peers = new Set<string>();
  for (const p of points) {
    for (const ev of p.events) {
      if (ev.fold !== undefined) continue;
      if (opaqueTunnel(ev) === null || !inOpaqueLead(ev, id.startTsNs)) continue;
      const o = ev.outer;
      if (o !== null) peers.add(`${o.src}|${o.dst}`);
      if (nearest === null || ev.tsNs > nearest.ev.tsNs) nearest = { p, ev };
    }
  }
  const outer = nearest === null ? null : outerEndpoint(nearest.ev);
  if (nearest === null || outer === null) return null;
  return sighting(nearest.p, nearest.ev, outer, 'nearest', peers.size);
}

/**
 * Flow counters (PacketEvent.fold, issue 20): a live agent sends a flow's packets whole where
 * they can matter — its first packets each way, those around a SYN/FIN/RST, a request or a quiet
 * spell — and counts the rest. Correlation never uses a counter (flowView ignores them: it has no
 * keys to recognise a packet by); this tells the journey how many packets of its connection each
 * point counted that way, so a report can say "+N counted" instead of claiming the connection
 * carried only what was sent whole.
 */
import type { PacketEvent } from '../../common/event';
import { reverseEndpoint, sameEndpoint, type Endpoint, type PointMatch } from './journey';

/** Packets of the matched connection a point counted rather than sent. */
export interface FoldedPackets {
  requestPackets: number;
  replyPackets: number;
  /** The last counted packet's time (ns, this point's clock). */
  lastTsNs: bigint;
}

function endpointOf(ev: PacketEvent): Endpoint | null {
  const t = ev.inner;
  if (t === null || t.sport === undefined || t.dport === undefined) return null;
  return { src: t.src, sport: t.sport, dst: t.dst, dport: t.dport };
}

/**
 * The counters among `events` of the connection `p` observed (its request tuple either way, the
 * same transport as the connection's packets) whose span overlaps [first packet − window, last
 * packet + window]; null when there are none.
 */
export function foldedPackets(
  p: PointMatch,
  events: readonly PacketEvent[],
  proto: string,
  windowNs: bigint,
): FoldedPackets | null {
  const obs = p.observed;
  if (obs === null || p.firstTsNs === null || p.lastTsNs === null) return null;
  const from = p.firstTsNs - windowNs;
  const to = p.lastTsNs + windowNs;
  const back = reverseEndpoint(obs);
  let requestPackets = 0;
  let replyPackets = 0;
  let lastTsNs = 0n;
  for (const ev of events) {
    const f = ev.fold;
    if (f === undefined || ev.inner?.proto !== proto) continue;
    if (f.lastTsNs < from || ev.tsNs > to) continue;
    const e = endpointOf(ev);
    if (e === null) continue;
    if (sameEndpoint(e, obs)) requestPackets += f.packets;
    else if (sameEndpoint(e, back)) replyPackets += f.packets;
    else continue;
    if (f.lastTsNs > lastTsNs) lastTsNs = f.lastTsNs;
  }
  return requestPackets + replyPackets === 0 ? null : { requestPackets, replyPackets, lastTsNs };
}

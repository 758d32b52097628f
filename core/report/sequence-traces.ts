/**
 * The same packet at successive points, for the sequence picture: each point's flow packets
 * (already the matched connection, in time order) paired with the next point's by what NAT
 * leaves alone — direction, TCP flags, sequence and acknowledgement numbers and payload length
 * (Linux NAT rewrites addresses and ports, never the sequence space) — the k-th such packet at
 * one point with the k-th at the next, so retransmissions pair in order. A point that did not
 * capture a packet the next one did is skipped over (the trace says so); a proxy's new
 * connection never pairs with the client's. Pure.
 */
import type { AnalysisResult, FlowPacketSummary, PointSummary } from './analysis-result';
import { toReferenceClock } from './times';

const FIN = 0x01;
const SYN = 0x02;
const RST = 0x04;
const PSH = 0x08;
const ACK = 0x10;
const URG = 0x20;
const ECE = 0x40;
const CWR = 0x80;

/** One packet as one point captured it. */
export interface Sighting {
  /** The point's index in path order. */
  point: number;
  packet: FlowPacketSummary;
  /** Its time moved onto the first point's clock (times.ts toReferenceClock). */
  refNs: bigint;
}

/** One packet followed across the points. */
export interface Trace {
  dir: 'request' | 'reply';
  /** In path order (point index ascending), at least one. */
  sightings: [Sighting, ...Sighting[]];
  /** The earliest sighting's time on the first point's clock. */
  startNs: bigint;
}

const pairKey = (p: FlowPacketSummary): string =>
  `${p.dir}|${p.flags}|${p.seq ?? '-'}|${p.ack ?? '-'}|${p.payloadLength}`;

/**
 * A point's packets for the picture: a packet captured both inside a tunnel and bare at one point
 * (the uplink sees the VXLAN packet and the bridge the inner one) is drawn once, bare.
 */
function drawable(flow: readonly FlowPacketSummary[]): FlowPacketSummary[] {
  const bare = new Set(flow.filter((p) => !p.tunneled).map(pairKey));
  return flow.filter((p) => !p.tunneled || !bare.has(pairKey(p)));
}

/** Points i..j saw one connection (no proxy in between), so their packets can be the same. */
function oneConnection(points: readonly PointSummary[], i: number, j: number): boolean {
  const first = points[i]?.proxied;
  return points.slice(i, j + 1).every((p) => p.proxied === first);
}

/** Every packet of the matched connection, followed across the points, in time order. */
export function buildTraces(result: Pick<AnalysisResult, 'points' | 'clock'>): Trace[] {
  const { points } = result;
  const clock = new Map((result.clock ?? []).map((o) => [o.point, o]));
  const per: Sighting[][] = points.map((p, i) =>
    drawable(p.flow).map((packet) => ({
      point: i,
      packet,
      refNs: toReferenceClock(BigInt(packet.tsNs), clock.get(p.name)),
    })),
  );
  const next = new Map<Sighting, Sighting>();
  const linked = new Set<Sighting>();
  for (const [i, here] of per.entries()) {
    for (const s of here) {
      const key = pairKey(s.packet);
      for (let j = i + 1; j < per.length && oneConnection(points, i, j); j++) {
        const b = per[j]?.find((x) => !linked.has(x) && pairKey(x.packet) === key);
        if (b === undefined) continue;
        next.set(s, b);
        linked.add(b);
        break;
      }
    }
  }
  const traces: { trace: Trace; order: number }[] = [];
  let order = 0;
  for (const here of per) {
    for (const s of here) {
      if (linked.has(s)) continue;
      const sightings: [Sighting, ...Sighting[]] = [s];
      for (let n = next.get(s); n !== undefined; n = next.get(n)) sightings.push(n);
      const startNs = sightings.reduce((m, x) => (x.refNs < m ? x.refNs : m), s.refNs);
      traces.push({ trace: { dir: s.packet.dir, sightings, startNs }, order: order++ });
    }
  }
  traces.sort((a, b) =>
    a.trace.startNs === b.trace.startNs
      ? a.order - b.order
      : a.trace.startNs < b.trace.startNs
        ? -1
        : 1,
  );
  return traces.map((t) => t.trace);
}

/**
 * Which traces to draw when there are more than `max`: the handshake, FIN and RST segments and
 * the first data packet of each direction first, then the other data packets, then pure ACKs,
 * each group in time order; the result is in time order.
 */
export function selectTraces(
  traces: readonly Trace[],
  max: number,
): { shown: Trace[]; omitted: number } {
  if (traces.length <= max) return { shown: [...traces], omitted: 0 };
  const firstData = new Set<Trace>();
  for (const dir of ['request', 'reply'] as const) {
    const t = traces.find((x) => x.dir === dir && x.sightings[0].packet.payloadLength > 0);
    if (t !== undefined) firstData.add(t);
  }
  const rank = (t: Trace): number => {
    const p = t.sightings[0].packet;
    if ((p.flags & (SYN | FIN | RST)) !== 0 || firstData.has(t)) return 0;
    return p.payloadLength > 0 ? 1 : 2;
  };
  const keep = new Set(
    traces
      .map((t, i) => ({ t, i, r: rank(t) }))
      .sort((a, b) => a.r - b.r || a.i - b.i)
      .slice(0, Math.max(0, max))
      .map((x) => x.t),
  );
  return { shown: traces.filter((t) => keep.has(t)), omitted: traces.length - keep.size };
}

const FLAG_NAMES: [number, string][] = [
  [SYN, 'SYN'],
  [FIN, 'FIN'],
  [RST, 'RST'],
  [PSH, 'PSH'],
  [URG, 'URG'],
  [ACK, 'ACK'],
  [ECE, 'ECE'],
  [CWR, 'CWR'],
];

/** `SYN`, `SYN-ACK`, `PSH-ACK 78 B`; a datagram or an echo by its length (the request's shape). */
export function packetLabel(
  p: Pick<FlowPacketSummary, 'flags' | 'payloadLength' | 'dir'>,
  shape: string | undefined,
): string {
  const bytes = p.payloadLength > 0 ? ` ${p.payloadLength} B` : '';
  if (shape === 'udp') return `UDP${bytes}`;
  if (shape === 'icmp-echo') return `echo ${p.dir === 'request' ? 'request' : 'reply'}${bytes}`;
  const names = FLAG_NAMES.filter(([bit]) => (p.flags & bit) !== 0).map(([, n]) => n);
  return `${names.length === 0 ? 'no flags' : names.join('-')}${bytes}`;
}

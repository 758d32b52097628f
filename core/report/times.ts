/**
 * Honest times: UTC with microseconds for people, the clock offset between the points' nodes
 * estimated from the same packets seen at two points (NTP's offset/delay bounds), and the per-hop
 * latency corrected by it. Pure: every time comes from the packets, no clock is read.
 *
 * The offset of a point's clock against the reference (the first point), θ = clock(point) −
 * clock(reference), from one request packet seen at both (t1 at the reference, t2 at the point)
 * and one reply packet seen at both (t3 at the point, t4 at the reference). One-way delays are
 * never negative, so
 *
 *     t2 − t1 = d_forward + θ  ⇒  θ ≤ t2 − t1
 *     t4 − t3 = d_back − θ     ⇒  θ ≥ t3 − t4
 *
 * θ lies in [t3 − t4, t2 − t1]; the estimate is the middle (NTP's offset, RFC 5905 §8, which
 * assumes symmetric delays) and the width is NTP's round-trip delay (t4 − t1) − (t3 − t2).
 * Points on the same node share a clock: their offset is 0 by construction.
 */
import type {
  ClockOffset,
  FlowPacketSummary,
  HopLatency,
  OffsetStatus,
  PointSummary,
} from './analysis-result';

import { durationText, utcMicros } from '../../common/time-text';

// The shapes live with the analysis result (no import cycle); they are named here too.
export type { ClockOffset, HopLatency, OffsetStatus };
// The words for times live in common/ (core/attribute and the collector use them too).
export { durationText, utcMicros };

/**
 * A packet's time with every digit it has: `2026-12-02T04:39:48.123456789Z` when the nanoseconds
 * are not a whole microsecond (a nanosecond pcap, a pcapng with if_tsresol 9), else as utcMicros.
 */
export function utcPacketTime(tsNs: bigint): string {
  const micros = utcMicros(tsNs);
  const ns = ((tsNs % 1000n) + 1000n) % 1000n;
  if (ns === 0n || !micros.endsWith('Z')) return micros; // no date: the ns are all there
  return `${micros.slice(0, -1)}${String(ns).padStart(3, '0')}Z`;
}

/**
 * `2026-12-02T04:39:48.123Z` from milliseconds since the Unix epoch: a time read from a clock in
 * ms (a prober's, the collector's), printed with the digits it has — never padded to microseconds
 * that were not measured.
 */
export function utcMillis(ms: number): string {
  return new Date(ms).toISOString();
}

const SYN = 0x02;
const ACK = 0x10;

const isSynOnly = (p: FlowPacketSummary): boolean => (p.flags & (SYN | ACK)) === SYN;
const isSynAck = (p: FlowPacketSummary): boolean => (p.flags & (SYN | ACK)) === (SYN | ACK);

/**
 * The first packet of `dir` at `a`, and the same packet at `b`: for TCP the SYN (or SYN-ACK) when
 * both saw one, else the first packet with the same sequence number and length; for UDP and ICMP
 * the first of that direction with the same length.
 */
function samePacket(
  a: FlowPacketSummary[],
  b: FlowPacketSummary[],
  dir: 'request' | 'reply',
): [FlowPacketSummary, FlowPacketSummary] | null {
  const as = a.filter((p) => p.dir === dir && !p.tunneled);
  const bs = b.filter((p) => p.dir === dir && !p.tunneled);
  const hand = dir === 'request' ? isSynOnly : isSynAck;
  const ha = as.find(hand);
  const hb = bs.find(hand);
  if (ha !== undefined && hb !== undefined) return [ha, hb];
  for (const pa of as) {
    const pb = bs.find(
      (q) =>
        q.payloadLength === pa.payloadLength &&
        (pa.seq === null || q.seq === null || q.seq === pa.seq),
    );
    if (pb !== undefined) return [pa, pb];
  }
  return null;
}

const nodeOf = (p: PointSummary, nodes: ReadonlyMap<string, string | null>): string | null => {
  const n = nodes.get(p.name) ?? p.node;
  return n === null || n === '' ? null : n;
};

/**
 * Each point's clock against the first point's. `nodes` names a point's node when the summary
 * does not (a live capture's point records); a point whose node is unknown is taken to have its
 * own clock (offline files: each file may come from another machine).
 */
export function estimateClockOffsets(
  points: PointSummary[],
  nodes: ReadonlyMap<string, string | null> = new Map(),
): ClockOffset[] {
  const ref = points[0];
  if (ref === undefined) return [];
  const refNode = nodeOf(ref, nodes);
  const none = (p: PointSummary, status: OffsetStatus, detail: string): ClockOffset => ({
    point: p.name,
    node: nodeOf(p, nodes),
    reference: ref.name,
    status,
    offsetNs: status === 'unbounded' ? null : '0',
    lowNs: null,
    highNs: null,
    detail,
  });
  return points.map((p, i) => {
    if (i === 0) return none(p, 'reference', 'the reference clock');
    const node = nodeOf(p, nodes);
    if (node !== null && node === refNode)
      return none(p, 'same-clock', `same node as ${ref.name} (${node}): one clock`);
    if (p.proxied || ref.proxied)
      return none(
        p,
        'unbounded',
        `${p.name} saw another connection (a proxy): no packet was seen at both points`,
      );
    const fwd = samePacket(ref.flow, p.flow, 'request');
    if (fwd === null)
      return none(p, 'unbounded', `no request packet was seen at both ${ref.name} and ${p.name}`);
    const t1 = BigInt(fwd[0].tsNs);
    const t2 = BigInt(fwd[1].tsNs);
    const back = samePacket(p.flow, ref.flow, 'reply');
    if (back === null)
      return {
        ...none(p, 'upper-bound', ''),
        offsetNs: null,
        highNs: (t2 - t1).toString(),
        detail: `only an upper bound: the request (frame ${fwd[0].frame} at ${ref.name}, ${fwd[1].frame} at ${p.name}); no reply was seen at both`,
      };
    const t3 = BigInt(back[0].tsNs);
    const t4 = BigInt(back[1].tsNs);
    const low = t3 - t4;
    const high = t2 - t1;
    if (low > high)
      return none(
        p,
        'unbounded',
        `the packets paired at ${ref.name} and ${p.name} give no consistent bound (the reply left before the request arrived): not the same packets`,
      );
    return {
      point: p.name,
      node,
      reference: ref.name,
      status: 'bounded',
      offsetNs: ((low + high) / 2n).toString(),
      lowNs: low.toString(),
      highNs: high.toString(),
      detail: `request frame ${fwd[0].frame} at ${ref.name} / ${fwd[1].frame} at ${p.name}, reply frame ${back[0].frame} at ${p.name} / ${back[1].frame} at ${ref.name}`,
    };
  });
}

function firstRequest(p: PointSummary): FlowPacketSummary | undefined {
  return p.flow.find((f) => f.dir === 'request' && !f.tunneled);
}

/** θ's [low, high] of one point (0 for the reference and same-clock points), or null. */
function thetaRange(o: ClockOffset | undefined): [bigint, bigint] | null {
  if (o === undefined) return null;
  if (o.status === 'reference' || o.status === 'same-clock') return [0n, 0n];
  if (o.status === 'bounded' && o.lowNs !== null && o.highNs !== null)
    return [BigInt(o.lowNs), BigInt(o.highNs)];
  return null;
}

/** The reference point's clock, or one of a point on its node: both ends of such a hop share it. */
const oneClock = (o: ClockOffset | undefined): boolean =>
  o?.status === 'reference' || o?.status === 'same-clock';

/** Per-hop latency of the request's first packet between consecutive points that both saw it. */
export function hopLatencies(points: PointSummary[], offsets: ClockOffset[]): HopLatency[] {
  const byPoint = new Map(offsets.map((o) => [o.point, o]));
  const hops: HopLatency[] = [];
  for (const [i, b] of points.entries()) {
    const a = points[i - 1];
    if (a === undefined) continue;
    const pa = firstRequest(a);
    const pb = firstRequest(b);
    const hop = { from: a.name, to: b.name };
    if (pa === undefined || pb === undefined || a.proxied !== b.proxied) {
      hops.push({
        ...hop,
        latencyNs: null,
        lowNs: null,
        highNs: null,
        detail:
          pa === undefined || pb === undefined
            ? `the request was not seen at ${pa === undefined ? a.name : b.name}`
            : 'the two points saw different connections (a proxy)',
      });
      continue;
    }
    const ra = thetaRange(byPoint.get(a.name));
    const rb = thetaRange(byPoint.get(b.name));
    const raw = BigInt(pb.tsNs) - BigInt(pa.tsNs);
    if (ra === null || rb === null) {
      hops.push({
        ...hop,
        latencyNs: null,
        lowNs: null,
        highNs: null,
        detail: `${durationText(raw)} by the raw timestamps; the clock offset of ${ra === null ? a.name : b.name} is not bounded, so the latency is not known`,
      });
      continue;
    }
    // latency = (tb − θb) − (ta − θa) = raw − θb + θa, and never negative (a one-way delay).
    const low0 = raw - rb[1] + ra[0];
    const high = raw - rb[0] + ra[1];
    const low = low0 < 0n ? (high < 0n ? high : 0n) : low0;
    const mid = (low + high) / 2n;
    hops.push({
      ...hop,
      latencyNs: mid.toString(),
      lowNs: low.toString(),
      highNs: high.toString(),
      detail:
        oneClock(byPoint.get(a.name)) && oneClock(byPoint.get(b.name))
          ? `${durationText(mid)} (one clock)`
          : low === high
            ? `${durationText(mid)} (two clocks; the offset's bounds coincide)`
            : `${durationText(mid)} (between ${durationText(low)} and ${durationText(high)}: the clock offset's bounds)`,
    });
  }
  return hops;
}

/** Points' timestamps moved onto the reference clock: t − θ (θ the estimate; unknown θ: 0). */
export function toReferenceClock(tsNs: bigint, o: ClockOffset | undefined): bigint {
  if (o === undefined || o.offsetNs === null) return tsNs;
  return tsNs - BigInt(o.offsetNs);
}

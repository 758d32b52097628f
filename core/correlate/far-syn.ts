/**
 * A request's SYN outside the window: points are matched within ±window of the request's time at
 * the first point, each on its own clock. When a later point's clock is further off than that (a
 * node without time sync, a capture file whose timestamps were shifted, a pcapng file with no
 * timestamps), the request is not in the window there, and "never reached" would be a claim the
 * packets contradict. Its SYN carries the same ISN through any NAT, so a SYN with that ISN
 * anywhere among the point's events finds it; the point is then matched in a window around that
 * SYN, and the distance is said.
 */
import type { PointEvents, RequestIdentity } from './journey';
import { flowView, isSynOnly } from './flow-view';

const absDiff = (a: bigint, b: bigint): bigint => (a > b ? a - b : b - a);

/**
 * The time of the SYN with the request's ISN nearest to its time at the first point, among those
 * further than `windowNs` from it; null when the request has no ISN or there is none.
 */
export function synOutsideWindow(
  id: RequestIdentity,
  point: PointEvents,
  windowNs: bigint,
): bigint | null {
  if (id.isn === null || id.proto !== 'tcp') return null;
  let best: bigint | null = null;
  for (const ev of point.events) {
    const v = flowView(ev);
    if (v === null || v.proto !== 'tcp' || !isSynOnly(v) || v.seq !== id.isn) continue;
    const d = absDiff(ev.tsNs, id.startTsNs);
    if (d <= windowNs) continue;
    if (best === null || d < absDiff(best, id.startTsNs)) best = ev.tsNs;
  }
  return best;
}

/** Signed seconds with one decimal, e.g. "+30.0 s". */
function secondsText(ns: bigint): string {
  const s = Number(ns) / 1e9;
  return `${s < 0 ? '-' : '+'}${Math.abs(s).toFixed(1)} s`;
}

/** What a point matched outside the window says (its detail, and the report's caution). */
export function outsideWindowText(shiftNs: bigint, windowNs: bigint, firstPoint: string): string {
  return (
    `the request's SYN was found ${secondsText(shiftNs)} from its time at ${firstPoint}, outside ` +
    `the ±${(Number(windowNs) / 1e9).toFixed(1)} s window points are matched in: the two clocks ` +
    'differ by about that much, or only a retransmission of the SYN got through'
  );
}

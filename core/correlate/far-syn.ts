/**
 * A request's SYN outside the window: points are matched within ±window of the request's time at
 * the first point, each on its own clock. When a later point's clock is further off than that (a
 * node without time sync, a capture file whose timestamps were shifted, a pcapng file with no
 * timestamps), the request is not in the window there, and "never reached" would be a claim the
 * packets contradict. Its SYN carries the same ISN, TSval and IPv4 ID through any NAT, so a SYN
 * with those anywhere among the point's events finds it; the point is then matched in a window
 * around that SYN, and the distance is said.
 */
import type { PacketEvent } from '../../common/event';
import { absDiff, type RequestIdentity } from './journey';
import { flowView, isSynOnly } from './flow-view';

/**
 * Whether `ev` is the request's SYN outside the window: a SYN without ACK with the request's ISN,
 * further than `windowNs` from the request's time, that also carries what else the request's SYN
 * carried and NAT leaves alone — its TSval, its IPv4 ID. The ISN alone is 32 bits: over a whole
 * capture (an hour of 10,000 connections a second) another connection's SYN would share it about
 * once in a hundred captures, so a request without either is not looked for outside the window.
 */
export function isFarSyn(id: RequestIdentity, ev: PacketEvent, windowNs: bigint): boolean {
  if (id.isn === null || id.proto !== 'tcp' || (id.tsVal === null && id.ipId === null))
    return false;
  const v = flowView(ev);
  if (v === null || v.proto !== 'tcp' || !isSynOnly(v) || v.seq !== id.isn) return false;
  if (absDiff(ev.tsNs, id.startTsNs) <= windowNs) return false;
  const k = ev.keys;
  return (id.tsVal === null || k.tsVal === id.tsVal) && (id.ipId === null || k.ipId === id.ipId);
}

/**
 * The time of the request's SYN outside the window (isFarSyn) among `events` nearest to its time
 * at the first point, or null. Only that time is kept, so a pass over a whole file holds nothing.
 */
export function synOutsideWindow(
  id: RequestIdentity,
  events: Iterable<PacketEvent>,
  windowNs: bigint,
): bigint | null {
  let best: bigint | null = null;
  for (const ev of events) {
    if (!isFarSyn(id, ev, windowNs)) continue;
    if (best === null || absDiff(ev.tsNs, id.startTsNs) < absDiff(best, id.startTsNs))
      best = ev.tsNs;
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
    `the ±${(Number(windowNs) / 1e9).toFixed(1)} s window points are matched in (the same SYN: ` +
    'ISN, TSval and IPv4 ID): the two clocks differ by about that much'
  );
}

/**
 * How many events the running repros hold for their probes' verdicts, and what is let go past
 * that. Every live repro's three points share the collector's budget equally (each never more
 * than MAX_EVENTS_PER_POINT); a point over its share lets its oldest events go, and what went is
 * counted with the capture times it spanned, so a probe judged in that time is cautioned rather
 * than judged from events that are gone (repro-core lossesInFlight). Before, each point let its
 * oldest go past 500,000 without a word, and 32 repros could hold 48 M events (~50 GB).
 */
import type { TaggedEvent } from '../core/repro/repro-core';
import { MAX_EVENTS_PER_POINT } from './repro-state';

/** What one point let go of one capture (attachment epoch; 0 the backend's). */
export interface LetGo {
  epoch: number;
  count: number;
  /** The capture times of the events let go, first and last (ms). */
  fromMs: number;
  toMs: number;
}

/** Events one point of a repro may hold while `liveRepros` repros share `budget`. */
export function pointHoldCap(budget: number, liveRepros: number): number {
  const share = Math.floor(budget / (3 * Math.max(1, liveRepros)));
  return Math.max(1, Math.min(MAX_EVENTS_PER_POINT, share));
}

/** What a point's log let go (PointEventLog.add), by capture, with their capture times. */
export function letGoByCapture(gone: readonly TaggedEvent[]): LetGo[] {
  const by = new Map<number, LetGo>();
  for (const { epoch, event } of gone) {
    const ms = Number(event.tsNs / 1_000_000n);
    const g = by.get(epoch);
    if (g === undefined) by.set(epoch, { epoch, count: 1, fromMs: ms, toMs: ms });
    else {
      g.count++;
      g.fromMs = Math.min(g.fromMs, ms);
      g.toMs = Math.max(g.toMs, ms);
    }
  }
  return [...by.values()];
}

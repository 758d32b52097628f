/**
 * The loss spans a repro keeps (repro-core LossSpan), bounded. An agent sends one `lost` message
 * per batch it could not deliver, and one status per report: kept one span each, 20,000 `lost`
 * messages of count 1 grew the collector by ~70 MB and one GET /v1/repros/:id took 366 ms to check
 * every probe against every span (3.2 MB of answer). The counts always stay exact: a span is only
 * ever merged into another of the same capture, never dropped.
 */
import { addCount } from '../../common/counters';
import type { LossSpan } from './repro-core';

/**
 * Spans one repro keeps: past it a new span of a capture widens that capture's last one (its
 * time and counts) instead of being added; a capture that has none yet still gets its first.
 */
export const MAX_REPRO_LOSS_SPANS = 1000;

/** The last span of the capture `s` is of (same capture and attachment), or undefined. */
function lastOf(spans: readonly LossSpan[], s: LossSpan): LossSpan | undefined {
  for (let i = spans.length - 1; i >= 0; i--) {
    const x = spans[i];
    if (x !== undefined && x.capture === s.capture && x.epoch === s.epoch) return x;
  }
  return undefined;
}

/**
 * Adds `s` to `spans`: merged into its capture's last span when the two touch or overlap in time
 * (a `lost` message after another, statuses that each count drops), or when `spans` is full
 * (the merged span then also covers the time between them: a probe in that gap is cautioned as
 * possibly hit rather than cleared). Merged: the union of the times, the sums of the counts.
 */
export function addLossSpan(
  spans: LossSpan[],
  s: LossSpan,
  max: number = MAX_REPRO_LOSS_SPANS,
): void {
  const last = lastOf(spans, s);
  const touches = last !== undefined && s.fromMs <= last.toMs && s.toMs >= last.fromMs;
  if (last === undefined || (!touches && spans.length < max)) {
    spans.push({ ...s });
    return;
  }
  last.fromMs = Math.min(last.fromMs, s.fromMs);
  last.toMs = Math.max(last.toMs, s.toMs);
  last.kernelDrops = addCount(last.kernelDrops, s.kernelDrops);
  last.queueDrops = addCount(last.queueDrops, s.queueDrops);
  last.lost = addCount(last.lost, s.lost);
  if (s.unheld !== undefined) last.unheld = addCount(last.unheld ?? 0, s.unheld);
}

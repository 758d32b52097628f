/**
 * Whether a point's capture covers the request's time. A capture file can hold another hour (the
 * wrong file, a capture started after the request or stopped before it): the request "never seen
 * there" is then not a drop but a capture that was not running, and the verdict must not say
 * more. A capture whose first-to-last frame span reaches within the correlation window of the
 * request (the most the points' clocks are taken to differ) counts as running then. A live
 * capture, which the collector armed before the request and stopped after it, has no span here
 * (PointMatch.capturedSpan absent) and always counts, and so does a file of no frame (see below).
 */
import { durationText, utcMicros } from '../../common/time-text';
import type { PointMatch } from '../correlate/journey';

/**
 * Why `p`'s capture does not cover `requestNs` ± `windowNs` and what that leaves unknown, or null
 * when it does (or is live).
 */
export function notCoveredText(
  p: Pick<PointMatch, 'point' | 'capturedSpan'>,
  requestNs: bigint,
  requestPoint: string,
  windowNs: bigint,
): string | null {
  const span = p.capturedSpan;
  // A file of no frame holds no time at all: it is what a capture running across a drop leaves
  // (tcpdump writes no start or stop time), so it is read as one — the verdict then says the
  // capture holds no packets and asks to confirm it ran (attribute.ts).
  if (span === undefined || span === null) return null;
  if (span.latestNs >= requestNs - windowNs && span.earliestNs <= requestNs + windowNs) return null;
  const when = `the request's time (${utcMicros(requestNs)} by ${requestPoint}'s clock)`;
  const gap =
    span.latestNs < requestNs
      ? `it ends ${durationText(requestNs - span.latestNs)} before the request`
      : `it begins ${durationText(span.earliestNs - requestNs)} after the request`;
  return (
    `the ${p.point} capture does not cover ${when}: its frames run from ` +
    `${utcMicros(span.earliestNs)} to ${utcMicros(span.latestNs)} by its own clock, so ${gap}, ` +
    `more than the ${durationText(windowNs)} the points' clocks are allowed to differ: a drop ` +
    `cannot be told from a capture made at another time (or a clock set that far off)`
  );
}

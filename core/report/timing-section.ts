/**
 * Times as a person reads them: UTC with microseconds instead of epoch nanoseconds, each point's
 * clock offset against the first point with its bounds, the per-hop latency, and the plain fact
 * that the points' clocks are different machines' clocks. JSON keeps the nanoseconds (times.ts).
 */
import type { AnalysisResult } from './analysis-result';
import { durationText, utcMicros, type ClockOffset, type HopLatency } from './times';
import { mdText } from './md-escape';

/** `+1.234 ms`, `−12 µs`, `+0 ns`. */
export function signedDuration(ns: bigint): string {
  return ns < 0n ? durationText(ns) : `+${durationText(ns)}`;
}

/** A point's first or last timestamp for people (UTC, µs); `''` when none. */
export function utcOrEmpty(tsNs: string | null): string {
  return tsNs === null ? '' : utcMicros(tsNs);
}

/** One point's clock against the reference, in words: `θ = +1.234 ms ± 450.0 µs from …`. */
export function offsetText(o: ClockOffset): string {
  switch (o.status) {
    case 'reference':
      return `the reference clock${o.node === null ? '' : ` (node ${o.node})`}`;
    case 'same-clock':
      return `same clock: ${o.detail}`;
    case 'bounded': {
      if (o.lowNs === null || o.highNs === null) return `cannot be bounded: ${o.detail}`;
      const low = BigInt(o.lowNs);
      const high = BigInt(o.highNs);
      const mid = (low + high) / 2n;
      return `θ = ${signedDuration(mid)} ± ${durationText((high - low) / 2n)} from ${o.detail}`;
    }
    case 'upper-bound':
      return o.highNs === null
        ? `cannot be bounded: ${o.detail}`
        : `θ ≤ ${signedDuration(BigInt(o.highNs))} (${o.detail})`;
    case 'unbounded':
      return `cannot be bounded: ${o.detail}`;
  }
}

/** One hop's latency in words (`decap → egress: 12.0 µs (one clock)`). */
export function hopText(h: HopLatency): string {
  return `${h.from} → ${h.to}: ${h.detail}`;
}

/** What every timing view says first: the clocks are the capturing machines' own. */
export const CLOCKS_SENTENCE =
  "Each point's timestamps come from the clock of the machine that captured it: points on " +
  "different nodes are different machines' clocks, so the difference between two of them is the " +
  "travel time plus the clocks' offset. The offset θ = clock(point) − clock(reference) is bounded " +
  'from one request and one reply packet seen at both points (θ lies in [t3 − t4, t2 − t1]; the ' +
  "estimate is the middle, as NTP's), and each hop's latency is corrected within those bounds.";

/** The first point that saw the request, and when (UTC, by its clock). */
function firstSeen(r: AnalysisResult): { point: string; utc: string } | null {
  for (const p of r.points)
    if (p.firstTsNs !== null) return { point: p.name, utc: utcMicros(p.firstTsNs) };
  return null;
}

/** The Markdown "Timing" section (empty when the result carries no times). */
export function timingMarkdown(r: AnalysisResult): string[] {
  const clock = r.clock ?? [];
  const hops = r.hops ?? [];
  if (clock.length === 0 && hops.length === 0) return [];
  const out = ['## Timing', '', CLOCKS_SENTENCE, ''];
  const first = firstSeen(r);
  if (first !== null)
    out.push(
      `The request was first seen at ${first.point} at ${first.utc} (UTC, by ${first.point}'s clock).`,
      '',
    );
  if (hops.length > 0) {
    out.push('| hop | latency of the request |', '| --- | --- |');
    for (const h of hops) out.push(`| ${mdText(`${h.from} → ${h.to}`)} | ${mdText(h.detail)} |`);
    out.push('');
  }
  if (clock.length > 0) {
    const ref = clock[0]?.reference ?? '';
    out.push(`| point | node | clock against ${mdText(ref)} |`, '| --- | --- | --- |');
    for (const o of clock)
      out.push(
        `| ${mdText(o.point)} | ${mdText(o.node ?? 'unknown')} | ${mdText(offsetText(o))} |`,
      );
    out.push('');
  }
  return out;
}

/** The terminal's timing lines: when the request was first seen, each hop, each bounded clock. */
export function timingTextLines(r: AnalysisResult): string[] {
  const out: string[] = [];
  const first = firstSeen(r);
  if (first !== null)
    out.push(
      `  seen:   ${first.point} ${first.utc} (UTC; each point's times are its own machine's clock)`,
    );
  for (const h of r.hops ?? []) out.push(`  hop:    ${hopText(h)}`);
  for (const o of r.clock ?? []) {
    if (o.status === 'reference') continue;
    out.push(`  clock:  ${o.point} against ${o.reference}: ${offsetText(o)}`);
  }
  return out;
}

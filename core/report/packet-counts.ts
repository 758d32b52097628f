/** A point's request/reply packet counts as report.md and report.html show them. */
import type { PointSummary } from './analysis-result';

/**
 * "request/reply", the retransmissions, and what the agent counted per flow without sending
 * (PointSummary.folded): those packets were seen but cannot be matched one by one.
 */
export function packetCounts(p: PointSummary): string {
  const f = p.folded;
  return (
    `${p.requestPackets}/${p.replyPackets}` +
    (p.retransmits > 0 ? ` (${p.retransmits} retransmitted)` : '') +
    (f === undefined ? '' : ` (+${f.requestPackets}/+${f.replyPackets} counted per flow, not sent)`)
  );
}

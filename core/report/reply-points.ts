/** The report's points as core/attribute/reply-path.ts reads them. */
import type { ReplyPoint } from '../attribute/reply-path';
import type { PointSummary } from './analysis-result';

export function replyPoints(points: readonly PointSummary[]): ReplyPoint[] {
  return points.map((p) => ({
    name: p.name,
    seen: p.status === 'matched' && p.observed !== null,
    seenReply: p.seenReply,
    seenSyn: p.seenSyn,
    flow: p.flow,
  }));
}

/**
 * When the first point holds no request that fits the selector. Offline (`hoptrace analyze`) that
 * is a verdict — `unknown`, exit 3, its report and bundle still written (README "Exit codes") —
 * so the user sees what was read and what to change. Live, the collector keeps waiting for the
 * request instead: there analyzeEvents throws CLI_NO_REQUEST (collector/session.ts).
 */
import type { Verdict } from '../attribute/attribute';
import type { AnalysisResult, PointSummary } from './analysis-result';

/** What to do when no request was selected. */
export const NO_REQUEST_HINT =
  'check --client and --dst, and that the first capture holds the request (a new connection, a data segment of an open one, a UDP datagram or a ping) — started before the request was sent';

/** What happens when the first point holds no request: an error (live) or the verdict (offline). */
export type NoRequest = 'throw' | 'verdict';

/**
 * The result of an analysis that selected no request: the verdict `unknown` with the reason
 * correlation gave and NO_REQUEST_HINT. The points in `unread` (the streaming analysis reads the
 * later points only once a request is selected) say they were not read, not that they hold nothing.
 */
export function noRequestResult(
  verdict: Verdict,
  points: PointSummary[],
  unread: ReadonlySet<string> = new Set(),
): AnalysisResult {
  const first = points[0]?.name ?? 'the first point';
  const notRead = `not read: no request was selected at ${first}`;
  return {
    verdict: {
      ...verdict,
      evidence: verdict.evidence.map((e) => (unread.has(e.point) ? { ...e, detail: notRead } : e)),
      hint: NO_REQUEST_HINT,
    },
    points: points.map((p) =>
      unread.has(p.name) ? { ...p, status: 'not-seen', detail: notRead } : p,
    ),
  };
}

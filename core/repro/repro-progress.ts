/**
 * A repro's timeline printed as it happens: each probe's row once the next probe has been sent
 * (its packets have had an interval to reach the collector), the deletion and replacement marks
 * in between, and at the end the rows still unprinted plus every verdict the late events changed
 * (the final timeline is the authority; a row printed early is never silently contradicted).
 * Pure: views in, lines out.
 */
import {
  markLine,
  summaryLines,
  type ReproSummary,
  TIMELINE_HEADER,
  timelineRowLine,
  type ReproMark,
  type TimelineRow,
} from './repro-core';

/** What progress reads of a repro view. */
export interface ProgressView {
  timeline: readonly TimelineRow[];
  marks: readonly ReproMark[];
}

export class ReproProgress {
  private readonly printed = new Map<string, TimelineRow>();
  private readonly marksPrinted = new Set<string>();
  private startMs: number | null = null;

  /**
   * Lines to print now: rows of the first `settled` probes not printed yet, and the marks up to
   * the last of them (or every mark when `settled` covers the whole timeline).
   */
  update(view: ProgressView, settled: number): string[] {
    const out: string[] = [];
    const rows = view.timeline.slice(0, Math.max(0, settled));
    const first = view.timeline[0];
    if (first === undefined && view.marks.length === 0) return out;
    if (this.startMs === null) {
      this.startMs = first?.startedAtMs ?? view.marks[0]?.atMs ?? 0;
      out.push(TIMELINE_HEADER);
    }
    const start = this.startMs;
    const all = settled >= view.timeline.length;
    const until = all ? Infinity : (rows.at(-1)?.startedAtMs ?? -Infinity);
    const items: { at: number; line: string }[] = [];
    for (const r of rows) {
      if (this.printed.has(r.probeId)) continue;
      this.printed.set(r.probeId, r);
      items.push({ at: r.startedAtMs, line: timelineRowLine(r, start) });
    }
    for (const m of view.marks) {
      const key = `${m.kind}@${m.atMs}`;
      if (m.atMs > until || this.marksPrinted.has(key)) continue;
      this.marksPrinted.add(key);
      items.push({ at: m.atMs, line: markLine(m, start) });
    }
    items.sort((a, b) => a.at - b.at);
    out.push(...items.map((i) => i.line));
    return out;
  }

  /** One line per printed probe whose verdict or server differs in `final` (late events). */
  changes(final: readonly TimelineRow[]): string[] {
    const out: string[] = [];
    for (const r of final) {
      const was = this.printed.get(r.probeId);
      if (was === undefined) continue;
      const before = `${was.verdict}${was.servedBy === null ? '' : ` via ${was.servedBy.name}`}`;
      const after = `${r.verdict}${r.servedBy === null ? '' : ` via ${r.servedBy.name}`}`;
      if (before !== after)
        out.push(
          `note: probe ${r.probeId} printed as ${before}; with the events that arrived later it is ${after}`,
        );
    }
    return out;
  }
}

/**
 * After the repro finished: the rows not printed yet, the verdicts late events changed, the
 * summary, and what the captures lost (`lossText`; older views: none).
 */
export function reproEndLines(
  progress: ReproProgress,
  view: ProgressView & { summary: ReproSummary | null; lossText?: readonly string[] },
): string[] {
  return [
    ...progress.update(view, view.timeline.length),
    ...progress.changes(view.timeline),
    ...summaryLines(view.summary),
    ...(view.lossText ?? []),
  ];
}

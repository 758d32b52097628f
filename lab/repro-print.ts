/** Runs the lab repro scenarios one after another and prints each timeline (scripts and CLI). */
import { ReproProgress, reproEndLines } from '../core/repro/repro-progress';
import { LiveCollector } from './live-collector';
import { REPRO_SCENARIOS, runRepro, type ReproRun } from './repro';

/** Whether a run matches its scenario's expectation (the summary; the tests check the timeline). */
export function reproMismatches(run: ReproRun): string[] {
  const s = run.view.summary;
  const out: string[] = [];
  if (s === null) return ['no summary'];
  if (s.recovered !== run.scenario.expect.recovered)
    out.push(`recovered=${String(s.recovered)}, expected ${String(run.scenario.expect.recovered)}`);
  return out;
}

/** Prints every scenario's timeline; resolves with the number of scenarios that did not match. */
export async function printLabRepros(
  out: (line: string) => void,
  only?: readonly string[],
): Promise<number> {
  const collector = await LiveCollector.start();
  let bad = 0;
  try {
    for (const sc of REPRO_SCENARIOS) {
      if (only !== undefined && !only.includes(sc.name)) continue;
      out(`\n## repro ${sc.name}: ${sc.description}`);
      try {
        const progress = new ReproProgress();
        const run = await runRepro(collector, sc, undefined, (view, settled) => {
          for (const line of progress.update(view, settled)) out(line);
        });
        for (const line of reproEndLines(progress, run.view)) out(line);
        const m = reproMismatches(run);
        out(m.length === 0 ? `(as expected, ${run.durationMs} ms)` : `MISMATCH: ${m.join('; ')}`);
        if (m.length > 0) bad++;
      } catch (e) {
        bad++;
        out(`ERROR: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  } finally {
    await collector.close();
  }
  return bad;
}

/**
 * Time to verdict in the live lab: lab/live.ts runs a scenario end to end (agents capture in the
 * lab's namespaces, events travel worker → agent → WebSocket → collector) and measures from curl's
 * return — the request's last packets — to the collector's finishedAt.
 */
import { LiveCollector, runLiveScenario } from '../lab/live';
import { findScenario } from '../lab/scenarios';

export interface LiveRow {
  scenario: string;
  verdict: string;
  state: string;
  ok: boolean;
  timeToVerdictMs: number;
  durationMs: number;
}

/** Runs each scenario `repeat` times against one collector. */
export async function benchLive(
  names: readonly string[],
  repeat: number,
  log: (s: string) => void,
): Promise<LiveRow[]> {
  const collector = await LiveCollector.start();
  const rows: LiveRow[] = [];
  try {
    for (let i = 0; i < repeat; i++) {
      for (const name of names) {
        const scenario = findScenario(name);
        if (scenario === undefined) throw new Error(`no lab scenario ${name}`);
        const run = await runLiveScenario(collector, scenario);
        const row: LiveRow = {
          scenario: name,
          verdict: run.verdict?.layer ?? 'none',
          state: run.state,
          ok: run.mismatches.length === 0,
          timeToVerdictMs: run.timeToVerdictMs,
          durationMs: run.durationMs,
        };
        log(`live: ${name}: ${row.verdict} (${row.state}) ${row.timeToVerdictMs} ms after curl`);
        rows.push(row);
      }
    }
  } finally {
    await collector.close();
  }
  return rows;
}

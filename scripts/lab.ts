/**
 * `npm run lab`: runs every lab scenario in its own namespaces, one after another, and prints a
 * table of expected vs. obtained verdicts. Exit 1 on any mismatch, 2 when the lab cannot run.
 *
 * Live by default: a collector and one agent per lab node capture each scenario, and the verdict
 * comes from the collector's API (events travel agent → WebSocket → collector). `--offline` runs
 * the issue-2 lab instead: tcpdump at the three points, `hoptrace analyze` on the files.
 *
 * Usage: node dist/scripts/lab.js [--offline [--keep]] [--only NAME[,NAME...]]
 *   --keep   (offline) keep pcaps, inventory.json, verdict.json, client.json (the probe's result)
 *            and server logs in ./lab-out/<scenario>/
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isHoptraceError } from '../common/errors';
import { assertLabPrerequisites } from '../lab/prereq';
import { LiveCollector, runLiveScenario, type LiveRun } from '../lab/live';
import { runScenario } from '../lab/run';
import type { LabVerdict } from '../lab/verdict';
import { SCENARIOS, type Scenario } from '../lab/scenarios';

interface Row {
  scenario: string;
  expected: string;
  verdict: string;
  hop: string;
  backendSrc: string;
  evidence: string;
  /** Live: from curl's return to the verdict. */
  time: string;
  ok: boolean;
  problems: string[];
}

/** What a row is made of, offline or live. */
interface RunResult {
  verdict: LabVerdict | null;
  mismatches: string[];
  analyzerError: string | null;
  durationMs: number;
  timeToVerdictMs?: number;
}

function hop(h: [string, string] | null | undefined): string {
  return h === undefined ? '?' : h === null ? '-' : `${h[0]}→${h[1]}`;
}

function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`;
}

function rowOf(s: Scenario, run: RunResult | null, error: string | null): Row {
  const outerWanted = s.expect.outerClass === undefined ? '' : ` (outer: ${s.expect.outerClass})`;
  const expected = `${s.expect.layer} ${hop(s.expect.rewrittenBetween)} ${s.expect.backendSrc ?? 'none'}${outerWanted}`;
  const v = run?.verdict ?? null;
  // The evidence that carries the verdict: the point after the rewrite, else the last point seen.
  const at = v?.rewrittenBetween?.[1];
  const ev = v?.evidence.find((e) => e.point === at) ?? v?.evidence.at(-1);
  return {
    scenario: s.name,
    expected,
    verdict:
      (v?.layer ?? (error !== null ? 'ERROR' : 'none')) +
      (v?.outer === undefined ? '' : ` (outer: ${v.outer.class} ${v.outer.src})`),
    hop: v === null ? '?' : hop(v.rewrittenBetween),
    backendSrc: v === null ? '?' : (v.observed['backend']?.src ?? 'none'),
    evidence:
      ev === undefined
        ? clip((run?.analyzerError ?? error ?? '').split('\n')[0] ?? '', 70)
        : clip(
            ev.matchedBy !== undefined && ev.matchedBy.length > 0
              ? `${ev.point ?? '?'} matched by ${ev.matchedBy.join(',')}`
              : `${ev.point === undefined ? '' : `${ev.point}: `}${ev.detail}`,
            72,
          ),
    time: run?.timeToVerdictMs === undefined ? '' : `${run.timeToVerdictMs} ms`,
    ok: error === null && run !== null && run.mismatches.length === 0,
    problems: error !== null ? [error] : (run?.mismatches ?? []),
  };
}

function printTable(rows: Row[], live: boolean): void {
  const head = [
    '',
    'scenario',
    'expected (layer hop backend-src)',
    'verdict',
    'hop',
    'backend src',
    'evidence',
    ...(live ? ['time to verdict'] : []),
  ];
  const cells = rows.map((r) => [
    r.ok ? 'ok' : 'FAIL',
    r.scenario,
    r.expected,
    r.verdict,
    r.hop,
    r.backendSrc,
    r.evidence,
    ...(live ? [r.time] : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
  const line = (c: string[]): string =>
    c
      .map((x, i) => x.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  process.stdout.write(`${line(head)}\n${line(widths.map((w) => '-'.repeat(w)))}\n`);
  for (const c of cells) process.stdout.write(`${line(c)}\n`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      keep: { type: 'boolean' },
      only: { type: 'string' },
      offline: { type: 'boolean' },
    },
  });
  try {
    assertLabPrerequisites();
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  const only = values.only?.split(',').filter((n) => n !== '');
  const scenarios = only === undefined ? SCENARIOS : SCENARIOS.filter((s) => only.includes(s.name));
  if (only !== undefined && scenarios.length !== only.length) {
    process.stderr.write(
      `unknown scenario in --only; known: ${SCENARIOS.map((s) => s.name).join(', ')}\n`,
    );
    return 2;
  }
  const offline = values.offline === true;
  const keep = values.keep === true;
  if (keep && !offline) {
    process.stderr.write('--keep applies to --offline (the live lab keeps nothing on disk)\n');
    return 2;
  }
  const rows: Row[] = [];
  const t0 = Date.now();
  const report = (s: Scenario, run: RunResult | null, error: string | null): void => {
    const row = rowOf(s, run, error);
    rows.push(row);
    process.stderr.write(
      `${row.ok ? 'ok  ' : 'FAIL'} ${s.name} (${run === null ? '-' : `${run.durationMs} ms`})\n`,
    );
  };
  const message = (e: unknown): string =>
    isHoptraceError(e) || e instanceof Error ? e.message : String(e);
  if (offline) {
    const base = keep ? resolve('lab-out') : mkdtempSync(join(tmpdir(), 'hoptrace-lab-'));
    // Also on SIGINT/SIGTERM, where the lab's handler exits the process and `finally` never runs.
    const removeBase = (): void => {
      if (!keep) rmSync(base, { recursive: true, force: true });
    };
    process.once('exit', removeBase);
    try {
      for (const s of scenarios) {
        try {
          report(s, await runScenario(s, { outDir: join(base, s.name) }), null);
        } catch (e) {
          report(s, null, message(e));
        }
      }
    } finally {
      removeBase();
    }
  } else {
    const collector = await LiveCollector.start();
    process.stderr.write(`collector on ${collector.url} (agents: ${collector.agentsUrl})\n`);
    try {
      for (const s of scenarios) {
        try {
          const run: LiveRun = await runLiveScenario(collector, s);
          report(s, { ...run, analyzerError: null }, null);
        } catch (e) {
          report(s, null, message(e));
        }
      }
    } finally {
      await collector.close();
    }
  }
  printTable(rows, !offline);
  const failed = rows.filter((r) => !r.ok);
  for (const r of failed)
    process.stdout.write(`\n${r.scenario}:\n${r.problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.stdout.write(
    `\n${rows.length - failed.length}/${rows.length} scenarios as expected (${offline ? 'offline: tcpdump + analyze' : 'live: agents → WebSocket → collector'}) in ${((Date.now() - t0) / 1000).toFixed(1)} s${keep ? `; outputs in ${resolve('lab-out')}` : ''}\n`,
  );
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(2);
  },
);

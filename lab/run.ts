/**
 * One scenario end to end: build the namespaces, prepare the probe (a keep-alive connection is
 * opened now, before any capture), start tcpdump at the three points, send the probe from the
 * client, stop the captures, analyze them in-process, compare with the scenario's expectation,
 * and tear everything down — also when something fails on the way.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import { isHoptraceError } from '../common/errors';
import { startCapture, type CaptureStats, type RunningCapture } from './capture';
import { stopChild } from './child';
import { delay, Netns } from './netns';
import { assertLabPrerequisites } from './prereq';
import { prepareProbe, type PreparedProbe, type ProbeResult } from './probe';
import { appSeesProbe, selectorOf, type Expectation, type Scenario } from './scenarios';
import { buildTopology, type LabProcess } from './topology';
import type { LabVerdict } from './verdict';

/** Packets still in flight after the probe returns (retransmits, FIN/ACK) get this long to land. */
const DRAIN_MS = 300;

/** What one scenario run produced. */
export interface ScenarioRun {
  scenario: Scenario;
  prefix: string;
  probeId: string;
  outDir: string;
  points: { name: string; file: string; ns: string; iface: string }[];
  inventoryFile: string;
  probe: ProbeResult;
  /** The source the backend application saw (from its log), null if no request reached it. */
  appObserved: { src: string; sport: number } | null;
  captures: CaptureStats[];
  verdict: LabVerdict | null;
  analyzerError: string | null;
  /** The analysis's bundle (`analyze --report-dir`'s files), null when the analyzer failed. */
  bundleDir: string | null;
  /** Every way the run differs from the scenario's expectation; empty means it passed. */
  mismatches: string[];
  durationMs: number;
}

/** Options for runScenario. */
export interface RunOptions {
  /** Directory for the pcaps, inventory.json, client.json (the probe's result), logs and the analysis's bundle/ (created). */
  outDir: string;
  /** Use this Netns (tests pass one to inspect its prefix); destroyed at the end either way. */
  lab?: Netns;
}

/** A probe id as the decoder extracts it: [0-9a-z]{1,32}. */
export function newProbeId(): string {
  return randomBytes(6).toString('hex');
}

/** Runs `scenario` end to end. Throws LAB_PREREQUISITE / LAB_SETUP; namespaces are always removed. */
export async function runScenario(scenario: Scenario, opts: RunOptions): Promise<ScenarioRun> {
  assertLabPrerequisites();
  const started = Date.now();
  const lab = opts.lab ?? new Netns();
  const probeId = newProbeId();
  mkdirSync(opts.outDir, { recursive: true });
  const captures: RunningCapture[] = [];
  let processes: LabProcess[] = [];
  let prepared: PreparedProbe | undefined;
  try {
    const topo = await buildTopology(lab, scenario, __dirname);
    processes = topo.processes;
    const points = topo.points.map((p) => ({ ...p, file: join(opts.outDir, `${p.name}.pcap`) }));
    prepared = await prepareProbe(lab, scenario, probeId);
    for (const p of points) captures.push(await startCapture(lab, p));

    const probe = await prepared.send();
    writeFileSync(join(opts.outDir, 'client.json'), JSON.stringify(probe, null, 2) + '\n');

    await delay(DRAIN_MS);
    const stats: CaptureStats[] = [];
    for (const c of captures.splice(0)) stats.push(await c.stop());
    for (const p of processes) await stopChild(p.child);
    const backendLog = topo.backendLog();
    const logs = processes.map((p) => `## ${p.name}\n${p.stdout()}`).join('\n');
    writeFileSync(join(opts.outDir, 'servers.log'), logs);

    const inventoryFile = join(opts.outDir, 'inventory.json');
    writeFileSync(inventoryFile, JSON.stringify(topo.inventory, null, 2) + '\n');

    let verdict: LabVerdict | null = null;
    let analyzerError: string | null = null;
    let bundleDir: string | null = join(opts.outDir, 'bundle');
    try {
      const { analyzeRun } = await import('./verdict');
      mkdirSync(bundleDir, { recursive: true });
      verdict = analyzeRun(
        points.map(({ name, file }) => ({ name, file })),
        topo.inventory,
        selectorOf(scenario),
        bundleDir,
      );
      writeFileSync(join(opts.outDir, 'verdict.json'), JSON.stringify(verdict, null, 2) + '\n');
    } catch (e) {
      // First line only: a missing module's message carries the whole require stack.
      const msg = isHoptraceError(e) || e instanceof Error ? e.message : String(e);
      analyzerError = msg.split('\n')[0] ?? msg;
      bundleDir = null;
    }

    const run: ScenarioRun = {
      scenario,
      prefix: lab.prefix,
      probeId,
      outDir: opts.outDir,
      points: points.map(({ name, file, ns, iface }) => ({ name, file, ns: lab.full(ns), iface })),
      inventoryFile,
      probe,
      appObserved: backendObserved(backendLog, probeId),
      captures: stats,
      verdict,
      analyzerError,
      bundleDir,
      mismatches: [],
      durationMs: 0,
    };
    run.mismatches = compareWithExpectation(scenario.expect, run);
    run.durationMs = Date.now() - started;
    return run;
  } finally {
    await prepared?.close().catch(() => undefined);
    for (const c of captures) await c.stop().catch(() => undefined);
    for (const p of processes) await stopChild(p.child).catch(() => undefined);
    await lab.destroy();
  }
}

/** The source the backend application logged for the probe (one JSON line per request). */
export function backendObserved(
  log: string,
  probeId: string,
): { src: string; sport: number } | null {
  for (const line of log.split('\n')) {
    if (!line.includes(`hoptrace-probe-${probeId}`)) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (
        typeof v === 'object' &&
        v !== null &&
        'src' in v &&
        'sport' in v &&
        typeof v.src === 'string' &&
        typeof v.sport === 'number'
      ) {
        return { src: v.src, sport: v.sport };
      }
    } catch {
      // not a JSON line
    }
  }
  return null;
}

/**
 * Evidence and hint texts that join an IPv6 address the points observed and a port without
 * brackets (`fd00::1:80` instead of `[fd00::1]:80`, which reads as another address).
 */
export function ipv6EndpointsWithoutBrackets(v: LabVerdict): string[] {
  const addrs = new Set(
    Object.values(v.observed)
      .flatMap((o) => (o === null ? [] : [o.src, o.dst]))
      .filter((a) => isIPv6(a)),
  );
  const texts = [...v.evidence.map((e) => `${e.point ?? '-'}: ${e.detail}`), `hint: ${v.hint}`];
  const out: string[] = [];
  for (const a of addrs) {
    const re = new RegExp(`(?<![[\\w:])${a.replace(/\./g, '\\.')}:\\d+`, 'g');
    for (const text of texts)
      for (const m of text.matchAll(re)) out.push(`${text.slice(0, text.indexOf(':'))}: ${m[0]}`);
  }
  return out;
}

/** Every difference between what `run` produced and `expect`. */
export function compareWithExpectation(
  expect: Expectation,
  run: Pick<ScenarioRun, 'verdict' | 'analyzerError' | 'probe' | 'appObserved'>,
): string[] {
  const out: string[] = [];
  if (run.probe.answered !== expect.answered)
    out.push(
      `client: ${run.probe.summary}; expected ${expect.answered ? 'an answer' : 'no answer'}`,
    );
  // The application's own view of the source, independent of the analyzer.
  if (appSeesProbe(expect) && run.appObserved?.src !== expect.backendSrc) {
    out.push(
      `backend application saw ${run.appObserved?.src ?? 'no request'}, expected ${expect.backendSrc ?? 'none'}`,
    );
  }
  const v = run.verdict;
  if (v === null) {
    out.push(`no verdict: ${run.analyzerError ?? 'analyzer not run'}`);
    return out;
  }
  if (v.layer !== expect.layer)
    out.push(
      `layer ${v.layer}, expected ${expect.layer}${v.reason === undefined ? '' : ` (reason: ${v.reason})`}`,
    );
  if (JSON.stringify(v.rewrittenBetween) !== JSON.stringify(expect.rewrittenBetween)) {
    out.push(
      `rewrittenBetween ${JSON.stringify(v.rewrittenBetween)}, expected ${JSON.stringify(expect.rewrittenBetween)}`,
    );
  }
  const backendSrc = v.observed['backend']?.src ?? null;
  if (backendSrc !== expect.backendSrc)
    out.push(
      `backend observed src ${backendSrc ?? 'none'}, expected ${expect.backendSrc ?? 'none'}`,
    );
  if (expect.sportChanges === true) {
    const a = v.observed['egress']?.sport;
    const b = v.observed['backend']?.sport;
    if (a === undefined || b === undefined || a === b)
      out.push(`source port did not change between egress (${a ?? '?'}) and backend (${b ?? '?'})`);
  }
  out.push(...outerMismatches(expect, v));
  return out;
}

/** How the outer connection's finding differs from what `expect` asks of it (if anything). */
function outerMismatches(expect: Expectation, v: LabVerdict): string[] {
  const out: string[] = [];
  if (expect.outerSrc !== undefined && v.outer?.src !== expect.outerSrc)
    out.push(`outer source ${v.outer?.src ?? 'not reported'}, expected ${expect.outerSrc}`);
  if (expect.outerClass !== undefined && v.outer?.class !== expect.outerClass)
    out.push(`outer class ${v.outer?.class ?? 'not reported'}, expected ${expect.outerClass}`);
  return out;
}

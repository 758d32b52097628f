/** The shapes of the reliability run: its rows, scenarios and results (reliability-results.json). */

/** One line of a scenario's table. */
export interface Row {
  measured: string;
  figure: string;
  target: string;
  /** null: a figure without a target (context for the others). */
  met: boolean | null;
}

export interface ScenarioResult {
  id: ScenarioId;
  title: string;
  /** How the scenario was run (counts, durations), one sentence. */
  setup: string;
  rows: Row[];
  /** What a reader needs to interpret the rows: defects found, caveats. */
  notes: string[];
  durationS: number;
  /** The scenario could not run to its end: why (its rows are what was measured before). */
  error?: string;
  /** Set when it did not run (no root for a tmpfs). */
  skipped?: string;
}

export const SCENARIOS = [
  'load',
  'captures',
  'collector-kill',
  'agent-kill',
  'disk-full',
  'corrupt',
  'fuzz',
  'healthz',
] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

export interface Machine {
  nproc: number;
  cpu: string;
  memGiB: number;
  kernel: string;
  node: string;
  /** The filesystem of the data directories (the temp dir), as /proc/mounts names it. */
  dataFs: string;
  loadBefore: string;
  loadAfter?: string;
}

export interface ReliabilityResults {
  command: string;
  quick: boolean;
  date: string;
  commit: string;
  machine: Machine;
  scenarios: ScenarioResult[];
  totalS: number;
}

/** What a scenario fills in as it runs (kept when it fails half-way). */
export type ScenarioOut = Pick<ScenarioResult, 'title' | 'setup' | 'rows' | 'notes' | 'skipped'>;

/** What every scenario gets. */
export interface Ctx {
  quick: boolean;
  /** Running as root (a tmpfs can be mounted). */
  root: boolean;
  /** Mutated frames of the fuzz scenario, and its time cap. */
  fuzzFrames: number;
  fuzzSeconds: number;
  log(s: string): void;
}

/** A row whose figure meets its target when `met` holds. */
export function row(measured: string, figure: string, target: string, met: boolean | null): Row {
  return { measured, figure, target, met };
}

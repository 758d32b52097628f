/**
 * The command that repeats an analysis or a capture, built from what was actually given: every
 * point, `--drops`, `--inventory`, `--client`/`--dst` and `--doctor` of `hoptrace analyze`, and
 * every flag of `hoptrace capture` that shapes the capture. What a command line cannot say (a
 * per-point filter, a setting only the API takes) is a note beside it, never silently dropped.
 * Pure: paths and URLs are passed in as the shell resolved them.
 */
import { hostPort } from '../../common/endpoint';

/** A command to run again: its words, the same as one shell line, and what it cannot carry. */
export interface ReproduceCommand {
  argv: string[];
  command: string;
  notes: string[];
}

/**
 * A word as POSIX sh reads it back unchanged: bare when safe, else in single quotes (brackets
 * too: `[fd00::5]` is a glob pattern to the shell).
 */
export function shellQuote(s: string): string {
  if (s === '') return "''";
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** `argv` as one shell line. */
export function commandLine(argv: readonly string[]): string {
  return argv.map(shellQuote).join(' ');
}

/** The request selector as given (`--client`, `--dst IP[:PORT]`). */
export interface SelectorArgs {
  client?: string | undefined;
  dst?: string | undefined;
  dport?: number | undefined;
}

function selectorArgs(sel: SelectorArgs | undefined): string[] {
  const out: string[] = [];
  if (sel?.client !== undefined) out.push('--client', sel.client);
  if (sel?.dst !== undefined)
    out.push(
      '--dst',
      sel.dport === undefined
        ? sel.dst.includes(':')
          ? `[${sel.dst}]`
          : sel.dst
        : hostPort(sel.dst, sel.dport),
    );
  return out;
}

/** What `hoptrace analyze` was given, paths as the shell resolved them. */
export interface AnalyzeCommandSpec {
  points: readonly { name: string; file: string }[];
  /** `--drops NAME=N`, in the order given. */
  drops?: readonly { point: string; count: number }[] | undefined;
  /** The inventory file to name (`--report-dir`'s inventory.json: the inventory as used). */
  inventory?: string | undefined;
  selector?: SelectorArgs | undefined;
  /** `--doctor FILE`. */
  doctor?: string | undefined;
}

/** `hoptrace analyze --point … [--drops …] [--inventory …] [--client …] [--dst …] [--doctor …]` */
export function analyzeCommand(spec: AnalyzeCommandSpec): ReproduceCommand {
  const argv = ['hoptrace', 'analyze'];
  for (const p of spec.points) argv.push('--point', `${p.name}=${p.file}`);
  for (const d of spec.drops ?? []) argv.push('--drops', `${d.point}=${d.count}`);
  if (spec.inventory !== undefined) argv.push('--inventory', spec.inventory);
  argv.push(...selectorArgs(spec.selector));
  if (spec.doctor !== undefined) argv.push('--doctor', spec.doctor);
  const notes: string[] = [];
  if (spec.points.some((p) => p.file === '-'))
    notes.push('a point was read from standard input (-): give it the same bytes again');
  return { argv, command: commandLine(argv), notes };
}

/** What a live capture was asked for (the collector's validated POST /v1/captures). */
export interface CaptureCommandSpec {
  /** The collector's URL, or null when it listens on every address (no one URL to name). */
  collector: string | null;
  points: readonly {
    name: string;
    target: string;
    iface: string;
    node?: string | undefined;
    filter?: string | undefined;
  }[];
  client?: string | undefined;
  dst?: string | undefined;
  dport?: number | undefined;
  timeoutMs: number;
  settleMs: number;
  stopOnFirstMatch: boolean;
  /** An inventory was given with the capture (it is in report.json, `capture.inventoryGiven`). */
  inventoryGiven: boolean;
  /** The capture kept the payload in evidence.pcapng (`--evidence-payload`). */
  evidencePayload?: boolean | undefined;
  /** The agents sent every packet as an event (`--per-packet`). */
  perPacket?: boolean | undefined;
  /** Doctor's checks ran at the end with this tunnel range (`--doctor-tunnel-range`). */
  doctorTunnelRange?: string | undefined;
}

/** `NAME=[NODE/]TARGET:IFACE` as `hoptrace capture --point` parses it (IPv6 in brackets). */
function pointArg(p: CaptureCommandSpec['points'][number]): string {
  const target = p.target.includes(':') ? `[${p.target}]` : p.target;
  return `${p.name}=${p.node === undefined ? target : `${p.node}/${target}`}:${p.iface}`;
}

/**
 * `hoptrace capture --point … --collector URL --token-file TOKEN_FILE [--client …] [--dst …]
 * [--filter …] [--inventory INVENTORY_FILE] --timeout …ms --settle …ms [--evidence-payload]
 * [--per-packet] [--doctor-tunnel-range CIDR]`. The points come first
 * (the order of the path); TOKEN_FILE is a placeholder: a report never holds a token.
 */
export function captureCommand(spec: CaptureCommandSpec): ReproduceCommand {
  const argv = ['hoptrace', 'capture'];
  for (const p of spec.points) argv.push('--point', pointArg(p));
  argv.push('--collector', spec.collector ?? 'COLLECTOR_URL', '--token-file', 'TOKEN_FILE');
  argv.push(...selectorArgs(spec));
  const notes = ['TOKEN_FILE: a file holding the collector API token (never written in a report)'];
  if (spec.collector === null)
    notes.push(
      'COLLECTOR_URL: the URL you reach the collector at (it listens on every address, so it cannot name one)',
    );
  const filters = [...new Set(spec.points.map((p) => p.filter ?? ''))];
  const [only] = filters;
  if (filters.length === 1 && only !== undefined && only !== '') argv.push('--filter', only);
  else if (filters.length > 1)
    notes.push(
      `the points had different filters (${spec.points.map((p) => `${p.name}: ${p.filter ?? 'none'}`).join('; ')}); ` +
        '`--filter` sets one for every point: give per-point filters in POST /v1/captures (report.json `capture.request`)',
    );
  if (spec.inventoryGiven) {
    argv.push('--inventory', 'INVENTORY_FILE');
    notes.push(
      'INVENTORY_FILE: the inventory given with the capture, saved as JSON from report.json `capture.inventoryGiven`',
    );
  }
  argv.push('--timeout', `${spec.timeoutMs}ms`, '--settle', `${spec.settleMs}ms`);
  if (spec.evidencePayload === true) argv.push('--evidence-payload');
  if (spec.perPacket === true) argv.push('--per-packet');
  if (spec.doctorTunnelRange !== undefined)
    argv.push('--doctor-tunnel-range', spec.doctorTunnelRange);
  if (!spec.stopOnFirstMatch)
    notes.push(
      'the capture ran with stopOnFirstMatch: false, which only POST /v1/captures takes (report.json `capture.request`)',
    );
  return { argv, command: commandLine(argv), notes };
}

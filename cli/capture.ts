/**
 * `hoptrace capture`: arm a live three-point capture on the collector, show progress while waiting
 * for the request, print the verdict and where the report is.
 *
 * Exit codes: 0 resolved; 3 the capture ended without resolving (timeout, failed, cancelled; the
 * verdict printed says what is missing); 1 an error (bad flags, collector unreachable, token refused).
 */
import { isIP } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { loadToken } from '../common/auth';
import { parseCidr } from '../common/cidr';
import { HoptraceError } from '../common/errors';
import { readInventoryFile } from '../common/inventory-file';
import { renderVerdictText } from '../core/report/report';
import {
  FINAL_STATES,
  isValidTarget,
  MAX_CAPTURE_TIMEOUT_MS,
  MIN_CAPTURE_TIMEOUT_MS,
  parsePodTarget,
  type CaptureView,
  type PointSpec,
} from '../collector';
import { canonicalIP } from '../common/address';
import { parseDstArg } from './analyze-args';
import { parseCommandLine, parseDuration } from './args';

export { parseDuration } from './args';
import { CollectorClient, NOT_HOPTRACE, type CollectorLimits } from './collector-client';
import { ANALYSIS, CAPTURE_VIEW } from './collector-replies';
import { ofId } from './reply-shapes';
import { EXIT } from './exit-codes';

export const USAGE =
  'hoptrace capture --collector URL --point NAME=[NODE/]TARGET:IFACE ... [--client IP] [--dst IP[:PORT]] [--timeout 30s] [--settle 2s] [--filter EXPR] [--inventory FILE] [--evidence-payload] [--per-packet] [--doctor-tunnel-range CIDR] [--json] [--token-file FILE]';

const FINAL = new Set<string>(FINAL_STATES);
/** How long polls may fail as a restarting collector's do before the capture is given up. */
const RESTART_GRACE_MS = 15_000;
/**
 * How long past the capture's timeout a collector may take to end it: a restart's grace (the
 * collector waits for its agents' resent events, up to its settle time or 15 s) and the final
 * analysis of a large capture. Past it the collector is not ending the capture as it must.
 */
const FINISH_GRACE_MS = 75_000;
/** The longest capture filter the collector takes (collector/capture-request.ts). */
const MAX_FILTER_CHARS = 4096;

/**
 * Parses `NAME=[NODE/]TARGET:IFACE`. TARGET is an IPv4 address, `[IPv6]`, a namespace path or a
 * PID; NODE names the agent's node (`vpn-node//run/netns/x`, `vpn-node/1234`).
 */
export function parseCapturePoint(value: string): PointSpec {
  const fail = (detail: string): HoptraceError =>
    new HoptraceError('CLI_BAD_POINT', `'${value}': ${detail}`, {
      where: '--point',
      hint: 'NAME=[NODE/]TARGET:IFACE, e.g. decap=10.244.1.10:tun0, egress=vpn-node//run/netns/vpn:eth0, backend=[fd00::5]:eth0',
    });
  const eq = value.indexOf('=');
  const name = value.slice(0, eq);
  if (eq <= 0 || !/^[a-z][a-z0-9-]{0,31}$/.test(name))
    throw fail('NAME must be lower-case letters, digits and dashes');
  const spec = value.slice(eq + 1);
  const colon = spec.lastIndexOf(':');
  if (colon < 0) throw fail('no :IFACE');
  const iface = spec.slice(colon + 1);
  let rest = spec.slice(0, colon);
  if (!/^[A-Za-z0-9_.@-]{1,15}$/.test(iface)) throw fail(`'${iface}' is not an interface name`);
  let node: string | undefined;
  let target: string;
  const bracket = /^(?:([^/[\]]+)\/)?\[([^\]]+)\]$/.exec(rest);
  if (bracket !== null) {
    node = bracket[1];
    target = bracket[2] ?? '';
    if (isIP(target) !== 6) throw fail(`'${target}' in brackets is not an IPv6 address`);
  } else {
    // `vpn/wg-0` is a namespace/pod target (the collector resolves it), not NODE/TARGET.
    if (!rest.startsWith('/') && rest.includes('/') && parsePodTarget(rest) === null) {
      const slash = rest.indexOf('/');
      node = rest.slice(0, slash);
      rest = rest.slice(slash + 1);
    }
    target = rest;
    if (target.includes(':')) throw fail('write an IPv6 target in brackets: [fd00::5]:eth0');
  }
  if (!isValidTarget(target))
    throw fail(`'${target}' is not a pod IP, namespace path, PID or namespace/pod`);
  const p: PointSpec = { name, target, iface };
  if (node !== undefined) {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(node)) throw fail(`'${node}' is not a node name`);
    p.node = node;
  }
  return p;
}

/** The options of a capture request besides its points, as `hoptrace capture` takes them. */
export interface CaptureOptionValues {
  client?: string | undefined;
  dst?: string | undefined;
  timeout?: string | undefined;
  settle?: string | undefined;
  /** Checked only (each point carries it). */
  filter?: string | undefined;
  inventory?: string | undefined;
  'evidence-payload'?: boolean | undefined;
  'per-packet'?: boolean | undefined;
  'doctor-tunnel-range'?: string | undefined;
}

/**
 * The request body's options (all but `points`), every one checked: CLI_USAGE here, before any
 * request — also for `kubectl hoptrace capture`, which calls this before it asks the API server.
 * Timeout and settle within what the collector takes (API_BAD_REQUEST otherwise, after the fact).
 */
export function captureOptions(
  values: CaptureOptionValues,
  usageText: string,
): Record<string, unknown> {
  const usage = (detail: string, where: string): HoptraceError =>
    new HoptraceError('CLI_USAGE', detail, { where, hint: `usage: ${usageText}` });
  const body: Record<string, unknown> = {};
  if (values.client !== undefined) {
    const client = canonicalIP(values.client);
    if (client === null) throw usage(`'${values.client}' is not an IP address`, '--client');
    body['client'] = client;
  }
  if (values.dst !== undefined) {
    const d = parseDstArg(values.dst);
    body['dst'] = d.dst;
    if (d.dport !== undefined) body['dport'] = d.dport;
  }
  const within = (flag: string, text: string, min: number): number => {
    const ms = parseDuration(text, flag);
    if (ms < min || ms > MAX_CAPTURE_TIMEOUT_MS)
      throw usage(
        `'${text}' is out of range: from ${min === 0 ? '0s' : `${min}ms`} to ${MAX_CAPTURE_TIMEOUT_MS / 60_000}m`,
        flag,
      );
    return ms;
  };
  body['timeoutMs'] = within('--timeout', values.timeout ?? '30s', MIN_CAPTURE_TIMEOUT_MS);
  if (values.settle !== undefined) body['settleMs'] = within('--settle', values.settle, 0);
  if (values.filter !== undefined && values.filter.length > MAX_FILTER_CHARS)
    throw usage(`the filter is longer than ${MAX_FILTER_CHARS} characters`, '--filter');
  if (values.inventory !== undefined) body['inventory'] = readInventoryFile(values.inventory);
  // Whole frames retained for evidence.pcapng (payload kept), not the first 256 bytes.
  if (values['evidence-payload'] === true) body['evidencePayload'] = true;
  if (values['per-packet'] === true) body['perPacket'] = true;
  // Doctor's checks through the agents when the capture ends, its findings in the report.
  const range = values['doctor-tunnel-range'];
  if (range !== undefined) {
    if (parseCidr(range) === null)
      throw usage(`'${range}' is not an IPv4 or IPv6 CIDR`, '--doctor-tunnel-range');
    body['doctor'] = { tunnelRange: range };
  }
  return body;
}

export interface CaptureDeps {
  /** Progress and notices (stderr). */
  err?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  fetch?: typeof fetch;
  /** Each request's deadline and reply cap (default DEFAULT_COLLECTOR_LIMITS). */
  limits?: CollectorLimits;
  pollMs?: number;
  /** How long past `--timeout` (and `--settle`) to wait for a final state (default 75 s). */
  finishGraceMs?: number;
  /** Told the capture's last view once it is final (kubectl hoptrace then downloads its bundle). */
  onFinal?: (view: CaptureView) => void;
}

/** One line per point whose `namespace/pod` target came from an old pod list (the API failed). */
export function targetNoteLines(v: Pick<CaptureView, 'points'>): string[] {
  return v.points.flatMap((p) =>
    p.targetNote === undefined
      ? []
      : [`  ${p.name}: target ${p.target} taken from an old pod list: ${p.targetNote}`],
  );
}

function progressLine(v: CaptureView, elapsedMs: number): string {
  const pts = v.points
    .map((p) => {
      const drops = p.kernelDrops === null ? 'unknown' : String(p.kernelDrops);
      const extra =
        (p.lost > 0 ? ` lost ${p.lost}` : '') +
        (p.queueDrops > 0 ? ` queue-drops ${p.queueDrops}` : '');
      const err = p.error ? ` ${p.error.code}` : '';
      return `${p.name}: ${p.state} ${p.packets} pkts drops ${drops}${extra}${err}`;
    })
    .join(' | ');
  const req = v.progress.requestSeen
    ? `request seen (${v.progress.layer ?? '?'})`
    : 'waiting for the request';
  return `[${(elapsedMs / 1000).toFixed(1)}s] ${v.state}, ${req} — ${pts}`;
}

/** A capture the collector keeps live past its timeout and every grace: it is not ending it. */
function notEnding(
  v: CaptureView,
  base: string,
  elapsedMs: number,
  timeoutMs: number,
): HoptraceError {
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  return new HoptraceError(
    'COLLECTOR_BAD_RESPONSE',
    `capture ${v.id} is still ${v.state} ${s(elapsedMs)} after it was armed with a ${s(timeoutMs)} timeout: a hoptrace collector ends a capture at its timeout`,
    {
      where: `GET ${new URL(`/v1/captures/${v.id}`, base).toString()}`,
      hint: `${NOT_HOPTRACE}; it may still end: GET /v1/captures/${v.id}`,
    },
  );
}

export async function runCapture(
  argv: string[],
  out: (line: string) => void,
  deps: CaptureDeps = {},
): Promise<number> {
  const err = deps.err ?? ((l: string) => process.stderr.write(l + '\n'));
  const { values, positionals } = parseCommandLine('capture', USAGE, argv, {
    collector: { type: 'string' },
    point: { type: 'string', multiple: true },
    client: { type: 'string' },
    dst: { type: 'string' },
    timeout: { type: 'string' },
    settle: { type: 'string' },
    filter: { type: 'string' },
    inventory: { type: 'string' },
    'evidence-payload': { type: 'boolean' },
    'per-packet': { type: 'boolean' },
    'doctor-tunnel-range': { type: 'string' },
    json: { type: 'boolean' },
    'token-file': { type: 'string' },
  });
  const usage = (detail: string, where = 'hoptrace capture'): HoptraceError =>
    new HoptraceError('CLI_USAGE', detail, { where, hint: `usage: ${USAGE}` });
  if (positionals.length > 0) throw usage(`unexpected argument '${String(positionals[0])}'`);
  const base = values.collector ?? 'http://127.0.0.1:7070';
  try {
    const u = new URL(base);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw usage(`'${base}' is not an http(s) URL`, '--collector');
  }
  const points = (values.point ?? []).map(parseCapturePoint);
  if (points.length < 2) throw usage('give at least two --point, in path order');
  const names = new Set(points.map((p) => p.name));
  if (names.size !== points.length)
    throw new HoptraceError('CLI_BAD_POINT', 'a point name is given twice', { where: '--point' });
  if (values.filter !== undefined) for (const p of points) p.filter = values.filter;
  const body: Record<string, unknown> = { points, ...captureOptions(values, USAGE) };
  const env = deps.env ?? process.env;
  const tokenFile = values['token-file'];
  const token = loadToken(tokenFile === undefined ? { env } : { file: tokenFile, env });

  const client = new CollectorClient(base, token, deps.fetch ?? fetch, deps.limits);
  let view = await client.json('POST', '/v1/captures', CAPTURE_VIEW, body);
  const id = view.id;
  const started = Date.now();
  // The collector ends the capture at its timeout; a reply that stays live for ever ends here.
  const timeoutMs = Number(body['timeoutMs']);
  const waitMs =
    timeoutMs + Number(body['settleMs'] ?? 0) + (deps.finishGraceMs ?? FINISH_GRACE_MS);
  err(`capture ${id} armed on ${base}`);
  for (const line of targetNoteLines(view)) err(line);
  let last = '';
  let failures = 0;
  let lastAnswer = Date.now();
  const pollMs = deps.pollMs ?? 200;
  while (!FINAL.has(view.state)) {
    const line = progressLine(view, Date.now() - started);
    if (line.replace(/^\[[^\]]*\] /, '') !== last.replace(/^\[[^\]]*\] /, '')) err(line);
    last = line;
    const elapsed = Date.now() - started;
    if (elapsed > waitMs) throw notEnding(view, base, elapsed, timeoutMs);
    await delay(pollMs);
    try {
      view = await client.json('GET', `/v1/captures/${id}`, ofId(CAPTURE_VIEW, id));
      failures = 0;
      lastAnswer = Date.now();
    } catch (e) {
      // A collector restart is survivable: it resumes the session; give it a few seconds — by the
      // clock too, so that requests that each wait out their deadline do not add up to minutes.
      if (
        !(e instanceof HoptraceError) ||
        e.code !== 'COLLECTOR_UNREACHABLE' ||
        ++failures > 25 ||
        Date.now() - lastAnswer > RESTART_GRACE_MS
      )
        throw e;
    }
  }
  err(progressLine(view, Date.now() - started));
  deps.onFinal?.(view);
  const result =
    view.reportUrls === null ? null : await client.json('GET', view.reportUrls.json, ANALYSIS);
  if (values.json === true) {
    out(JSON.stringify({ capture: view, analysis: result }));
  } else {
    out(
      `capture ${view.id}: ${view.state}${view.finalReason === null ? '' : ` (${view.finalReason})`}`,
    );
    if (result !== null) out(renderVerdictText(result).trimEnd());
    for (const p of view.points) {
      if (p.error) out(`  point ${p.name}: ${p.error.code}: ${p.error.message}`);
    }
    if (view.reportUrls !== null) {
      out(
        `report: ${new URL(view.reportUrls.markdown, base).toString()} (JSON: ${new URL(view.reportUrls.json, base).toString()})`,
      );
    }
    // report.json's command that repeats this capture (a collector older than report.json
    // evidence has none).
    const again = (result as { reproduce?: { command?: unknown } } | null)?.reproduce?.command;
    if (typeof again === 'string') out(`again:  ${again}`);
  }
  return view.state === 'resolved' ? EXIT.ok : EXIT.inconclusive;
}

/**
 * `hoptrace repro`: probe through the VPN while its pod is deleted and rescheduled, print the
 * per-probe timeline and whether the path came back.
 *
 *   hoptrace repro --lab [--only NAME,...]      the lab's three scenarios (root; namespaces only)
 *   hoptrace repro --collector URL --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE
 *                  --decap-iface wg0 --egress-iface eth0 --client IP --url http://BACKEND/...
 *                  [--delete-after N] [--interval 1s] [--count 20] [--max-time 2s] [--token-file F]
 *
 * The cluster form runs on the VPN client machine (the client side of the tunnel): it creates the
 * repro on the collector (which selects the VPN pods through the Kubernetes API), sends one HTTP
 * probe every interval from its own local port with `hoptrace-probe-<id>` in the path, posts each
 * probe, asks the collector to delete the attached pod after N probes (the collector follows the
 * replacement), finishes after `count` probes and prints the same timeline as the lab.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { isIP } from 'node:net';
import type { ParseArgsConfig } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { loadToken } from '../common/auth';
import { HoptraceError } from '../common/errors';
import type { ReproView } from '../collector';
import { assertLabPrerequisites } from '../lab/prereq';
import { printLabRepros } from '../lab/repro-print';
import { MAX_REPRO_PROBES } from '../core/repro/repro-core';
import { ReproProgress, reproEndLines } from '../core/repro/repro-progress';
import { parseCommandLine } from './args';
import { CollectorClient, type CollectorLimits } from './collector-client';
import { REPRO_VIEW } from './collector-replies';
import { ofId } from './reply-shapes';
import { parseDuration } from './capture';

export const USAGE =
  'hoptrace repro --lab [--only NAME[,NAME]] | hoptrace repro --collector URL --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE --decap-iface IFACE --egress-iface IFACE --client IP --url http://BACKEND/PATH [--delete-after N] [--interval 1s] [--count 20] [--max-time 2s] [--token-file F]';

/** What the cluster form needs (parsed from the flags; tests build it directly). */
export interface ClusterReproOptions {
  collector: string;
  token: string;
  workload: { namespace: string; labelSelector: string };
  backend: { target: string; iface: string };
  decapIface: string;
  egressIface: string;
  /** This machine's tunnel address (the probes' source at the decap point). */
  client: string;
  /** The probes go to this URL with `/hoptrace-probe-<id>` appended to its path. */
  url: string;
  /** Delete the attached pod right after this probe (1-based); null: never. */
  deleteAfter: number | null;
  intervalMs: number;
  count: number;
  /** Per-probe timeout. */
  maxTimeMs: number;
  /** How long to wait for the captures to report `capturing` before probing anyway. */
  armWaitMs?: number;
  /** Wait after the last probe for its events to arrive. */
  settleMs?: number;
  /** How requests reach the collector (kubectl hoptrace: through the API server's port-forward). */
  fetch?: typeof fetch;
  /** Each request's deadline and reply cap (default DEFAULT_COLLECTOR_LIMITS). */
  limits?: CollectorLimits;
}

/** What one probe got: its HTTP status, or its error (with the errno code when there is one). */
export interface ProbeOutcome {
  ok: boolean;
  httpCode: string | null;
  error: string | null;
  errorCode?: string | null;
}

/** One probe: a fresh connection from `sport`, its HTTP status or error. */
export async function sendProbe(url: URL, sport: number, timeoutMs: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: ProbeOutcome): void => {
      if (done) return;
      done = true;
      resolve(v);
    };
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port === '' ? 80 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        localPort: sport,
        agent: false,
        headers: { connection: 'close', 'user-agent': 'hoptrace-repro' },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const code = String(res.statusCode ?? 0);
          finish({ ok: code === '200', httpCode: code, error: null });
        });
        res.on('error', (e) => {
          finish({ ok: false, httpCode: String(res.statusCode ?? 0), error: e.message });
        });
      },
    );
    req.setTimeout(timeoutMs, () => {
      req.destroy(new Error(`no answer within ${timeoutMs} ms`));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      finish({ ok: false, httpCode: null, error: e.message, errorCode: e.code ?? null });
    });
    req.end();
  });
}

/**
 * Local ports for the probes: each probe is a fresh connection from its own port, so the report can
 * name it by its tuple. The ports are chosen on the user's machine, where another socket may hold
 * one (the base is random within 41000–60999, inside Linux's ephemeral range): a port refused
 * with EADDRINUSE is skipped, never reported as the path failing.
 */
export class ProbePorts {
  private next: number;
  constructor(base = 41000 + Math.floor(Math.random() * 20000)) {
    this.next = base;
  }
  take(): number {
    this.next = this.next >= 60999 ? 41000 : this.next + 1;
    return this.next;
  }
}

/** Tries at most this many ports for one probe before its error is the port's. */
const PORT_TRIES = 8;

/** One probe from the first port of `ports` this machine lets it bind; `sport` is the one used. */
export async function sendProbeFromFreePort(
  url: URL,
  ports: ProbePorts,
  timeoutMs: number,
): Promise<Omit<ProbeOutcome, 'errorCode'> & { sport: number }> {
  for (let i = 1; ; i++) {
    const sport = ports.take();
    const res = await sendProbe(url, sport, timeoutMs);
    if (res.errorCode !== 'EADDRINUSE' || i >= PORT_TRIES)
      return { sport, ok: res.ok, httpCode: res.httpCode, error: res.error };
  }
}

/** The probe URL: `base`'s path with `hoptrace-probe-<id>` appended as the last segment. */
export function probeUrl(base: string, id: string): URL {
  const u = new URL(base);
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/hoptrace-probe-${id}`;
  return u;
}

/** One call of /v1/repros…: its reply a repro view, of repro `id` once there is one. */
function api(
  o: ClusterReproOptions,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  id?: string,
): Promise<ReproView> {
  return new CollectorClient(o.collector, o.token, o.fetch, o.limits).json(
    method,
    path,
    id === undefined ? REPRO_VIEW : ofId(REPRO_VIEW, id),
    body,
  );
}

const capturing = (v: ReproView): boolean =>
  v.backend.state === 'capturing' &&
  (v.attachments.at(-1)?.points.every((p) => p.state === 'capturing') ?? false);

/** The cluster form: create, probe, delete after N, finish; resolves with the final view. */
export async function runClusterRepro(
  o: ClusterReproOptions,
  out: (line: string) => void,
): Promise<ReproView> {
  const created = await api(o, 'POST', '/v1/repros', {
    workload: { kubernetes: o.workload },
    decapIface: o.decapIface,
    egressIface: o.egressIface,
    backend: o.backend,
    client: o.client,
    timeoutMs: o.count * (o.intervalMs + o.maxTimeMs) + 120_000,
  });
  const id = created.id;
  const pod = created.attachments.at(-1)?.pod;
  out(`repro ${id}: attached to ${pod?.name ?? '?'} (${pod?.ip ?? '?'}) on ${pod?.node ?? '?'}`);
  const armUntil = Date.now() + (o.armWaitMs ?? 15_000);
  let v = created;
  while (!capturing(v) && Date.now() < armUntil) {
    await delay(250);
    v = await api(o, 'GET', `/v1/repros/${id}`, undefined, id);
  }
  if (!capturing(v)) {
    const states = [v.backend, ...(v.attachments.at(-1)?.points ?? [])]
      .map((p) => `${p.name}=${p.state}${p.error ? ` (${p.error.code})` : ''}`)
      .join(', ');
    out(`note: not every capture is capturing yet (${states}); probing anyway`);
  }
  const run = randomBytes(3).toString('hex');
  const ports = new ProbePorts();
  const progress = new ReproProgress();
  for (let n = 1; n <= o.count; n++) {
    const t0 = Date.now();
    const probeId = `r${run}n${String(n).padStart(2, '0')}`;
    const { sport, ...res } = await sendProbeFromFreePort(
      probeUrl(o.url, probeId),
      ports,
      o.maxTimeMs,
    );
    await api(
      o,
      'POST',
      `/v1/repros/${id}/probes`,
      { probeId, sport, startedAtMs: t0, endedAtMs: Date.now(), ...res },
      id,
    );
    if (n === o.deleteAfter) {
      const d = await api(o, 'POST', `/v1/repros/${id}/delete`, undefined, id);
      const mark = d.marks.filter((m) => m.kind === 'deleted').at(-1);
      out(`after probe ${n}: ${mark?.detail ?? 'pod deleted'}`);
    }
    // Each probe's row once the next one was sent: its packets had an interval to arrive.
    const now = await api(o, 'GET', `/v1/repros/${id}`, undefined, id);
    for (const line of progress.update(now, n - 1)) out(line);
    const wait = t0 + o.intervalMs - Date.now();
    if (wait > 0) await delay(wait);
  }
  // Events of the last probes are still on their way from the agents (batching, FIN/ACK).
  await delay(o.settleMs ?? 1000);
  const view = await api(o, 'POST', `/v1/repros/${id}/finish`, {}, id);
  for (const line of reproEndLines(progress, view)) out(line);
  return view;
}

function positiveInt(value: string | undefined, flag: string, dflt: number | null): number | null {
  if (value === undefined) return dflt;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new HoptraceError('CLI_USAGE', `'${value}' is not a positive integer`, { where: flag });
  return n;
}

/** What the probing takes, from the flags both cluster forms share (hoptrace and kubectl hoptrace). */
export type ProbePlan = Pick<
  ClusterReproOptions,
  | 'decapIface'
  | 'egressIface'
  | 'client'
  | 'url'
  | 'deleteAfter'
  | 'intervalMs'
  | 'count'
  | 'maxTimeMs'
>;

export const PROBE_FLAGS = ['decap-iface', 'egress-iface', 'client', 'url'] as const;

/** The flags of both cluster forms: the workload, the backend and the probing (parseProbePlan). */
export const PROBE_OPTIONS = {
  'vpn-workload': { type: 'string' },
  backend: { type: 'string' },
  'decap-iface': { type: 'string' },
  'egress-iface': { type: 'string' },
  client: { type: 'string' },
  url: { type: 'string' },
  'delete-after': { type: 'string' },
  interval: { type: 'string' },
  count: { type: 'string' },
  'max-time': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/**
 * CLI_USAGE naming every flag of `need` that is missing, before anything is asked of a collector
 * or an API server.
 */
export function requireFlags(
  values: Record<string, string | boolean | undefined>,
  need: readonly string[],
  where: string,
  usage: string,
  lead = '',
): void {
  const missing = need.filter((k) => typeof values[k] !== 'string');
  if (missing.length > 0)
    throw new HoptraceError(
      'CLI_USAGE',
      `give ${lead}${need.map((k) => `--${k}`).join(', ')} (missing: ${missing.map((k) => `--${k}`).join(', ')})`,
      { where, hint: `usage: ${usage}` },
    );
}

/** The probing flags (PROBE_FLAGS given, see requireFlags) checked and turned into a plan. */
export function parseProbePlan(values: Record<string, string | boolean | undefined>): ProbePlan {
  const s = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === 'string' ? v : undefined;
  };
  const url = s('url') ?? '';
  if (!/^http:\/\//.test(url) || !URL.canParse(url))
    throw new HoptraceError('CLI_USAGE', `'${url}' is not an http:// URL`, { where: '--url' });
  const client = s('client') ?? '';
  if (isIP(client) === 0)
    throw new HoptraceError('CLI_USAGE', `'${client}' is not an IP address`, {
      where: '--client',
      hint: "this machine's address inside the tunnel, e.g. 10.90.0.42",
    });
  const count = positiveInt(s('count'), '--count', 20) ?? 20;
  if (count > MAX_REPRO_PROBES)
    throw new HoptraceError(
      'CLI_USAGE',
      `--count ${count}: a collector keeps at most ${MAX_REPRO_PROBES} probes of one repro`,
      { where: '--count', hint: 'run several repros of fewer probes' },
    );
  const deleteAfter = positiveInt(s('delete-after'), '--delete-after', null);
  if (deleteAfter !== null && deleteAfter >= count)
    throw new HoptraceError('CLI_USAGE', '--delete-after must be below --count', {
      where: '--delete-after',
    });
  return {
    decapIface: s('decap-iface') ?? '',
    egressIface: s('egress-iface') ?? '',
    client,
    url,
    deleteAfter,
    intervalMs: parseDuration(s('interval') ?? '1s', '--interval'),
    count,
    maxTimeMs: parseDuration(s('max-time') ?? '2s', '--max-time'),
  };
}

/** Parses the cluster form's flags (token from --token-file or HOPTRACE_TOKEN). */
export function parseClusterRepro(
  values: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): ClusterReproOptions {
  const s = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === 'string' ? v : undefined;
  };
  requireFlags(
    values,
    ['collector', 'vpn-workload', 'backend', ...PROBE_FLAGS],
    'hoptrace repro',
    USAGE,
    '--lab, or ',
  );
  const wl = /^([^/]+)\/(.+)$/.exec(s('vpn-workload') ?? '');
  if (wl === null)
    throw new HoptraceError(
      'CLI_USAGE',
      `'${s('vpn-workload') ?? ''}' is not NAMESPACE/LABELSELECTOR`,
      { where: '--vpn-workload', hint: 'e.g. vpn/app=wireguard' },
    );
  const be = /^(.+):([^:\]]+)$/.exec(s('backend') ?? '');
  if (be === null)
    throw new HoptraceError('CLI_USAGE', `'${s('backend') ?? ''}' is not TARGET:IFACE`, {
      where: '--backend',
      hint: 'e.g. 10.244.2.5:eth0 or web/web-1:eth0',
    });
  const plan = parseProbePlan(values);
  const tokenFile = s('token-file');
  return {
    collector: s('collector') ?? '',
    token: loadToken(tokenFile === undefined ? { env } : { file: tokenFile }),
    workload: { namespace: wl[1] ?? '', labelSelector: wl[2] ?? '' },
    backend: { target: (be[1] ?? '').replace(/^\[|\]$/g, ''), iface: be[2] ?? '' },
    ...plan,
  };
}

export async function runRepro(argv: string[], out: (line: string) => void): Promise<number> {
  const { values } = parseCommandLine('repro', USAGE, argv, {
    lab: { type: 'boolean' },
    only: { type: 'string' },
    collector: { type: 'string' },
    ...PROBE_OPTIONS,
    'token-file': { type: 'string' },
  });
  if (values.lab === true) {
    assertLabPrerequisites();
    const bad = await printLabRepros(out, values.only?.split(','));
    return bad === 0 ? 0 : 1;
  }
  await runClusterRepro(parseClusterRepro(values), out);
  return 0;
}

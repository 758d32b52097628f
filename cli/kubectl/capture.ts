/**
 * `kubectl hoptrace capture`: the three points as kubectl targets (targets.ts), then exactly
 * `hoptrace capture` (cli/capture.ts) against the collector pod through the port-forward, with the
 * token of its Secret; once the capture is final, its bundle into `./hoptrace-<id>/` (report.ts).
 * Exit codes as `hoptrace capture`: 0 resolved, 3 not resolved, 1 an error.
 */
import { resolve } from 'node:path';
import type { CaptureView } from '../../collector';
import { HoptraceError } from '../../common/errors';
import { captureOptions, parseDuration, runCapture } from '../capture';
import { linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';
import { downloadBundle, downloadedLines } from './bundle-download';
import { parseKubeTarget, resolveKubeTarget } from './targets';

export const USAGE =
  'kubectl hoptrace capture [--decap TARGET:IFACE] [--egress TARGET:IFACE] --backend TARGET:IFACE ' +
  '[--client IP] [--dst IP[:PORT]] [--timeout 30s] [--settle 2s] [--filter EXPR] ' +
  '[--evidence-payload] [--per-packet] [--doctor-tunnel-range CIDR] [--json] ' +
  `[--out DIR] [--no-download] [--evidence-wait 30s] ${KUBE_USAGE}`;

/** The points in path order: the flag, its point name. */
const POINTS = [
  ['decap', 'decap'],
  ['egress', 'egress'],
  ['backend', 'backend'],
] as const;

/** The command as typed, quoted for a shell where needed (the `again:` line). */
export function shellLine(argv: readonly string[]): string {
  return argv
    .map((a) => (/^[A-Za-z0-9_./:=@,+-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`))
    .join(' ');
}

export async function runKubeCapture(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, positionals, kube, namespace, hoptraceNamespace } = parseKubectlArgs(
    'capture',
    USAGE,
    argv,
    {
      decap: { type: 'string' },
      egress: { type: 'string' },
      backend: { type: 'string' },
      client: { type: 'string' },
      dst: { type: 'string' },
      timeout: { type: 'string' },
      settle: { type: 'string' },
      filter: { type: 'string' },
      json: { type: 'boolean' },
      out: { type: 'string' },
      'no-download': { type: 'boolean' },
      'evidence-wait': { type: 'string' },
      'evidence-payload': { type: 'boolean' },
      'per-packet': { type: 'boolean' },
      'doctor-tunnel-range': { type: 'string' },
    },
  );
  const usage = (detail: string): HoptraceError =>
    new HoptraceError('CLI_USAGE', detail, {
      where: 'kubectl hoptrace capture',
      hint: `usage: ${USAGE}`,
    });
  if (positionals.length > 0) throw usage(`unexpected argument '${String(positionals[0])}'`);
  if (values.backend === undefined) throw usage('give --backend TARGET:IFACE');
  if (values.decap === undefined && values.egress === undefined)
    throw usage('give --decap and/or --egress TARGET:IFACE (the VPN pod) besides --backend');
  // Every flag is checked here, before the API server is asked anything: a typo costs no
  // port-forward (hoptrace capture checks them again with the same function).
  const evidenceWaitMs = parseDuration(values['evidence-wait'] ?? '30s', '--evidence-wait');
  captureOptions(values, USAGE);
  const range = values['doctor-tunnel-range'];
  if (values.out === '')
    throw usage('--out: the path is empty (give the directory for the bundle, or . for this one)');
  // The targets' syntax (their namespace is filled in once the context's is known).
  for (const [flag] of POINTS) {
    const v = values[flag];
    if (v !== undefined) parseKubeTarget(`--${flag}`, v, namespace ?? 'default');
  }

  const cluster = await deps.connect(kube);
  const defaultNs = namespace ?? cluster.defaultNamespace;
  const given = POINTS.flatMap(([flag, name]) => {
    const v = values[flag];
    return v === undefined ? [] : [{ name, t: parseKubeTarget(`--${flag}`, v, defaultNs) }];
  });
  const link = await linkCollector(cluster, hoptraceNamespace);
  const pointArgs: string[] = [];
  for (const p of given) {
    const r = await resolveKubeTarget(cluster, p.t);
    if (r.note !== undefined) deps.err(r.note);
    pointArgs.push('--point', `${p.name}=${r.target}:${p.t.iface}`);
  }
  const pass = (flag: 'client' | 'dst' | 'timeout' | 'settle' | 'filter'): string[] =>
    values[flag] === undefined ? [] : [`--${flag}`, values[flag]];
  const captureArgv = [
    '--collector',
    link.base,
    ...pointArgs,
    ...pass('client'),
    ...pass('dst'),
    ...pass('timeout'),
    ...pass('settle'),
    ...pass('filter'),
    ...(values['evidence-payload'] === true ? ['--evidence-payload'] : []),
    ...(values['per-packet'] === true ? ['--per-packet'] : []),
    ...(range === undefined ? [] : ['--doctor-tunnel-range', range]),
    ...(values.json === true ? ['--json'] : []),
  ];

  let final: CaptureView | undefined;
  // hoptrace capture's lines, with the port-forward named instead of an unreachable in-cluster URL;
  // its report: line gives way to the downloaded bundle, its again: line to this command.
  const local = (l: string): string => l.split(link.base).join(link.label);
  const out = (l: string): void => {
    if (values.json === true) deps.out(l);
    else if (l.startsWith('again:  '))
      deps.out(`again:  kubectl hoptrace capture ${shellLine(argv)}`);
    else if (!l.startsWith('report: ')) deps.out(local(l));
  };
  const code = await runCapture(captureArgv, out, {
    err: (l) => {
      deps.err(local(l));
    },
    env: { HOPTRACE_TOKEN: link.token },
    fetch: link.fetch,
    limits: link.limits,
    ...(deps.pollMs === undefined ? {} : { pollMs: deps.pollMs }),
    onFinal: (v) => {
      final = v;
    },
  });
  if (final?.reportUrls != null && values['no-download'] !== true) {
    const dir = resolve(deps.cwd, values.out ?? `hoptrace-${final.id}`);
    const d = await downloadBundle(link.client, final.id, dir, {
      evidenceWaitMs,
      ...(deps.pollMs === undefined ? {} : { pollMs: deps.pollMs }),
    });
    // With --json, stdout stays one JSON object.
    for (const l of downloadedLines(d)) (values.json === true ? deps.err : deps.out)(l);
  }
  return code;
}

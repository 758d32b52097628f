/**
 * `hoptrace doctor`, local mode: the checks run on this machine, reading each namespace on the
 * path with nsenter (agent/doctor/read.ts), then assembled by the pure core/doctor/checks.ts. In the
 * lab every node is a namespace; on a real node give `/proc/1/ns/net` for the node itself and the
 * pod's `/proc/PID/ns/net`.
 *
 * Exit codes: 0 no error finding; 4 at least one error finding; 1 bad flags or a failed run.
 */
import { basename } from 'node:path';
import { isIPv4 } from 'node:net';
import { isIP } from '../common/cidr';
import { loadToken } from '../common/auth';
import { HoptraceError } from '../common/errors';
import type { DoctorTarget, NamespaceFacts } from '../common/wire';
import { namespaceInventory, readNamespaceFacts, runDeniedTest } from '../agent';
import { classifyDenied } from '../core/doctor/denied';
import { runDoctorChecks, type DeniedOutcome, type DoctorResult } from '../core/doctor/checks';
import { parseCommandLine } from './args';
import { CollectorClient } from './collector-client';
import {
  checkFamily,
  parseTunnelRange,
  postDoctor,
  printDoctor,
  type DoctorRequest,
} from './doctor-remote';

export const USAGE =
  'hoptrace doctor --collector URL --vpn POD_IP|NODE/PATH --backend POD_IP|NODE/PATH [--token-file F] [--tunnel-range CIDR] [--client IP] [--dst IP] [--json]\n       hoptrace doctor --netns vpn=PATH --netns vpn-node=PATH --netns backend-node=PATH [--netns backend=PATH] [--netns client=PATH] [--tunnel-range 10.90.0.0/24] [--client IP] [--dst IP] [--pod-cidr CIDR]... [--denied-source IP --target IP:PORT] [--known-netns GLOB] [--json]';

const ROLES = ['vpn', 'vpn-node', 'backend-node', 'backend', 'client'] as const;
type Role = (typeof ROLES)[number];

/** Options of a local doctor run. */
export interface LocalDoctorOptions {
  netns: Partial<Record<Role, string>>;
  /** IPv4 or IPv6: the routes and nat rules read are its family's; client and dst must match it. */
  tunnelRange: string;
  client?: string | undefined;
  dst?: string | undefined;
  podCidrs?: string[] | undefined;
  /** Named namespaces whose addresses count as live (default /run/netns/*, plus every process's). */
  knownNetns?: string | undefined;
  denied?: { source: string; target: { ip: string; port: number } } | undefined;
}

/** Runs the checks against namespace files on this machine. */
export async function runLocalDoctor(opts: LocalDoctorOptions): Promise<DoctorResult> {
  const { family, first } = parseTunnelRange(opts.tunnelRange);
  checkFamily('--client', opts.client, family);
  checkFamily('--dst', opts.dst, family);
  const client = opts.client ?? first;
  const nodeOf = (role: 'vpn-node' | 'backend-node'): string => {
    const p = opts.netns[role];
    return p === undefined ? role : basename(p) === 'net' ? role : basename(p);
  };
  const backendFacts =
    opts.netns.backend === undefined
      ? undefined
      : await readNamespaceFacts(
          { name: 'backend', target: opts.netns.backend, routeTo: [] },
          family,
          { node: nodeOf('backend-node') },
        );
  const dst = opts.dst ?? backendFacts?.addresses.find((a) => isIP(a) === family);
  const wanted: { role: Role; node: string; routeTo: string[] }[] = [
    { role: 'vpn', node: nodeOf('vpn-node'), routeTo: dst === undefined ? [] : [dst] },
    {
      role: 'vpn-node',
      node: nodeOf('vpn-node'),
      routeTo: [client, ...(dst === undefined ? [] : [dst])],
    },
    {
      role: 'backend-node',
      node: nodeOf('backend-node'),
      routeTo: [client, ...(dst === undefined ? [] : [dst])],
    },
  ];
  const facts: NamespaceFacts[] = [];
  for (const w of wanted) {
    const path = opts.netns[w.role];
    if (path === undefined) continue;
    const t: DoctorTarget = { name: w.role, target: path, routeTo: w.routeTo };
    facts.push(await readNamespaceFacts(t, family, { node: w.node }));
  }
  const inventory = await namespaceInventory({
    netnsGlob: opts.knownNetns ?? '/run/netns/*',
    scanProc: opts.knownNetns === undefined,
  });
  const nodeAddresses: Record<string, string[]> = {};
  for (const f of facts)
    if (f.name === 'vpn-node' || f.name === 'backend-node') nodeAddresses[f.node] = f.addresses;
  let denied: DeniedOutcome | undefined;
  if (opts.denied !== undefined) {
    const clientNs = opts.netns.client;
    const nodeNs = opts.netns['backend-node'];
    if (clientNs === undefined || nodeNs === undefined) {
      throw new HoptraceError(
        'CLI_USAGE',
        '--denied-source needs --netns client=PATH and --netns backend-node=PATH',
        {
          where: 'hoptrace doctor',
        },
      );
    }
    const run = await runDeniedTest({
      source: opts.denied.source,
      target: opts.denied.target,
      node: nodeOf('backend-node'),
      clientNetns: clientNs,
      backendNodeNetns: nodeNs,
      backendNetns: opts.netns.backend,
    });
    denied = classifyDenied(run);
  }
  return runDoctorChecks({
    facts,
    tunnelRange: opts.tunnelRange,
    client,
    dst,
    liveAddresses: [
      ...new Set([...inventory.flatMap((n) => n.addresses), ...(backendFacts?.addresses ?? [])]),
    ],
    nodeAddresses,
    podCidrs: opts.podCidrs,
    denied,
  });
}

function parseNetnsArgs(values: string[]): Partial<Record<Role, string>> {
  const out: Partial<Record<Role, string>> = {};
  for (const v of values) {
    const eq = v.indexOf('=');
    const role = v.slice(0, eq);
    const path = v.slice(eq + 1);
    if (eq <= 0 || !(ROLES as readonly string[]).includes(role) || !path.startsWith('/')) {
      throw new HoptraceError('CLI_USAGE', `'${v}' is not ROLE=PATH`, {
        where: '--netns',
        hint: `ROLE is one of ${ROLES.join(', ')}; PATH is /run/netns/NAME or /proc/PID/ns/net`,
      });
    }
    out[role as Role] = path;
  }
  return out;
}

function parseTarget(v: string): { ip: string; port: number } {
  const m = /^(\d+\.\d+\.\d+\.\d+):(\d+)$/.exec(v);
  if (m?.[1] === undefined || m[2] === undefined || !isIPv4(m[1])) {
    throw new HoptraceError('CLI_USAGE', `'${v}' is not IPv4:PORT`, { where: '--target' });
  }
  return { ip: m[1], port: Number(m[2]) };
}

/** `hoptrace doctor …` */
export async function runDoctor(argv: string[], out: (line: string) => void): Promise<number> {
  const { values } = parseCommandLine('doctor', USAGE, argv, {
    collector: { type: 'string' },
    vpn: { type: 'string' },
    backend: { type: 'string' },
    'token-file': { type: 'string' },
    netns: { type: 'string', multiple: true },
    'tunnel-range': { type: 'string' },
    client: { type: 'string' },
    dst: { type: 'string' },
    'pod-cidr': { type: 'string', multiple: true },
    'denied-source': { type: 'string' },
    target: { type: 'string' },
    'known-netns': { type: 'string' },
    json: { type: 'boolean' },
  });
  if (values.collector !== undefined) {
    const result = await doctorViaCollector(values.collector, {
      vpn: values.vpn,
      backend: values.backend,
      tokenFile: values['token-file'],
      body: {
        tunnelRange: values['tunnel-range'],
        client: values.client,
        dst: values.dst,
        podCidrs: values['pod-cidr'],
      },
    });
    return printDoctor(out, result, values.json === true);
  }
  const netns = parseNetnsArgs(values.netns ?? []);
  if (
    netns['backend-node'] === undefined &&
    netns['vpn-node'] === undefined &&
    netns.vpn === undefined
  ) {
    throw new HoptraceError(
      'CLI_USAGE',
      'give at least one of --netns vpn=, vpn-node=, backend-node=',
      {
        where: 'hoptrace doctor',
        hint: `usage: ${USAGE}`,
      },
    );
  }
  const deniedSource = values['denied-source'];
  const target = values.target;
  if ((deniedSource === undefined) !== (target === undefined)) {
    throw new HoptraceError('CLI_USAGE', '--denied-source and --target go together', {
      where: 'hoptrace doctor',
    });
  }
  const result = await runLocalDoctor({
    netns,
    tunnelRange: values['tunnel-range'] ?? '10.90.0.0/24',
    client: values.client,
    dst: values.dst,
    podCidrs: values['pod-cidr'],
    knownNetns: values['known-netns'],
    denied:
      deniedSource === undefined || target === undefined
        ? undefined
        : { source: deniedSource, target: parseTarget(target) },
  });
  return printDoctor(out, result, values.json === true);
}

/** Collector mode: POST /v1/doctor; the agents read the namespaces. */
async function doctorViaCollector(
  base: string,
  o: {
    vpn: string | undefined;
    backend: string | undefined;
    tokenFile: string | undefined;
    body: Omit<DoctorRequest, 'vpn' | 'backend'>;
  },
): Promise<DoctorResult> {
  if (o.vpn === undefined || o.backend === undefined) {
    throw new HoptraceError('CLI_USAGE', '--collector needs --vpn and --backend', {
      where: 'hoptrace doctor',
      hint: `usage: ${USAGE}`,
    });
  }
  const token = loadToken(o.tokenFile === undefined ? {} : { file: o.tokenFile });
  return postDoctor(new CollectorClient(base, token), {
    vpn: o.vpn,
    backend: o.backend,
    ...o.body,
  });
}

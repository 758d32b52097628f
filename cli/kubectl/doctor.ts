/**
 * `kubectl hoptrace doctor`: the checks of `hoptrace doctor --collector` (cli/doctor-remote.ts)
 * against the collector pod through the port-forward, with the token of its Secret. `--vpn` and
 * `--backend` are kubectl targets without an interface (targets.ts), resolved here to the pod IP
 * the agents know the pod's namespace by. Output and exit codes as `hoptrace doctor`: 0 no error
 * finding, 4 at least one, 1 an error, 2 a bad command line.
 */
import { HoptraceError } from '../../common/errors';
import { checkDoctorFlags, postDoctor, printDoctor } from '../doctor-remote';
import { linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';
import { parseKubeRef, resolvePodIp } from './targets';

export const USAGE =
  'kubectl hoptrace doctor --vpn TARGET --backend TARGET [--tunnel-range 10.90.0.0/24] ' +
  `[--client IP] [--dst IP] [--pod-cidr CIDR]... [--json] ${KUBE_USAGE}`;

export async function runKubeDoctor(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, positionals, kube, namespace, hoptraceNamespace } = parseKubectlArgs(
    'doctor',
    USAGE,
    argv,
    {
      vpn: { type: 'string' },
      backend: { type: 'string' },
      'tunnel-range': { type: 'string' },
      client: { type: 'string' },
      dst: { type: 'string' },
      'pod-cidr': { type: 'string', multiple: true },
      json: { type: 'boolean' },
    },
  );
  const usage = (detail: string): HoptraceError =>
    new HoptraceError('CLI_USAGE', detail, {
      where: 'kubectl hoptrace doctor',
      hint: `usage: ${USAGE}`,
    });
  if (positionals.length > 0) throw usage(`unexpected argument '${String(positionals[0])}'`);
  if (values.vpn === undefined || values.backend === undefined)
    throw usage('give --vpn TARGET (the VPN pod) and --backend TARGET (the backend pod)');
  const rest = {
    tunnelRange: values['tunnel-range'],
    client: values.client,
    dst: values.dst,
    podCidrs: values['pod-cidr'],
  };
  const family = checkDoctorFlags(rest);
  // Parsed before the cluster is asked: a bad target reaches no API server.
  const parse = (flag: string, v: string, ns: string) => parseKubeRef(flag, v, ns);
  parse('--vpn', values.vpn, 'default');
  parse('--backend', values.backend, 'default');

  const cluster = await deps.connect(kube);
  const ns = namespace ?? cluster.defaultNamespace;
  const link = await linkCollector(cluster, hoptraceNamespace);
  const ip = async (flag: string, v: string): Promise<string> => {
    const r = await resolvePodIp(cluster, parse(flag, v, ns), family);
    if (r.note !== undefined) deps.err(r.note);
    return r.ip;
  };
  const vpn = await ip('--vpn', values.vpn);
  const backend = await ip('--backend', values.backend);
  const result = await postDoctor(link.client, { vpn, backend, ...rest });
  return printDoctor(deps.out, result, values.json === true);
}

/**
 * `hoptrace repro`: probe through the VPN while its pod is deleted and rescheduled, print the
 * per-probe timeline and whether the path came back.
 *
 *   hoptrace repro --lab [--only NAME,...]      the lab's three scenarios (root; namespaces only)
 *   hoptrace repro --collector URL --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE
 *                  [--delete-after N] [--interval 1s] [--count 20]
 *
 * The cluster form needs the Kubernetes API path (select the VPN pods by namespace and labels,
 * delete one, find its replacement by owner/labels): not implemented yet, and it says so.
 */
import { HoptraceError } from '../common/errors';
import { assertLabPrerequisites } from '../lab/prereq';
import { printLabRepros } from '../lab/repro-print';
import { parseCommandLine } from './args';

const USAGE =
  'hoptrace repro --lab [--only NAME[,NAME]] | hoptrace repro --collector URL --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE [--delete-after N] [--interval 1s] [--count 20]';

export async function runRepro(argv: string[], out: (line: string) => void): Promise<number> {
  const { values } = parseCommandLine('repro', USAGE, argv, {
    lab: { type: 'boolean' },
    only: { type: 'string' },
    collector: { type: 'string' },
    'vpn-workload': { type: 'string' },
    backend: { type: 'string' },
    'delete-after': { type: 'string' },
    interval: { type: 'string' },
    count: { type: 'string' },
  });
  if (values.lab === true) {
    assertLabPrerequisites();
    const bad = await printLabRepros(out, values.only?.split(','));
    return bad === 0 ? 0 : 1;
  }
  if (
    values.collector === undefined ||
    values['vpn-workload'] === undefined ||
    values.backend === undefined
  ) {
    throw new HoptraceError(
      'CLI_USAGE',
      'give --lab, or --collector, --vpn-workload and --backend',
      {
        where: 'hoptrace repro',
        hint: `usage: ${USAGE}`,
      },
    );
  }
  if (!/^[^/]+\/.+$/.test(values['vpn-workload']))
    throw new HoptraceError(
      'CLI_USAGE',
      `'${values['vpn-workload']}' is not NAMESPACE/LABELSELECTOR`,
      {
        where: '--vpn-workload',
      },
    );
  throw new HoptraceError(
    'REPRO_NOT_SUPPORTED',
    'not yet: a repro on a cluster needs the Kubernetes API path (select the VPN pods by namespace/labels, delete one, follow its replacement); only the lab form runs today',
    {
      where: 'hoptrace repro --collector',
      hint: 'run `hoptrace repro --lab` (root) to see the timeline on the lab',
    },
  );
}

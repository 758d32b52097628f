/**
 * The subcommand of issue 18 that is not built yet (repro): their usage is what they will take, and
 * running one says so with KUBECTL_NOT_IMPLEMENTED and the manual route that works today.
 */
import { HoptraceError } from '../../common/errors';
import { KUBE_USAGE } from './flags';

export const NOT_YET = {
  repro: `kubectl hoptrace repro --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE [--delete-after N] [--interval 1s] [--count 20] ${KUBE_USAGE}`,
} as const;

export type NotYet = keyof typeof NOT_YET;

const MANUAL: Record<NotYet, string> = {
  repro:
    'kubectl -n hoptrace port-forward svc/hoptrace-collector 7070, then hoptrace repro --collector https://127.0.0.1:7070',
};

export function runNotYet(name: NotYet): Promise<number> {
  return Promise.reject(
    new HoptraceError('KUBECTL_NOT_IMPLEMENTED', 'not built yet', {
      where: `kubectl hoptrace ${name}`,
      hint: `for now: ${MANUAL[name]}`,
    }),
  );
}

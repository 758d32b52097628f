/**
 * The flags every `kubectl hoptrace` subcommand takes, as kubectl's own: which kubeconfig and
 * context, `-n` for the namespace of targets written without one; and where hoptrace is installed.
 */
import type { ParseArgsConfig } from 'node:util';
import { HoptraceError } from '../../common/errors';
import { parseCommandLine, parseDuration } from '../args';
import type { Cluster } from './cluster';
import { DEFAULT_REQUEST_TIMEOUT_MS, type KubeFlags } from './kube-config';

export const KUBE_OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  'hoptrace-namespace': { type: 'string' },
  'request-timeout': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

export const KUBE_USAGE =
  '[--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [--hoptrace-namespace hoptrace] [--request-timeout 30s]';

/** Where hoptrace runs unless --hoptrace-namespace says otherwise (deploy/base/namespace.yaml). */
export const HOPTRACE_NAMESPACE = 'hoptrace';

/** What a subcommand needs from outside: the streams, the environment, the cluster. */
export interface KubectlDeps {
  out: (line: string) => void;
  err: (line: string) => void;
  env: NodeJS.ProcessEnv;
  /** Where bundles are written (`./hoptrace-<id>/`). */
  cwd: string;
  connect: (flags: KubeFlags) => Promise<Cluster>;
  /** Poll interval of capture progress (tests make it short). */
  pollMs?: number;
}

/** Parses a subcommand's own options together with the shared ones. */
export function parseKubectlArgs<O extends NonNullable<ParseArgsConfig['options']>>(
  command: string,
  usage: string,
  argv: string[],
  options: O,
) {
  const parsed = parseCommandLine(
    command,
    usage,
    argv,
    { ...KUBE_OPTIONS, ...options },
    'kubectl hoptrace',
  );
  const v = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const str = (k: string): string | undefined => (typeof v[k] === 'string' ? v[k] : undefined);
  const timeout = str('request-timeout');
  const requestTimeoutMs =
    timeout === undefined
      ? DEFAULT_REQUEST_TIMEOUT_MS
      : parseDuration(timeout, '--request-timeout');
  if (requestTimeoutMs <= 0) {
    throw new HoptraceError('CLI_USAGE', `'${timeout ?? ''}' is not above 0`, {
      where: '--request-timeout',
      hint: 'e.g. 30s; every request ends within it',
    });
  }
  const kube: KubeFlags = {
    kubeconfig: str('kubeconfig'),
    context: str('context'),
    requestTimeoutMs,
  };
  return {
    ...parsed,
    kube,
    namespace: str('namespace'),
    hoptraceNamespace: str('hoptrace-namespace') ?? HOPTRACE_NAMESPACE,
  };
}

/**
 * Which cluster `kubectl hoptrace` talks to, chosen as kubectl chooses: `--kubeconfig FILE`, else
 * every file of `$KUBECONFIG` (merged, the first one's current context wins), else
 * `~/.kube/config`, else the pod's service account when running in a cluster; then `--context`.
 * Every failure is K8S_CONFIG, saying what was looked at.
 */
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';

/** The flags every subcommand takes (kubectl's global ones that matter here). */
export interface KubeFlags {
  kubeconfig?: string | undefined;
  context?: string | undefined;
}

/** Where the configuration was found, for messages. */
export interface LoadedConfig {
  kc: K8s.KubeConfig;
  /** `--kubeconfig x`, `$KUBECONFIG`, `~/.kube/config` or `in-cluster`. */
  source: string;
  context: string;
  /** The API server's URL. */
  server: string;
  /** The context's namespace, else `default` (what kubectl uses for names without one). */
  namespace: string;
}

const NO_CLUSTER_HINT =
  'give --kubeconfig FILE or --context NAME, or set KUBECONFIG; `kubectl config get-contexts` lists what kubectl would use';

export function loadKubeConfig(
  k8s: typeof K8s,
  flags: KubeFlags,
  env: NodeJS.ProcessEnv = process.env,
): LoadedConfig {
  const kc = new k8s.KubeConfig();
  let source: string;
  try {
    const envFiles = (env['KUBECONFIG'] ?? '').split(delimiter).filter((f) => f !== '');
    const home = env['HOME'];
    const homeConfig = home === undefined ? undefined : join(home, '.kube', 'config');
    if (flags.kubeconfig !== undefined) {
      source = `--kubeconfig ${flags.kubeconfig}`;
      kc.loadFromFile(flags.kubeconfig);
    } else if (envFiles.length > 0) {
      source = '$KUBECONFIG';
      const [first, ...more] = envFiles;
      kc.loadFromFile(first ?? '');
      for (const f of more) {
        if (!existsSync(f)) continue; // kubectl skips files of the list that do not exist
        const other = new k8s.KubeConfig();
        other.loadFromFile(f);
        kc.mergeConfig(other, true);
      }
    } else if (homeConfig !== undefined && existsSync(homeConfig)) {
      source = '~/.kube/config';
      kc.loadFromFile(homeConfig);
    } else if (env['KUBERNETES_SERVICE_HOST'] !== undefined) {
      source = 'in-cluster';
      kc.loadFromCluster();
    } else {
      throw new HoptraceError('K8S_CONFIG', 'no kubeconfig found', {
        where: '--kubeconfig, $KUBECONFIG, ~/.kube/config',
        hint: NO_CLUSTER_HINT,
      });
    }
  } catch (e) {
    if (e instanceof HoptraceError) throw e;
    throw new HoptraceError(
      'K8S_CONFIG',
      `cannot load the kubeconfig (${e instanceof Error ? e.message : String(e)})`,
      { where: flags.kubeconfig ?? env['KUBECONFIG'] ?? '~/.kube/config', hint: NO_CLUSTER_HINT },
    );
  }
  if (flags.context !== undefined) {
    if (kc.getContextObject(flags.context) === null) {
      const known = kc.getContexts().map((c) => c.name);
      throw new HoptraceError('K8S_CONFIG', `no context '${flags.context}' in ${source}`, {
        where: '--context',
        hint: known.length > 0 ? `contexts there: ${known.join(', ')}` : NO_CLUSTER_HINT,
      });
    }
    kc.setCurrentContext(flags.context);
  }
  const context = kc.getCurrentContext();
  const cluster = kc.getCurrentCluster();
  if (cluster === null || cluster.server === '') {
    throw new HoptraceError('K8S_CONFIG', `${source} names no current cluster`, {
      where: source,
      hint: 'kubectl config use-context NAME, or give --context NAME',
    });
  }
  const namespace = kc.getContextObject(context)?.namespace ?? 'default';
  return { kc, source, context, server: cluster.server, namespace };
}

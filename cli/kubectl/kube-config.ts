/**
 * Which cluster `kubectl hoptrace` talks to, chosen as kubectl chooses: `--kubeconfig FILE`, else
 * every file of `$KUBECONFIG` (merged, the first one's current context wins), else
 * `~/.kube/config`, else the pod's service account when running in a cluster; then `--context`.
 * Every failure is K8S_CONFIG, saying what was looked at. What the chosen context names is checked
 * here too, before any request (checkKubeConfig): a server that is not a URL, a certificate file
 * that cannot be read, an exec plugin that is not there — a mistake in the configuration, never
 * reported as an API server that does not answer.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';

/**
 * How long one request may take (`--request-timeout`, kubectl's flag): each API server request, an
 * exec credential plugin's run, a port-forward's handshake, each request to the collector through
 * it. Past it the request is aborted (its socket destroyed, the plugin killed) and the command ends
 * with the error, never waits on.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** The flags every subcommand takes (kubectl's global ones that matter here). */
export interface KubeFlags {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  /** `--request-timeout` (DEFAULT_REQUEST_TIMEOUT_MS when not given). */
  requestTimeoutMs?: number | undefined;
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
      readableConfig(flags.kubeconfig);
      kc.loadFromFile(flags.kubeconfig);
    } else if (envFiles.length > 0) {
      // kubectl skips the files of the list that do not exist, the first one included; the first
      // file that does exist sets the current context.
      const present = envFiles.filter((f) => existsSync(f));
      source = `$KUBECONFIG (${present.join(delimiter)})`;
      const [first, ...more] = present;
      if (first === undefined) {
        throw new HoptraceError(
          'K8S_CONFIG',
          `none of the files of $KUBECONFIG exists (${envFiles.join(delimiter)})`,
          { where: '$KUBECONFIG', hint: NO_CLUSTER_HINT },
        );
      }
      readableConfig(first);
      kc.loadFromFile(first);
      for (const f of more) {
        readableConfig(f);
        const other = new k8s.KubeConfig();
        other.loadFromFile(f);
        kc.mergeConfig(other, true);
      }
    } else if (homeConfig !== undefined && existsSync(homeConfig)) {
      source = '~/.kube/config';
      readableConfig(homeConfig);
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
  checkKubeConfig(kc, source);
  return { kc, source, context, server: cluster.server, namespace };
}

/**
 * A kubeconfig file that is not a regular file (a FIFO, /dev/zero, a directory) is refused before
 * it is read: reading it would block or never end.
 */
function readableConfig(file: string): void {
  let regular: boolean;
  try {
    regular = statSync(file).isFile();
  } catch (e) {
    throw new HoptraceError('K8S_CONFIG', `cannot read ${file} (${errText(e)})`, {
      where: file,
      hint: NO_CLUSTER_HINT,
    });
  }
  if (!regular) {
    throw new HoptraceError('K8S_CONFIG', `${file} is not a regular file`, {
      where: file,
      hint: 'give the kubeconfig file itself',
    });
  }
}

const errText = (e: unknown): string =>
  (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));

/** A PEM block, as certificate-authority-data, client-certificate-data and client-key-data hold. */
const PEM = /-----BEGIN [A-Z0-9 ]+-----/;

/**
 * What the current context names, checked before any request: the cluster's server (an http(s)
 * URL), the files it reads (certificate-authority, client-certificate, client-key, a token file),
 * the inline PEM data, and an exec credential plugin's command (on PATH, or the file, executable).
 * Each mistake is K8S_CONFIG naming the kubeconfig field and the file.
 */
export function checkKubeConfig(kc: K8s.KubeConfig, source: string): void {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const inCluster = source === 'in-cluster';
  const fail = (field: string, detail: string, hint: string): never => {
    throw new HoptraceError('K8S_CONFIG', `${field}: ${detail}`, { where: source, hint });
  };
  const fixIt = inCluster
    ? "KUBERNETES_SERVICE_HOST is set, so the pod's service account was used: outside a pod, unset it or give --kubeconfig FILE"
    : `fix it in ${source} (kubectl config view --minify shows what kubectl would use)`;
  const provider = user?.authProvider as { config?: { tokenFile?: unknown } } | undefined;
  const tokenFile = provider?.config?.tokenFile;
  // In a pod the service account's files come first: without them this is not a pod at all.
  if (inCluster && typeof tokenFile === 'string')
    readableFile('the service account token', tokenFile, fail, fixIt);
  if (inCluster && cluster?.caFile !== undefined)
    readableFile('the service account CA', cluster.caFile, fail, fixIt);
  if (cluster !== null) {
    const c = `clusters[${cluster.name}]`;
    let url: URL | undefined;
    try {
      url = new URL(cluster.server);
    } catch {
      url = undefined;
    }
    if (
      url === undefined ||
      (url.protocol !== 'https:' && url.protocol !== 'http:') ||
      url.hostname === ''
    )
      fail(`${c}.server`, `'${cluster.server}' is not an https:// URL`, fixIt);
    // The client library refuses plain http unless TLS verification is off (there is none to do).
    if (url?.protocol === 'http:' && !cluster.skipTLSVerify)
      fail(
        `${c}.server`,
        `'${cluster.server}' is plain http, which is taken only with insecure-skip-tls-verify: true`,
        fixIt,
      );
    if (cluster.caFile !== undefined && cluster.caFile !== '')
      readableFile(`${c}.certificate-authority`, cluster.caFile, fail, fixIt);
    else if (cluster.caData !== undefined && cluster.caData !== '' && !isPem(cluster.caData))
      fail(`${c}.certificate-authority-data`, 'is not base64 of a PEM certificate', fixIt);
  }
  if (user === null) return;
  const u = `users[${user.name}]`;
  if (user.certFile !== undefined && user.certFile !== '')
    readableFile(`${u}.client-certificate`, user.certFile, fail, fixIt);
  else if (user.certData !== undefined && user.certData !== '' && !isPem(user.certData))
    fail(`${u}.client-certificate-data`, 'is not base64 of a PEM certificate', fixIt);
  if (user.keyFile !== undefined && user.keyFile !== '')
    readableFile(`${u}.client-key`, user.keyFile, fail, fixIt);
  else if (user.keyData !== undefined && user.keyData !== '' && !isPem(user.keyData))
    fail(`${u}.client-key-data`, 'is not base64 of a PEM key', fixIt);
  if (typeof tokenFile === 'string' && tokenFile !== '')
    readableFile(`${u}.tokenFile`, tokenFile, fail, fixIt);
  const exec = user.exec as { command?: unknown } | null | undefined;
  if (exec !== undefined && exec !== null) {
    const command = exec.command;
    if (typeof command !== 'string' || command === '')
      fail(`${u}.exec.command`, 'is missing', fixIt);
    else if (!executableFound(command))
      fail(
        `${u}.exec.command`,
        `'${command}' is not ${command.includes('/') ? 'an executable file' : 'an executable on PATH'}`,
        'install the credential plugin your cluster needs (kubectl fails the same way), or fix the path',
      );
  }
}

function isPem(base64: string): boolean {
  return PEM.test(Buffer.from(base64, 'base64').toString('latin1'));
}

function readableFile(
  field: string,
  file: string,
  fail: (field: string, detail: string, hint: string) => never,
  hint: string,
): void {
  try {
    if (!statSync(file).isFile()) fail(field, `${file} is not a regular file`, hint);
    accessSync(file, constants.R_OK);
  } catch (e) {
    if (e instanceof HoptraceError) throw e;
    fail(field, `cannot read ${file} (${errText(e)})`, hint);
  }
}

/** As spawn finds it: a name without '/' on PATH, else the path (relative to this directory). */
function executableFound(command: string): boolean {
  const candidates = command.includes('/')
    ? [isAbsolute(command) ? command : resolve(command)]
    : (process.env['PATH'] ?? '')
        .split(delimiter)
        .filter((d) => d !== '')
        .map((d) => join(d, command));
  return candidates.some((f) => {
    try {
      accessSync(f, constants.X_OK);
      return statSync(f).isFile();
    } catch {
      return false;
    }
  });
}

/**
 * `startCollector`: wires the data directory, the agent hub (WebSocket on /v1/agents), the session
 * manager and the HTTP API onto one HTTP(S) server. SIGTERM is the CLI's business (cli/collector.ts).
 */
import type { Server } from 'node:http';
import { sessionsUiSource } from './ui/ui-source';
import { UiSessions } from './ui/ui-sessions';
import type { AddressInfo } from 'node:net';
import { HoptraceError } from '../common/errors';
import { createApi } from './http';
import { createCollectorServer } from './http-server';
import { createAgentHub, type AgentHubOptions } from './hub';
import { chainAuth, nodeTokenAuth, sharedTokenAuth, type AgentAuthenticator } from './agent-auth';
import { clientCertAuth } from './agent-cert-auth';
import { tokenReviewAuth } from './k8s/token-review';
import type { KubeApi, KubeSource } from './k8s/client';
import { K8sInventorySource } from './k8s/source';
import type { AgentHub } from './hub-types';
import { createLogger, type CollectorLogger, type LogLevel } from './logger';
import { SessionManager, type Clock } from './sessions';
import type { RetentionPolicy } from './disk-retention';
import { CaptureStore } from './store';
import { hostPort } from '../common/endpoint';

export interface CollectorOptions {
  host?: string;
  /** 0 = any free port. */
  port?: number;
  dataDir: string;
  /**
   * The shared token: accepted by the API, and from agents when no per-agent identity is
   * configured (or with `agentAuth.allowSharedToken`).
   */
  tokens: string[];
  /** Per-agent identities (collector/agent-auth.ts): each binds a connection to one node. */
  agentAuth?: AgentAuthOptions;
  /** Tokens accepted by the HTTP API only. */
  apiTokens?: string[];
  tls?: { cert: string | Buffer; key: string | Buffer };
  logLevel?: LogLevel;
  logger?: CollectorLogger;
  /** Replaces the WebSocket hub (tests inject an in-memory one). */
  hubFactory?: (server: Server, opts: AgentHubOptions) => AgentHub | Promise<AgentHub>;
  clock?: Clock;
  /** fdatasync event appends (default true). */
  fsync?: boolean;
  debounceMs?: number;
  /** Read nodes and pods from the Kubernetes API (`--kubernetes`, `--kubeconfig`); tests pass an api. */
  kubernetes?: { source: KubeSource | KubeApi; intervalMs?: number };
  /** Attach conntrack evidence to finished captures (agents read it; default false). */
  conntrack?: boolean;
  /** Captures live at once at most (`--max-live-captures`; default 32, collector/sessions.ts). */
  maxLiveCaptures?: number;
  /** Finished captures held in memory (`--keep-finished`; default 1,000, collector/sessions.ts). */
  keepFinished?: number;
  /** Finished repros held in memory (`--keep-finished-repros`; default 50, collector/repro.ts). */
  keepFinishedRepros?: number;
  /** Finished captures the data directory keeps (`--retain-finished`, `--retain-age`). */
  retainFinished?: RetentionPolicy;
  /** Finished repros it keeps (`--retain-finished-repros`, `--retain-age`). */
  retainFinishedRepros?: RetentionPolicy;
}

export interface AgentAuthOptions {
  /** `--agent-tokens`: node → its token. */
  nodeTokens?: ReadonlyMap<string, string>;
  /** `--client-ca`: PEM CA of agents' client certificates (needs `tls`). */
  clientCa?: string | Buffer;
  /** `--token-review`: ServiceAccount tokens checked by the Kubernetes API (needs `kubernetes`). */
  tokenReview?: { audience?: string; serviceAccount?: string };
  /** Also accept the shared token from agents (migration; any holder speaks for any node). */
  allowSharedToken?: boolean;
}

export interface RunningCollector {
  /** Base URL of the API, e.g. http://127.0.0.1:7070 */
  url: string;
  /** WebSocket URL agents connect to. */
  agentsUrl: string;
  collectorId: string;
  sessions: SessionManager;
  hub: AgentHub;
  /** The Kubernetes API view, when enabled. */
  kubernetes: K8sInventorySource | undefined;
  close(): Promise<void>;
}

export const AGENTS_PATH = '/v1/agents';

export async function startCollector(opts: CollectorOptions): Promise<RunningCollector> {
  const logger = opts.logger ?? createLogger({ level: opts.logLevel ?? 'info' });
  const aa = opts.agentAuth ?? {};
  if (aa.clientCa !== undefined && opts.tls === undefined)
    throw new HoptraceError('CLI_USAGE', 'client certificates need TLS', {
      where: '--client-ca',
      hint: 'give --tls-cert and --tls-key too',
    });
  if (aa.tokenReview !== undefined && opts.kubernetes === undefined)
    throw new HoptraceError('CLI_USAGE', 'TokenReview needs the Kubernetes API', {
      where: '--token-review',
      hint: 'give --kubernetes (in a cluster) or --kubeconfig FILE too',
    });
  // First: a wrong --kubeconfig stops the start before anything listens.
  const k8s = opts.kubernetes
    ? await K8sInventorySource.start({
        api: opts.kubernetes.source,
        logger,
        ...(opts.kubernetes.intervalMs !== undefined
          ? { intervalMs: opts.kubernetes.intervalMs }
          : {}),
      })
    : undefined;
  const store = new CaptureStore({ dir: opts.dataDir, fsync: opts.fsync ?? true });
  const ways: AgentAuthenticator[] = [];
  if (aa.clientCa !== undefined) ways.push(clientCertAuth());
  if (aa.nodeTokens !== undefined) ways.push(nodeTokenAuth(aa.nodeTokens));
  if (aa.tokenReview !== undefined && k8s !== undefined)
    ways.push(tokenReviewAuth({ api: k8s.api, ...aa.tokenReview }));
  const shared = ways.length === 0 || aa.allowSharedToken === true;
  if (shared) ways.push(sharedTokenAuth(opts.tokens));
  const auth = chainAuth(ways);
  const server: Server = createCollectorServer({
    ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
    ...(aa.clientCa !== undefined ? { clientCa: aa.clientCa } : {}),
    logger,
  });
  const hubOpts: AgentHubOptions = {
    server,
    path: AGENTS_PATH,
    auth,
    collectorId: store.collectorId,
    lastSeqStore: store.lastSeq,
    ...(logger.pino ? { logger: logger.pino.child({ component: 'hub' }) } : {}),
  };
  const hub = await (opts.hubFactory ? opts.hubFactory(server, hubOpts) : createAgentHub(hubOpts));
  const sessions = new SessionManager({
    hub,
    store,
    logger,
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.debounceMs !== undefined ? { debounceMs: opts.debounceMs } : {}),
    ...(k8s ? { cluster: k8s } : {}),
    ...(opts.conntrack !== undefined ? { conntrack: opts.conntrack } : {}),
    ...(opts.maxLiveCaptures !== undefined ? { maxLiveCaptures: opts.maxLiveCaptures } : {}),
    ...(opts.keepFinished !== undefined ? { maxFinishedHeld: opts.keepFinished } : {}),
    ...(opts.keepFinishedRepros !== undefined
      ? { maxFinishedRepros: opts.keepFinishedRepros }
      : {}),
    ...(opts.retainFinished !== undefined ? { retainFinished: opts.retainFinished } : {}),
    ...(opts.retainFinishedRepros !== undefined
      ? { retainFinishedRepros: opts.retainFinishedRepros }
      : {}),
  });
  sessions.start();
  const apiTokens = [...opts.tokens, ...(opts.apiTokens ?? [])];
  const api = createApi({
    sessions,
    tokens: apiTokens,
    collectorId: store.collectorId,
    logger,
    ui: {
      source: sessionsUiSource(sessions),
      logins: new UiSessions(apiTokens, Date.now, opts.tls !== undefined),
      nowMs: Date.now,
    },
  });
  server.on('request', api.listener());

  const host = opts.host ?? '127.0.0.1';
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 7070, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    k8s?.close();
    await sessions.close();
    await hub.close();
    throw new HoptraceError('COLLECTOR_LISTEN', e instanceof Error ? e.message : String(e), {
      where: hostPort(host, opts.port ?? 7070),
      hint: 'pick a free address with --listen HOST:PORT',
    });
  }
  if (shared && ways.length > 1)
    logger.warn({}, 'agents may also use the shared token: its holders can speak for any node');
  logger.info({ state: 'auth' }, `agents authenticate with ${auth.description}`);
  const addr = server.address() as AddressInfo;
  const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const scheme = opts.tls ? 'https' : 'http';
  logger.info({ state: 'listening' }, `collector listening on ${scheme}://${h}:${addr.port}`);
  // 0.0.0.0 / :: is no address a client can use: reports then name a placeholder.
  const everyAddress = addr.address === '0.0.0.0' || addr.address === '::';
  sessions.setCollectorUrl(everyAddress ? null : `${scheme}://${h}:${addr.port}`);

  let closing: Promise<void> | undefined;
  return {
    url: `${scheme}://${h}:${addr.port}`,
    agentsUrl: `${opts.tls ? 'wss' : 'ws'}://${h}:${addr.port}${AGENTS_PATH}`,
    collectorId: store.collectorId,
    sessions,
    hub,
    kubernetes: k8s,
    close: () => {
      closing ??= (async () => {
        k8s?.close();
        await sessions.close();
        await hub.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
        });
      })();
      return closing;
    },
  };
}

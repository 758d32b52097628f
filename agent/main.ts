/**
 * `startAgent`: one agent per node. Wires the CollectorLink, the capture runtime and the
 * namespace inventory the agent reports in its hello (refreshed in the background, because a
 * hello must be ready the moment a connection opens).
 */
import { randomBytes } from 'node:crypto';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { missingCapabilities } from './capabilities';
import { NsCapture } from './capture/ns-capture';
import { RetentionStore, type RetentionStoreOptions } from './capture/retention-store';
import { CollectorLink, type AgentReplyBody, type LinkStats } from './link/collector-link';
import {
  namespaceAddresses,
  namespaceInventory,
  nodeAddresses,
  type NamespaceInfo,
  type NetnsScope,
} from './netns/addresses';
import { InventoryCache } from './netns/inventory-cache';
import { resolveTarget } from './netns/resolve';
import { answerRequest } from './doctor/serve';
import { serveRequests } from './requests';
import { AgentRuntime, buildHello, DEFAULT_MAX_CAPTURES } from './runtime';
import { HoptraceError, isHoptraceError } from '../common/errors';
import { agentIdProblem, nodeNameProblem } from '../common/agent-names';
import { hoptraceVersion } from '../common/version';

/**
 * Events per link message (EventBatch). Every WebSocket message costs the agent about the same
 * whatever it carries — its Envelope, spool entry, ws frame and write, and the collector's ack —
 * so 2048 (~200 KiB) divides that by 8 against the capture's 256, far below the 16 MiB either
 * side takes (common/command-limits.ts MAX_MESSAGE_BYTES). The worker's frames are still handed on as each arrives: no added latency.
 */
export const LINK_BATCH_EVENTS = 2048;

export interface AgentOptions {
  /** ws:// or wss:// URL of the collector's agent endpoint, e.g. ws://collector:7070/v1/agents */
  collectorUrl: string;
  /** The bearer token, or a function read on every connection (a rotated token file). */
  token: string | (() => string);
  ca?: Buffer;
  /** TLS client certificate and key (a collector with --client-ca takes the node from it). */
  cert?: Buffer;
  key?: Buffer;
  /** Node name (default: the host name). */
  node?: string;
  agentId?: string;
  /** The node's own namespace when the agent does not run in it (the lab: a node is a namespace). */
  nodeNetns?: string;
  /** Which namespaces this agent owns and searches for targets. */
  scope?: NetnsScope;
  spoolLimit?: number;
  /** Captures live at once (default 4, runtime.ts DEFAULT_MAX_CAPTURES); more are AGENT_BUSY. */
  maxCaptures?: number;
  heartbeatMs?: number;
  /** How often the namespace inventory is refreshed (default 5 s). */
  refreshMs?: number;
  /**
   * Frame retention for the evidence (retention-store.ts): where its files go (default
   * $HOPTRACE_RETENTION_DIR, else <tmpdir>/hoptrace-retention) and its bounds; false = none.
   */
  retention?: Partial<RetentionStoreOptions> | false;
  logger?: pino.Logger;
}

export interface RunningAgent {
  /** The current agent id (a new one is taken when the collector's seq for the old is exhausted). */
  readonly agentId: string;
  node: string;
  stats(): LinkStats;
  /** Resolves once the collector has acknowledged a hello. */
  connected: Promise<void>;
  onError(handler: (err: HoptraceError) => void): void;
  close(): Promise<void>;
}

/** Starts an agent: reads its inventory, connects, and serves capture commands. */
export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  const log = opts.logger ?? pino({ enabled: false });
  const node = opts.node ?? hostname();
  // The collector refuses a hello with any other names (AGENT_BAD_NAME), which the link would
  // retry for ever: said here, once, before anything starts.
  const nodeBad = nodeNameProblem(node);
  if (nodeBad !== null)
    throw new HoptraceError('CLI_USAGE', nodeBad, {
      where: opts.node === undefined ? 'the host name (no --node given)' : '--node',
      hint: "give --node the node's name (Kubernetes: spec.nodeName)",
    });
  const idBad = opts.agentId === undefined ? null : agentIdProblem(opts.agentId);
  if (idBad !== null) throw new HoptraceError('CLI_USAGE', idBad, { where: '--agent-id' });
  const newId = (): string => `${node}-${randomBytes(3).toString('hex')}`;
  let agentId = opts.agentId ?? newId();
  const scope = opts.scope ?? {};
  // Said once at start, so a DaemonSet without one of them names it before any capture fails.
  for (const c of missingCapabilities() ?? []) {
    log.error(
      { code: 'AGENT_NOT_PERMITTED', capability: `CAP_${c.name}` },
      `the agent lacks CAP_${c.name} (${c.usedFor}): ${c.without}`,
    );
  }
  let nodeAddrs: string[] = [];
  let namespaces: NamespaceInfo[] = [];
  let onChange = (): void => undefined;
  // Namespaces are scanned at every refresh, their addresses read again only when new, young or
  // stale (agent/netns/inventory-cache.ts): each read is a child process.
  const nodeCache = new InventoryCache<string[]>();
  const nsCache = new InventoryCache<NamespaceInfo>();
  const refresh = async (): Promise<void> => {
    try {
      const before = JSON.stringify([nodeAddrs, namespaces]);
      const nowMs = Date.now();
      [nodeAddrs, namespaces] = await Promise.all([
        nodeAddresses(opts.nodeNetns, { c: nodeCache, nowMs }),
        namespaceInventory(scope, { c: nsCache, nowMs }),
      ]);
      if (JSON.stringify([nodeAddrs, namespaces]) !== before) onChange();
    } catch (e) {
      log.warn(
        {
          code: isHoptraceError(e) ? e.code : 'NETNS_QUERY_FAILED',
          err: e instanceof Error ? e.message : String(e),
        },
        'inventory refresh failed',
      );
    }
  };
  await refresh();

  const maxCaptures = opts.maxCaptures ?? DEFAULT_MAX_CAPTURES;
  const link = new CollectorLink({
    url: opts.collectorUrl,
    token: opts.token,
    ...(opts.ca ? { ca: opts.ca } : {}),
    ...(opts.cert && opts.key ? { cert: opts.cert, key: opts.key } : {}),
    hello: () => buildHello(agentId, node, hoptraceVersion(), nodeAddrs, namespaces, maxCaptures),
    onSeqExhausted: () => {
      agentId = newId();
    },
    ...(opts.spoolLimit !== undefined ? { spoolLimit: opts.spoolLimit } : {}),
    ...(opts.heartbeatMs !== undefined ? { heartbeatMs: opts.heartbeatMs } : {}),
    logger: log.child({ agentId }),
  });

  const retention =
    opts.retention === false
      ? undefined
      : new RetentionStore({
          dir: process.env['HOPTRACE_RETENTION_DIR'] ?? join(tmpdir(), 'hoptrace-retention'),
          onWarning: (message) => {
            log.warn({ code: 'RETENTION_OFF' }, message);
          },
          ...opts.retention,
        });
  const runtime = new AgentRuntime(
    node,
    {
      send: (kind: 'events' | 'status' | 'error', body: never) => {
        link.send(kind as 'events', body);
      },
      resolveTarget: (target) => resolveTarget(target, scope),
      namespaceAddresses: (path) => namespaceAddresses(path),
      makeCapture: (spec, netnsPath, retain) =>
        new NsCapture(spec, {
          netnsPath,
          batch: { maxBatch: LINK_BATCH_EVENTS },
          ...(retain === undefined ? {} : { retain }),
        }),
      nowMs: () => Date.now(),
      ...(retention === undefined ? {} : { retention }),
    },
    log.child({ agentId }),
    { maxCaptures },
  );
  onChange = () => {
    link.refreshHello();
  };
  link.onCommand((cmd) => {
    runtime.handle(cmd);
  });
  link.onRequest(
    serveRequests({
      answer: (req) => answerRequest(req, agentId, { node, nodeNetns: opts.nodeNetns, scope }),
      frames: (req) => runtime.frames(req),
      reply: (body: AgentReplyBody) => {
        if (!link.reply(body))
          log.warn({ agentId, kind: body.kind }, 'reply not sent: not connected');
      },
      agentId: () => agentId,
      node,
      logger: log.child({ agentId }),
    }),
  );

  const timer = setInterval(() => void refresh(), opts.refreshMs ?? 5000);
  timer.unref();

  const connected = new Promise<void>((resolve) => {
    link.onConnected(() => {
      resolve();
    });
  });

  return {
    get agentId() {
      return agentId;
    },
    node,
    stats: () => link.stats(),
    connected,
    onError: (handler) => {
      link.onError(handler);
    },
    close: async () => {
      clearInterval(timer);
      await runtime.close();
      retention?.close();
      // Give the collector a moment to acknowledge the last statuses; never hang on a dead link.
      await Promise.race([link.flush(), new Promise((r) => setTimeout(r, 2000).unref())]);
      await link.close();
    },
  };
}

/**
 * The live lab's collector: `hoptrace collector` as a subprocess on a loopback port with a temp
 * data dir and a random token, plus a small typed client for its HTTP API. The process can be
 * SIGKILLed and restarted on the same port and data dir (the restart test).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HoptraceError } from '../common/errors';
import type { AgentView, CaptureView } from '../collector';
import { collect, stopChild, waitForLine } from './child';
import { delay } from './netns';
import { forget, removeOnExit, spawnTracked } from './live-procs';

/** dist/cli/main.js, next to this file's dist/lab/. */
export const CLI_MAIN = join(__dirname, '..', 'cli', 'main.js');

/** The body of `POST /v1/captures`. */
export interface CaptureRequestBody {
  points: { name: string; target: string; iface: string; filter?: string; node?: string }[];
  client?: string;
  dst?: string;
  dport?: number;
  timeoutMs?: number;
  stopOnFirstMatch?: boolean;
  settleMs?: number;
  evidencePayload?: boolean;
  doctor?: { tunnelRange: string };
}

/** The collector runs without a test runner's NODE_OPTIONS instrumentation. */
function collectorEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  return env;
}

/** A non-2xx answer of the API. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`HTTP ${status}: ${body.trim()}`);
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function asCaptureView(v: unknown): CaptureView {
  if (!isRecord(v) || typeof v['id'] !== 'string' || !Array.isArray(v['points']))
    throw new Error(`not a capture view: ${JSON.stringify(v)}`);
  return v as unknown as CaptureView;
}

function asAgents(v: unknown): AgentView[] {
  if (!isRecord(v) || !Array.isArray(v['agents']))
    throw new Error(`not an agent list: ${JSON.stringify(v)}`);
  return v['agents'] as AgentView[];
}

/** The lab's nodes that run an agent (lab/live-agents.ts labNodes). */
export const LAB_NODE_NAMES = ['vpn-node', 'backend-node'] as const;

/** Where a LiveCollector keeps its data, and how much of its log. */
export interface LiveCollectorOptions {
  /** The data directory (default: `data` in the collector's temp dir), e.g. on a small tmpfs. */
  dataDir?: string;
  /** Keep only the last this many characters of its log (default: all of it). */
  logTailChars?: number;
  /**
   * Agents may also use the shared token (`--allow-shared-agent-token`): simulated agents of
   * made-up nodes (bench/reliability) have no node token.
   */
  allowSharedAgentToken?: boolean;
  /** More `hoptrace collector` flags (the kubectl lab test: `--kubeconfig` of a simulated API). */
  collectorArgs?: readonly string[];
}

/** A running collector subprocess. */
export class LiveCollector {
  readonly dataDir: string;
  readonly tokenFile: string;
  readonly token: string;
  /**
   * `--agent-tokens`: one token per lab node, so the live lab runs with per-agent identity (each
   * agent can speak only for its own node; the shared token opens the API only).
   */
  readonly agentTokensFile: string;
  private readonly nodeTokens = new Map<string, string>();
  private readonly tmp: string;
  private child: ChildProcess | undefined;
  private stderr: () => string = () => '';
  /** Logs of earlier incarnations (before a restart). */
  private pastLogs = '';
  private readonly logTailChars: number;
  private readonly allowShared: boolean;
  private readonly extraArgs: readonly string[];
  port = 0;

  private constructor(opts: LiveCollectorOptions) {
    this.tmp = mkdtempSync(join(tmpdir(), 'hoptrace-live-'));
    removeOnExit(this.tmp);
    this.dataDir = opts.dataDir ?? join(this.tmp, 'data');
    this.logTailChars = opts.logTailChars ?? Infinity;
    this.allowShared = opts.allowSharedAgentToken === true;
    this.extraArgs = opts.collectorArgs ?? [];
    this.tokenFile = join(this.tmp, 'token');
    this.token = randomBytes(24).toString('hex');
    writeFileSync(this.tokenFile, `${this.token}\n`, { mode: 0o600 });
    this.agentTokensFile = join(this.tmp, 'agent-tokens');
    const lines: string[] = [];
    for (const node of LAB_NODE_NAMES) {
      const token = randomBytes(24).toString('hex');
      this.nodeTokens.set(node, token);
      writeFileSync(join(this.tmp, `token-${node}`), `${token}\n`, { mode: 0o600 });
      lines.push(`${node} ${token}`);
    }
    writeFileSync(this.agentTokensFile, `${lines.join('\n')}\n`, { mode: 0o600 });
  }

  /** The token file of `node`'s agent (its line of the agent token file). */
  nodeTokenFile(node: string): string {
    if (!this.nodeTokens.has(node)) throw new Error(`no agent token for lab node ${node}`);
    return join(this.tmp, `token-${node}`);
  }

  /** Starts a collector on 127.0.0.1 (a free port) and waits for its "listening" line. */
  static async start(opts: LiveCollectorOptions = {}): Promise<LiveCollector> {
    const c = new LiveCollector(opts);
    try {
      await c.spawn();
    } catch (e) {
      await c.close();
      throw e;
    }
    return c;
  }

  /** A directory for the lab's own files (removed with the collector). */
  get tmpDir(): string {
    return this.tmp;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get agentsUrl(): string {
    return `ws://127.0.0.1:${this.port}/v1/agents`;
  }

  /** Everything the collector logged (JSON lines), across restarts. */
  logs(): string {
    return this.pastLogs + this.stderr();
  }

  /** The collector's process id while it runs (RSS, CPU from /proc). */
  get pid(): number | undefined {
    return this.running() ? this.child?.pid : undefined;
  }

  running(): boolean {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  private async spawn(): Promise<void> {
    // HOPTRACE_COLLECTOR_NODE_ARGS: node flags for the collector (profiling: `--cpu-prof`).
    const nodeArgs = (process.env['HOPTRACE_COLLECTOR_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
    const child = spawnTracked(
      [
        ...nodeArgs,
        CLI_MAIN,
        'collector',
        '--listen',
        `127.0.0.1:${this.port}`,
        '--data-dir',
        this.dataDir,
        '--token-file',
        this.tokenFile,
        '--agent-tokens',
        this.agentTokensFile,
        ...(this.allowShared ? ['--allow-shared-agent-token'] : []),
        ...this.extraArgs,
      ],
      collectorEnv(),
    );
    this.child = child;
    this.stderr = collect(child.stderr, this.logTailChars);
    const line = await waitForLine(
      child,
      child.stdout,
      /^collector \S+ listening on http:\/\/127\.0\.0\.1:\d+/,
      'hoptrace collector',
      10_000,
    ).catch((e: unknown) => {
      if (e instanceof Error) e.message += ` stderr: ${this.stderr().trim()}`;
      throw e;
    });
    child.stdout?.resume();
    this.port = Number(/127\.0\.0\.1:(\d+)/.exec(line)?.[1]);
  }

  /** SIGKILL: no clean shutdown, no final save (what a crash or an OOM kill does). */
  kill(): Promise<void> {
    return this.end('SIGKILL', 3000);
  }

  /** SIGTERM (a clean shutdown) keeping the data dir; `restart` starts it again. */
  stop(): Promise<void> {
    return this.end('SIGTERM', 10_000);
  }

  private async end(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    await stopChild(child, signal, timeoutMs);
    this.pastLogs = (this.pastLogs + this.stderr()).slice(-this.logTailChars);
    this.stderr = () => '';
    this.child = undefined;
  }

  /** Starts the collector again on the same port and data dir. */
  async restart(): Promise<void> {
    if (this.running()) await this.kill();
    // The port was just released by a killed process; listen can race the kernel's cleanup.
    for (let i = 0; ; i++) {
      try {
        await this.spawn();
        return;
      } catch (e) {
        if (i >= 20 || !/EADDRINUSE|COLLECTOR_LISTEN/.test(String(e))) throw e;
        await delay(100);
      }
    }
  }

  /** SIGTERM (clean), removes the temp dir. */
  async close(): Promise<void> {
    if (this.child !== undefined) await stopChild(this.child, 'SIGTERM', 5000);
    this.child = undefined;
    rmSync(this.tmp, { recursive: true, force: true });
    forget(this.tmp);
  }

  /** One API call with the bearer token; rejects with ApiError on a non-2xx answer. */
  async api(
    method: string,
    path: string,
    body?: unknown,
    token = this.token,
    timeoutMs = 10_000,
  ): Promise<unknown> {
    const init: RequestInit = {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      signal: AbortSignal.timeout(timeoutMs),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(`${this.url}${path}`, init);
    const text = await res.text();
    if (!res.ok) throw new ApiError(res.status, text);
    return JSON.parse(text) as unknown;
  }

  async agents(): Promise<AgentView[]> {
    return asAgents(await this.api('GET', '/v1/agents'));
  }

  async createCapture(body: CaptureRequestBody): Promise<CaptureView> {
    return asCaptureView(await this.api('POST', '/v1/captures', body));
  }

  async capture(id: string): Promise<CaptureView> {
    return asCaptureView(await this.api('GET', `/v1/captures/${encodeURIComponent(id)}`));
  }

  async cancel(id: string): Promise<CaptureView> {
    return asCaptureView(await this.api('DELETE', `/v1/captures/${encodeURIComponent(id)}`));
  }

  /** The capture when `done(view)` holds; rejects with the last view after `timeoutMs`. */
  async waitCapture(
    id: string,
    done: (v: CaptureView) => boolean,
    what: string,
    timeoutMs = 20_000,
  ): Promise<CaptureView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await this.capture(id);
      if (done(v)) return v;
      if (Date.now() > deadline) {
        throw new HoptraceError(
          'LAB_SETUP',
          `capture ${id}: ${what} not reached after ${timeoutMs} ms (state ${v.state}, points ${v.points
            .map(
              (p) => `${p.name}=${p.state}${p.error ? ` ${p.error.code}: ${p.error.message}` : ''}`,
            )
            .join(', ')})`,
          { where: 'lab' },
        );
      }
      await delay(25);
    }
  }
}

/** Polls `GET /v1/agents` until `ok(agents)`; rejects after `timeoutMs` naming what was listed. */
export async function waitAgents(
  c: LiveCollector,
  ok: (agents: AgentView[]) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<AgentView[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const agents = await c.agents();
    if (ok(agents)) return agents;
    if (Date.now() > deadline) {
      throw new HoptraceError(
        'LAB_SETUP',
        `${what} not reached after ${timeoutMs} ms; agents: ${
          agents.map((a) => `${a.agentId}(${a.connected ? 'connected' : 'gone'})`).join(', ') ||
          'none'
        }`,
        { where: 'lab' },
      );
    }
    await delay(25);
  }
}

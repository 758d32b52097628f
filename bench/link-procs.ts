/**
 * The processes of the link trials (bench/link.ts): a `hoptrace collector` child and a
 * `hoptrace agent` child connected to it, started from the CLI as a user starts them — the agent
 * with a node token file and retention at its defaults, over `wss://` (a test CA made here with
 * openssl) or plain `ws://` on 127.0.0.1 — plus the few calls of the collector's HTTP API the
 * bench needs (arm, read, cancel a capture), over https with that CA when the link is TLS.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { CaptureView } from '../collector';
import { collect, stopChild, waitForLine } from '../lab/child';
import { CLI_MAIN } from '../lab/live-collector';
import { spawnTracked } from '../lab/live-procs';

export type LinkScheme = 'wss' | 'ws';

/** A test CA and a server certificate for 127.0.0.1 under `dir` (as test/unit/tls.test.ts). */
export function makeTestPki(dir: string): { ca: string; cert: string; key: string } {
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=hoptrace bench CA',
  );
  ssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'san.ext',
  );
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key') };
}

/** The children run without a test runner's NODE_OPTIONS; `extra` adds to the environment. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env['NODE_OPTIONS'];
  return env;
}

/** Node flags from an environment variable (profiling: `--cpu-prof --cpu-prof-dir=DIR`). */
export function nodeArgsFrom(value: string | undefined): string[] {
  return (value ?? '').split(' ').filter((a) => a !== '');
}

/**
 * The CLI both processes run: this build's, or HOPTRACE_BENCH_CLI (another build's
 * dist/cli/main.js, for a before/after of a change in the same run conditions).
 */
export function benchCli(): string {
  return process.env['HOPTRACE_BENCH_CLI'] ?? CLI_MAIN;
}

/** One collector and one agent connected to it, over one scheme. */
export class LinkPair {
  private collector: ChildProcess | undefined;
  private agent: ChildProcess | undefined;
  private collectorLog: () => string = () => '';
  private agentLog: () => string = () => '';
  private readonly apiToken = randomBytes(24).toString('hex');
  private ca: Buffer | undefined;
  port = 0;

  private constructor(
    readonly scheme: LinkScheme,
    private readonly dir: string,
    readonly node: string,
  ) {}

  /**
   * Starts the collector, then the agent (scoped to the namespaces named `netnsGlob`), and waits
   * until the agent said it is connected. `dir` is the pair's own temp dir (the caller removes it).
   */
  static async start(scheme: LinkScheme, dir: string, netnsGlob: string): Promise<LinkPair> {
    const p = new LinkPair(scheme, dir, 'bench');
    try {
      await p.spawn(netnsGlob);
    } catch (e) {
      await p.close();
      throw e;
    }
    return p;
  }

  get collectorPid(): number {
    return this.collector?.pid ?? -1;
  }

  get agentPid(): number {
    return this.agent?.pid ?? -1;
  }

  /** The last lines both processes logged (for a failure's message). */
  logs(): string {
    const tail = (s: string): string => s.trim().split('\n').slice(-8).join('\n');
    return `collector:\n${tail(this.collectorLog())}\nagent:\n${tail(this.agentLog())}`;
  }

  private async spawn(netnsGlob: string): Promise<void> {
    mkdirSync(join(this.dir, 'data'), { recursive: true });
    const tokenFile = join(this.dir, 'api-token');
    writeFileSync(tokenFile, `${this.apiToken}\n`, { mode: 0o600 });
    const nodeToken = randomBytes(24).toString('hex');
    const nodeTokenFile = join(this.dir, 'node-token');
    writeFileSync(nodeTokenFile, `${nodeToken}\n`, { mode: 0o600 });
    const agentTokens = join(this.dir, 'agent-tokens');
    writeFileSync(agentTokens, `${this.node} ${nodeToken}\n`, { mode: 0o600 });
    const tls: string[] = [];
    let caFile: string | undefined;
    if (this.scheme === 'wss') {
      const pki = makeTestPki(this.dir);
      tls.push('--tls-cert', pki.cert, '--tls-key', pki.key);
      caFile = pki.ca;
      this.ca = readFileSync(pki.ca);
    }
    const collector = spawnTracked(
      [
        ...nodeArgsFrom(process.env['HOPTRACE_COLLECTOR_NODE_ARGS']),
        benchCli(),
        'collector',
        '--listen',
        '127.0.0.1:0',
        '--data-dir',
        join(this.dir, 'data'),
        '--token-file',
        tokenFile,
        '--agent-tokens',
        agentTokens,
        '--log-level',
        'warn',
        ...tls,
      ],
      childEnv(),
    );
    this.collector = collector;
    this.collectorLog = collect(collector.stderr, 20_000);
    const line = await waitForLine(
      collector,
      collector.stdout,
      /^collector \S+ listening on https?:\/\/127\.0\.0\.1:\d+/,
      'hoptrace collector',
      15_000,
    );
    collector.stdout?.resume();
    this.port = Number(/127\.0\.0\.1:(\d+)/.exec(line)?.[1]);
    const agent = spawnTracked(
      [
        ...nodeArgsFrom(process.env['HOPTRACE_BENCH_AGENT_NODE_ARGS']),
        benchCli(),
        'agent',
        '--collector',
        `${this.scheme}://127.0.0.1:${this.port}/v1/agents`,
        '--node',
        this.node,
        '--token-file',
        nodeTokenFile,
        ...(caFile === undefined ? [] : ['--ca', caFile]),
        '--netns-glob',
        netnsGlob,
        '--no-proc-scan',
        '--log-level',
        'warn',
      ],
      // Retention at its defaults, in this run's temp dir rather than the machine's.
      childEnv({ HOPTRACE_RETENTION_DIR: join(this.dir, 'retention') }),
    );
    this.agent = agent;
    this.agentLog = collect(agent.stderr, 20_000);
    await waitForLine(
      agent,
      agent.stdout,
      /^hoptrace agent \S+ .*connected to/,
      'hoptrace agent',
      15_000,
    );
    agent.stdout?.resume();
  }

  /** One API call; rejects naming the status and body on a non-2xx answer. */
  api(method: string, path: string, body?: unknown): Promise<unknown> {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const send = this.scheme === 'wss' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(
        {
          host: '127.0.0.1',
          port: this.port,
          method,
          path,
          timeout: 15_000,
          ...(this.ca === undefined ? {} : { ca: this.ca }),
          headers: {
            authorization: `Bearer ${this.apiToken}`,
            ...(data === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if (status < 200 || status > 299)
              reject(new Error(`${method} ${path}: HTTP ${status}: ${text}`));
            else resolve(JSON.parse(text) as unknown);
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 15 s`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  async capture(id: string): Promise<CaptureView> {
    return (await this.api('GET', `/v1/captures/${encodeURIComponent(id)}`)) as CaptureView;
  }

  /** SIGTERM to the agent, then the collector (SIGKILL after 10 s each). */
  async close(): Promise<void> {
    if (this.agent !== undefined) await stopChild(this.agent, 'SIGTERM', 10_000);
    if (this.collector !== undefined) await stopChild(this.collector, 'SIGTERM', 10_000);
    this.agent = undefined;
    this.collector = undefined;
  }
}

/**
 * The capture workers of an agent: its child processes (nsenter execs node, so a worker is the
 * agent's direct child) and the interface each captures on, from the worker's JSON argument.
 */
export function workerPids(agentPid: number): { pid: number; iface: string | null }[] {
  const out: { pid: number; iface: string | null }[] = [];
  let children: string;
  try {
    children = readdirChildren(agentPid);
  } catch {
    return out;
  }
  for (const c of children.split(' ').filter((s) => s !== '')) {
    const pid = Number(c);
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    out.push({ pid, iface: ifaceOfWorker(cmdline) });
  }
  return out;
}

/** The children of every thread of `pid` (/proc/PID/task/TID/children). */
function readdirChildren(pid: number): string {
  return readdirSync(`/proc/${pid}/task`)
    .map((t) => readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8'))
    .join(' ');
}

/** The `iface` of a worker's NUL-separated command line (its JSON argument), null if none. */
export function ifaceOfWorker(cmdline: string): string | null {
  for (const arg of cmdline.split('\0')) {
    if (!arg.startsWith('{')) continue;
    try {
      const v = JSON.parse(arg) as { iface?: unknown; spec?: { iface?: unknown } };
      const iface = v.iface ?? v.spec?.iface;
      if (typeof iface === 'string') return iface;
    } catch {
      // not the worker's argument
    }
  }
  return null;
}

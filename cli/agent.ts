/** `hoptrace agent`: parse the flags, start the agent, run until SIGTERM/SIGINT. */
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import pino from 'pino';
import { startAgent, type AgentOptions } from '../agent';
import { loadToken } from '../common/auth';
import { readBoundedText, sizeText } from '../common/bounded-file';
import { HoptraceError } from '../common/errors';
import { parseCommandLine } from './args';

export const USAGE =
  'hoptrace agent --collector ws://HOST:PORT/v1/agents [--node NAME] [--agent-id ID] [--token-file FILE] [--ca FILE] [--cert FILE --key FILE] [--node-netns PATH] [--netns-glob GLOB] [--no-proc-scan] [--refresh-ms N] [--spool N] [--max-captures N] [--retention-dir DIR | --no-retention] [--log-level LEVEL]';

/** pino's levels, the most severe first, and 'silent'. */
export const AGENT_LOG_LEVELS: readonly string[] = [
  ...Object.entries(pino.levels.values)
    .sort((a, b) => b[1] - a[1])
    .map(([name]) => name),
  'silent',
];

/** A PEM file (a CA bundle, a certificate, a key) is far smaller than this. */
const PEM_MAX_BYTES = 1024 * 1024;

/** A PEM file named by a flag, read bounded (CLI_USAGE when it cannot be read). */
function readPem(flag: string, file: string): Buffer {
  try {
    return Buffer.from(readBoundedText(file, PEM_MAX_BYTES), 'utf8');
  } catch (e) {
    throw new HoptraceError(
      'CLI_USAGE',
      `cannot read ${file} (${e instanceof Error ? e.message : String(e)})`,
      { where: flag, hint: `a PEM file of at most ${sizeText(PEM_MAX_BYTES)}` },
    );
  }
}

/**
 * The collector URL, checked whole (a port beyond 65535 made `new WebSocket` throw at start, an
 * "internal error" with a stack trace).
 */
function collectorUrl(url: string | undefined): string {
  const bad = (why: string): HoptraceError =>
    new HoptraceError(
      'CLI_USAGE',
      `${why}: give the collector as ws://HOST:PORT/v1/agents (or wss://)`,
      {
        where: '--collector',
      },
    );
  if (url === undefined) throw bad('no collector');
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw bad(`'${url}' is not a URL (a port is 1-65535)`);
  }
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:')
    throw bad(`'${u.protocol}' is not ws: or wss:`);
  if (u.hostname === '') throw bad(`'${url}' names no host`);
  return url;
}

/** The agent options from the command line and the environment. */
export function parseAgentArgs(
  argv: string[],
  env: NodeJS.ProcessEnv,
): AgentOptions & { logLevel: string } {
  const { values, positionals } = parseCommandLine('agent', USAGE, argv, {
    collector: { type: 'string' },
    node: { type: 'string' },
    'agent-id': { type: 'string' },
    'token-file': { type: 'string' },
    ca: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
    'node-netns': { type: 'string' },
    'netns-glob': { type: 'string' },
    'no-proc-scan': { type: 'boolean' },
    spool: { type: 'string' },
    'max-captures': { type: 'string' },
    'retention-dir': { type: 'string' },
    'no-retention': { type: 'boolean' },
    'refresh-ms': { type: 'string' },
    'log-level': { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: 'hoptrace agent',
      hint: `usage: ${USAGE}`,
    });
  }
  const url = collectorUrl(values.collector);
  const logLevel = values['log-level'] ?? 'info';
  if (!AGENT_LOG_LEVELS.includes(logLevel))
    throw new HoptraceError('CLI_USAGE', `unknown log level '${logLevel}'`, {
      where: '--log-level',
      hint: `one of ${AGENT_LOG_LEVELS.join(', ')}`,
    });
  const certFile = values.cert;
  const keyFile = values.key;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new HoptraceError('CLI_USAGE', 'give both --cert and --key, or neither', {
      where: 'hoptrace agent',
    });
  const tokenFile = values['token-file'];
  // A token file is read now (a wrong path fails at start) and again on every connection: a
  // projected ServiceAccount token is rotated in place by the kubelet. A regular file only: a
  // FIFO would be waited on, and read once.
  let token: string | (() => string);
  if (tokenFile !== undefined) {
    loadToken({ file: tokenFile, regularOnly: true });
    token = () => loadToken({ file: tokenFile, regularOnly: true });
  } else if (certFile !== undefined && (env['HOPTRACE_TOKEN'] ?? '').trim() === '') {
    token = ''; // the client certificate is the identity
  } else {
    token = loadToken({ env });
  }
  const opts: AgentOptions & { logLevel: string } = {
    collectorUrl: url,
    token,
    logLevel,
    scope: {
      ...(values['netns-glob'] !== undefined ? { netnsGlob: values['netns-glob'] } : {}),
      scanProc: values['no-proc-scan'] !== true,
    },
  };
  if (values.node !== undefined) opts.node = values.node;
  if (values['agent-id'] !== undefined) opts.agentId = values['agent-id'];
  if (values['node-netns'] !== undefined) opts.nodeNetns = values['node-netns'];
  if (certFile !== undefined && keyFile !== undefined) {
    opts.cert = readPem('--cert', certFile);
    opts.key = readPem('--key', keyFile);
    checkClientPair(certFile, opts.cert, keyFile, opts.key);
  }
  if (values.ca !== undefined) {
    opts.ca = readPem('--ca', values.ca);
    checkCaPem(values.ca, opts.ca);
  }
  if (values['refresh-ms'] !== undefined) {
    // How often the namespace inventory is re-read (a changed one re-sends the hello): a repro
    // follows a rescheduled pod only as fast as this.
    const n = Number(values['refresh-ms']);
    if (!Number.isInteger(n) || n < 100)
      throw new HoptraceError(
        'CLI_USAGE',
        `'${values['refresh-ms']}' is not a number of ms ≥ 100`,
        {
          where: '--refresh-ms',
        },
      );
    opts.refreshMs = n;
  }
  if (values['no-retention'] === true && values['retention-dir'] !== undefined)
    throw new HoptraceError('CLI_USAGE', 'give --retention-dir or --no-retention, not both', {
      where: 'hoptrace agent',
    });
  // Where the frames of each capture are retained for the evidence (files unlinked at once).
  if (values['no-retention'] === true) opts.retention = false;
  else if (values['retention-dir'] !== undefined) opts.retention = { dir: values['retention-dir'] };
  if (values.spool !== undefined) {
    const n = Number(values.spool);
    if (!Number.isInteger(n) || n < 1) {
      throw new HoptraceError(
        'CLI_USAGE',
        `'${values.spool}' is not a positive number of batches`,
        { where: '--spool' },
      );
    }
    opts.spoolLimit = n;
  }
  const maxCaptures = values['max-captures'];
  if (maxCaptures !== undefined) {
    const n = Number(maxCaptures);
    if (!/^[0-9]+$/.test(maxCaptures) || !Number.isSafeInteger(n) || n < 1)
      throw new HoptraceError(
        'CLI_USAGE',
        `'${maxCaptures}' is not a whole number of captures ≥ 1`,
        {
          where: '--max-captures',
          hint: "each capture is ~85 MiB of the agent's memory; the default, 4, fits its 512 MiB limit",
        },
      );
    opts.maxCaptures = n;
  }
  return opts;
}

export async function runAgent(argv: string[], out: (line: string) => void): Promise<number> {
  const opts = parseAgentArgs(argv, process.env);
  const logger = pino({ level: opts.logLevel, base: { role: 'agent' } });
  // Link problems are logged by the link itself, once per change (agent/link/collector-link.ts).
  const agent = await startAgent({ ...opts, logger });
  void agent.connected.then(() => {
    out(`hoptrace agent ${agent.agentId} (node ${agent.node}) connected to ${opts.collectorUrl}`);
  });
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await agent.close();
  return 0;
}

/**
 * Refuses a --cert/--key pair that TLS cannot use (AGENT_TLS): not PEM, or a key that is not the
 * certificate's. Taken as they were, every handshake failed and the agent retried for ever.
 */
export function checkClientPair(
  certFile: string,
  cert: Buffer,
  keyFile: string,
  key: Buffer,
): void {
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new HoptraceError(
      'AGENT_TLS',
      `${certFile} and ${keyFile}: ${e instanceof Error ? e.message : String(e)}`,
      {
        where: '--cert/--key',
        hint: "give the agent's client certificate and its private key, in PEM",
      },
    );
  }
}

/**
 * Refuses a --ca that holds no PEM certificate, or one that does not parse (AGENT_TLS): Node's TLS
 * takes such a file silently, and the agent would then fail every handshake as "unreachable".
 */
export function checkCaPem(file: string, pem: Buffer): void {
  const blocks =
    pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ??
    [];
  const bad = (why: string): HoptraceError =>
    new HoptraceError('AGENT_TLS', `${file}: ${why}`, {
      where: '--ca',
      hint: "give the collector's CA certificate, ca.crt, in PEM",
    });
  if (blocks.length === 0) throw bad('no PEM certificate in it');
  for (const [i, b] of blocks.entries()) {
    try {
      new X509Certificate(b);
    } catch (e) {
      throw bad(
        `PEM certificate ${i + 1} does not parse (${e instanceof Error ? e.message : String(e)})`,
      );
    }
  }
}

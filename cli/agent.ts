/** `hoptrace agent`: parse the flags, start the agent, run until SIGTERM/SIGINT. */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pino from 'pino';
import { startAgent, type AgentOptions } from '../agent';
import { loadToken } from '../common/auth';
import { HoptraceError } from '../common/errors';
import { parseCommandLine, readFileArg } from './args';

export const USAGE =
  'hoptrace agent --collector ws://HOST:PORT/v1/agents [--node NAME] [--agent-id ID] [--token-file FILE] [--ca FILE] [--cert FILE --key FILE] [--node-netns PATH] [--netns-glob GLOB] [--no-proc-scan] [--refresh-ms N] [--spool N] [--retention-dir DIR | --no-retention] [--log-level LEVEL]';

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
  const url = values.collector;
  if (url === undefined || !/^wss?:\/\/[^/]+/.test(url)) {
    throw new HoptraceError(
      'CLI_USAGE',
      'give the collector as ws://HOST:PORT/v1/agents (or wss://)',
      {
        where: '--collector',
      },
    );
  }
  const certFile = values.cert;
  const keyFile = values.key;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new HoptraceError('CLI_USAGE', 'give both --cert and --key, or neither', {
      where: 'hoptrace agent',
    });
  const tokenFile = values['token-file'];
  // A token file is read now (a wrong path fails at start) and again on every connection: a
  // projected ServiceAccount token is rotated in place by the kubelet.
  let token: string | (() => string);
  if (tokenFile !== undefined) {
    loadToken({ file: tokenFile });
    token = () => loadToken({ file: tokenFile });
  } else if (certFile !== undefined && (env['HOPTRACE_TOKEN'] ?? '').trim() === '') {
    token = ''; // the client certificate is the identity
  } else {
    token = loadToken({ env });
  }
  const opts: AgentOptions & { logLevel: string } = {
    collectorUrl: url,
    token,
    logLevel: values['log-level'] ?? 'info',
    scope: {
      ...(values['netns-glob'] !== undefined ? { netnsGlob: values['netns-glob'] } : {}),
      scanProc: values['no-proc-scan'] !== true,
    },
  };
  if (values.node !== undefined) opts.node = values.node;
  if (values['agent-id'] !== undefined) opts.agentId = values['agent-id'];
  if (values['node-netns'] !== undefined) opts.nodeNetns = values['node-netns'];
  if (certFile !== undefined && keyFile !== undefined) {
    opts.cert = readFileArg('--cert', certFile);
    opts.key = readFileArg('--key', keyFile);
  }
  if (values.ca !== undefined) {
    try {
      opts.ca = readFileSync(values.ca);
    } catch (e) {
      throw new HoptraceError(
        'CLI_USAGE',
        `cannot read ${values.ca} (${e instanceof Error ? e.message : String(e)})`,
        {
          where: '--ca',
        },
      );
    }
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
  return opts;
}

export async function runAgent(argv: string[], out: (line: string) => void): Promise<number> {
  const opts = parseAgentArgs(argv, process.env);
  const logger = pino({ level: opts.logLevel, base: { role: 'agent' } });
  const agent = await startAgent({ ...opts, logger });
  agent.onError((err) => {
    logger.error({ code: err.code, agentId: agent.agentId }, err.message);
  });
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

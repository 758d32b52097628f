/**
 * `hoptrace collector`: parse the flags, start the collector, run until SIGTERM/SIGINT.
 */
import { join } from 'node:path';
import { loadToken } from '../common/auth';
import { HoptraceError } from '../common/errors';
import {
  DEFAULT_MAX_FINISHED_HELD,
  DEFAULT_MAX_FINISHED_REPROS,
  DEFAULT_MAX_LIVE_CAPTURES,
  DEFAULT_RETAIN_FINISHED,
  DEFAULT_RETAIN_FINISHED_REPROS,
  LOG_LEVELS,
  readNodeTokens,
  startCollector,
  type AgentAuthOptions,
  type CollectorOptions,
  type LogLevel,
  type RunningCollector,
} from '../collector';
import { parseAge, parseCommandLine, readFileArg } from './args';
import { parseDuration } from './capture';

export const USAGE =
  'hoptrace collector [--listen HOST:PORT] [--data-dir DIR] [--token-file FILE] [--api-token-file FILE] [--tls-cert FILE --tls-key FILE] [--agent-tokens FILE] [--client-ca FILE] [--token-review [--token-review-audience AUD] [--agent-service-account NS:NAME]] [--allow-shared-agent-token] [--max-live-captures 32] [--keep-finished 1000] [--keep-finished-repros 50] [--retain-finished 10000] [--retain-finished-repros 1000] [--retain-age 30d] [--log-level LEVEL] [--kubernetes | --kubeconfig FILE] [--kubernetes-interval 10s]';

/** `HOST:PORT` or `[IPv6]:PORT` (127.0.0.1:7070 by default); `:PORT` is refused as ambiguous. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(value) ?? /^([^:[\]]*):(\d+)$/.exec(value);
  const port = Number(m?.[2]);
  if (m === null || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new HoptraceError('CLI_USAGE', `'${value}' is not HOST:PORT`, {
      where: '--listen',
      hint: 'e.g. --listen 0.0.0.0:7070 or --listen [::]:7070',
    });
  }
  if (m[1] === '' || m[1] === undefined) {
    // ':7070' used to mean every address, silently; which one is meant must be said.
    throw new HoptraceError('CLI_USAGE', `'${value}' names no address`, {
      where: '--listen',
      hint: 'give 127.0.0.1:PORT (this machine only) or 0.0.0.0:PORT / [::]:PORT (every address)',
    });
  }
  return { host: m[1], port };
}

/** $XDG_STATE_HOME/hoptrace, else ./hoptrace-data. */
export function defaultDataDir(env: NodeJS.ProcessEnv): string {
  const xdg = env['XDG_STATE_HOME'];
  return xdg !== undefined && xdg !== '' ? join(xdg, 'hoptrace') : 'hoptrace-data';
}

/** How agents prove who they are (collector/agent-auth.ts), from the flags. */
function agentAuthOf(values: {
  'agent-tokens'?: string | undefined;
  'client-ca'?: string | undefined;
  'token-review'?: boolean | undefined;
  'token-review-audience'?: string | undefined;
  'agent-service-account'?: string | undefined;
  'allow-shared-agent-token'?: boolean | undefined;
}): AgentAuthOptions {
  const out: AgentAuthOptions = {};
  const file = values['agent-tokens'];
  if (file !== undefined) out.nodeTokens = readNodeTokens(file);
  const ca = values['client-ca'];
  if (ca !== undefined) out.clientCa = readFileArg('--client-ca', ca);
  const audience = values['token-review-audience'];
  const sa = values['agent-service-account'];
  if (values['token-review'] === true) {
    if (sa !== undefined && !/^[a-z0-9-]{1,63}:[a-z0-9.-]{1,253}$/.test(sa))
      throw new HoptraceError('CLI_USAGE', `'${sa}' is not NAMESPACE:NAME`, {
        where: '--agent-service-account',
        hint: 'e.g. hoptrace:hoptrace-agent',
      });
    out.tokenReview = {
      ...(audience !== undefined ? { audience } : {}),
      ...(sa !== undefined ? { serviceAccount: sa } : {}),
    };
  } else if (audience !== undefined || sa !== undefined) {
    throw new HoptraceError('CLI_USAGE', 'these flags belong to --token-review', {
      where: audience !== undefined ? '--token-review-audience' : '--agent-service-account',
    });
  }
  if (values['allow-shared-agent-token'] === true) out.allowSharedToken = true;
  return out;
}

/** The collector options from the command line and the environment. */
export function parseCollectorArgs(argv: string[], env: NodeJS.ProcessEnv): CollectorOptions {
  const { values, positionals } = parseCommandLine('collector', USAGE, argv, {
    listen: { type: 'string' },
    'data-dir': { type: 'string' },
    'token-file': { type: 'string' },
    'api-token-file': { type: 'string' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'agent-tokens': { type: 'string' },
    'client-ca': { type: 'string' },
    'token-review': { type: 'boolean' },
    'token-review-audience': { type: 'string' },
    'agent-service-account': { type: 'string' },
    'allow-shared-agent-token': { type: 'boolean' },
    'max-live-captures': { type: 'string' },
    'keep-finished': { type: 'string' },
    'keep-finished-repros': { type: 'string' },
    'retain-finished': { type: 'string' },
    'retain-finished-repros': { type: 'string' },
    'retain-age': { type: 'string' },
    'log-level': { type: 'string' },
    kubernetes: { type: 'boolean' },
    kubeconfig: { type: 'string' },
    'kubernetes-interval': { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: 'hoptrace collector',
      hint: `usage: ${USAGE}`,
    });
  }
  const { host, port } = parseListen(values.listen ?? '127.0.0.1:7070');
  const tokenFile = values['token-file'];
  const token = loadToken(tokenFile === undefined ? { env } : { file: tokenFile, env });
  const opts: CollectorOptions = {
    host,
    port,
    dataDir: values['data-dir'] ?? defaultDataDir(env),
    tokens: [token],
    // Agents read the flow's conntrack entries when a capture finishes (evidence in the report).
    conntrack: true,
  };
  const apiFile = values['api-token-file'];
  if (apiFile !== undefined) opts.apiTokens = [loadToken({ file: apiFile })];
  const cert = values['tls-cert'];
  const key = values['tls-key'];
  if ((cert === undefined) !== (key === undefined)) {
    throw new HoptraceError('CLI_USAGE', 'give both --tls-cert and --tls-key, or neither', {
      where: 'hoptrace collector',
    });
  }
  if (cert !== undefined && key !== undefined) {
    opts.tls = { cert: readFileArg('--tls-cert', cert), key: readFileArg('--tls-key', key) };
  }
  opts.agentAuth = agentAuthOf(values);
  const kubeconfig = values.kubeconfig;
  if (values.kubernetes === true && kubeconfig !== undefined) {
    throw new HoptraceError('CLI_USAGE', 'give --kubernetes or --kubeconfig FILE, not both', {
      where: 'hoptrace collector',
      hint: '--kubernetes uses the pod service account; --kubeconfig a file outside the cluster',
    });
  }
  const interval = values['kubernetes-interval'];
  if (values.kubernetes === true || kubeconfig !== undefined) {
    opts.kubernetes = {
      source:
        kubeconfig === undefined
          ? { kind: 'in-cluster' }
          : { kind: 'kubeconfig', file: kubeconfig },
    };
    if (interval !== undefined) {
      const ms = parseDuration(interval, '--kubernetes-interval');
      if (ms < 1000) {
        throw new HoptraceError('CLI_USAGE', 'list the API at most once a second', {
          where: '--kubernetes-interval',
        });
      }
      opts.kubernetes.intervalMs = ms;
    }
  } else if (interval !== undefined) {
    throw new HoptraceError(
      'CLI_USAGE',
      '--kubernetes-interval needs --kubernetes or --kubeconfig',
      {
        where: 'hoptrace collector',
      },
    );
  }
  const live = countFlag(
    values['max-live-captures'],
    '--max-live-captures',
    'live captures and repros',
    `it bounds the captures and repros live at once together; the default is ${DEFAULT_MAX_LIVE_CAPTURES}`,
  );
  if (live !== undefined) opts.maxLiveCaptures = live;
  const keep = countFlag(
    values['keep-finished'],
    '--keep-finished',
    'finished captures',
    `the finished captures held in memory, the most recent (older ones are read from --data-dir when asked for by id); the default is ${DEFAULT_MAX_FINISHED_HELD}`,
  );
  if (keep !== undefined) opts.keepFinished = keep;
  const keepRepros = countFlag(
    values['keep-finished-repros'],
    '--keep-finished-repros',
    'finished repros',
    `the finished repros held in memory, the most recent (older ones are read from --data-dir when asked for by id); the default is ${DEFAULT_MAX_FINISHED_REPROS}`,
  );
  if (keepRepros !== undefined) opts.keepFinishedRepros = keepRepros;
  const age = values['retain-age'];
  const maxAgeMs = age === undefined ? null : parseAge(age, '--retain-age');
  if (maxAgeMs !== null && maxAgeMs < 60_000)
    throw new HoptraceError('CLI_USAGE', `'${age}' is shorter than a minute`, {
      where: '--retain-age',
      hint: 'finished captures and repros older than this are removed from --data-dir, e.g. 30d or 12h',
    });
  opts.retainFinished = {
    maxCount: retainCount(
      values['retain-finished'],
      '--retain-finished',
      'finished captures',
      DEFAULT_RETAIN_FINISHED,
    ),
    maxAgeMs,
  };
  opts.retainFinishedRepros = {
    maxCount: retainCount(
      values['retain-finished-repros'],
      '--retain-finished-repros',
      'finished repros',
      DEFAULT_RETAIN_FINISHED_REPROS,
    ),
    maxAgeMs,
  };
  const level = values['log-level'];
  if (level !== undefined) {
    if (!(LOG_LEVELS as readonly string[]).includes(level)) {
      throw new HoptraceError('CLI_USAGE', `unknown log level '${level}'`, {
        where: '--log-level',
        hint: `one of ${LOG_LEVELS.join(', ')}`,
      });
    }
    opts.logLevel = level as LogLevel;
  }
  return opts;
}

/** A flag's whole number ≥ 1 (undefined when not given); CLI_USAGE naming it otherwise. */
function countFlag(
  text: string | undefined,
  flag: string,
  what: string,
  hint: string,
): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    throw new HoptraceError('CLI_USAGE', `'${text}' is not a whole number ≥ 1 of ${what}`, {
      where: flag,
      hint,
    });
  return n;
}

/** A retention count: the flag's whole number (0: keep every one, null), else the default. */
function retainCount(
  text: string | undefined,
  flag: string,
  what: string,
  fallback: number,
): number | null {
  if (text === '0') return null;
  return (
    countFlag(
      text,
      flag,
      what,
      `the ${what} --data-dir keeps, the most recent (older ones are removed); 0 keeps every one; the default is ${fallback}`,
    ) ?? fallback
  );
}

export interface RunCollectorOptions {
  env?: NodeJS.ProcessEnv;
  /** Stops the collector (tests); SIGTERM and SIGINT always do. */
  signal?: AbortSignal;
  /** Called once the collector listens. */
  onReady?: (c: RunningCollector) => void;
  /** Overrides for startCollector (tests inject a hub). */
  overrides?: Partial<CollectorOptions>;
}

/** Runs the collector until SIGTERM/SIGINT (or `signal`); returns the exit code. */
export async function runCollector(
  argv: string[],
  out: (line: string) => void,
  run: RunCollectorOptions = {},
): Promise<number> {
  const opts = { ...parseCollectorArgs(argv, run.env ?? process.env), ...run.overrides };
  const c = await startCollector(opts);
  out(
    `collector ${c.collectorId} listening on ${c.url} (agents: ${c.agentsUrl}, data: ${opts.dataDir})`,
  );
  run.onReady?.(c);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      run.signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    if (run.signal?.aborted === true) stop();
    else run.signal?.addEventListener('abort', stop);
  });
  await c.close();
  out('collector stopped');
  return 0;
}

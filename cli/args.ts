/** Command-line parsing on node:util parseArgs, with errors that say what to do. */
import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { HoptraceError } from '../common/errors';

type Options = NonNullable<ParseArgsConfig['options']>;

/** parseArgs in strict mode; a bad flag becomes CLI_USAGE naming the command and its usage. */
export function parseCommandLine<O extends Options>(
  command: string,
  usage: string,
  argv: string[],
  options: O,
  program = 'hoptrace',
) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new HoptraceError('CLI_USAGE', parseArgsText(e), {
      where: `${program} ${command}`,
      hint: `usage: ${usage}`,
    });
  }
}

/**
 * node:util parseArgs's complaint in one line of our words: its own are several lines and talk of
 * positional arguments and '-- "--flag"' quoting nobody asked about.
 */
export function parseArgsText(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const code = (e as { code?: unknown } | null)?.code;
  // "Option '-n, --namespace <value>' argument missing": the long form, the one =VALUE works with.
  const flag = /(--[\w-]+)/.exec(message)?.[1] ?? /'(-[\w])/.exec(message)?.[1] ?? '?';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown flag '${flag}'`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (message.includes('does not take an argument')) return `'${flag}' takes no value`;
    if (message.includes('ambiguous'))
      return `'${flag}' needs a value; for one that starts with '-', write ${flag}=VALUE`;
    return `'${flag}' needs a value`;
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const arg = /argument '([^']*)'/.exec(message)?.[1] ?? '?';
    return `unexpected argument '${arg}'`;
  }
  return message.split('\n')[0] ?? message;
}

/** The bytes of a file named by a flag; CLI_USAGE (what and which flag) when unreadable. */
export function readFileArg(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new HoptraceError(
      'CLI_USAGE',
      `cannot read ${path} (${e instanceof Error ? e.message : String(e)})`,
      {
        where: flag,
      },
    );
  }
}

/** `--help`/`-h` among a command's arguments (before a `--`). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  const head = end < 0 ? argv : argv.slice(0, end);
  return head.includes('--help') || head.includes('-h');
}

/** `30s`, `500ms`, `2m`, `1.5s`; a bare number is seconds. */
export function parseDuration(value: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  if (m === null) {
    throw new HoptraceError('CLI_USAGE', `'${value}' is not a duration`, {
      where: flag,
      hint: 'e.g. 30s, 500ms, 2m',
    });
  }
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return Math.round(unit === 'ms' ? n : unit === 's' ? n * 1000 : n * 60_000);
}

const AGE_UNITS_MS: Record<string, number> = {
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/**
 * An age of kept data, `30d`, `12h`, `90m` (a unit is required), in ms. Apart from
 * parseDuration, whose values become timers (Node fires a timer of more than 2^31 - 1 ms at once).
 */
export function parseAge(value: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(m|h|d)$/.exec(value.trim());
  const ms = m === null ? NaN : Math.round(Number(m[1]) * (AGE_UNITS_MS[m[2] ?? ''] ?? NaN));
  if (!Number.isSafeInteger(ms)) {
    throw new HoptraceError('CLI_USAGE', `'${value}' is not an age`, {
      where: flag,
      hint: 'a number and a unit: m, h or d, e.g. 30d or 12h',
    });
  }
  return ms;
}

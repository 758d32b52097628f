/**
 * The collector's logger: pino with a fixed set of context keys, so logs can be searched by
 * capture, agent and point. Payload bytes and tokens are never logged; `redact` is a second line
 * of defence should a header or token slip into a log object.
 */
import pino, { type DestinationStream, type Logger } from 'pino';

/** The only context keys collector logs use. */
export interface LogFields {
  captureId?: string;
  agentId?: string;
  point?: string;
  code?: string;
  state?: string;
  node?: string;
  count?: number;
  err?: string;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export const LOG_LEVELS: readonly LogLevel[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

export interface CollectorLogger {
  info(fields: LogFields, msg: string): void;
  warn(fields: LogFields, msg: string): void;
  error(fields: LogFields, msg: string): void;
  debug(fields: LogFields, msg: string): void;
  /** The root pino logger underneath, without a component (the hub takes a child of it). */
  readonly pino?: Logger;
}

/** A pino logger (JSON lines on stderr unless a destination is given). */
export function createLogger(
  opts: { level?: LogLevel; destination?: DestinationStream } = {},
): CollectorLogger {
  // The root carries no component: each part's child names its own, so a line never holds the
  // key twice (pino repeats a key given by both a base and a child).
  const root: Logger = pino(
    {
      level: opts.level ?? 'info',
      base: null,
      redact: { paths: ['token', 'authorization', 'headers.authorization'], remove: true },
    },
    opts.destination ?? pino.destination(2),
  );
  const logger = root.child({ component: 'collector' });
  return {
    pino: root,
    info: (f, m) => {
      logger.info(f, m);
    },
    warn: (f, m) => {
      logger.warn(f, m);
    },
    error: (f, m) => {
      logger.error(f, m);
    },
    debug: (f, m) => {
      logger.debug(f, m);
    },
  };
}

/** A logger that drops everything (tests). */
export function silentLogger(): CollectorLogger {
  const nop = (): void => undefined;
  return { info: nop, warn: nop, error: nop, debug: nop };
}

/**
 * Bearer tokens between agents and the collector: read from a file or an environment variable,
 * compared in constant time. Tokens are secrets: never log them.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { NotRegularError, readBoundedText, sizeText, TooLargeError } from './bounded-file';
import { HoptraceError } from './errors';

/** The environment variable read when no token file is given. */
export const TOKEN_ENV = 'HOPTRACE_TOKEN';

/** A token file's largest size: a projected ServiceAccount token (a JWT) is 1-2 KiB. */
export const TOKEN_FILE_MAX_BYTES = 64 * 1024;

/**
 * The token from `file` (surrounding whitespace trimmed, so `echo secret > file` works) or else
 * from `env[envName]`. Throws AUTH_NO_TOKEN when neither yields a non-empty token. A file is read
 * up to TOKEN_FILE_MAX_BYTES (/dev/zero once grew the agent to 1.5 GB); with `regularOnly` (the
 * agent, which reads it again on every connection) it must be a regular file, so a FIFO is refused
 * instead of waited on for ever.
 */
export function loadToken(
  opts: { file?: string; envName?: string; env?: NodeJS.ProcessEnv; regularOnly?: boolean } = {},
): string {
  const envName = opts.envName ?? TOKEN_ENV;
  if (opts.file !== undefined) {
    let text: string;
    try {
      text = readBoundedText(opts.file, TOKEN_FILE_MAX_BYTES, {
        regularOnly: opts.regularOnly === true,
      });
    } catch (e) {
      const bounded = e instanceof TooLargeError || e instanceof NotRegularError;
      const reason = bounded
        ? e.message
        : e instanceof Error && 'code' in e
          ? String(e.code)
          : 'unreadable';
      throw new HoptraceError('AUTH_NO_TOKEN', `cannot read the token file (${reason})`, {
        where: opts.file,
        hint: `give a readable regular file holding the token (at most ${sizeText(TOKEN_FILE_MAX_BYTES)})`,
      });
    }
    const token = text.trim();
    if (token === '') {
      throw new HoptraceError('AUTH_NO_TOKEN', 'the token file is empty', { where: opts.file });
    }
    return token;
  }
  const token = (opts.env ?? process.env)[envName]?.trim() ?? '';
  if (token === '') {
    throw new HoptraceError('AUTH_NO_TOKEN', `${envName} is not set`, {
      hint: `set ${envName} or give a token file`,
    });
  }
  return token;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}

/** A token's SHA-256: fixed-length, so timingSafeEqual can compare any two tokens. */
export function tokenDigest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/**
 * True when `given` equals one of `accepted`. Both sides are hashed first so the comparison has a
 * fixed length (timingSafeEqual needs equal lengths; comparing lengths directly would leak them),
 * and every accepted token is compared so the time does not say which one matched.
 */
export function tokenMatches(given: string | undefined, accepted: readonly string[]): boolean {
  if (given === undefined || given === '') return false;
  const g = tokenDigest(given);
  let ok = false;
  for (const a of accepted) {
    if (a === '') continue;
    if (timingSafeEqual(g, tokenDigest(a))) ok = true;
  }
  return ok;
}

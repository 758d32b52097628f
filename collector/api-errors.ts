/**
 * The HTTP API's request errors, shared by http.ts and repro-http.ts: a method the path does not
 * take (405 with `Allow`), an id whose percent-encoding is broken (400, not a 500), nothing there
 * (404).
 */
import { HoptraceError } from '../common/errors';

/** 405: the path exists, the method does not; `allow` becomes the Allow header. */
export class MethodNotAllowed extends HoptraceError {
  constructor(
    method: string,
    path: string,
    readonly allow: readonly string[],
  ) {
    super('API_METHOD_NOT_ALLOWED', `method ${method} is not allowed`, {
      where: path,
      hint: `use ${allow.join(' or ')}`,
    });
  }
}

/** A path segment, percent-decoded; API_BAD_REQUEST when its encoding is broken. */
export function decodeSegment(segment: string, path: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HoptraceError('API_BAD_REQUEST', `malformed percent-encoding in '${segment}'`, {
      where: path,
      hint: 'encode the id as RFC 3986 says, or send it as it is',
    });
  }
}

/** 404 for `path` (the request's path, said once): what is not there, and where to look. */
export function notFound(path: string, detail: string, hint?: string): HoptraceError {
  return new HoptraceError(
    'API_NOT_FOUND',
    detail,
    hint === undefined ? { where: path } : { where: path, hint },
  );
}

/** 404: no capture at `path` (which names its id). */
export const noSuchCapture = (path: string): HoptraceError =>
  notFound(
    path,
    'no such capture',
    'GET /v1/captures lists the live and most recent ones; finished ones past the retention (--retain-finished, --retain-age) are removed',
  );

/** 404: no repro at `path` (which names its id). */
export const noSuchRepro = (path: string): HoptraceError =>
  notFound(
    path,
    'no such repro',
    'GET /v1/repros lists the running and most recent ones; finished ones past the retention (--retain-finished-repros, --retain-age) are removed',
  );

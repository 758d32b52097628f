/**
 * The HTTP API's request errors, shared by http.ts and repro-http.ts: a method the path does not
 * take (405 with `Allow`), an id whose percent-encoding is broken (400, not a 500).
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

/**
 * The URL of an HTTP request as its target says it. An origin-form target (RFC 9112 §3.2.1:
 * '/v1/…') is a path even when it starts with '//': `new URL('//v1/captures', base)` reads it as
 * protocol-relative, 'v1' the host, and the API then answered for '/captures'. An absolute-form
 * target ('http://host/v1/…', §3.2.2) keeps its own path.
 */
export function requestUrl(target: string): URL {
  return target.startsWith('/') ? new URL(`http://x${target}`) : new URL(target, 'http://x');
}

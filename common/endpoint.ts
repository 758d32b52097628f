/**
 * Addresses with ports as every reader parses them: `10.90.0.42:40000`, and IPv6 in brackets,
 * `[fd00:42::14]:8080` (RFC 3986 §3.2.2; RFC 5952 §6). Every text, report and log line that
 * joins an address and a port goes through here.
 */

/** `addr:port`, with an IPv6 address in brackets. */
export function hostPort(addr: string, port: number): string {
  return addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;
}

/** `src:sport -> dst:dport`, IPv6 in brackets. */
export function tupleText(t: { src: string; sport: number; dst: string; dport: number }): string {
  return `${hostPort(t.src, t.sport)} -> ${hostPort(t.dst, t.dport)}`;
}

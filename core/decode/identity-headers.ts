/**
 * Headers at the start of a request's payload that claim a client identity: a PROXY protocol
 * header (haproxy's proxy-protocol.txt: version 1 is one text line `PROXY TCP4 src dst sport
 * dport\r\n`, version 2 a binary header after a 12-byte signature) and the HTTP/1 request headers
 * `X-Forwarded-For` (de facto), `Forwarded` (RFC 7239) and `X-Real-IP` (nginx's realip module).
 * Only what the bytes given hold: the caller joins the request's consecutive segments
 * (core/report/identity-scan.ts), and `complete` says whether the head ended within them, so a
 * header past a snaplen, a gap or the scan's bound is said unseen, not absent. Pure; never throws.
 */

export type IdentityHeaderKind =
  'x-forwarded-for' | 'forwarded' | 'x-real-ip' | 'proxy-v1' | 'proxy-v2';

export interface IdentityHeader {
  kind: IdentityHeaderKind;
  /** The claimed identity as written (at most 200 characters). */
  value: string;
}

const MAX_VALUE = 200;
/** proxy-protocol.txt §2.2: \r\n\r\n\0\r\nQUIT\n */
const V2_SIGNATURE = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];
/** An HTTP/1 request line starts with a method token (RFC 9110 §9) and a space. */
const METHOD = /^[A-Z]{3,10} /;

/** Latin-1 text of `b[from, to)`, at most `max` characters. */
const text = (b: Uint8Array, from: number, to: number, max = MAX_VALUE): string => {
  let s = '';
  for (let i = from; i < to && s.length < max; i++) s += String.fromCharCode(b[i] ?? 0);
  return s;
};

/** The end of the line starting at `from` (the index of its CR or LF), or -1 within `end`. */
function lineEnd(b: Uint8Array, from: number, end: number): number {
  for (let i = from; i < end; i++) if (b[i] === 0x0d || b[i] === 0x0a) return i;
  return -1;
}

/** Past the line ending at `at` (CRLF or LF). */
const nextLine = (b: Uint8Array, at: number): number => (b[at] === 0x0d ? at + 2 : at + 1);

function ipv4(b: Uint8Array, at: number): string {
  return [0, 1, 2, 3].map((i) => String(b[at + i] ?? 0)).join('.');
}

function ipv6(b: Uint8Array, at: number): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push((((b[at + i] ?? 0) << 8) | (b[at + i + 1] ?? 0)).toString(16));
  return groups.join(':');
}

const u16 = (b: Uint8Array, at: number): number => ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);

/** The addresses a PROXY v2 header names (TCP/UDP over IPv4 or IPv6), or its command and family. */
function proxyV2(b: Uint8Array, off: number, end: number): { value: string; length: number } {
  const verCmd = b[off + 12] ?? 0;
  const fam = b[off + 13] ?? 0;
  const length = 16 + u16(b, off + 14);
  const a = off + 16;
  const proto = (fam & 0x0f) === 1 ? 'TCP' : (fam & 0x0f) === 2 ? 'UDP' : '?';
  if ((verCmd & 0x0f) === 1 && fam >> 4 === 1 && a + 12 <= end)
    return {
      value: `${proto}4 ${ipv4(b, a)}:${u16(b, a + 8)} -> ${ipv4(b, a + 4)}:${u16(b, a + 10)}`,
      length,
    };
  if ((verCmd & 0x0f) === 1 && fam >> 4 === 2 && a + 36 <= end)
    return {
      value: `${proto}6 [${ipv6(b, a)}]:${u16(b, a + 32)} -> [${ipv6(b, a + 16)}]:${u16(b, a + 34)}`,
      length,
    };
  return { value: `command ${verCmd & 0x0f}, family 0x${fam.toString(16)}`, length };
}

/** An identity header and the offset in the scanned bytes where its line (or PROXY header) starts. */
export interface LocatedIdentityHeader extends IdentityHeader {
  at: number;
}

/** What the bytes hold of a request's head, and whether they hold all of it. */
export interface IdentityHeadScan {
  headers: LocatedIdentityHeader[];
  /**
   * The bytes reach the end of what is looked at — the empty line ending an HTTP/1 head, or a
   * start that is no PROXY header and no HTTP/1 request line (nothing further to find) — so more
   * bytes of the request would add no identity header. False: the head may go on past `end`.
   */
  complete: boolean;
}

/** A start of an HTTP/1 request line (a method token being written, or written and a space). */
const METHOD_PREFIX = /^[A-Z]{0,10}$/;

/** True when `b[at, end)`, shorter than `whole` bytes, starts as `sig` does (as far as both go). */
const cutWithin = (
  b: Uint8Array,
  at: number,
  end: number,
  sig: readonly number[],
  whole: number,
): boolean =>
  end - at < whole && sig.slice(0, Math.min(sig.length, end - at)).every((v, i) => b[at + i] === v);

const PROXY_V1 = [0x50, 0x52, 0x4f, 0x58, 0x59, 0x20]; // "PROXY "

/**
 * The identity headers in `b[off, end)`, the captured start of one request's payload (possibly
 * several segments joined), with where each starts and whether the head ended within the bytes.
 */
export function scanIdentityHead(b: Uint8Array, off: number, end: number): IdentityHeadScan {
  const headers: LocatedIdentityHeader[] = [];
  const more = (): IdentityHeadScan => ({ headers, complete: false });
  const done = (): IdentityHeadScan => ({ headers, complete: true });
  let at = off;
  // A PROXY header cut before its fixed part ends (v2: signature and 4 bytes; v1: "PROXY ").
  if (cutWithin(b, at, end, V2_SIGNATURE, 16) || cutWithin(b, at, end, PROXY_V1, 6)) return more();
  if (end - at >= 16 && V2_SIGNATURE.every((v, i) => b[at + i] === v)) {
    const v2 = proxyV2(b, at, end);
    headers.push({ kind: 'proxy-v2', value: v2.value, at });
    if (at + v2.length > end) return more();
    at += v2.length;
  } else if (text(b, at, Math.min(end, at + 6)) === 'PROXY ') {
    const e = lineEnd(b, at, Math.min(end, at + 108)); // a v1 line is at most 107 bytes
    const value = text(b, at + 6, e < 0 ? Math.min(end, at + 107) : e);
    headers.push({ kind: 'proxy-v1', value, at });
    // No line end: cut short (more may follow), or longer than any v1 line (not one: stop).
    if (e < 0) return end - at < 108 ? more() : done();
    at = nextLine(b, e);
  }
  // HTTP/1 header lines, up to the empty line that ends them (or the bytes there are).
  if (at >= end) return more(); // a PROXY header alone: the request follows
  const first = lineEnd(b, at, end);
  if (first < 0) {
    const start = text(b, at, Math.min(end, at + 11));
    return METHOD.test(start) || METHOD_PREFIX.test(start) ? more() : done();
  }
  if (!METHOD.test(text(b, at, Math.min(first, at + 11)))) return done();
  at = nextLine(b, first);
  while (at < end) {
    const e = lineEnd(b, at, end);
    const stop = e < 0 ? end : e;
    if (stop === at) return done(); // the empty line: the headers end
    // A name (`x-forwarded-for` is the longest looked for) and up to MAX_VALUE of its value.
    const line = text(b, at, stop, 20 + MAX_VALUE);
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon).toLowerCase();
    if (name === 'x-forwarded-for' || name === 'forwarded' || name === 'x-real-ip')
      headers.push({
        kind: name,
        value: line
          .slice(colon + 1)
          .trim()
          .slice(0, MAX_VALUE),
        at,
      });
    if (e < 0) break;
    at = nextLine(b, e);
  }
  return more();
}

/** The identity headers in `b[off, end)`, the captured start of one request's payload. */
export function identityHeadersIn(b: Uint8Array, off: number, end: number): IdentityHeader[] {
  return scanIdentityHead(b, off, end).headers.map((h) => ({ kind: h.kind, value: h.value }));
}

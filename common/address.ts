/**
 * Canonical address text: dotted quad for IPv4, RFC 5952 for IPv6 (lowercase hex, leading zeros
 * dropped, the longest run of two or more zero groups compressed to "::", the first run on a tie,
 * IPv4-mapped addresses as ::ffff:a.b.c.d per RFC 5952 §5).
 *
 * `canonicalIP` turns an address as a person typed it into that form, so it compares equal to the
 * packets' addresses as strings.
 */
import { isIP } from 'node:net';
import { parseCidr } from './cidr';

/** Dotted quad of the 4 bytes at `at` (caller has bounds-checked). */
export function formatIPv4(b: Uint8Array, at: number): string {
  return `${b[at] ?? 0}.${b[at + 1] ?? 0}.${b[at + 2] ?? 0}.${b[at + 3] ?? 0}`;
}

/** RFC 5952 text of the 16 bytes at `at` (caller has bounds-checked). */
export function formatIPv6(b: Uint8Array, at: number): string {
  // Group i is bytes at+2i, at+2i+1.
  let bestStart = -1;
  let bestLen = 0;
  let runStart = -1;
  for (let i = 0; i < 8; i++) {
    const g = ((b[at + 2 * i] ?? 0) << 8) | (b[at + 2 * i + 1] ?? 0);
    if (g === 0) {
      if (runStart < 0) runStart = i;
      const len = i - runStart + 1;
      if (len > bestLen) {
        bestLen = len;
        bestStart = runStart;
      }
    } else {
      runStart = -1;
    }
  }
  // ::ffff:a.b.c.d (IPv4-mapped): groups 0-4 zero, group 5 ffff.
  if (bestStart === 0 && bestLen === 5 && b[at + 10] === 0xff && b[at + 11] === 0xff) {
    return `::ffff:${formatIPv4(b, at + 12)}`;
  }
  if (bestLen < 2) bestStart = -1;
  let s = '';
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      s += i === 0 ? '::' : ':';
      i += bestLen - 1;
      continue;
    }
    const g = ((b[at + 2 * i] ?? 0) << 8) | (b[at + 2 * i + 1] ?? 0);
    s += g.toString(16);
    if (i < 7) s += ':';
  }
  return s;
}

/**
 * An address as the decoder writes it (the dotted quad, RFC 5952 for IPv6), so a --client or --dst compares equal to the packets' addresses however it was typed
 * (`2001:DB8::1`, `2001:db8:0:0:0:0:0:1`); a zone (`%eth0`), which no packet carries, is dropped.
 * null when `text` is not an address.
 */
export function canonicalIP(text: string): string | null {
  const family = isIP(text);
  // isIP takes the dotted quad only without leading zeros: the decoder's form already.
  if (family !== 6) return family === 4 ? text : null;
  const n = parseCidr(text)?.first;
  if (n === undefined) return null;
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 16; i++) bytes[i] = Number((n >> BigInt(8 * (15 - i))) & 0xffn);
  return formatIPv6(bytes, 0);
}

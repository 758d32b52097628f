/** IPv4 CIDR arithmetic for the path checks (the tunnel range, pod CIDRs, iptables -s/-d). */
import { isIP, isIPv4 } from 'node:net';

/** 4 or 6 for an IPv4 or IPv6 address literal, else 0 (node:net's check: pure, no socket). */
export { isIP };

/** An IPv4 prefix as [first, last] unsigned 32-bit numbers. */
export interface Range4 {
  first: number;
  last: number;
  text: string;
}

function toNumber(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

/** `10.90.0.0/24`, `10.90.0.0/255.255.255.0` or a bare address (/32) → range; null for anything else (IPv6 included). */
export function parseCidr4(text: string): Range4 | null {
  const [ip = '', mask] = text.split('/', 2);
  if (!isIPv4(ip)) return null;
  let bits = 32;
  if (mask !== undefined) {
    if (isIPv4(mask)) {
      const m = toNumber(mask);
      bits = 32 - Math.log2(2 ** 32 - m);
    } else bits = Number(mask);
  }
  if (!Number.isInteger(bits) || bits < 0 || bits > 32) return null;
  const size = 2 ** (32 - bits);
  const first = Math.floor(toNumber(ip) / size) * size;
  return { first, last: first + size - 1, text };
}

/** A CIDR (parseCidr4) or an address range `a-b` (nft prints set intervals so); null otherwise. */
export function parseRange4(text: string): Range4 | null {
  const dash = text.indexOf('-');
  if (dash < 0) return parseCidr4(text);
  const a = parseCidr4(text.slice(0, dash));
  const b = parseCidr4(text.slice(dash + 1));
  if (a === null || b === null || b.last < a.first) return null;
  return { first: a.first, last: b.last, text };
}

/** `outer` contains all of `inner`. */
export function covers(outer: Range4, inner: Range4): boolean {
  return outer.first <= inner.first && inner.last <= outer.last;
}

/** The two ranges share at least one address. */
export function overlaps(a: Range4, b: Range4): boolean {
  return a.first <= b.last && b.first <= a.last;
}

/** `ip` lies in `cidr` (both as text); false when either is not IPv4. */
export function inCidr(ip: string, cidr: string): boolean {
  const a = parseCidr4(ip);
  const r = parseCidr4(cidr);
  return a !== null && r !== null && covers(r, a);
}

/** The /16 holding `ip` (a guess at a pod CIDR when none is given). */
export function slash16(ip: string): string | null {
  const r = parseCidr4(`${ip}/16`);
  if (r === null) return null;
  const n = r.first;
  return `${Math.floor(n / 2 ** 24)}.${Math.floor(n / 2 ** 16) % 256}.0.0/16`;
}

/** The first host address of an IPv4 range (any address in it serves for `ip route get`). */
export function firstHost(range: string): string | null {
  const r = parseCidr4(range);
  if (r === null) return null;
  const n = r.last > r.first ? r.first + 1 : r.first;
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
}

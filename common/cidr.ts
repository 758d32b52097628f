/**
 * IPv4 and IPv6 CIDR arithmetic for the path checks (the tunnel range, pod CIDRs, iptables and
 * ip6tables -s/-d, nft sets). Addresses are bigints, so one set of range operations serves both
 * families; a range of one family never covers nor overlaps one of the other.
 */
import { isIP, isIPv4, isIPv6 } from 'node:net';

/** 4 or 6 for an IPv4 or IPv6 address literal, else 0 (node:net's check: pure, no socket). */
export { isIP };

/** An address family of the path checks. */
export type Family = 4 | 6;

/** A set of consecutive addresses of one family, as [first, last]. */
export interface IpRange {
  family: Family;
  first: bigint;
  last: bigint;
  text: string;
}

/** A prefix: a range whose size is a power of two, with its prefix length. */
export interface Cidr extends IpRange {
  bits: number;
}

const WIDTH: Record<Family, number> = { 4: 32, 6: 128 };

function v4ToBigint(ip: string): bigint {
  return ip.split('.').reduce((n, o) => n * 256n + BigInt(o), 0n);
}

/** An IPv6 literal (isIPv6 already checked) → 128-bit number; `::` and an IPv4 tail expanded. */
function v6ToBigint(ip: string): bigint {
  let text = ip;
  const colon = text.lastIndexOf(':');
  const tail = text.slice(colon + 1);
  if (tail.includes('.')) {
    const n = v4ToBigint(tail);
    text = `${text.slice(0, colon + 1)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const h = groups(head);
  const r = rest === undefined ? [] : groups(rest);
  const all =
    rest === undefined ? h : [...h, ...Array<string>(8 - h.length - r.length).fill('0'), ...r];
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** An address literal (an IPv6 zone `%eth0` dropped) → family and number; null otherwise. */
function parseAddress(text: string): { family: Family; n: bigint } | null {
  const ip = text.replace(/%.*$/, '');
  if (isIPv4(ip)) return { family: 4, n: v4ToBigint(ip) };
  if (isIPv6(ip)) return { family: 6, n: v6ToBigint(ip) };
  return null;
}

/** The prefix length an IPv4 netmask (`255.255.255.0`) stands for; NaN for a non-contiguous one. */
function maskBits(mask: string): number {
  const inverted = 2n ** 32n - v4ToBigint(mask);
  const bits = 32 - Math.log2(Number(inverted));
  return Number.isInteger(bits) ? bits : NaN;
}

/** The prefix length after the `/`: digits, or an IPv4 netmask; NaN for anything else. */
function prefixBits(family: Family, mask: string): number {
  if (family === 4 && isIPv4(mask)) return maskBits(mask);
  return /^\d{1,3}$/.test(mask) ? Number(mask) : NaN;
}

/**
 * `10.90.0.0/24`, `10.90.0.0/255.255.255.0`, `fd00:10:90::/64` or a bare address (a host
 * prefix) → the prefix; null for anything else.
 */
export function parseCidr(text: string): Cidr | null {
  const [ip = '', mask] = text.split('/', 2);
  const a = parseAddress(ip);
  if (a === null) return null;
  const width = WIDTH[a.family];
  const bits = mask === undefined ? width : prefixBits(a.family, mask);
  if (!Number.isInteger(bits) || bits < 0 || bits > width) return null;
  const size = 1n << BigInt(width - bits);
  const first = (a.n / size) * size;
  return { family: a.family, first, last: first + size - 1n, text, bits };
}

/** A CIDR (parseCidr) or an address range `a-b` (nft prints set intervals so); null otherwise. */
export function parseRange(text: string): IpRange | null {
  const dash = text.indexOf('-');
  if (dash < 0) return parseCidr(text);
  const a = parseCidr(text.slice(0, dash));
  const b = parseCidr(text.slice(dash + 1));
  if (a === null || b === null || a.family !== b.family || b.last < a.first) return null;
  return { family: a.family, first: a.first, last: b.last, text };
}

/** The family of a CIDR or address; null when it is neither. */
export function familyOf(text: string): Family | null {
  return parseCidr(text)?.family ?? null;
}

/** `outer` contains all of `inner` (same family). */
export function covers(outer: IpRange, inner: IpRange): boolean {
  return outer.family === inner.family && outer.first <= inner.first && inner.last <= outer.last;
}

/** The two ranges share at least one address (same family). */
export function overlaps(a: IpRange, b: IpRange): boolean {
  return a.family === b.family && a.first <= b.last && b.first <= a.last;
}

/** `ip` lies in `cidr` (both as text, either family); false when either does not parse. */
export function inCidr(ip: string, cidr: string): boolean {
  const a = parseCidr(ip);
  const r = parseCidr(cidr);
  return a !== null && r !== null && covers(r, a);
}

function v4Text(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
}

/** RFC 5952 text: lowercase, no leading zeros, the longest run of two or more zero groups as `::`. */
function v6Text(n: bigint): string {
  const g = [7n, 6n, 5n, 4n, 3n, 2n, 1n, 0n].map((i) => (n >> (16n * i)) & 0xffffn);
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && g[j] === 0n) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = (part: bigint[]): string => part.map((x) => x.toString(16)).join(':');
  if (best.at < 0) return hex(g);
  return `${hex(g.slice(0, best.at))}::${hex(g.slice(best.at + best.len))}`;
}

/** An address of `family` as text (IPv6 in RFC 5952 form). */
function addressText(family: Family, n: bigint): string {
  return family === 4 ? v4Text(n) : v6Text(n);
}

/**
 * The prefix around a pod address when no pod CIDR is given: the /16 for IPv4 (a cluster CIDR
 * such as 10.244.0.0/16), the /48 for IPv6 (a site prefix, which holds every node's /64).
 */
export function podCidrAround(ip: string): string | null {
  const a = parseCidr(ip);
  if (a === null || a.bits !== WIDTH[a.family]) return null;
  const bits = a.family === 4 ? 16 : 48;
  const size = 1n << BigInt(WIDTH[a.family] - bits);
  return `${addressText(a.family, (a.first / size) * size)}/${bits}`;
}

/** The first host address of a range, either family (any address in it serves for `ip route get`). */
export function firstHost(range: string): string | null {
  const r = parseCidr(range);
  if (r === null) return null;
  return addressText(r.family, r.last > r.first ? r.first + 1n : r.first);
}

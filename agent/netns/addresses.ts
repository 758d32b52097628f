/**
 * Which network namespaces this node has and which addresses they hold: what the agent reports in
 * its hello so the collector builds the inventory itself, and what pod-IP targets resolve against.
 */
import { execFile } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, basename } from 'node:path';
import { HoptraceError } from '../../common/errors';
import { nsenterRefusal } from '../capabilities';
import type { InventoryCache } from './inventory-cache';

/** Which namespaces an agent owns. Several lab agents on one host each scan their own prefix. */
export interface NetnsScope {
  /** Glob over named namespaces; `*` and `?` in the last path part only. Default `/run/netns/*`. */
  netnsGlob?: string;
  /** Also scan every process's namespace (`/proc/<pid>/ns/net`). Default true. */
  scanProc?: boolean;
}

/** A namespace file and its identity (one namespace can have many files). */
export interface NamespaceFile {
  path: string;
  dev: number;
  inode: number;
}

/** What the agent reports about one namespace. */
export interface NamespaceInfo {
  path: string;
  inode: number;
  addresses: string[];
  ifaces: string[];
}

/** `*`/`?` glob of one path segment → RegExp. */
export function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

/** Paths matching `glob` (wildcards in the last segment only). */
export function expandGlob(glob: string): string[] {
  const dir = dirname(glob);
  const re = globToRegExp(basename(glob));
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => re.test(n))
    .sort()
    .map((n) => `${dir}/${n}`);
}

function fileOf(path: string): NamespaceFile | null {
  try {
    const st = statSync(path);
    return { path, dev: st.dev, inode: st.ino };
  } catch {
    return null;
  }
}

/**
 * The namespaces in scope, deduplicated by identity (device + inode): named ones first (their
 * paths are the stable ones), then processes' in PID order.
 */
export function scanNamespaces(scope: NetnsScope = {}): NamespaceFile[] {
  const paths = expandGlob(scope.netnsGlob ?? '/run/netns/*');
  if (scope.scanProc ?? true) {
    let pids: number[] = [];
    try {
      pids = readdirSync('/proc')
        .filter((n) => /^\d+$/.test(n))
        .map(Number)
        .sort((a, b) => a - b);
    } catch {
      // no /proc: named namespaces only
    }
    for (const pid of pids) paths.push(`/proc/${pid}/ns/net`);
  }
  const seen = new Set<string>();
  const out: NamespaceFile[] = [];
  for (const p of paths) {
    const f = fileOf(p);
    if (f === null) continue;
    const key = `${f.dev}:${f.inode}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(f);
  }
  return out;
}

/** `ip -j addr show` output, as far as hoptrace reads it. */
interface IpAddrJson {
  ifname?: string;
  flags?: string[];
  link_type?: string;
  addr_info?: { family?: string; local?: string; scope?: string }[];
}

/** Interface names and reportable addresses from `ip -j addr show` (skips loopback and IPv6 link-local). */
export function parseIpAddrJson(json: string): { ifaces: string[]; addresses: string[] } {
  const links = JSON.parse(json) as IpAddrJson[];
  const ifaces: string[] = [];
  const addresses: string[] = [];
  for (const l of links) {
    if (l.ifname !== undefined) ifaces.push(l.ifname);
    const loopback = l.link_type === 'loopback' || (l.flags ?? []).includes('LOOPBACK');
    if (loopback) continue;
    for (const a of l.addr_info ?? []) {
      if (a.local === undefined || a.scope === 'host') continue;
      if (a.family === 'inet6' && /^fe[89ab]/i.test(a.local)) continue;
      if (!addresses.includes(a.local)) addresses.push(a.local);
    }
  }
  return { ifaces, addresses };
}

function run(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 10_000, maxBuffer: 8 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout);
      else reject(new Error(stderr.trim() !== '' ? stderr.trim() : err.message));
    });
  });
}

/** Interfaces and addresses of the namespace at `netnsPath` (absent = this process's own). */
export async function namespaceAddresses(
  netnsPath?: string,
): Promise<{ ifaces: string[]; addresses: string[] }> {
  const args = ['-j', 'addr', 'show'];
  try {
    const out =
      netnsPath === undefined
        ? await run('ip', args)
        : await run('nsenter', [`--net=${netnsPath}`, '--', 'ip', ...args]);
    return parseIpAddrJson(out);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    const where = netnsPath ?? 'agent namespace';
    throw (
      nsenterRefusal(message, where) ??
      new HoptraceError('NETNS_QUERY_FAILED', `ip -j addr show failed: ${message}`, {
        where,
        hint: 'the agent needs iproute2 and nsenter (util-linux); the namespace may be gone',
      })
    );
  }
}

/**
 * Every address of the node: all interfaces including bridges and gateways (a kube-proxy
 * masquerade out of the pod bridge shows the bridge's address), without loopback and IPv6
 * link-local. In the lab the node is itself a namespace: pass its path.
 */
export async function nodeAddresses(
  nodeNetns?: string,
  cache?: { c: InventoryCache<string[]>; nowMs: number },
): Promise<string[]> {
  const key = nodeNetns ?? '';
  const hit = cache?.c.fresh(key, cache.nowMs);
  if (hit !== undefined) return hit;
  const a = (await namespaceAddresses(nodeNetns)).addresses;
  cache?.c.put(key, a, cache.nowMs);
  return a;
}

/** The namespaces in scope as read: those read, and those that could not be (with why). */
export interface InventoryRead {
  namespaces: NamespaceInfo[];
  unreadable: { path: string; error: HoptraceError }[];
}

/** Every namespace in scope with its interfaces and addresses, and the ones that failed. */
export async function readInventory(
  scope: NetnsScope = {},
  /** Reads to reuse (inventory-cache.ts): only new, young or stale namespaces are read again. */
  cache?: { c: InventoryCache<NamespaceInfo>; nowMs: number },
): Promise<InventoryRead> {
  const files = scanNamespaces(scope);
  const out: InventoryRead = { namespaces: [], unreadable: [] };
  const keyOf = (f: NamespaceFile): string => `${f.path}\u0000${f.dev}:${f.inode}`;
  cache?.c.retain(new Set(files.map(keyOf)));
  const reads = await Promise.all(
    files.map(async (f): Promise<NamespaceInfo | HoptraceError> => {
      const hit = cache?.c.fresh(keyOf(f), cache.nowMs);
      if (hit !== undefined) return hit;
      try {
        const a = await namespaceAddresses(f.path);
        const info = { path: f.path, inode: f.inode, addresses: a.addresses, ifaces: a.ifaces };
        cache?.c.put(keyOf(f), info, cache.nowMs);
        return info;
      } catch (e) {
        return e as HoptraceError;
      }
    }),
  );
  reads.forEach((r, i) => {
    if (r instanceof HoptraceError) out.unreadable.push({ path: files[i]?.path ?? '', error: r });
    else out.namespaces.push(r);
  });
  return out;
}

/** Every namespace in scope with its interfaces and addresses. Namespaces that vanish meanwhile are left out. */
export async function namespaceInventory(
  scope: NetnsScope = {},
  cache?: { c: InventoryCache<NamespaceInfo>; nowMs: number },
): Promise<NamespaceInfo[]> {
  return (await readInventory(scope, cache)).namespaces;
}

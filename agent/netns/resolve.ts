/**
 * Capture target → network namespace file. A target is a path (`/run/netns/x`,
 * `/proc/<pid>/ns/net`), a PID, or a pod IP that the agent finds among the namespaces in its scope.
 * Every form ends in a namespace of the agent's scope (--netns-glob, --no-proc-scan): a path or a
 * PID must name a network namespace file (nsfs) that the scope holds, and a path that does not —
 * missing, a regular file, a namespace outside the scope — is refused with one message, so the
 * collector's side cannot learn from the answers which files exist on the node.
 */
import { statfsSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { HoptraceError } from '../../common/errors';
import { notPermitted } from '../capabilities';
import {
  readInventory,
  scanNamespaces,
  type InventoryRead,
  type NamespaceFile,
  type NamespaceInfo,
  type NetnsScope,
} from './addresses';

/** statfs(2) f_type of nsfs, the namespace files' filesystem (linux/magic.h NSFS_MAGIC). */
export const NSFS_MAGIC = 0x6e736673;

/** True when `path` is a namespace file (bind mounts of one, as under /run/netns, included). */
function isNsfs(path: string): boolean {
  try {
    return statfsSync(path).type === NSFS_MAGIC;
  } catch {
    return false;
  }
}

/** A parsed target. */
export type Target =
  { kind: 'path'; path: string } | { kind: 'pid'; pid: number } | { kind: 'ip'; ip: string };

/** The namespace a target names. */
export interface ResolvedTarget {
  /** Namespace file to enter (`nsenter --net=PATH`). */
  path: string;
  dev: number;
  inode: number;
  via: Target['kind'];
}

/** Classifies a target string; throws TARGET_INVALID. */
export function parseTarget(target: string): Target {
  const t = target.trim();
  if (t.startsWith('/')) return { kind: 'path', path: t };
  if (/^\d+$/.test(t)) return { kind: 'pid', pid: Number(t) };
  const bare = t.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bare) !== 0) return { kind: 'ip', ip: bare };
  throw new HoptraceError('TARGET_INVALID', `'${target}' is not a path, a PID or an IP address`, {
    hint: 'use /run/netns/NAME, /proc/PID/ns/net, a PID, or the pod IP',
  });
}

/** Canonical comparison form of an address (lower case, no zone). */
function canonical(ip: string): string {
  return ip.toLowerCase().replace(/%.*$/, '');
}

function expandIPv6(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const [head = '', tail = ''] = ip.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === '' ? [] : tail.split(':');
  const fill = ip.includes('::') ? Array<string>(8 - h.length - t.length).fill('0') : [];
  return [...h, ...fill, ...t].map((g) => g.padStart(4, '0')).join(':');
}

/** True when two address texts name the same address. */
export function sameAddress(a: string, b: string): boolean {
  return expandIPv6(canonical(a)) === expandIPv6(canonical(b));
}

/**
 * The namespace file's identity; null when it does not exist. A file that exists but is refused
 * (EACCES: /proc/PID/ns/net of a process the agent may not inspect) is AGENT_NOT_PERMITTED,
 * not "not found".
 */
function statNs(path: string, via: Target['kind']): ResolvedTarget | null {
  try {
    const st = statSync(path);
    return { path, dev: st.dev, inode: st.ino, via };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EACCES')
      throw notPermitted('SYS_PTRACE', `cannot open ${path} (EACCES)`, path);
    return null;
  }
}

/** Where a scope searches, in words. */
function searchedIn(scope: NetnsScope): string {
  return `${scope.netnsGlob ?? '/run/netns/*'}${(scope.scanProc ?? true) ? ' and /proc/*/ns/net' : ''}`;
}

/** Injection points for tests. */
export interface ResolveDeps {
  inventory?: (scope: NetnsScope) => Promise<NamespaceInfo[]>;
  /** The namespace files of the scope (default addresses.ts scanNamespaces). */
  scan?: (scope: NetnsScope) => NamespaceFile[];
}

/** /proc/PID/ns/net: with the /proc scan on, a process's namespace is in scope by definition. */
const PROC_NET = /^\/proc\/\d+\/ns\/net$/;

/** True when the namespace `r` is one of the scope's (by device and inode). */
function inScope(r: ResolvedTarget, scope: NetnsScope, deps: ResolveDeps): boolean {
  if ((scope.scanProc ?? true) && PROC_NET.test(r.path)) return true;
  return (deps.scan ?? scanNamespaces)(scope).some((f) => f.dev === r.dev && f.inode === r.inode);
}

function outOfScope(what: string, scope: NetnsScope): HoptraceError {
  return new HoptraceError(
    'TARGET_OUT_OF_SCOPE',
    `${what} is not a network namespace in this agent's scope (${searchedIn(scope)})`,
    {
      hint: "give a namespace under the agent's --netns-glob, a PID or /proc/PID/ns/net (not with --no-proc-scan), or the pod IP",
    },
  );
}

/**
 * Resolves `target` to a namespace file of the scope. Throws TARGET_INVALID, TARGET_NOT_FOUND
 * (says what was searched and what to do), TARGET_OUT_OF_SCOPE (a path or PID outside the scope,
 * or not a namespace) or TARGET_AMBIGUOUS (a pod IP held by several namespaces).
 */
export async function resolveTarget(
  target: string,
  scope: NetnsScope = {},
  deps: ResolveDeps = {},
): Promise<ResolvedTarget> {
  const t = parseTarget(target);
  switch (t.kind) {
    case 'path': {
      let r: ResolvedTarget | null = null;
      try {
        r = statNs(t.path, 'path');
      } catch (e) {
        // A process's namespace the agent may not open says so (its PID is no secret); any
        // other path is answered like a missing one.
        if (PROC_NET.test(t.path)) throw e;
      }
      if (r === null || !isNsfs(t.path) || !inScope(r, scope, deps))
        throw outOfScope(t.path, scope);
      return r;
    }
    case 'pid': {
      const r = statNs(`/proc/${t.pid}/ns/net`, 'pid');
      if (r === null) {
        throw new HoptraceError('TARGET_NOT_FOUND', `no process ${t.pid} (/proc/${t.pid}/ns/net)`, {
          hint: 'the process has exited; find the pod process again (crictl inspect, ps)',
        });
      }
      if (!isNsfs(r.path) || !inScope(r, scope, deps))
        throw outOfScope(`process ${t.pid}'s namespace`, scope);
      return r;
    }
    case 'ip': {
      const read: InventoryRead =
        deps.inventory === undefined
          ? await readInventory(scope)
          : { namespaces: await deps.inventory(scope), unreadable: [] };
      const inv = read.namespaces;
      const hits = inv.filter((n) => n.addresses.some((a) => sameAddress(a, t.ip)));
      // One namespace can be reached by several files; identical inodes are one namespace.
      const unique = [...new Map(hits.map((h) => [h.inode, h])).values()];
      const searched = searchedIn(scope);
      const first = unique[0];
      // Not found because the kernel refused the agent its namespaces: say that, not "not found".
      const refused = read.unreadable.filter((u) => u.error.code === 'AGENT_NOT_PERMITTED');
      const why = refused[0]?.error;
      if (first === undefined && why !== undefined) {
        throw new HoptraceError(
          'AGENT_NOT_PERMITTED',
          `${t.ip} is in none of the ${inv.length} namespaces read; ${refused.length} of ${inv.length + read.unreadable.length} could not be entered (${why.detail})`,
          {
            where: why.where ?? searchedIn(scope),
            ...(why.hint === undefined ? {} : { hint: why.hint }),
          },
        );
      }
      if (first === undefined) {
        throw new HoptraceError(
          'TARGET_NOT_FOUND',
          `no namespace holds ${t.ip} among ${inv.length} searched (${searched})`,
          {
            hint: "check the pod IP and that the pod runs on this agent's node, or give the namespace path or a PID",
          },
        );
      }
      if (unique.length > 1) {
        throw new HoptraceError(
          'TARGET_AMBIGUOUS',
          `${t.ip} is held by ${unique.length} namespaces: ${unique.map((u) => u.path).join(', ')}`,
          { hint: 'give the namespace path, or narrow the agent scope (netnsGlob)' },
        );
      }
      const r = statNs(first.path, 'ip');
      if (r === null) {
        throw new HoptraceError(
          'TARGET_NOT_FOUND',
          `${first.path} vanished while resolving ${t.ip}`,
          {
            hint: 'the pod was just deleted; resolve again',
          },
        );
      }
      return r;
    }
  }
}

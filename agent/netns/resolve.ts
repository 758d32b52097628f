/**
 * Capture target → network namespace file. A target is a path (`/run/netns/x`,
 * `/proc/<pid>/ns/net`), a PID, or a pod IP that the agent finds among the namespaces in its scope.
 */
import { statSync } from 'node:fs';
import { isIP } from 'node:net';
import { HoptraceError } from '../../common/errors';
import { notPermitted } from '../capabilities';
import {
  readInventory,
  type InventoryRead,
  type NamespaceInfo,
  type NetnsScope,
} from './addresses';

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
}

/**
 * Resolves `target` to a namespace file. Throws TARGET_INVALID, TARGET_NOT_FOUND (says what was
 * searched and what to do) or TARGET_AMBIGUOUS (a pod IP held by several namespaces).
 */
export async function resolveTarget(
  target: string,
  scope: NetnsScope = {},
  deps: ResolveDeps = {},
): Promise<ResolvedTarget> {
  const t = parseTarget(target);
  switch (t.kind) {
    case 'path': {
      const r = statNs(t.path, 'path');
      if (r === null) {
        throw new HoptraceError('TARGET_NOT_FOUND', `no namespace file ${t.path}`, {
          hint: 'list named namespaces with `ip netns list`, pods with `crictl pods`',
        });
      }
      return r;
    }
    case 'pid': {
      const r = statNs(`/proc/${t.pid}/ns/net`, 'pid');
      if (r === null) {
        throw new HoptraceError('TARGET_NOT_FOUND', `no process ${t.pid} (/proc/${t.pid}/ns/net)`, {
          hint: 'the process has exited; find the pod process again (crictl inspect, ps)',
        });
      }
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

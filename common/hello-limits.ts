/**
 * What one agent hello may hold, and what keeping it costs. The collector keeps every agent's
 * hello (connected ones, and disconnected ones for a while: collector/hub.ts), so what a hello may
 * list is bounded in entries, not only in bytes: 256,000 two-character addresses fit in 1 MiB of
 * protobuf and took ~7.5 MB of heap once decoded (an adversarial review kept 30 such agent ids).
 */
import type { Hello } from './wire';

/**
 * Beyond any of these a hello is refused (HELLO_TOO_LARGE), never kept. A real node is far below:
 * Kubernetes' default is 110 pods a node, managed offerings allow 250 (737 on EKS's largest
 * instances with prefix delegation); a pod's namespace lists lo and eth0 and one or two
 * addresses, and the host namespace one veth per pod. 737 pods thus make ~740 namespaces and
 * ~4,500 entries in all: `entries` is seven times that, `namespaces` five times.
 */
export const HELLO_LIMITS = {
  namespaces: 4096,
  addressesPerNamespace: 256,
  interfacesPerNamespace: 1024,
  nodeAddresses: 1024,
  /** Namespaces, their addresses and interfaces, and node addresses, together. */
  entries: 32_768,
  /** version, a namespace path, an address or interface name (agentId and node: agent-names.ts). */
  stringLength: 4096,
} as const;

/**
 * The captures an agent whose hello names none runs at once: agents older than Hello.max_captures
 * ran at most 4 unless started with --max-captures, which they did not announce.
 */
export const HELLO_DEFAULT_MAX_CAPTURES = 4;

/** The captures the agent of `h` runs at once at most, as it says (or HELLO_DEFAULT_MAX_CAPTURES). */
export function helloMaxCaptures(h: Hello): number {
  return h.maxCaptures ?? HELLO_DEFAULT_MAX_CAPTURES;
}

/**
 * A hello's encoded size at most (1 MiB): within the count caps a 16 MiB hello still kept ~133 MiB
 * of heap per agent id (issue 17); a real one is a few KiB per namespace.
 */
export const HELLO_MAX_BYTES = 1024 * 1024;

/** The entries a hello lists (what HELLO_LIMITS.entries bounds). */
export function helloEntries(h: Hello): number {
  let n = h.nodeAddresses.length + h.namespaces.length;
  for (const ns of h.namespaces) n += ns.addresses.length + ns.interfaces.length;
  return n;
}

/** Why a hello is too large to keep (what, and the limit), or null. */
export function helloTooLarge(h: Hello): string | null {
  const L = HELLO_LIMITS;
  const long = (s: string): boolean => s.length > L.stringLength;
  if (long(h.version)) return `a version longer than ${L.stringLength} characters`;
  if (h.nodeAddresses.length > L.nodeAddresses || h.nodeAddresses.some(long))
    return `${h.nodeAddresses.length} node addresses (at most ${L.nodeAddresses})`;
  if (h.namespaces.length > L.namespaces)
    return `${h.namespaces.length} namespaces (at most ${L.namespaces})`;
  for (const n of h.namespaces) {
    if (long(n.path) || n.addresses.some(long) || n.interfaces.some(long))
      return `a namespace path, address or interface longer than ${L.stringLength} characters`;
    if (n.addresses.length > L.addressesPerNamespace)
      return `${n.addresses.length} addresses in ${n.path.slice(0, 80)} (at most ${L.addressesPerNamespace})`;
    if (n.interfaces.length > L.interfacesPerNamespace)
      return `${n.interfaces.length} interfaces in ${n.path.slice(0, 80)} (at most ${L.interfacesPerNamespace})`;
  }
  const entries = helloEntries(h);
  if (entries > L.entries)
    return `${entries} namespaces, addresses and interfaces in all (at most ${L.entries})`;
  return null;
}

/**
 * What keeping a decoded hello costs in heap bytes, estimated from above: two bytes a character
 * (UTF-16 at worst), 32 a string, 512 a namespace object. Measured with Node 20 (heapUsed over 5
 * decoded copies; estimate in brackets): 70 KB for a 110-pod node (86 KB), 0.52 MB for 1,000 pods
 * (0.84 MB), 7.5 MB for 256,000 two-character addresses (9.8 MB), 0.95 MB for 250 addresses of
 * 4,000 characters (2.2 MB). Within HELLO_LIMITS and HELLO_MAX_BYTES it stays under ~5 MiB.
 */
export function helloHeapBytes(h: Hello): number {
  let chars = h.agentId.length + h.node.length + h.version.length;
  let strings = 3 + h.nodeAddresses.length;
  for (const a of h.nodeAddresses) chars += a.length;
  for (const n of h.namespaces) {
    chars += n.path.length;
    strings += 1 + n.addresses.length + n.interfaces.length;
    for (const a of n.addresses) chars += a.length;
    for (const i of n.interfaces) chars += i.length;
  }
  return 2 * chars + 32 * strings + 512 * h.namespaces.length;
}

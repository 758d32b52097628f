/**
 * The Linux capabilities the agent needs, and nothing else: the one list the DaemonSet
 * (deploy/base/agent.yaml), the live lab's agents (lab/live-agents.ts, under setpriv) and the README's
 * table are checked against. Each was found by running every agent operation as uid 0 with the
 * set minus that one capability (README "The agent's capabilities" gives what failed).
 *
 * The kernel checks that matter (Linux 6.x):
 * - setns(fd, CLONE_NEWNET) (nsenter --net=…) needs CAP_SYS_ADMIN (net/core/net_namespace.c
 *   netns_install: ns_capable in both the namespace's and the caller's user namespace).
 * - socket(AF_PACKET) needs CAP_NET_RAW (net/packet/af_packet.c packet_create); TPACKET rings,
 *   promiscuous membership and classic BPF filters (SO_ATTACH_FILTER) need nothing more.
 * - every nfnetlink message — nf_tables dumps (iptables-nft, nft), conntrack dumps — needs
 *   CAP_NET_ADMIN (net/netfilter/nfnetlink.c), as do legacy iptables' getsockopt reads (which
 *   open a raw socket first: CAP_NET_RAW).
 * - opening /proc/PID/ns/net passes ptrace_may_access(PTRACE_MODE_READ_FSCREDS): a process of
 *   another uid, or whose permitted set is not a subset of the agent's effective set (any pod's
 *   default container set), needs CAP_SYS_PTRACE (security/commoncap.c cap_ptrace_access_check).
 */
import { readFileSync } from 'node:fs';
import { HoptraceError } from '../common/errors';

/** A capability the agent keeps, with what it is for and what fails without it. */
export interface AgentCapability {
  /** As Kubernetes writes it (securityContext.capabilities.add). */
  name: 'NET_RAW' | 'NET_ADMIN' | 'SYS_ADMIN' | 'SYS_PTRACE';
  /** Its number (linux/capability.h): its bit in /proc/PID/status CapEff. */
  bit: number;
  /** What the agent does with it. */
  usedFor: string;
  /** What fails without it. */
  without: string;
}

/** The agent's capabilities, in the order of deploy/base/agent.yaml. */
export const AGENT_CAPABILITIES: readonly AgentCapability[] = [
  {
    name: 'NET_RAW',
    bit: 13,
    usedFor: 'AF_PACKET sockets: libpcap capture in the worker; iptables-legacy-save',
    without: 'every capture point fails with CAPTURE_OPEN_FAILED; the legacy nat table is unread',
  },
  {
    name: 'NET_ADMIN',
    bit: 12,
    usedFor:
      'nfnetlink reads: iptables-save (nf_tables), nft -j list ruleset, conntrack -L; legacy iptables reads',
    without:
      'doctor cannot read the nat rules (DOCTOR_READ_FAILED), no conntrack evidence (CONNTRACK_READ_FAILED)',
  },
  {
    name: 'SYS_ADMIN',
    bit: 21,
    usedFor: 'setns into a network namespace (nsenter --net=…): capture workers, every read inside',
    without:
      'no capture, no namespace inventory (pod IP targets are not found), no doctor reads (AGENT_NOT_PERMITTED)',
  },
  {
    name: 'SYS_PTRACE',
    bit: 19,
    usedFor: "opening other processes' /proc/PID/ns/net (PID targets, the /proc namespace scan)",
    without:
      'PID and /proc/PID/ns/net targets fail with AGENT_NOT_PERMITTED; the scan skips pod processes (named namespaces in /run/netns still work)',
  },
];

/** The capabilities `CapEff:` (a hex mask from /proc/PID/status) holds, as bit numbers. */
export function capabilityBits(statusText: string, field = 'CapEff'): Set<number> | null {
  const m = new RegExp(`^${field}:\\s*([0-9a-f]+)$`, 'mi').exec(statusText);
  if (m?.[1] === undefined) return null;
  const mask = BigInt(`0x${m[1]}`);
  const bits = new Set<number>();
  for (let b = 0; b < 64; b++) if ((mask >> BigInt(b)) & 1n) bits.add(b);
  return bits;
}

/** The agent's capabilities this process lacks; null when /proc/self/status cannot be read. */
export function missingCapabilities(statusText?: string): AgentCapability[] | null {
  let text = statusText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/status', 'utf8');
    } catch {
      return null;
    }
  }
  const have = capabilityBits(text);
  if (have === null) return null;
  return AGENT_CAPABILITIES.filter((c) => !have.has(c.bit));
}

/** The capability named `name` (a member of AGENT_CAPABILITIES). */
function capability(name: AgentCapability['name']): AgentCapability {
  const c = AGENT_CAPABILITIES.find((x) => x.name === name);
  if (c === undefined) throw new Error(`no capability ${name}`);
  return c;
}

/**
 * AGENT_NOT_PERMITTED for an operation that needs CAP_`name`: the agent lacks it (the usual
 * case), or holds it and something else refused — a seccomp profile answers EPERM for a syscall
 * it blocks (setns in a runtime's default profile), an LSM or hidepid answers EACCES.
 */
export function notPermitted(
  name: AgentCapability['name'],
  refused: string,
  where: string,
  statusText?: string,
): HoptraceError {
  const held = missingCapabilities(statusText)?.some((c) => c.name === name) === false;
  const usedFor = capability(name).usedFor;
  if (!held) {
    return new HoptraceError(
      'AGENT_NOT_PERMITTED',
      `${refused}: the agent lacks CAP_${name} (${usedFor})`,
      {
        where,
        hint: `add ${name} to the agent container's securityContext.capabilities (deploy/base/agent.yaml; README "The agent's capabilities")`,
      },
    );
  }
  return new HoptraceError(
    'AGENT_NOT_PERMITTED',
    `${refused}, although the agent holds CAP_${name}: a seccomp profile or a security module (AppArmor, SELinux) refused it`,
    {
      where,
      hint: 'check the agent container\'s seccompProfile and appArmorProfile (README "The agent\'s capabilities")',
    },
  );
}

/**
 * nsenter's own refusals, from its stderr: setns refused (EPERM: no CAP_SYS_ADMIN, or a seccomp
 * profile answering EPERM as Docker's and containerd's do; ENOSYS: a profile answering ENOSYS as
 * containers/common's — CRI-O, Podman — does) or the namespace file refused (EACCES on
 * /proc/PID/ns/net: no CAP_SYS_PTRACE). Null for anything else.
 */
export function nsenterRefusal(stderr: string, where: string): HoptraceError | null {
  const setns =
    /nsenter: reassociate to namespace '[^']*' failed: (?:Operation not permitted|Function not implemented)/.exec(
      stderr,
    );
  if (setns !== null) return notPermitted('SYS_ADMIN', setns[0], where);
  const open = /nsenter: cannot open \S+: Permission denied/.exec(stderr);
  if (open !== null) return notPermitted('SYS_PTRACE', open[0], where);
  return null;
}

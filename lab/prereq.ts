/**
 * Lab prerequisites: root and the tools the lab runs. A missing one is a LAB_PREREQUISITE error
 * that names it and how to get it; lab tests fail with it rather than skipping silently.
 */
import { execFileSync } from 'node:child_process';
import { HoptraceError } from '../common/errors';

/**
 * Tools the lab runs, with the Debian package that provides each: ip6tables for the IPv6
 * kube-proxy scenario, nft for the native nftables scenarios. Every one is required, so a lab
 * run or test never skips a scenario for want of a tool.
 */
export const LAB_TOOLS: readonly { tool: string; pkg: string }[] = [
  { tool: 'ip', pkg: 'iproute2' },
  { tool: 'iptables', pkg: 'iptables' },
  { tool: 'ip6tables', pkg: 'iptables' },
  { tool: 'nft', pkg: 'nftables' },
  { tool: 'tcpdump', pkg: 'tcpdump' },
  { tool: 'socat', pkg: 'socat' },
  { tool: 'nsenter', pkg: 'util-linux' },
  // The live lab's agents run with only their capabilities (lab/live-agents.ts).
  { tool: 'setpriv', pkg: 'util-linux' },
  { tool: 'curl', pkg: 'curl' },
  { tool: 'ping', pkg: 'iputils-ping' },
];

/** What is missing; an empty list means the lab can run. */
export function missingPrerequisites(): string[] {
  const missing: string[] = [];
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    missing.push(
      `not running as root (uid ${process.getuid()}); the lab creates network namespaces`,
    );
  }
  const lacking = LAB_TOOLS.filter(({ tool }) => !onPath(tool));
  if (lacking.length > 0) {
    const names = lacking.map((l) => l.tool).join(', ');
    const pkgs = [...new Set(lacking.map((l) => l.pkg))].join(' ');
    missing.push(`missing tools: ${names} (apt-get install ${pkgs})`);
  }
  return missing;
}

/** Throws LAB_PREREQUISITE naming everything that is missing. */
export function assertLabPrerequisites(): void {
  const missing = missingPrerequisites();
  if (missing.length > 0) {
    throw new HoptraceError('LAB_PREREQUISITE', missing.join('; '), {
      where: 'lab',
      hint: 'run as root with the listed packages installed',
    });
  }
}

function onPath(tool: string): boolean {
  try {
    // `command -v` needs a shell; `which` may be absent, so ask the shell builtin directly.
    execFileSync('sh', ['-c', 'command -v "$1"', 'sh', tool], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

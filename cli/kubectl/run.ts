/**
 * `kubectl hoptrace <subcommand> …`: the usage, each subcommand's help, and errors turned into
 * their code on stderr and the exit code of README "Exit codes". main.ts only wires the process.
 */
import { isHoptraceError } from '../../common/errors';
import { hoptraceVersion } from '../../common/version';
import { wantsHelp } from '../args';
import { EXIT } from '../exit-codes';
import type { Cluster } from './cluster';
import { KUBE_USAGE, type KubectlDeps } from './flags';

export const USAGE = `usage: kubectl hoptrace <command> [options]

Finds which layer rewrote a VPN client's source address, on the cluster of your kubeconfig.

commands:
  capture --decap TARGET:IFACE --egress TARGET:IFACE --backend TARGET:IFACE --client IP [--dst IP[:PORT]]
      arm the three points, show progress, print the verdict, download the bundle to ./hoptrace-<id>/
      (TARGET: NAMESPACE/POD, POD in -n's namespace, or a workload: [NAMESPACE/]deploy/NAME, sts/NAME, ds/NAME)
  status
      the collector, every node's agent (connected, version), the captures running
  report ID
      download a capture's (or a repro's) bundle to ./hoptrace-<ID>/
  install --image IMAGE
      apply deploy/ with the image, create the token and TLS Secrets, wait for the collector and
      every node's agent, say which nodes have one
  uninstall
      delete all of it: the workloads, the RBAC, both Secrets, the namespace
  doctor --vpn TARGET --backend TARGET [--tunnel-range CIDR] [--client IP] [--dst IP]
      the path checks of hoptrace doctor, read by the agents of the two pods' nodes
  repro --vpn-workload WORKLOAD --decap-iface IFACE --egress-iface IFACE --backend TARGET:IFACE --client IP --url URL
      from this VPN client: probe through the tunnel, have the collector delete the VPN pod after
      --delete-after N probes and follow its replacement, print the timeline, download the bundle
      (WORKLOAD: [NAMESPACE/]sts/NAME, deploy/, ds/, or NAMESPACE/LABELSELECTOR)
  help, <command> --help, --version

every command takes ${KUBE_USAGE}
(the kubeconfig and context as kubectl picks them; -n: the namespace of targets written without one;
--hoptrace-namespace: where hoptrace is installed). The collector is reached through the API
server's port-forward to its pod, with the token of the Secret hoptrace-token.
`;

interface Command {
  run: (argv: string[], deps: KubectlDeps) => Promise<number>;
  usage: string;
}

// Loaded when run, like cli/main.ts's commands (the collector's public face pulls in a lot).
const COMMANDS: Record<string, () => Promise<Command>> = {
  status: async () => {
    const m = await import('./status');
    return { run: m.runStatus, usage: m.USAGE };
  },
  report: async () => {
    const m = await import('./report');
    return { run: m.runReport, usage: m.USAGE };
  },
  capture: async () => {
    const m = await import('./capture');
    return { run: m.runKubeCapture, usage: m.USAGE };
  },
  install: async () => {
    const m = await import('./install');
    return { run: m.runInstall, usage: m.INSTALL_USAGE };
  },
  uninstall: async () => {
    const m = await import('./install');
    return { run: m.runUninstall, usage: m.UNINSTALL_USAGE };
  },
  doctor: async () => {
    const m = await import('./doctor');
    return { run: m.runKubeDoctor, usage: m.USAGE };
  },
  repro: async () => {
    const m = await import('./repro');
    return { run: m.runKubeRepro, usage: m.USAGE };
  },
};

/** Errors that mean the command line itself is wrong: exit 2. */
const USAGE_CODES = new Set(['CLI_USAGE', 'CLI_BAD_POINT']);

/**
 * Runs one command line; never throws (a bug is reported as one, exit 70). Whatever the command
 * left open on the clusters it connected to (requests, port-forwards, exec plugins) is ended
 * when it returns, so the process exits with its error instead of waiting on a silent peer.
 */
export async function runKubectl(argv: string[], deps: KubectlDeps): Promise<number> {
  const connected: Cluster[] = [];
  const tracked: KubectlDeps = {
    ...deps,
    connect: async (flags) => {
      const c = await deps.connect(flags);
      connected.push(c);
      return c;
    },
  };
  try {
    return await runCommand(argv, tracked);
  } finally {
    for (const c of connected) c.close();
  }
}

async function runCommand(argv: string[], deps: KubectlDeps): Promise<number> {
  try {
    const [command, ...rest] = argv;
    if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
      deps.out(USAGE.trimEnd());
      return command === undefined ? EXIT.usage : EXIT.ok;
    }
    if (command === '--version' || command === 'version') {
      deps.out(`kubectl-hoptrace ${hoptraceVersion()}`);
      return EXIT.ok;
    }
    const load = COMMANDS[command];
    if (load === undefined) {
      deps.err(`CLI_USAGE: unknown command '${command}' (run \`kubectl hoptrace help\`)`);
      return EXIT.usage;
    }
    const cmd = await load();
    if (wantsHelp(rest)) {
      deps.out(`usage: ${cmd.usage}`);
      return EXIT.ok;
    }
    return await cmd.run(rest, deps);
  } catch (e) {
    if (isHoptraceError(e)) {
      deps.err(`kubectl hoptrace: ${e.message}`);
      return USAGE_CODES.has(e.code) ? EXIT.usage : EXIT.error;
    }
    deps.err(
      `kubectl hoptrace: internal error (please report): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`,
    );
    return EXIT.internal;
  }
}

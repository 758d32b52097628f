/** `hoptrace <command> …`: parse the command name, hand over, turn errors into clear messages. */
import { isHoptraceError } from '../common/errors';
import { hoptraceVersion } from '../common/version';
import { wantsHelp } from './args';
import { EXIT } from './exit-codes';
import { outputError } from './output-error';

const USAGE = `usage: hoptrace <command> [options]

commands:
  decode [--json] [--vxlan-port N]... FILE
      decode every frame of a pcap/pcapng file: layers, outer and inner tuple
  analyze --point NAME=FILE [--point NAME=FILE]... [--drops NAME=N]... [--inventory inv.json]
          [--client IP] [--dst IP[:PORT]] [--doctor doctor.json] [--json] [--report-dir DIR]
      correlate one request across capture points and name the layer that rewrote its source
  collector [--listen HOST:PORT] [--data-dir DIR] [--token-file FILE] [--tls-cert F --tls-key F]
      the collector: WebSocket endpoint for agents (/v1/agents) and the HTTP API (/v1/captures)
  agent --collector ws://HOST:PORT/v1/agents [--node NAME] [--token-file FILE] [--netns-glob GLOB]
      one per node: captures inside pod network namespaces on the collector's command
  capture --collector URL --point NAME=TARGET:IFACE ... [--client IP] [--dst IP[:PORT]] [--timeout 30s] [--json]
      arm a live capture at the points, wait for the request, print the verdict and the report's URL
  doctor --netns vpn=PATH --netns vpn-node=PATH --netns backend-node=PATH [--tunnel-range CIDR]
         [--client IP] [--dst IP] [--denied-source IP --target IP:PORT --netns client=PATH] [--json]
      check the path for a preserved client address: rp_filter, return route, masquerade, denied source
  repro --lab [--only NAME,...]
  repro --collector URL --vpn-workload NS/LABELSELECTOR --backend TARGET:IFACE [--delete-after N] [--interval 1s] [--count 20]
      probe while the VPN pod is deleted and rescheduled; per-probe timeline
  help, <command> --help
      this text, or one command's usage
  --version
      the version of hoptrace
`;

type Runner = (argv: string[], out: (line: string) => void) => number | Promise<number>;
interface Command {
  run: Runner;
  usage: string;
}

// Each command's module is loaded only when it runs: the agent and collector pull in ws, pino,
// protobufjs and the Kubernetes client, which would otherwise cost every command ~0.2 s of startup.
const COMMANDS: Record<string, () => Promise<Command>> = {
  decode: async () => {
    const m = await import('./decode');
    return { run: m.runDecode, usage: m.DECODE_USAGE };
  },
  analyze: async () => {
    const m = await import('./analyze');
    return { run: m.runAnalyze, usage: m.USAGE };
  },
  collector: async () => {
    const m = await import('./collector');
    return { run: m.runCollector, usage: m.USAGE };
  },
  agent: async () => {
    const m = await import('./agent');
    return { run: m.runAgent, usage: m.USAGE };
  },
  capture: async () => {
    const m = await import('./capture');
    return { run: m.runCapture, usage: m.USAGE };
  },
  repro: async () => {
    const m = await import('./repro');
    return { run: m.runRepro, usage: m.USAGE };
  },
  doctor: async () => {
    const m = await import('./doctor');
    return { run: m.runDoctor, usage: m.USAGE };
  },
};

/** Errors that mean the command line itself is wrong: exit 2, like an unknown command. */
const USAGE_CODES = new Set(['CLI_USAGE', 'CLI_BAD_POINT']);

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (command === '--version' || command === 'version') {
    process.stdout.write(`hoptrace ${hoptraceVersion()}\n`);
    return EXIT.ok;
  }
  const load = COMMANDS[command];
  if (!load) {
    process.stderr.write(
      `hoptrace: CLI_USAGE: unknown command '${command}' (run \`hoptrace help\`)\n`,
    );
    return EXIT.usage;
  }
  const out = (line: string): void => {
    process.stdout.write(line + '\n');
  };
  const cmd = await load();
  if (wantsHelp(rest)) {
    process.stdout.write(`${cmd.usage.startsWith('usage: ') ? '' : 'usage: '}${cmd.usage}\n`);
    return EXIT.ok;
  }
  return cmd.run(rest, out);
}

// A reader that goes away (`hoptrace decode f.pcap | head`) ends the output, not with a stack
// trace; a write that fails (a full disk: ENOSPC) is CLI_OUTPUT, exit 1, never a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(EXIT.ok);
  process.stderr.write(`hoptrace: ${outputError(e).message}\n`);
  process.exit(EXIT.error);
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (isHoptraceError(e)) {
      process.stderr.write(`hoptrace: ${e.message}\n`);
      process.exitCode = USAGE_CODES.has(e.code) ? EXIT.usage : EXIT.error;
      return;
    }
    // An unexpected failure is a bug: show it whole so it can be reported.
    process.stderr.write(
      `hoptrace: internal error (please report): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    process.exitCode = EXIT.internal;
  },
);

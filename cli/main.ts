/** `hoptrace <command> …`: parse the command name, hand over, turn errors into clear messages. */
import { isHoptraceError } from '../common/errors';

const USAGE = `usage: hoptrace <command> [options]

commands:
  decode [--json] [--vxlan-port N]... FILE
      decode every frame of a pcap/pcapng file: layers, outer and inner tuple
  analyze --point NAME=FILE [--point NAME=FILE]... [--drops NAME=N]... [--inventory inv.json]
          [--client IP] [--dst IP[:PORT]] [--json] [--report-dir DIR]
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
      probe while the VPN pod is deleted and rescheduled; per-probe timeline (cluster form: not yet)
  help
      this text
`;

type Runner = (argv: string[], out: (line: string) => void) => number | Promise<number>;

// Each command's module is loaded only when it runs: the agent and collector pull in ws, pino,
// protobufjs and the Kubernetes client, which would otherwise cost every command ~0.2 s of startup.
const COMMANDS: Record<string, () => Promise<Runner>> = {
  decode: async () => (await import('./decode')).runDecode,
  analyze: async () => (await import('./analyze')).runAnalyze,
  collector: async () => (await import('./collector')).runCollector,
  agent: async () => (await import('./agent')).runAgent,
  capture: async () => (await import('./capture')).runCapture,
  repro: async () => (await import('./repro')).runRepro,
  doctor: async () => (await import('./doctor')).runDoctor,
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return command === undefined ? 2 : 0;
  }
  const load = COMMANDS[command];
  if (!load) {
    process.stderr.write(`CLI_USAGE: unknown command '${command}' (run \`hoptrace help\`)\n`);
    return 2;
  }
  const out = (line: string): void => {
    process.stdout.write(line + '\n');
  };
  const run = await load();
  return run(rest, out);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (isHoptraceError(e)) {
      process.stderr.write(`hoptrace: ${e.message}\n`);
      process.exitCode = 1;
      return;
    }
    // An unexpected failure is a bug: show it whole so it can be reported.
    process.stderr.write(
      `hoptrace: internal error (please report): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    process.exitCode = 70;
  },
);

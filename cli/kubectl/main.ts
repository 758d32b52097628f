/** `kubectl-hoptrace`, the kubectl plugin (`kubectl hoptrace …`): wires the process to run.ts. */
import { EXIT } from '../exit-codes';
import { connectCluster } from './cluster';
import { runKubectl } from './run';

// A reader that goes away (`kubectl hoptrace status | head`) ends the output, not with a trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(EXIT.ok);
  throw e;
});

void runKubectl(process.argv.slice(2), {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
  env: process.env,
  cwd: process.cwd(),
  connect: (flags) => connectCluster(flags, process.env),
}).then((code) => {
  process.exitCode = code;
});

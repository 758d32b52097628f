/**
 * `kubectl-hoptrace` run as a process for the tests of what goes wrong outside it
 * (kubectl-faults.test.ts, kubectl-api-reply.test.ts, kubectl-exec-plugin.test.ts): the process
 * with a deadline of its own, a listener that never answers, a kubeconfig written for one case.
 */
import { execFile, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';

const root = join(__dirname, '..', '..', '..');
/** The plugin's launcher (bin/kubectl-hoptrace). */
export const BIN = join(root, 'bin', 'kubectl-hoptrace');

export interface Exit {
  code: number | null;
  /** The child outlived the test's deadline and was killed. */
  hung: boolean;
  stderr: string;
  ms: number;
}

/**
 * `kubectl-hoptrace ARGV…` as a process, killed if it is still running after `deadlineMs` — far
 * above the 1 s request timeouts the tests give, so only a process that would never end reaches
 * it (the plugin's own start takes seconds on two busy cores).
 */
export function spawnPlugin(
  argv: string[],
  env: NodeJS.ProcessEnv,
  deadlineMs = 45_000,
): Promise<Exit> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...argv],
      { env: { PATH: process.env['PATH'], ...env }, timeout: deadlineMs, killSignal: 'SIGKILL' },
      (e, _stdout, stderr) => {
        resolve({
          code: e === null ? 0 : typeof e.code === 'number' ? e.code : null,
          hung: e?.killed === true,
          stderr,
          ms: Date.now() - started,
        });
      },
    );
  });
}

/** A TCP listener that accepts and never answers (an API server or collector that hangs). */
export async function silentListener(t: {
  teardown(fn: () => unknown): void;
}): Promise<{ port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((c) => {
    sockets.add(c);
    c.on('error', () => undefined);
    c.on('close', () => sockets.delete(c));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const c of sockets) c.destroy();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, sockets };
}

/** A kubeconfig file of one cluster `c`, one user `u` and the context `ctx` (namespace ns1). */
export function kubeconfig(dir: string, name: string, cluster: object, user: object): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u', namespace: 'ns1' } }],
      'current-context': 'ctx',
    }),
  );
  return file;
}

/** The tests that run `sleep` (a plugin that hangs) skip without it. */
export const hasSleep = spawnSync('sleep', ['0']).status === 0;

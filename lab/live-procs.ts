/**
 * Host-namespace processes of the live lab (the collector and the agents). Unlike the lab's servers
 * they do not live in a lab namespace, so `Netns.destroy` cannot reap them: every one is registered
 * here and SIGKILLed on process exit, and on SIGINT/SIGTERM before the process goes away.
 *
 * Signal order: lab/netns.ts exits the process from its own SIGINT/SIGTERM handler while a lab is
 * alive; `exit` handlers still run then, so ours kills the children. When no lab is alive ours is
 * the only handler and exits itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

const children = new Set<ChildProcess>();
const paths = new Set<string>();
let hooked = false;

function killAllSync(): void {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) {
      try {
        process.kill(c.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  children.clear();
  for (const p of paths) rmSync(p, { recursive: true, force: true });
  paths.clear();
}

function onSignal(sig: NodeJS.Signals): void {
  killAllSync();
  // Another handler (a live Netns) exits after tearing down its namespaces; else we exit.
  if (process.listenerCount(sig) <= 1) process.exit(sig === 'SIGINT' ? 130 : 143);
}

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAllSync);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/**
 * Starts `node args` in the host namespace, killed when this process ends. With `wrap` (a command
 * that execs its arguments, such as setpriv) the child is `wrap… node args`: same PID, since the
 * wrapper replaces itself with node. Its stdin is a pipe when `stdin` says so (a child driven line
 * by line).
 */
export function spawnTracked(
  args: readonly string[],
  env?: NodeJS.ProcessEnv,
  wrap: readonly string[] = [],
  stdin: 'ignore' | 'pipe' = 'ignore',
): ChildProcess {
  hook();
  const [file, ...argv] = [...wrap, process.execPath, ...args] as [string, ...string[]];
  const child = spawn(file, argv, {
    stdio: [stdin, 'pipe', 'pipe'],
    ...(env === undefined ? {} : { env }),
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Removes `path` (a temp dir) when this process ends, unless `forget` is called first. */
export function removeOnExit(path: string): void {
  hook();
  paths.add(path);
}

/** `path` was removed by its owner. */
export function forget(path: string): void {
  paths.delete(path);
}

/**
 * The exec credential plugins client-node runs for a kubeconfig user (`users[].user.exec`),
 * bounded. client-node spawns a plugin and waits, without a limit, until its stdout and stderr
 * close — which a child the plugin started and left holding them (a shell script's `sleep &`,
 * `aws eks get-token`'s python) can put off for ever, a child that a kill of the plugin alone
 * leaves running. Its spawn function (ExecAuth.execFn) is wrapped:
 * - the plugin starts in a process group of its own (`detached`: a new session), so that
 *   `process.kill(-pid)` reaches what it starts too;
 * - past the deadline, or at close(), the group is killed (SIGKILL: a plugin waiting for a browser
 *   login ignores nothing less), the pipes from it are destroyed (a process that left the group may
 *   still hold them: they are not waited for) and the child is unref'd, so nothing of it keeps the
 *   command alive;
 * - a plugin that exits with an error or by a signal has its group killed at once: its children
 *   neither outlive it nor hold its output open, and its error is reported at once;
 * - what it printed is kept (the start of it) for the message, and a plugin that prints more than
 *   MAX_PLUGIN_OUTPUT on either stream is killed the same way.
 * A plugin in a session of its own has no controlling terminal, and a signal sent to the
 * terminal's process group (Ctrl-C, a hang-up) no longer reaches it: while one runs, SIGINT,
 * SIGTERM and SIGHUP kill its group first, then take their course.
 */
import type { ChildProcess, SpawnOptions, spawn } from 'node:child_process';
import type * as K8s from '@kubernetes/client-node';

/** What became of the last exec credential plugin run (for K8S_CONFIG's message). */
export interface PluginRun {
  killed: boolean;
  /** The stream it printed more than MAX_PLUGIN_OUTPUT bytes on (it was killed for it). */
  overflow: 'stdout' | 'stderr' | undefined;
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The most a plugin may print on stdout, and on stderr: client-node keeps each whole in a string,
 * which past V8's limit (512 MiB: `yes` gets there in a second) throws a RangeError from a stream
 * callback — a crash with a stack trace. An ExecCredential, a client certificate and key included,
 * is a few KiB.
 */
export const MAX_PLUGIN_OUTPUT = 1024 * 1024;

export interface ExecPlugins {
  last(): PluginRun | undefined;
  /** Kills every plugin still running, with its process group, and stops waiting for it. */
  killAll(): void;
}

/** Signals that would have reached the plugin through the terminal's process group. */
const PASSED_ON: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** SIGKILL to the plugin's process group (it leads it: detached); what is gone already is fine. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is empty. Not a group (a platform without setsid): the plugin alone.
    child.kill('SIGKILL');
  }
}

export function watchExecPlugins(kc: K8s.KubeConfig, timeoutMs: number): ExecPlugins {
  const running = new Map<ChildProcess, PluginRun>();
  let last: PluginRun | undefined;

  const stop = (child: ChildProcess, run: PluginRun): void => {
    run.killed = true;
    killGroup(child);
    child.stdin?.destroy();
    child.stdout?.destroy();
    child.stderr?.destroy();
    child.unref();
  };
  const killAll = (): void => {
    for (const [child, run] of running) stop(child, run);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    killAll();
    for (const s of PASSED_ON) process.off(s, onSignal);
    // Its course: the default (the command ends by it) unless someone else listens for it.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  const forget = (child: ChildProcess): void => {
    running.delete(child);
    if (running.size === 0) for (const s of PASSED_ON) process.off(s, onSignal);
  };

  const authenticators = (kc as unknown as { authenticators?: unknown[] }).authenticators ?? [];
  const exec = authenticators.find(
    (a): a is { execFn: typeof spawn } =>
      typeof (a as { execFn?: unknown } | null)?.execFn === 'function',
  );
  if (exec !== undefined) {
    const original = exec.execFn as (
      command: string,
      args: readonly string[] | undefined,
      options: SpawnOptions,
    ) => ChildProcess;
    exec.execFn = ((command: string, args?: readonly string[], options: SpawnOptions = {}) => {
      const child = original(command, args, { ...options, detached: true });
      const run: PluginRun = {
        killed: false,
        overflow: undefined,
        code: null,
        stdout: '',
        stderr: '',
      };
      last = run;
      if (running.size === 0) for (const s of PASSED_ON) process.on(s, onSignal);
      running.set(child, run);
      const timer = setTimeout(() => {
        stop(child, run);
      }, timeoutMs);
      // Registered before client-node's own listeners: past the bound, the chunk at hand is the
      // last one it gets.
      const printed = { stdout: 0, stderr: 0 };
      const keep = (stream: 'stdout' | 'stderr', start: number) => (d: Buffer | string) => {
        printed[stream] += typeof d === 'string' ? Buffer.byteLength(d) : d.length;
        if (run[stream].length < start) run[stream] += d.toString();
        if (printed[stream] > MAX_PLUGIN_OUTPUT && !run.killed) {
          run.overflow = stream;
          stop(child, run);
        }
      };
      child.stdout?.on('data', keep('stdout', 200));
      child.stderr?.on('data', keep('stderr', 400));
      child.once('exit', (code) => {
        // An error or a signal: what it started goes with it (a plugin that exits 0 may leave a
        // helper of its own running; one that holds the output open is killed at the deadline).
        if (code !== 0 && !run.killed) killGroup(child);
      });
      child.once('close', (code) => {
        run.code = code;
        clearTimeout(timer);
        forget(child);
      });
      child.once('error', () => {
        clearTimeout(timer);
        forget(child);
      });
      return child;
    }) as typeof spawn;
  }
  return { last: () => last, killAll };
}

/**
 * The exec credential plugins client-node runs for a kubeconfig user (`users[].user.exec`),
 * bounded. client-node spawns a plugin and waits, without a limit, until its stdout and stderr
 * close — which a child the plugin started and left holding them (a shell script's `sleep &`,
 * `aws eks get-token`'s python) can put off for ever, a child that a kill of the plugin alone
 * leaves running. Its spawn function (ExecAuth.execFn) is wrapped:
 * - without a terminal (scripts, CI, a pod), the plugin starts in a process group of its own
 *   (`detached`: a new session), so that `process.kill(-pid)` reaches what it starts too;
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
 *
 * On a terminal (standard input a TTY) the plugin stays in the command's session, as kubectl runs
 * it: a plugin that asks on /dev/tty (an MFA code, a device login) can ask, and Ctrl-C reaches it.
 * Its tree is then killed by walking /proc (each process stopped, its children read from
 * /proc/PID/task/TID/children, then all killed): what it started and left running is found while
 * it runs; children of a plugin that already exited are init's and are not found (partial).
 */
import type { ChildProcess, SpawnOptions, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { isatty } from 'node:tty';
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

/** Processes a tree walk stops at (a fork bomb is not followed for ever). */
const MAX_TREE = 1024;

function signal(pid: number, s: NodeJS.Signals): boolean {
  try {
    process.kill(pid, s);
    return true;
  } catch {
    return false; // gone already, or not ours
  }
}

/** The children of `pid` as /proc lists them (every thread's), or none when it cannot be read. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ')) {
        const n = Number(word);
        if (word !== '' && Number.isSafeInteger(n) && n > 1) out.push(n);
      }
    } catch {
      // the thread ended while it was read
    }
  }
  return out;
}

/**
 * SIGKILL to `pid` and every process under it: each is stopped (SIGSTOP: it cannot start another
 * or exit and hand its children to init) before its children are read, then all are killed. For a
 * plugin in the command's own session (a terminal), where no process group holds just its tree.
 */
export function killTree(pid: number): void {
  const seen = new Set<number>();
  const todo = [pid];
  while (todo.length > 0 && seen.size < MAX_TREE) {
    const p = todo.pop() ?? pid;
    if (seen.has(p) || !signal(p, 'SIGSTOP')) continue;
    seen.add(p);
    todo.push(...childrenOf(p));
  }
  for (const p of seen) signal(p, 'SIGKILL');
}

/** A session of its own for the plugin unless the command runs on a terminal (see the top). */
function onTerminal(): boolean {
  return isatty(0); // process.stdin would open a stream on it
}

export function watchExecPlugins(kc: K8s.KubeConfig, timeoutMs: number): ExecPlugins {
  const running = new Map<ChildProcess, PluginRun>();
  let last: PluginRun | undefined;

  const detached = !onTerminal();
  const kill = (child: ChildProcess): void => {
    if (detached) killGroup(child);
    else if (child.pid !== undefined) killTree(child.pid);
  };
  const stop = (child: ChildProcess, run: PluginRun): void => {
    run.killed = true;
    kill(child);
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
      // Listening before the spawn, not after: a signal that arrives between the fork and this
      // line would otherwise take its default course and leave the plugin's group running. One
      // that arrives now waits for the event loop, when `running` holds the child.
      const listen = detached && running.size === 0;
      if (listen) for (const s of PASSED_ON) process.on(s, onSignal);
      let child: ChildProcess;
      try {
        child = original(command, args, { ...options, detached });
      } catch (e) {
        if (listen) for (const s of PASSED_ON) process.off(s, onSignal);
        throw e;
      }
      const run: PluginRun = {
        killed: false,
        overflow: undefined,
        code: null,
        stdout: '',
        stderr: '',
      };
      last = run;
      // On a terminal, Ctrl-C and a hang-up reach the plugin as they reach the command.
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
        if (code !== 0 && !run.killed && detached) killGroup(child);
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

/**
 * A thin shell over `ip netns`: runs commands with execFile (never a shell string), turns failures
 * into LAB_SETUP errors that name the command and its stderr, and owns the lifetime of every
 * namespace it creates. Namespace names carry a per-run prefix (`ht<6 hex>-`), so parallel runs
 * and leftovers of a crashed run never collide, and cleanup only ever touches this run's names.
 *
 * A run that cannot clean up (SIGKILL, an OOM kill, a power cut of the VM's process) leaves its
 * namespaces behind. Before its first namespace, each run writes an owner file
 * (`/run/hoptrace-lab/<prefix>`: its PID and the process's start time, so a reused PID is told
 * apart); the first namespace a process creates first sweeps the runs whose owner is gone —
 * processes inside killed, namespaces and owner file removed (sweepOrphanLabs). A namespace named
 * like the lab's without an owner file (an older version's leftover) is never touched: it is
 * named in the returned report, with the command that removes it.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HoptraceError } from '../common/errors';

/** Output of a finished command. */
export interface CommandResult {
  stdout: string;
  stderr: string;
}

/**
 * Runs `file args` (writing `input` to its stdin, if given) and resolves with its output; rejects
 * with LAB_SETUP naming the command.
 */
export function runCommand(
  file: string,
  args: readonly string[],
  timeoutMs = 15_000,
  input?: string,
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { timeout: timeoutMs, maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err === null) {
          resolve({ stdout, stderr });
          return;
        }
        const why = stderr.trim() !== '' ? stderr.trim() : err.message;
        reject(
          new HoptraceError('LAB_SETUP', `\`${[file, ...args].join(' ')}\` failed: ${why}`, {
            where: 'lab',
          }),
        );
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** Output and exit code of a command whose failure is an outcome, not an error (e.g. curl). */
export interface CommandStatus extends CommandResult {
  code: number;
}

/** Runs `file args` and resolves with its exit code whatever it is. */
export function runCommandStatus(
  file: string,
  args: readonly string[],
  timeoutMs = 15_000,
): Promise<CommandStatus> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { timeout: timeoutMs, maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ stdout, stderr: err !== null && stderr === '' ? err.message : stderr, code });
      },
    );
  });
}

/** Every namespace name on this machine (`ip netns list`, first column). */
export async function listNamespaces(): Promise<string[]> {
  const { stdout } = await runCommand('ip', ['netns', 'list']);
  return parseNetnsList(stdout);
}

function parseNetnsList(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n !== '');
}

/** Where each run's owner file lives (tmpfs, emptied at boot with /run/netns). */
export const OWNER_DIR = '/run/hoptrace-lab';
const PREFIX_RE = /^ht[0-9a-f]{6}-$/;

/** A process's start time in clock ticks since boot (/proc/<pid>/stat field 22), null if gone. */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

/** Whether the owner file's text names a process that still runs (same PID, same start time). */
function ownerAlive(text: string): boolean {
  const [pid, start] = text.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0 || start === undefined) return false;
  return processStart(n) === start;
}

/** What a sweep did: namespaces removed (their runs' owners gone) and lab-named ones left alone. */
export interface SweepReport {
  removed: string[];
  unowned: string[];
}

/**
 * Removes the namespaces of lab runs whose owner process is gone (see the top), and names the
 * lab-named namespaces that have no owner file. Never throws: a sweep that cannot read or remove
 * something leaves it and says so in `unowned` at worst.
 */
export async function sweepOrphanLabs(): Promise<SweepReport> {
  let owners: string[] = [];
  try {
    owners = readdirSync(OWNER_DIR).filter((f) => PREFIX_RE.test(f));
  } catch {
    // no owner dir yet: nothing was ever marked
  }
  const names = await listNamespaces().catch(() => [] as string[]);
  const removed: string[] = [];
  const live = new Set<string>();
  for (const prefix of owners) {
    const file = join(OWNER_DIR, prefix);
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // its run just removed it
    }
    if (ownerAlive(text)) {
      live.add(prefix);
      continue;
    }
    for (const name of names.filter((n) => n.startsWith(prefix))) {
      await killNamespacePids(name);
      await runCommand('ip', ['netns', 'del', name]).then(
        () => removed.push(name),
        () => undefined,
      );
    }
    rmSync(file, { force: true });
  }
  const unowned = names.filter((n) => {
    const prefix = n.slice(0, 9);
    return PREFIX_RE.test(prefix) && !live.has(prefix) && !owners.includes(prefix);
  });
  return { removed, unowned };
}

/** The first sweep of this process, run before its first namespace. */
let swept: Promise<SweepReport> | null = null;
let unownedSaid = false;

/** A fresh per-run prefix: `ht` + 6 random hex digits + `-`. */
export function newRunPrefix(): string {
  return `ht${randomBytes(3).toString('hex')}-`;
}

// Labs alive in this process. While any is alive, SIGINT/SIGTERM tear all of them down before
// the process exits; with none alive the default signal behaviour is restored.
const liveLabs = new Set<Netns>();

function onSignal(sig: NodeJS.Signals): void {
  // Synchronous on purpose: the process is about to exit and async work would not finish.
  for (const lab of [...liveLabs]) lab.destroySync();
  process.exit(sig === 'SIGINT' ? 130 : 143);
}

function track(lab: Netns): void {
  if (liveLabs.size === 0) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  liveLabs.add(lab);
}

function untrack(lab: Netns): void {
  if (!liveLabs.delete(lab) || liveLabs.size > 0) return;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

/**
 * The namespaces of one lab run. `add` creates a namespace (name = prefix + short name), `exec`
 * runs a command inside one, `spawn` starts a long-lived process inside one; `destroy` kills every
 * process in the lab's namespaces by PID and deletes them, and is safe to call more than once.
 */
export class Netns {
  readonly prefix: string;
  private readonly names: string[] = [];
  private readonly children = new Set<ChildProcess>();

  constructor(prefix: string = newRunPrefix()) {
    if (!PREFIX_RE.test(prefix)) {
      throw new HoptraceError('LAB_SETUP', `namespace prefix '${prefix}' is not ht<6 hex>-`, {
        where: 'lab',
      });
    }
    this.prefix = prefix;
    track(this);
  }

  /** The full name of short name `ns` in this run. */
  full(ns: string): string {
    return this.prefix + ns;
  }

  /** Namespaces created so far (full names). */
  namespaces(): readonly string[] {
    return this.names;
  }

  /**
   * Creates namespace `ns` with loopback up. The first one of a process sweeps the leftovers of
   * runs whose owner is gone; the first one of a run writes its owner file.
   */
  async add(ns: string): Promise<void> {
    const name = this.full(ns);
    if (this.names.length === 0) {
      swept ??= sweepOrphanLabs();
      const report = await swept;
      if (report.unowned.length > 0 && !unownedSaid) {
        unownedSaid = true;
        process.stderr.write(
          `lab: namespaces named like the lab's but of no known run (left alone): ${report.unowned.join(', ')}; remove them with: ${report.unowned.map((n) => `ip netns del ${n}`).join('; ')}\n`,
        );
      }
      this.markOwner();
    }
    await runCommand('ip', ['netns', 'add', name]);
    this.names.push(name);
    await this.ip(ns, 'link', 'set', 'lo', 'up');
  }

  /** Writes this run's owner file (see the top): LAB_SETUP when it cannot. */
  private markOwner(): void {
    try {
      mkdirSync(OWNER_DIR, { recursive: true });
      writeFileSync(join(OWNER_DIR, this.prefix), `${process.pid} ${processStart(process.pid)}\n`);
    } catch (e) {
      throw new HoptraceError(
        'LAB_SETUP',
        `cannot write ${join(OWNER_DIR, this.prefix)}: ${String(e)}`,
        {
          where: 'lab',
          hint: 'the lab runs as root and keeps one owner file per run in /run/hoptrace-lab',
        },
      );
    }
  }

  private dropOwner(): void {
    rmSync(join(OWNER_DIR, this.prefix), { force: true });
  }

  /** `ip -n <ns> ...args`. */
  ip(ns: string, ...args: string[]): Promise<CommandResult> {
    return runCommand('ip', ['-n', this.full(ns), ...args]);
  }

  /** Runs `file args` inside namespace `ns` and waits for it. */
  exec(
    ns: string,
    file: string,
    args: readonly string[],
    timeoutMs?: number,
  ): Promise<CommandResult> {
    return runCommand('ip', ['netns', 'exec', this.full(ns), file, ...args], timeoutMs);
  }

  /** Runs `file args` inside namespace `ns`; a non-zero exit is reported, not thrown. */
  execStatus(
    ns: string,
    file: string,
    args: readonly string[],
    timeoutMs?: number,
  ): Promise<CommandStatus> {
    return runCommandStatus('ip', ['netns', 'exec', this.full(ns), file, ...args], timeoutMs);
  }

  /** Sets sysctl `key=value` inside namespace `ns`. */
  async sysctl(ns: string, key: string, value: string): Promise<void> {
    await this.exec(ns, 'sysctl', ['-q', '-w', `${key}=${value}`]);
  }

  /** `iptables ...args` inside namespace `ns`. */
  async iptables(ns: string, ...args: string[]): Promise<void> {
    await this.exec(ns, 'iptables', ['-w', ...args]);
  }

  /** `ip6tables ...args` inside namespace `ns`. */
  async ip6tables(ns: string, ...args: string[]): Promise<void> {
    await this.exec(ns, 'ip6tables', ['-w', ...args]);
  }

  /** Loads `ruleset` (nft syntax) inside namespace `ns` as one transaction: `nft -f -`. */
  async nft(ns: string, ruleset: string): Promise<void> {
    await runCommand('ip', ['netns', 'exec', this.full(ns), 'nft', '-f', '-'], 15_000, ruleset);
  }

  /**
   * Starts `file args` inside namespace `ns`. `ip netns exec` execs the command after setns, so
   * the child's PID is the command's own PID and signals reach it directly. stdin is closed
   * unless `stdin` is 'pipe' (a process the lab drives by writing lines to it).
   */
  spawn(
    ns: string,
    file: string,
    args: readonly string[],
    stdin: 'ignore' | 'pipe' = 'ignore',
  ): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', this.full(ns), file, ...args], {
      stdio: [stdin, 'pipe', 'pipe'],
    });
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
    return child;
  }

  /** Kills every process in the lab's namespaces and deletes them (best effort, never throws). */
  async destroy(): Promise<void> {
    let left = 0;
    for (const name of [...this.names].reverse()) {
      await killNamespacePids(name);
      await runCommand('ip', ['netns', 'del', name]).catch(async () => {
        // Gone already is fine; one still there keeps the owner file, so a later sweep takes it.
        if ((await listNamespaces().catch(() => [name])).includes(name)) left++;
      });
    }
    this.names.length = 0;
    if (left === 0) this.dropOwner();
    untrack(this);
  }

  /** Synchronous `destroy` for signal handlers. */
  destroySync(): void {
    let left = 0;
    for (const name of [...this.names].reverse()) {
      for (const pid of pidsSync(name)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      try {
        execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
      } catch {
        left++; // gone already, or still there: the owner file stays for a later sweep
      }
    }
    this.names.length = 0;
    if (left === 0) this.dropOwner();
    untrack(this);
  }
}

function parsePids(stdout: string): number[] {
  return stdout
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

function pidsSync(name: string): number[] {
  try {
    return parsePids(execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }));
  } catch {
    return [];
  }
}

// SIGTERM first, SIGKILL for anything still there after a short grace period.
async function killNamespacePids(name: string): Promise<void> {
  const pids = await runCommand('ip', ['netns', 'pids', name]).then(
    (r) => parsePids(r.stdout),
    () => [],
  );
  if (pids.length === 0) return;
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + 1000;
  while (Date.now() < deadline && pids.some(alive)) await delay(20);
  for (const pid of pids) if (alive(pid)) signal(pid, 'SIGKILL');
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Resolves after `ms` milliseconds (for grace periods only, never as synchronisation). */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

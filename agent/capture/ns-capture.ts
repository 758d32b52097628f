/**
 * Capture inside a network namespace: starts worker.ts there with nsenter, parses its frames and
 * turns every way it can fail into a HoptraceError — interface missing, bad filter, namespace
 * missing at start (rejects start()), namespace or interface gone mid-capture (onEnd).
 *
 * With the addon, the worker's batches come through a ring of shared memory this process creates
 * and the worker inherits as fd 3 (native/loader.ts PcapSharedRing): only small notices cross
 * the worker's stdout, and each batch is read in place and released once consumed.
 *
 * The namespace is watched by identity (device + inode of its nsfs file): `ip netns del` only
 * unmounts the name while our worker keeps the namespace itself alive, so without the watch a
 * deleted namespace would be captured (and kept) forever.
 */
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { statSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { join } from 'node:path';
import { ERRORS, HoptraceError, type ErrorCode } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import type { EncodedEvents } from '../../common/wire';
import { loadNativeAddon, type PcapSharedRing } from '../../native/loader';
import { nsenterRefusal } from '../capabilities';
import { watchNamespaceFile } from '../netns/ns-watch';
import { EventsWireEncoder, parseSummaryFrame } from './summary-wire';
import {
  EventBatcher,
  type BatchOptions,
  type CaptureSource,
  type CaptureSpec,
  type CaptureStats,
} from './source';
import type { RetentionTarget } from './retention';
import type { WorkerArgs } from './worker';
import { WorkerFrameParser, type WireError, type WorkerFrame } from './worker-frames';

export interface NsCaptureOptions {
  /** Namespace file (`/run/netns/x`, `/proc/PID/ns/net`); absent = the agent's own namespace. */
  netnsPath?: string;
  /** How long the worker may take to open the capture (default 10 s). */
  readyTimeoutMs?: number;
  /**
   * Poll the namespace's identity at this period (tests). Default: at once when its directory
   * says the file changed, and every second besides; /proc paths every 250 ms (ns-watch.ts).
   */
  watchIntervalMs?: number;
  statsIntervalMs?: number;
  /**
   * Bytes the worker may hold unread by this process before it drops event batches and counts
   * them (default 8 MiB, besides what the kernel's socket buffer holds).
   */
  workerMaxQueuedBytes?: number;
  batch?: BatchOptions;
  /**
   * Share a frame ring with the worker (native/loader.ts PcapSharedRing) when the addon loads here
   * and the worker runs the native source (default true); false: everything through its stdout.
   */
  ring?: boolean;
  /** Worker script (default: worker.js next to this file). */
  workerPath?: string;
  /** The worker's warnings, e.g. the fallback to cap (default: process.emitWarning). */
  onWarning?: (message: string) => void;
  /**
   * Retain every frame (retention.ts) into this file: `fd` is this process's, passed down to the
   * worker as one of its stdio fds; its bounds go along.
   */
  retain?: RetentionTarget;
}

interface NsIdentity {
  dev: number;
  ino: number;
}

/**
 * Node flags of the capture worker. V8's memory reducer ran one full mark-compact ~8 s after a
 * worker started (its heap had grown while modules loaded, then allocation stopped): ~40 ms of
 * CPU on the machines measured, paid by every capture in its first seconds; the worker's
 * JavaScript allocates little once capturing (its packets never reach it), so the heap it keeps
 * instead is the few MB it started with.
 */
export const WORKER_NODE_FLAGS: readonly string[] = ['--no-memory-reducer'];

/**
 * The worker's environment: the agent's, without NODE_EXTRA_CA_CERTS — Node reads and parses every
 * certificate of that file at start (~45 ms of CPU for Debian's bundle on the machines measured),
 * and the worker never opens a TLS connection.
 */
export function workerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const rest = { ...env };
  delete rest['NODE_EXTRA_CA_CERTS'];
  return rest;
}

function identity(path: string): NsIdentity | null {
  try {
    const st = statSync(path);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return null;
  }
}

function sameIdentity(a: NsIdentity | null, b: NsIdentity | null): boolean {
  return a !== null && b !== null && a.dev === b.dev && a.ino === b.ino;
}

/** Rebuilds a worker's error; an unknown code becomes CAPTURE_WORKER_FAILED. */
export function errorFromWire(e: WireError): HoptraceError {
  const code: ErrorCode = Object.hasOwn(ERRORS, e.code)
    ? (e.code as ErrorCode)
    : 'CAPTURE_WORKER_FAILED';
  // The message reads "CODE: where: detail (hint)"; take the detail back out of it.
  let detail = e.message;
  if (detail.startsWith(`${e.code}: `)) detail = detail.slice(e.code.length + 2);
  if (e.where !== undefined && detail.startsWith(`${e.where}: `))
    detail = detail.slice(e.where.length + 2);
  if (e.hint !== undefined && detail.endsWith(` (${e.hint})`))
    detail = detail.slice(0, -(e.hint.length + 3));
  const opts: { where?: string; hint?: string } = {};
  if (e.where !== undefined) opts.where = e.where;
  if (e.hint !== undefined) opts.hint = e.hint;
  return new HoptraceError(code, detail, opts);
}

/** Captures `spec` inside a namespace through a worker process. */
export class NsCapture implements CaptureSource {
  private child: ChildProcess | undefined;
  private batcher: EventBatcher | undefined;
  /** startEncoded: the encoder, and the events it handed over. */
  private encoder: EventsWireEncoder | undefined;
  private encodedEvents = 0;
  private onEnd: ((err: HoptraceError | null) => void) | undefined;
  private stopping: Promise<void> | undefined;
  private ended = false;
  private workerStats: CaptureStats | undefined;
  private stderrTail = '';
  private unwatch: (() => void) | undefined;
  private nsId: NsIdentity | null = null;
  /** The error the capture ends with once the worker has exited (its namespace went away). */
  private endWith: HoptraceError | undefined;
  /** Milliseconds from spawn to the worker's ready frame. */
  startupMs: number | undefined;
  /** Which implementation the worker runs ('native' or 'cap'), from its ready frame. */
  sourceKind: 'native' | 'cap' | undefined;
  /** Worker frames that came through the shared frame ring (0: all through its stdout). */
  get ringFrames(): number {
    return this.parser?.ringFrames ?? 0;
  }
  private parser: WorkerFrameParser | undefined;
  /** Warnings the worker sent (e.g. the fallback to cap and why). */
  readonly warnings: string[] = [];
  /**
   * The worker said its last word (its `end` frame, right after its final counters): stats() is
   * final, retention counters included. False when it was killed or failed.
   */
  finalStats = false;

  constructor(
    private readonly spec: CaptureSpec,
    private readonly opts: NsCaptureOptions = {},
  ) {}

  /** Flow counter events start() delivered, and the packets they count. */
  private foldEvents = 0;
  private foldedPackets = 0;

  private get where(): string {
    return `${this.opts.netnsPath ?? 'agent namespace'} interface ${this.spec.iface}`;
  }

  start(
    onEvents: (events: PacketEvent[]) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void> {
    // Flow counters are counted as they are delivered, like `delivered` (a full queue drops).
    const batcher = new EventBatcher((events) => {
      for (const ev of events) {
        if (ev.fold === undefined) continue;
        this.foldEvents++;
        this.foldedPackets += ev.fold.packets;
      }
      onEvents(events);
    }, this.opts.batch);
    return this.launch(
      false,
      (f) => {
        if (f.type === 'events') for (const ev of f.events) batcher.push(ev);
        else if (f.type === 'event') batcher.push(f.event);
      },
      onEnd,
      batcher,
    );
  }

  /**
   * Like start(), but the events arrive already encoded as EventBatch `events` entries
   * (summary-wire.ts): the native worker's summary records become protobuf bytes without a
   * PacketEvent per packet. Chunks hold at most batch.maxBatch events (default 256) and are handed
   * over as each worker frame arrives (the worker already batches per ring block), so nothing is
   * queued here. What the agent runtime uses.
   */
  startEncoded(
    onEncoded: (chunk: EncodedEvents) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void> {
    const enc = new EventsWireEncoder((chunk) => {
      this.encodedEvents += chunk.count;
      try {
        onEncoded(chunk);
      } catch (e) {
        // The consumer's own failure, not unreadable worker output: rethrown outside the frame
        // parsing (as one thrown from start()'s onEvents would surface).
        queueMicrotask(() => {
          throw e;
        });
      }
    }, this.opts.batch?.maxBatch ?? 256);
    this.encoder = enc;
    return this.launch(
      true,
      (f) => {
        if (f.type === 'summaries') enc.summaries(parseSummaryFrame(f.body));
        else if (f.type === 'events') enc.events(f.events);
        else enc.events([f.event]);
        enc.flush();
      },
      onEnd,
      undefined,
    );
  }

  private launch(
    rawSummaries: boolean,
    consume: (f: Exclude<WorkerFrame, { type: 'control' }>) => void,
    onEnd: (err: HoptraceError | null) => void,
    batcher: EventBatcher | undefined,
  ): Promise<void> {
    if (this.child !== undefined || this.stopping !== undefined) {
      return Promise.reject(new Error('NsCapture.start() called twice'));
    }
    const nsPath = this.opts.netnsPath;
    if (nsPath !== undefined) {
      this.nsId = identity(nsPath);
      if (this.nsId === null) {
        return Promise.reject(
          new HoptraceError('TARGET_NOT_FOUND', `network namespace ${nsPath} does not exist`, {
            where: this.where,
            hint: 'the pod or namespace is gone; list namespaces with `ip netns list` or lsns -t net',
          }),
        );
      }
    }
    const args: WorkerArgs = { spec: this.spec, where: nsPath ?? 'agent namespace' };
    if (this.opts.statsIntervalMs !== undefined) args.statsIntervalMs = this.opts.statsIntervalMs;
    if (this.opts.workerMaxQueuedBytes !== undefined) {
      args.maxQueuedBytes = this.opts.workerMaxQueuedBytes;
    }
    const ring = this.frameRing();
    // The worker inherits the ring as its fd 3.
    if (ring !== undefined) args.ringFd = 3;
    const stdio: ('pipe' | 'ignore' | number)[] = ['pipe', 'pipe', 'pipe'];
    stdio.push(ring !== undefined ? ring.fd : 'ignore');
    const retain = this.opts.retain;
    if (retain !== undefined) {
      // The worker's fd 4; it writes through the same open file (the offset is shared, and this
      // process only ever reads the file with positional reads).
      args.retain = { ...retain, fd: stdio.length };
      stdio.push(retain.fd);
    }
    const worker = this.opts.workerPath ?? join(__dirname, 'worker.js');
    const argv = [...WORKER_NODE_FLAGS, worker, JSON.stringify(args)];
    const env = workerEnv(process.env);
    const t0 = process.hrtime.bigint();
    let child: ChildProcessByStdio<Writable, Readable, Readable>;
    try {
      // stdio 0-2 are pipes, so the three streams exist (the typings lose that with an fd added).
      child = (
        nsPath === undefined
          ? spawn(process.execPath, argv, { stdio, env })
          : spawn('nsenter', [`--net=${nsPath}`, '--', process.execPath, ...argv], { stdio, env })
      ) as ChildProcessByStdio<Writable, Readable, Readable>;
    } catch (e) {
      // Refused before any process existed (bad arguments, no resources): start() rejects as for
      // any worker failure, and the ring is unmapped now rather than at some later GC.
      ring?.dispose();
      return Promise.reject(
        new HoptraceError(
          'CAPTURE_WORKER_FAILED',
          `cannot start the capture worker: ${e instanceof Error ? e.message : String(e)}`,
          { where: this.where },
        ),
      );
    } finally {
      // The worker has its own copy now; the mapping here lives as long as ring.buffer.
      ring?.close();
    }
    this.child = child;
    this.batcher = batcher;
    this.onEnd = onEnd;
    const parser = new WorkerFrameParser({
      rawSummaries,
      ...(ring !== undefined ? { ring } : {}),
    });
    this.parser = parser;

    return new Promise<void>((resolve, reject) => {
      let ready = false;
      const readyTimer = setTimeout(() => {
        fail(
          new HoptraceError(
            'CAPTURE_WORKER_FAILED',
            `the worker did not open the capture within ${this.opts.readyTimeoutMs ?? 10000} ms${this.stderrNote()}`,
            { where: this.where },
          ),
        );
      }, this.opts.readyTimeoutMs ?? 10000);

      // Before ready a failure rejects start(); after it, it ends delivery with the error.
      const fail = (err: HoptraceError): void => {
        clearTimeout(readyTimer);
        if (!ready) {
          ready = true;
          this.end(null, false);
          this.kill();
          reject(err);
          return;
        }
        this.kill();
        this.end(err, true);
      };

      const onFrame = (f: WorkerFrame): void => {
        if (this.ended) return;
        if (f.type !== 'control') {
          try {
            consume(f);
          } catch (e) {
            unreadable(e);
          }
          return;
        }
        const msg = f.msg;
        switch (msg.kind) {
          case 'ready':
            clearTimeout(readyTimer);
            ready = true;
            this.startupMs = Number(process.hrtime.bigint() - t0) / 1e6;
            this.sourceKind = msg.source;
            this.startWatch();
            resolve();
            break;
          case 'stats':
            this.workerStats = msg.stats;
            break;
          case 'error':
            fail(errorFromWire(msg.error));
            break;
          case 'warning':
            this.warn(msg.message, 'HOPTRACE_CAPTURE_FALLBACK');
            break;
          case 'end':
            this.finalStats = true;
            break;
        }
      };

      const unreadable = (e: unknown): void => {
        fail(
          new HoptraceError(
            'CAPTURE_WORKER_FAILED',
            `unreadable worker output: ${e instanceof Error ? e.message : String(e)}`,
            { where: this.where },
          ),
        );
      };
      child.stdout.on('data', (chunk: Buffer) => {
        let frames: WorkerFrame[];
        try {
          frames = parser.push(chunk);
        } catch (e) {
          unreadable(e);
          return;
        }
        for (const f of frames) onFrame(f);
        // Everything handed out is consumed: the worker may reuse those ring bytes.
        parser.release();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-2000);
      });
      child.stdin.on('error', () => undefined);
      child.once('error', (e) => {
        ring?.dispose();
        fail(
          new HoptraceError('CAPTURE_WORKER_FAILED', `cannot start the worker: ${e.message}`, {
            where: this.where,
            hint: 'nsenter (util-linux) and node must be on PATH',
          }),
        );
      });
      child.once('close', (code, signal) => {
        // The worker is gone and its stdout read to the end: no notice can point into the ring.
        ring?.dispose();
        clearTimeout(readyTimer);
        this.stopWatch();
        if (this.ended) return;
        if (this.endWith !== undefined) {
          this.end(this.endWith, true);
          return;
        }
        if (this.stopping !== undefined) {
          if (ready) this.end(null, true);
          else
            fail(
              new HoptraceError('CAPTURE_WORKER_FAILED', 'stopped before the capture was open', {
                where: this.where,
              }),
            );
          return;
        }
        void this.classifyExit(code, signal).then(fail);
      });
    });
  }

  /**
   * A frame ring for the worker, when it will run the native source and the addon loads here;
   * undefined otherwise, or when it cannot be created (the worker then writes everything to its
   * stdout: slower, nothing lost).
   */
  private frameRing(): PcapSharedRing | undefined {
    if (this.opts.ring === false || this.spec.source === 'cap') return undefined;
    const load = loadNativeAddon();
    if (!load.ok) return undefined;
    const bytes = Math.min(
      Math.max(this.opts.workerMaxQueuedBytes ?? 8 * 1024 * 1024, 64 * 1024),
      1024 * 1024 * 1024,
    );
    try {
      return new load.addon.SharedRing(bytes);
    } catch (e) {
      this.warn(
        `shared frame ring unavailable (${e instanceof Error ? e.message : String(e)}); batches go through the worker's stdout`,
        'HOPTRACE_CAPTURE_RING',
      );
      return undefined;
    }
  }

  /** Keeps a warning and passes it on (opts.onWarning, else a process warning with `code`). */
  private warn(message: string, code: string): void {
    this.warnings.push(message);
    if (this.opts.onWarning !== undefined) this.opts.onWarning(message);
    else process.emitWarning(message, { code });
  }

  private stderrNote(): string {
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return tail === '' ? '' : `; worker stderr: ${tail}`;
  }

  /** Why did the worker exit on its own? Waits briefly for a namespace deletion in progress. */
  private async classifyExit(
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<HoptraceError> {
    const nsPath = this.opts.netnsPath;
    if (nsPath !== undefined) {
      // Whoever removes a namespace usually kills its processes first, then unmounts it.
      for (let i = 0; i < 10; i++) {
        if (!sameIdentity(identity(nsPath), this.nsId)) return this.namespaceGone();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const how = signal !== null ? `signal ${signal}` : `exit code ${String(code)}`;
    // nsenter itself refused (before the worker ran): a capability the agent lacks.
    const refused = nsenterRefusal(this.stderrTail, this.where);
    if (refused !== null) return refused;
    if (signal === 'SIGABRT' || /Assertion .status == 0. failed/.test(this.stderrTail)) {
      // cap 0.2.1 asserts in its poll callback when libpcap's socket reports an error, which is
      // what an interface removed under the capture looks like (measured on these machines).
      return new HoptraceError(
        'CAPTURE_INTERFACE_GONE',
        `interface ${this.spec.iface} disappeared (libpcap read error; worker ended by ${how})`,
        {
          where: this.opts.netnsPath ?? 'agent namespace',
          hint: 'the pod was deleted or its interface removed; capture again on a live interface',
        },
      );
    }
    return new HoptraceError(
      'CAPTURE_WORKER_FAILED',
      `the worker ended (${how})${this.stderrNote()}`,
      {
        where: this.where,
      },
    );
  }

  private namespaceGone(): HoptraceError {
    return new HoptraceError(
      'CAPTURE_NAMESPACE_GONE',
      `network namespace ${this.opts.netnsPath ?? ''} was deleted while capturing`,
      {
        where: this.where,
        hint: 'the pod was deleted or restarted; resolve the target again and re-arm',
      },
    );
  }

  private startWatch(): void {
    const nsPath = this.opts.netnsPath;
    if (nsPath === undefined) return;
    // On the directory's inotify watch, with a backstop in the status reports' tick; polled
    // where there is no directory to watch (agent/netns/ns-watch.ts).
    this.unwatch = watchNamespaceFile(
      nsPath,
      () => {
        if (!sameIdentity(identity(nsPath), this.nsId)) {
          this.stopWatch();
          // Not the end yet: asked to stop, the worker drains its ring and writes what it holds —
          // packets captured before the deletion (a pod deleted mid-request). The capture ends
          // with this error once the worker has exited.
          this.endWith ??= this.namespaceGone();
          this.kill();
        }
      },
      { pollMs: this.opts.watchIntervalMs },
    );
  }

  private stopWatch(): void {
    this.unwatch?.();
    this.unwatch = undefined;
  }

  private kill(): void {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    // The worker drains its ring (≤ ~1 s) and its stdout before exiting, then sends its final
    // counters: give it time, or the last frames and counters are lost.
    setTimeout(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }, 10_000).unref();
  }

  /** Flushes and calls onEnd once. */
  private end(err: HoptraceError | null, notify: boolean): void {
    if (this.ended) return;
    this.ended = true;
    this.stopWatch();
    this.batcher?.close();
    const onEnd = this.onEnd;
    this.onEnd = undefined;
    if (notify) onEnd?.(err);
  }

  stop(): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      const child = this.child;
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
        this.end(null, true);
        resolve();
        return;
      }
      child.once('close', () => {
        this.end(null, true);
        resolve();
      });
      this.kill();
    });
    return this.stopping;
  }

  stats(): CaptureStats {
    const b = this.batcher;
    const w = this.workerStats;
    const s: CaptureStats = {
      // A flow counter event stands for its packets.
      packets:
        b !== undefined
          ? b.delivered - this.foldEvents + this.foldedPackets
          : this.encodedEvents -
            (this.encoder?.foldEvents ?? 0) +
            (this.encoder?.foldedPackets ?? 0),
      decodeErrors: b?.decodeErrors ?? this.encoder?.decodeErrors ?? 0,
      kernelDrops: w?.kernelDrops ?? null,
      ifaceDrops: w?.ifaceDrops ?? null,
      queueDrops: (w?.queueDrops ?? 0) + (b?.dropped ?? 0),
    };
    if (w?.received !== undefined) s.received = w.received;
    if (w?.retention !== undefined) s.retention = w.retention;
    const folded = this.encoder?.foldedPackets ?? this.foldedPackets;
    if (folded > 0) s.folded = folded;
    if (w?.foldFullSent !== undefined) s.foldFullSent = w.foldFullSent;
    return s;
  }
}

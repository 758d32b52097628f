/**
 * Later points' passes on another core (`hoptrace analyze`): once the first point has chosen the
 * request, every later point's pass has the same plan and none depends on another, so while this
 * thread reads one later file a worker thread (offline/pass-worker.ts) reads the next. The worker
 * starts when the analysis starts, so loading its modules overlaps the first point's passes.
 *
 * The analysis is synchronous (core/report/analyze.ts pulls each point's events), so the result is
 * waited for with Atomics.wait on a shared word the worker bumps after posting it, and taken with
 * receiveMessageOnPort. A worker that stops making progress (no block read for `stallMs`; it
 * bumps a second word per block) or fails to start is given up and terminated: the pass then runs
 * here, so a broken worker costs time, never the answer and never a hang. Errors the pass throws
 * (a malformed file) come back with their code and are thrown here as the in-thread pass would.
 */
import { join } from 'node:path';
import {
  MessageChannel,
  receiveMessageOnPort,
  Worker,
  type MessagePort,
} from 'node:worker_threads';
import { HoptraceError, type ErrorCode } from '../common/errors';
import type { PacketEvent } from '../common/event';
import type { LaterPass } from '../core/report/analyze';
import type { CaptureFileStats, ResumePoint } from './pcap-file';

/** One later point's pass, as the worker runs it. */
export interface PassJob {
  name: string;
  file: string;
  gated: boolean;
  plan: LaterPass;
}

/** What the pass kept and counted, and what the file recorded about its capture. */
export interface PassResult {
  events: PacketEvent[];
  count: number;
  recorded: { format: 'pcap' | 'pcapng'; stats: CaptureFileStats } | null;
  /** Where the file can be read again from the middle (offline/seek-points.ts). */
  seek: readonly ResumePoint[];
}

/** Messages on a worker's port (both directions). */
export type PassMessage =
  | { type: 'job'; id: number; job: PassJob }
  | { type: 'done'; id: number; result: PassResult }
  | {
      type: 'failed';
      id: number;
      error: { code?: ErrorCode; detail: string; where?: string; hint?: string; message: string };
    };

/** Words of a worker's shared signal: results posted, blocks read. */
export const SIGNAL = { posted: 0, progress: 1 } as const;

/** No block read for this long: the worker is given up (module loading included). */
export const DEFAULT_STALL_MS = 10_000;

interface Slot {
  worker: Worker;
  port: MessagePort;
  signal: Int32Array;
  busy: boolean;
  dead: boolean;
}

/** A submitted pass; `result()` waits for it (null: run the pass here instead). */
export interface PassTicket {
  result(): PassResult | null;
}

export interface PassPoolOptions {
  size: number;
  stallMs?: number;
  /** The worker script (tests give one that never answers). */
  script?: string;
}

export class PassPool {
  private readonly slots: Slot[] = [];
  private readonly stallMs: number;
  private nextId = 1;

  constructor(opts: PassPoolOptions) {
    this.stallMs = opts.stallMs ?? DEFAULT_STALL_MS;
    const script = opts.script ?? join(__dirname, 'pass-worker.js');
    for (let i = 0; i < opts.size; i++) {
      const signal = new Int32Array(new SharedArrayBuffer(8));
      const { port1, port2 } = new MessageChannel();
      let worker: Worker;
      try {
        worker = new Worker(script, { workerData: { port: port2, signal }, transferList: [port2] });
      } catch {
        port1.close();
        continue;
      }
      worker.unref();
      port1.unref();
      const slot: Slot = { worker, port: port1, signal, busy: false, dead: false };
      // Seen only when this thread's event loop runs (between analyses): marks the slot unusable.
      worker.on('error', () => (slot.dead = true));
      worker.on('exit', () => (slot.dead = true));
      this.slots.push(slot);
    }
  }

  /** Workers that may take a pass. */
  get size(): number {
    return this.slots.filter((s) => !s.dead).length;
  }

  /** Hands `job` to an idle worker; null when none is idle (the caller runs it itself). */
  submit(job: PassJob): PassTicket | null {
    const slot = this.slots.find((s) => !s.busy && !s.dead);
    if (slot === undefined) return null;
    const id = this.nextId++;
    slot.busy = true;
    const posted = Atomics.load(slot.signal, SIGNAL.posted);
    const message: PassMessage = { type: 'job', id, job };
    slot.port.postMessage(message);
    return { result: () => this.wait(slot, id, posted) };
  }

  private wait(slot: Slot, id: number, posted: number): PassResult | null {
    let progress = Atomics.load(slot.signal, SIGNAL.progress);
    for (;;) {
      const m = receiveMessageOnPort(slot.port) as { message: PassMessage } | undefined;
      if (m !== undefined) {
        const msg = m.message;
        if (msg.id !== id) continue;
        slot.busy = false;
        if (msg.type === 'done') return msg.result;
        if (msg.type === 'failed') throw rebuilt(msg.error);
        continue;
      }
      if (slot.dead) return this.giveUp(slot);
      const woke = Atomics.wait(slot.signal, SIGNAL.posted, posted, this.stallMs);
      if (woke !== 'timed-out') {
        posted = Atomics.load(slot.signal, SIGNAL.posted);
        continue;
      }
      const now = Atomics.load(slot.signal, SIGNAL.progress);
      if (now === progress) return this.giveUp(slot);
      progress = now;
    }
  }

  private giveUp(slot: Slot): null {
    slot.dead = true;
    slot.busy = false;
    void slot.worker.terminate();
    return null;
  }

  /** Stops every worker (the analysis is over). */
  close(): void {
    for (const s of this.slots) {
      s.dead = true;
      s.port.close();
      void s.worker.terminate();
    }
  }
}

/** The error the pass threw in the worker, as the in-thread pass would have thrown it. */
function rebuilt(e: {
  code?: ErrorCode;
  detail: string;
  where?: string;
  hint?: string;
  message: string;
}): Error {
  if (e.code === undefined) return new Error(e.message);
  return new HoptraceError(e.code, e.detail, {
    ...(e.where === undefined ? {} : { where: e.where }),
    ...(e.hint === undefined ? {} : { hint: e.hint }),
  });
}

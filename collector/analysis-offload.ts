/**
 * Analysis off the main thread for large captures. The session manager hands a capture's events
 * to one worker thread (collector/analysis-worker.ts) once it holds `offloadAbove` useful events,
 * then every stored batch as it arrives, and asks it for analyses; the event loop only copies
 * each batch once (structured clone) and never runs the matching itself.
 *
 * The worker is started on first use and unref'ed. Should it die, every pending analysis fails
 * and `onLost` is called: the manager gives the new worker the captures' events again from the
 * data directory.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { PacketEvent } from '../common/event';
import type { Inventory } from '../common/inventory';
import type { AnalysisResult } from '../core/report/analysis-result';

export type OffloadRequest =
  | { type: 'add'; id: string; point: string; events: readonly PacketEvent[] }
  | { type: 'drop'; id: string }
  | {
      type: 'analyze';
      reqId: number;
      id: string;
      points: string[];
      inventory: Inventory;
      selector: { client: string | undefined; dst: string | undefined; dport: number | undefined };
    };

export type OffloadReply =
  { reqId: number; result: AnalysisResult | null } | { reqId: number; error: string };

type Pending = { resolve: (r: AnalysisResult | null) => void; reject: (e: Error) => void };

export class AnalysisOffload {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;
  private closed = false;
  /** Analyses the worker answered. */
  analyses = 0;

  constructor(private readonly onLost: (why: string) => void) {}

  private ensure(): Worker {
    if (this.worker !== undefined) return this.worker;
    const w = new Worker(join(__dirname, 'analysis-worker.js'));
    w.unref();
    w.on('message', (m: OffloadReply) => {
      const p = this.pending.get(m.reqId);
      if (p === undefined) return;
      this.pending.delete(m.reqId);
      if ('error' in m) p.reject(new Error(m.error));
      else {
        this.analyses++;
        p.resolve(m.result);
      }
    });
    const gone = (why: string): void => {
      if (this.worker !== w) return;
      this.worker = undefined;
      const failed = [...this.pending.values()];
      this.pending.clear();
      for (const p of failed) p.reject(new Error(why));
      if (!this.closed) this.onLost(why);
    };
    w.on('error', (e) => {
      gone(`the analysis worker failed (${e.message})`);
    });
    w.on('exit', (code) => {
      gone(`the analysis worker exited (code ${code})`);
    });
    this.worker = w;
    return w;
  }

  add(id: string, point: string, events: readonly PacketEvent[]): void {
    if (this.closed || events.length === 0) return;
    const req: OffloadRequest = { type: 'add', id, point, events };
    this.ensure().postMessage(req);
  }

  drop(id: string): void {
    if (this.closed || this.worker === undefined) return;
    const req: OffloadRequest = { type: 'drop', id };
    this.worker.postMessage(req);
  }

  analyze(
    id: string,
    ask: Omit<Extract<OffloadRequest, { type: 'analyze' }>, 'type' | 'reqId' | 'id'>,
  ): Promise<AnalysisResult | null> {
    if (this.closed) return Promise.reject(new Error('the collector is closing'));
    const reqId = this.nextReq++;
    const req: OffloadRequest = { type: 'analyze', reqId, id, ...ask };
    return new Promise((resolve, reject) => {
      this.pending.set(reqId, { resolve, reject });
      this.ensure().postMessage(req);
    });
  }

  /** Kills the worker (tests use it to prove a lost worker is recovered). */
  async terminateWorker(): Promise<void> {
    await this.worker?.terminate();
  }

  async close(): Promise<void> {
    this.closed = true;
    const w = this.worker;
    this.worker = undefined;
    for (const p of this.pending.values()) p.reject(new Error('the collector is closing'));
    this.pending.clear();
    await w?.terminate();
  }
}

/**
 * The inputs' SHA-256 (file-digest.ts) for `analyze --report-dir`, taken beside the analysis
 * instead of before it: hashing costs ~0.6 ms per MiB here (SHA-NI), more than the analysis reads
 * (1.5 GiB: ~0.95 s of hashing against ~0.45 s of analysis), and the second core is idle while
 * the first point's file is read. A worker thread claims files one at a time from a shared counter
 * while this thread analyses; when the analysis is done this thread claims whatever is left and
 * hashes it here, then waits for the files the worker holds. A worker that fails to start, or
 * exits before answering, costs time only: its files are hashed here.
 *
 * The size and modification time are read before the analysis starts: the report's check that a
 * file did not change while it was analysed (report-dir.ts changedSince) compares that time with
 * the file's afterwards, and a file whose size when hashed differs from the size before is marked
 * `changed`, so a file changed while it was hashed is noted as before. Only the inputs
 * file-digest.ts hashableInput accepts are hashed: a pipe read by a worker beside the analysis
 * would split its bytes with it.
 */
import { join } from 'node:path';
import { availableParallelism } from 'node:os';
import {
  MessageChannel,
  receiveMessageOnPort,
  Worker,
  type MessagePort,
} from 'node:worker_threads';
import { fileDigest, fileStamp, hashableInput, type FileDigest } from './file-digest';
import type { PointFile } from './analyze-files';

/** A worker's answer: the digest of file `i` (a file it cannot read gets none). */
export interface DigestMessage {
  i: number;
  digest: FileDigest;
}

export class PendingDigests {
  private readonly files: PointFile[];
  private readonly claim = new Int32Array(new SharedArrayBuffer(4));
  private readonly done = new Map<number, FileDigest>();
  private readonly stamps: ({ bytes: number; mtimeMs: number } | null)[];
  private worker: Worker | null = null;
  private port: MessagePort | null = null;
  /** Files hashed by the worker and by this thread (a test's view of who did the work). */
  readonly hashed = { worker: 0, here: 0 };
  private ended: Promise<void> = Promise.resolve();

  /**
   * Starts hashing `points`' regular files (see above). `worker: false` (or one core) hashes
   * them all on this thread in take(); `script` replaces the worker's (tests).
   */
  constructor(points: PointFile[], opts: { worker?: boolean; script?: string } = {}) {
    this.files = points.filter((p) => hashableInput(p.file));
    this.stamps = this.files.map((p) => fileStamp(p.file));
    if (opts.worker === false || availableParallelism() < 2 || this.files.length === 0) return;
    try {
      // Answers come on a port of their own, read with receiveMessageOnPort once the worker has
      // exited: every answer it posted is queued there (a 'message' event may come after 'exit').
      const { port1, port2 } = new MessageChannel();
      const w = new Worker(opts.script ?? join(__dirname, 'digest-worker.js'), {
        workerData: { files: this.files.map((p) => p.file), claim: this.claim, port: port2 },
        transferList: [port2],
      });
      this.worker = w;
      this.port = port1;
      this.ended = new Promise((resolve) => {
        w.once('exit', () => {
          resolve();
        });
        // 'exit' follows an error; the files the worker held are hashed here.
        w.once('error', () => undefined);
      });
    } catch {
      this.worker = null; // no worker: every file is hashed here
    }
  }

  /**
   * Every hashed file's digest by point name, once all are hashed; throws the error of a file
   * that cannot be read (FILE_NOT_FOUND), as fileDigest does, after stopping the worker.
   */
  async take(): Promise<Map<string, FileDigest>> {
    try {
      let mine = 0;
      for (let i = Atomics.add(this.claim, 0, 1); i < this.files.length;) {
        this.done.set(i, this.digestHere(i));
        mine++;
        i = Atomics.add(this.claim, 0, 1);
      }
      // The worker claimed nothing (small files, analysed before it started): not waited for.
      if (mine === this.files.length) await this.close();
      else await this.answers();
      const out = new Map<string, FileDigest>();
      this.files.forEach((p, i) => {
        out.set(p.name, this.done.get(i) ?? this.digestHere(i));
      });
      return out;
    } catch (e) {
      await this.close();
      throw e;
    }
  }

  /** Files claimed so far, by either thread (all of them once take() has begun). */
  claimed(): number {
    return Math.min(Atomics.load(this.claim, 0), this.files.length);
  }

  /**
   * Stops the worker (an analysis that failed does not wait for its inputs' digests, nor does the
   * process wait for it to exit); resolves once it has exited.
   */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.port?.close();
    this.port = null;
    if (w !== null) await w.terminate();
  }

  /** Waits for the worker to exit (every file is claimed), then takes the answers it posted. */
  private async answers(): Promise<void> {
    if (this.worker === null) return;
    await this.ended;
    this.worker = null;
    const port = this.port;
    this.port = null;
    if (port === null) return;
    for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port))
      this.answer(m.message as DigestMessage);
    port.close();
  }

  private answer(m: DigestMessage): void {
    this.done.set(m.i, this.stamped(m.i, m.digest));
    this.hashed.worker++;
  }

  /** File i hashed on this thread, with the size and time read before the analysis. */
  private digestHere(i: number): FileDigest {
    const p = this.files[i];
    if (p === undefined) throw new RangeError(`no file ${i}`);
    const d = this.stamped(i, fileDigest(p.file));
    this.hashed.here++;
    return d;
  }

  /** The time read before the analysis; `changed` when the size hashed is not the size then. */
  private stamped(i: number, d: FileDigest): FileDigest {
    const s = this.stamps[i];
    if (s === null || s === undefined) return d;
    return { ...d, mtimeMs: s.mtimeMs, ...(s.bytes === d.bytes ? {} : { changed: true }) };
  }
}

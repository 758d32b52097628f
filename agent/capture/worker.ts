/**
 * The capture worker: started by ns-capture.ts inside the target network namespace
 * (`nsenter --net=PATH node worker.js '<json>'`), because libpcap opens only interfaces of its own
 * namespace and Node has no setns. It runs a NativeSource there (a CapSource when the addon is not
 * built, after a `warning` frame, or when the spec asks for `source: 'cap'`) and streams frames
 * (worker-frames.ts) on stdout: `ready` once the capture is open, event batches (one binary frame
 * per capture batch; beyond maxQueuedBytes unread by the parent a batch is dropped and counted),
 * periodic `stats` (final ones after the ring is drained at stop), and
 * `error` + exit code 2 when it cannot start or the capture fails. It stops on SIGTERM/SIGINT and when stdin closes
 * (the parent died), so it never outlives the agent.
 */
import { isHoptraceError, type HoptraceError } from '../../common/errors';
import { loadNativeAddon } from './native-loader';
import { NativeSource } from './native-source';
import { SUMMARY_BYTES, type SummaryHandler } from './summary';
import type { CaptureSource, CaptureSpec } from './source';
import {
  encodeControlFrame,
  encodeSummaryFrame,
  EventBatchEncoder,
  FramePool,
  type WireError,
  type WorkerControl,
} from './worker-frames';

/** The JSON argument. */
export interface WorkerArgs {
  spec: CaptureSpec;
  /** Label for errors (the namespace path). */
  where?: string;
  statsIntervalMs?: number;
  /** Bytes queued on stdout beyond which event batches are dropped and counted (default 8 MiB). */
  maxQueuedBytes?: number;
}

type LiveSource = CaptureSource & { linktypeName: string | undefined };

/** The spec's source, else native when the addon loads, else cap with a warning. */
function pickSource(
  args: WorkerArgs,
  warn: (message: string) => void,
  onSummaries: SummaryHandler,
): { src: LiveSource; kind: 'native' | 'cap' } {
  const opts = args.where === undefined ? {} : { where: args.where };
  const want = args.spec.source;
  if (want !== 'cap') {
    const load = loadNativeAddon();
    // Forced 'native' without the addon: NativeSource.start() rejects with the reason.
    if (load.ok || want === 'native') {
      // Each capture batch goes through the C fast path and is written as it comes, as summary
      // records (one frame per batch): no per-packet JavaScript and no second queue here.
      return {
        src: new NativeSource(args.spec, { ...opts, direct: true, onSummaries }),
        kind: 'native',
      };
    }
    warn(
      `native capture addon unavailable (${load.reason}); using cap 0.2.1: drops unknown, ~40 k pps ceiling`,
    );
  }
  // Loaded only when used: cap's binding is not needed (and may be absent) with the addon.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { CapSource } = require('./cap-source') as typeof import('./cap-source');
  return { src: new CapSource(args.spec, opts), kind: 'cap' };
}

function toWire(e: unknown): WireError {
  const error: WireError = isHoptraceError(e)
    ? { code: e.code, message: e.message }
    : { code: 'CAPTURE_WORKER_FAILED', message: e instanceof Error ? e.message : String(e) };
  if (isHoptraceError(e) && e.where !== undefined) error.where = e.where;
  if (isHoptraceError(e) && e.hint !== undefined) error.hint = e.hint;
  return error;
}

function main(): void {
  const args = JSON.parse(process.argv[2] ?? '{}') as WorkerArgs;
  const maxQueued = args.maxQueuedBytes ?? 8 * 1024 * 1024;
  const out = process.stdout;
  let pipeDrops = 0;
  let exiting = false;

  const send = (msg: WorkerControl): void => {
    out.write(encodeControlFrame(msg));
  };
  const ctxJson = JSON.stringify({
    point: args.spec.point,
    node: args.spec.node,
    iface: args.spec.iface,
  });
  // Frame header + the context as JSON (see encodeSummaryFrame), before the records.
  const frameHead = 40 + Buffer.byteLength(ctxJson, 'utf8');
  const pool = new FramePool();
  const { src, kind } = pickSource(
    args,
    (message) => {
      process.stderr.write(`hoptrace capture worker: ${message}\n`);
      send({ kind: 'warning', message });
    },
    (recs, count, raw, rawBytes, linktype, firstFrame) => {
      // Same bound as for event batches: a slow parent never blocks the capture or grows memory.
      if (out.writableLength > maxQueued) {
        pipeDrops += count;
        return;
      }
      // Pooled output buffers: a fresh 100-400 KB buffer per batch is an mmap/munmap pair and
      // page faults each time (strace showed them at every batch).
      const buf = pool.take(frameHead + count * SUMMARY_BYTES + rawBytes);
      const frame = encodeSummaryFrame(
        recs,
        count,
        raw,
        rawBytes,
        linktype,
        firstFrame,
        ctxJson,
        buf,
      );
      out.write(frame, () => {
        pool.give(buf);
      });
    },
  );
  const sendStats = (): void => {
    const s = src.stats();
    send({ kind: 'stats', stats: { ...s, queueDrops: s.queueDrops + pipeDrops } });
  };
  const exit = (code: number): void => {
    // Exit once stdout has drained, so the last frames reach the parent (at most maxQueued
    // bytes are pending; the parent waits 10 s before SIGKILL).
    out.end(() => process.exit(code));
    setTimeout(() => process.exit(code), 8000).unref();
  };
  const shutdown = (): void => {
    if (exiting) return;
    exiting = true;
    void src.stop().then(() => {
      sendStats();
      send({ kind: 'end' });
      exit(0);
    });
  };

  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.stdin.on('end', shutdown);
  process.stdin.on('close', shutdown);
  process.stdin.resume();
  // The parent went away while we were writing: nothing left to report to.
  out.on('error', () => process.exit(0));

  // stdout is a pipe: writes are asynchronous (libuv queues what the pipe does not take), so
  // writableLength is what the parent has not read yet. One frame per capture batch.
  const encoder = new EventBatchEncoder();
  src
    .start(
      (events) => {
        // Never let a slow parent block the capture or grow memory: beyond the bound, drop the
        // batch and count it.
        if (out.writableLength > maxQueued) {
          pipeDrops += events.length;
          return;
        }
        for (const f of encoder.encode(events)) out.write(f);
      },
      (err: HoptraceError | null) => {
        // The capture failed after it was open (interface removed, read error): report and exit.
        if (err === null || exiting) return;
        exiting = true;
        sendStats();
        send({ kind: 'error', error: toWire(err) });
        exit(2);
      },
    )
    .then(
      () => {
        send({
          kind: 'ready',
          linktype: src.linktypeName ?? 'unknown',
          pid: process.pid,
          source: kind,
        });
        setInterval(sendStats, args.statsIntervalMs ?? 1000).unref();
      },
      (e: unknown) => {
        exiting = true;
        send({ kind: 'error', error: toWire(e) });
        exit(2);
      },
    );
}

main();

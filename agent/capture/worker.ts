/**
 * The capture worker: started by ns-capture.ts inside the target network namespace
 * (`nsenter --net=PATH node worker.js '<json>'`), because libpcap opens only interfaces of its own
 * namespace and Node has no setns. It runs a CapSource there and streams frames
 * (worker-frames.ts) on stdout: `ready` once the capture is open, events, periodic `stats`, and
 * `error` + exit code 2 when it cannot start. It stops on SIGTERM/SIGINT and when stdin closes
 * (the parent died), so it never outlives the agent.
 */
import { isHoptraceError } from '../../common/errors';
import { CapSource } from './cap-source';
import type { CaptureSpec } from './source';
import {
  encodeControlFrame,
  encodeEventFrame,
  type WireError,
  type WorkerControl,
} from './worker-frames';

/** The JSON argument. */
export interface WorkerArgs {
  spec: CaptureSpec;
  /** Label for errors (the namespace path). */
  where?: string;
  statsIntervalMs?: number;
  /** Bytes queued on stdout beyond which events are dropped and counted (default 32 MiB). */
  maxQueuedBytes?: number;
}

function main(): void {
  const args = JSON.parse(process.argv[2] ?? '{}') as WorkerArgs;
  const maxQueued = args.maxQueuedBytes ?? 32 * 1024 * 1024;
  const out = process.stdout;
  let pipeDrops = 0;
  let exiting = false;

  const send = (msg: WorkerControl): void => {
    out.write(encodeControlFrame(msg));
  };
  const src = new CapSource(args.spec, args.where === undefined ? {} : { where: args.where });
  const sendStats = (): void => {
    const s = src.stats();
    send({ kind: 'stats', stats: { ...s, queueDrops: s.queueDrops + pipeDrops } });
  };
  const exit = (code: number): void => {
    // Exit once stdout has drained, so the last frames reach the parent.
    out.end(() => process.exit(code));
    setTimeout(() => process.exit(code), 2000).unref();
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

  src
    .start(
      (events) => {
        for (const ev of events) {
          // Never let a slow parent block the capture: beyond the bound, drop and count.
          if (out.writableLength > maxQueued) pipeDrops++;
          else out.write(encodeEventFrame(ev));
        }
      },
      () => undefined,
    )
    .then(
      () => {
        send({ kind: 'ready', linktype: src.linktypeName ?? 'unknown', pid: process.pid });
        setInterval(sendStats, args.statsIntervalMs ?? 1000).unref();
      },
      (e: unknown) => {
        exiting = true;
        const error: WireError = isHoptraceError(e)
          ? { code: e.code, message: e.message }
          : { code: 'CAPTURE_WORKER_FAILED', message: e instanceof Error ? e.message : String(e) };
        if (isHoptraceError(e) && e.where !== undefined) error.where = e.where;
        if (isHoptraceError(e) && e.hint !== undefined) error.hint = e.hint;
        send({ kind: 'error', error });
        exit(2);
      },
    );
}

main();

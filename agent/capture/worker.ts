/**
 * The capture worker: started by ns-capture.ts inside the target network namespace
 * (`nsenter --net=PATH node worker.js '<json>'`), because libpcap opens only interfaces of its own
 * namespace and Node has no setns. It runs a NativeSource there (a CapSource when the addon is not
 * built, after a `warning` frame, or when the spec asks for `source: 'cap'`) and streams frames
 * (worker-frames.ts) on stdout: `ready` once the capture is open, event batches (one binary frame
 * per capture batch; beyond maxQueuedBytes unread by the parent a batch is dropped and counted),
 * periodic `stats` (final ones after the ring is drained at stop), and `error` + exit code 2 when
 * it cannot start or the capture fails. When the addon loads, its FrameWriter is the one writer on
 * stdout, and the native capture writes each batch through it from C (no JavaScript per batch);
 * when the parent passed a shared frame ring (args.ringFd), the batches go into the ring and only
 * their notices through stdout.
 * It stops on SIGTERM/SIGINT and when stdin closes (the parent died), so it never outlives the
 * agent.
 */
import { isHoptraceError, type HoptraceError } from '../../common/errors';
import { loadNativeAddon, type PcapBatchAddon, type PcapFrameWriter } from '../../native/loader';
import { NativeSource } from './native-source';
import type { RetentionTarget } from './retention';
import { FOLD_FIRST, type CaptureSource, type CaptureSpec } from './source';
import {
  encodeControlFrame,
  EventBatchEncoder,
  type WireError,
  type WorkerControl,
} from './worker-frames';

/** The longest a worker waits between two stats frames while its counters do not change. */
export const STATS_IDLE_MS = 8000;
/** Counters that are not losses (packets received, bytes retained) go out at most this often. */
export const STATS_COUNTS_MS = 5000;

/** The JSON argument. */
export interface WorkerArgs {
  spec: CaptureSpec;
  /** Label for errors (the namespace path). */
  where?: string;
  /** Stats while the counters change (default 1 s; see STATS_IDLE_MS). */
  statsIntervalMs?: number;
  /** Bytes queued on stdout beyond which event batches are dropped and counted (default 8 MiB). */
  maxQueuedBytes?: number;
  /**
   * An inherited fd of the parent's frame ring (native/loader.ts PcapSharedRing): with the addon,
   * batch frames go through it (a full ring is then the bound), only notices through stdout.
   */
  ringFd?: number;
  /**
   * Frame retention (retention.ts): an inherited fd of the file the parent opened, and its bounds.
   * Every frame the capture numbers is appended to it, cut to `snaplen`.
   */
  retain?: RetentionTarget;
}

type LiveSource = CaptureSource & { linktypeName: string | undefined };

/**
 * At high rates a ring block retires every few milliseconds, and each frame wakes the agent
 * process on the other CPU; each wake-up of the agent cost ~0.4 ms of its CPU here, whatever the
 * frame held. So the addon gathers the records of several wake-ups into one frame: a frame goes
 * out when its batch (2 MiB, 10,922 records) is full, or 100 ms after the previous frame (a
 * timer writes what is left). After a quiet spell the first frame goes out at once, so a lone
 * request waits only for its ring block (50 ms timeout); under steady traffic events wait up to
 * 100 ms more. Measured (agent process, ns per packet, three runs each):
 *   - 20 ms, ~4,000 records per batch (the raw area sized for a batch of full-snaplen frames):
 *     ~360–375 at ~330 k pps, ~90 frames/s;
 *   - 20 ms, 10,922 records: ~280–300, ~46 frames/s;
 *   - 100 ms, 10,922 records: ~245–270; at 100 k pps ~410 (20 ms: ~660), 17 frames/s (55).
 * The worker itself: the same within the noise at ~330 k pps, ~10 % less at 100 k pps.
 */
const WORKER_COALESCE_MS = 100;

/**
 * libpcap's TPACKET_V3 blocks are 256 KiB: a busy link retires one every few milliseconds (~220
 * a second at ~330 k pps of small frames) and each wakes the worker. When blocks retire less than
 * 20 ms apart the addon reads the ring on a 20 ms timer instead, until a tick finds it empty
 * (pcap_batch.c busyPollMs). The 32 MiB ring holds ~190 k such frames, ~0.5 s at that rate.
 * Measured at ~330 k pps, interleaved runs: worker ~260–300 → ~235–245 ns per packet (5 ms:
 * ~265–290; 40 ms: ~220, but less room in the ring and more delay).
 */
const WORKER_BUSY_POLL_MS = 20;
const WORKER_BATCH_BYTES = 2 * 1024 * 1024;

/** Where the worker's frames go: its stdout, read by the parent. */
interface FrameSink {
  /** Writes one whole frame; a droppable one is dropped (false) while maxQueuedBytes are unread. */
  write(frame: Uint8Array, droppable: boolean): boolean;
  /** Calls done once the parent has taken everything written (or writing failed). */
  flush(done: () => void): void;
  /** Writing failed: the parent went away. */
  failed(): boolean;
  /** The addon's writer, when the sink is one (the native capture writes through it from C). */
  native?: PcapFrameWriter;
}

/**
 * With the addon: its FrameWriter owns fd 1 (process.stdout is never opened, so libuv polls the fd
 * once and frames never interleave), and the native capture writes its batches through it from C.
 */
function nativeSink(
  addon: PcapBatchAddon,
  maxQueued: number,
  ringFd: number | undefined,
  warn: (message: string) => void,
): FrameSink {
  let w: PcapFrameWriter;
  try {
    w = new addon.FrameWriter(1, maxQueued, ringFd);
  } catch (e) {
    if (ringFd === undefined) throw e;
    // Everything still works through stdout, only with a copy more on each side.
    w = new addon.FrameWriter(1, maxQueued);
    warn(
      `shared frame ring unusable (${e instanceof Error ? e.message : String(e)}); batches go through the worker's stdout`,
    );
  }
  return {
    native: w,
    write: (frame, droppable) => w.write(frame, droppable),
    flush(done) {
      const check = (): void => {
        if (w.pending() === 0 || w.error() !== null) done();
        else setTimeout(check, 5);
      };
      check();
    },
    failed: () => w.error() !== null,
  };
}

/** Without the addon: process.stdout (libuv queues what the pipe does not take). */
function stdoutSink(maxQueued: number): FrameSink {
  const out = process.stdout;
  let failed = false;
  out.on('error', () => {
    failed = true;
  });
  return {
    write(frame, droppable) {
      if (failed || (droppable && out.writableLength > maxQueued)) return false;
      out.write(frame);
      return true;
    },
    flush(done) {
      out.end(done);
    },
    failed: () => failed,
  };
}

/** The spec's source, else native when the addon loads, else cap with a warning. */
function pickSource(
  args: WorkerArgs,
  warn: (message: string) => void,
  sink: FrameSink,
): { src: LiveSource; kind: 'native' | 'cap' } {
  const opts = {
    ...(args.where === undefined ? {} : { where: args.where }),
    ...(args.retain === undefined ? {} : { retain: args.retain }),
  };
  const want = args.spec.source;
  if (want !== 'cap') {
    const load = loadNativeAddon();
    // Forced 'native' without the addon: NativeSource.start() rejects with the reason.
    if (load.ok || want === 'native') {
      // Each capture batch is decoded by the C fast path and written by the addon as one frame
      // of summary records: no JavaScript per packet or per batch here.
      const context = JSON.stringify({
        point: args.spec.point,
        node: args.spec.node,
        iface: args.spec.iface,
      });
      const fold = args.spec.foldFirst ?? FOLD_FIRST;
      const frameOut =
        sink.native !== undefined
          ? {
              writer: sink.native,
              context,
              coalesceMs: WORKER_COALESCE_MS,
              busyPollMs: WORKER_BUSY_POLL_MS,
              ...(fold > 0 ? { foldFirst: fold } : {}),
            }
          : undefined;
      return {
        src: new NativeSource(args.spec, {
          ...opts,
          batchBytes: WORKER_BATCH_BYTES,
          direct: true,
          ...(frameOut !== undefined ? { frameOut } : {}),
        }),
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
  const load = args.spec.source === 'cap' ? undefined : loadNativeAddon();
  let sink: FrameSink | undefined;
  const early: string[] = [];
  if (load?.ok === true) {
    try {
      sink = nativeSink(load.addon, maxQueued, args.ringFd, (m) => early.push(m));
    } catch (e) {
      // fd 1 cannot be polled (a regular file, say): stdout still works, per batch in JavaScript.
      process.stderr.write(
        `hoptrace capture worker: ${e instanceof Error ? e.message : String(e)}; writing through process.stdout\n`,
      );
    }
  }
  sink ??= stdoutSink(maxQueued);
  let pipeDrops = 0;
  let exiting = false;

  const send = (msg: WorkerControl): void => {
    sink.write(encodeControlFrame(msg), false);
  };
  const warn = (message: string): void => {
    process.stderr.write(`hoptrace capture worker: ${message}\n`);
    send({ kind: 'warning', message });
  };
  for (const message of early) warn(message);
  const { src, kind } = pickSource(args, warn, sink);
  let lastStats = '';
  let lastLosses = '';
  let lastSentMs = 0;
  /**
   * Sends the counters. With `ifChanged` (the periodic tick): at once when a loss counter moved
   * (drops, decode errors, retention's state or drops), the other counters (packets received,
   * bytes retained) at most every STATS_COUNTS_MS, nothing when nothing changed. Returns whether
   * anything changed.
   */
  const sendStats = (ifChanged = false): boolean => {
    // The parent went away while we were writing: nothing left to report to.
    if (sink.failed()) process.exit(0);
    const s = src.stats();
    const stats = { ...s, queueDrops: s.queueDrops + pipeDrops };
    const text = JSON.stringify(stats);
    const r = stats.retention;
    const losses = JSON.stringify([
      stats.kernelDrops,
      stats.ifaceDrops,
      stats.queueDrops,
      stats.decodeErrors,
      r?.state,
      r?.error,
      r?.dropped,
    ]);
    const now = Date.now();
    if (ifChanged) {
      if (text === lastStats) return false;
      if (losses === lastLosses && now - lastSentMs < STATS_COUNTS_MS) return true;
    }
    lastStats = text;
    lastLosses = losses;
    lastSentMs = now;
    send({ kind: 'stats', stats });
    return true;
  };
  const exit = (code: number): void => {
    // Exit once the parent has taken the last frames (at most maxQueued bytes are pending; the
    // parent waits 10 s before SIGKILL).
    sink.flush(() => process.exit(code));
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

  // Event batches (the cap source): never let a slow parent block the capture or grow memory;
  // beyond the bound a batch is dropped and counted.
  const encoder = new EventBatchEncoder();
  src
    .start(
      (events) => {
        // The bound is checked once per batch (its first frame): a batch goes whole or not at all.
        let first = true;
        for (const f of encoder.encode(events)) {
          if (!sink.write(f, first)) {
            pipeDrops += events.length;
            return;
          }
          first = false;
        }
      },
      (err: HoptraceError | null) => {
        // The capture failed after it was open (interface removed, read error): report and exit.
        if (err === null || exiting) return;
        exiting = true;
        sendStats();
        send({ kind: 'error', error: toWire(err) });
        // Not from inside this callback: the addon calls it with its close deferred until the
        // callback returns, and that close is what writes the retention buffer (retain.c) — an
        // exit here, when nothing is pending on the sink, lost the frames of every capture whose
        // interface went away (a deleted pod's).
        setImmediate(() => {
          exit(2);
        });
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
        // Every statsIntervalMs while the counters move; while they stand still the period
        // doubles up to STATS_IDLE_MS, so an idle capture's worker (and the agent, which reads
        // its frame) wakes every few seconds, not every second.
        const base = args.statsIntervalMs ?? 1000;
        let every = base;
        const tick = (): void => {
          every = sendStats(true) ? base : Math.min(2 * every, Math.max(base, STATS_IDLE_MS));
          setTimeout(tick, every).unref();
        };
        setTimeout(tick, base).unref();
      },
      (e: unknown) => {
        exiting = true;
        send({ kind: 'error', error: toWire(e) });
        exit(2);
      },
    );
}

main();

/**
 * The capture-source contract: live capture (native-source.ts, cap-source.ts), capture inside
 * another network namespace through a worker (ns-capture.ts) and file replay (file-source.ts) all
 * implement CaptureSource, and test/unit/capture-contract.test.ts runs one suite against each.
 */
import type { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import type { EncodedEvents } from '../../common/wire';
import type { RetentionStats } from './retention';

/** What to capture and how to label it. */
export interface CaptureSpec {
  point: string;
  node: string;
  iface: string;
  /** BPF filter (pcap-filter(7)); empty or absent = everything. */
  filter?: string;
  /** Bytes kept per packet (default 512 with the native source, 65535 with cap). */
  snaplen?: number;
  /** libpcap ring buffer size in bytes (default 32 MiB native, 64 MiB cap). */
  bufferBytes?: number;
  /**
   * Live capture implementation in the worker: 'native' (our libpcap addon, the default when it
   * is built) or 'cap' (cap 0.2.1). Absent = native, falling back to cap with a warning.
   */
  source?: 'native' | 'cap';
  /**
   * Per-flow counters (native source only; native/pcap-batch/src/fold.c): packets of a flow sent
   * whole per direction after it appears and after each packet that may start or end an exchange
   * (default FOLD_FIRST); the rest are counted into the flow's counter events. 0: every packet is
   * an event. The cap fallback never folds.
   */
  foldFirst?: number;
}

/** Packets sent whole per flow and direction before the rest are counted (CaptureSpec.foldFirst). */
export const FOLD_FIRST = 32;

/** Counters of one capture. */
export interface CaptureStats {
  /** Events delivered to the consumer. */
  packets: number;
  /** Delivered events whose frame was malformed (event.error set). */
  decodeErrors: number;
  /** Packets the kernel dropped; null = the source cannot know (never a made-up 0). */
  kernelDrops: number | null;
  /** Packets the interface dropped; null = unknown. */
  ifaceDrops: number | null;
  /**
   * Events dropped because the consumer fell behind (bounded queues drop rather than block), and
   * packets still in the capture ring when it was closed: received, never delivered.
   */
  queueDrops: number;
  /**
   * Packets the capture took in (native: libpcap's ps_recv, which includes kernel drops); absent
   * when the source cannot know. Once stopped: packets + kernelDrops + queueDrops = received.
   */
  received?: number;
  /** Frame retention (retention.ts), when the source was given a retention file. */
  retention?: RetentionStats;
  /** Of `packets`: those delivered inside flow counter events (PacketEvent.fold), not as events. */
  folded?: number;
  /** Packets sent whole because the flow table had no free slot (a scan-like load). */
  foldFullSent?: number;
}

/** One way of producing PacketEvents. */
export interface CaptureSource {
  /**
   * Starts delivering; resolves once the capture is actually open (interface opened, filter
   * compiled). Rejects with HoptraceError on a bad interface/filter/namespace. `onEnd` is called
   * exactly once when delivery ends: null after stop() or the end of a file, else the reason.
   */
  start(
    onEvents: (events: PacketEvent[]) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void>;
  /**
   * Optional: start() with the events delivered already encoded (EventBatch `events` entries,
   * common/events-wire.ts), without a PacketEvent per packet. The agent runtime prefers it.
   */
  startEncoded?(
    onEncoded: (chunk: EncodedEvents) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void>;
  /** Stops delivery (flushing what is queued) and releases the capture; idempotent. */
  stop(): Promise<void>;
  stats(): CaptureStats;
}

/** Batching limits. */
export interface BatchOptions {
  /** Most events in one onEvents call (default 256). */
  maxBatch?: number;
  /** Longest an event waits for its batch to fill (default 50 ms). */
  maxDelayMs?: number;
  /** Most events queued before new ones are dropped and counted (default 65536). */
  maxQueued?: number;
}

/**
 * Collects events from a capture callback and hands them on in batches from a later tick, so the
 * callback never waits for the consumer. A full queue drops the newest event and counts it.
 */
export class EventBatcher {
  delivered = 0;
  decodeErrors = 0;
  dropped = 0;
  private queue: PacketEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly maxDelayMs: number;
  private readonly maxQueued: number;

  constructor(
    private readonly deliver: (events: PacketEvent[]) => void,
    opts: BatchOptions = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 256;
    this.maxDelayMs = opts.maxDelayMs ?? 50;
    this.maxQueued = opts.maxQueued ?? 65536;
  }

  /** Queues one event; false when it was dropped because the queue is full. */
  push(ev: PacketEvent): boolean {
    if (this.queue.length >= this.maxQueued) {
      this.dropped++;
      return false;
    }
    this.queue.push(ev);
    if (this.queue.length >= this.maxBatch) {
      this.immediate ??= setImmediate(() => {
        this.flush();
      });
    } else {
      this.timer ??= setTimeout(() => {
        this.flush();
      }, this.maxDelayMs);
    }
    return true;
  }

  /** Delivers everything queued now, in batches of at most maxBatch. */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
    while (this.queue.length > 0) {
      // Take the whole queue at once: splicing maxBatch off the front of a long queue copies the
      // rest every time (quadratic). Events pushed while delivering go to the next round.
      const queue = this.queue;
      this.queue = [];
      for (let i = 0; i < queue.length; i += this.maxBatch) {
        const batch = queue.length <= this.maxBatch ? queue : queue.slice(i, i + this.maxBatch);
        this.delivered += batch.length;
        for (const ev of batch) if (ev.error !== undefined) this.decodeErrors++;
        this.deliver(batch);
      }
    }
  }

  /** Drops the timers (after a final flush). */
  close(): void {
    this.flush();
  }
}

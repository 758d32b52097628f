/**
 * Loads our libpcap addon (native/pcap-batch, built by scripts/build-native.sh). It is optional:
 * when it is not built or does not load, callers get the reason and fall back to `cap`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** What `new Capture(options, ...)` takes (see native/pcap-batch/src/pcap_batch.c). */
export interface PcapBatchOptions {
  iface: string;
  /** BPF filter; '' = everything. */
  filter?: string;
  snaplen?: number;
  bufferBytes?: number;
  /** TPACKET_V3 block retire timeout: the longest a packet waits in the ring. */
  timeoutMs?: number;
  immediate?: boolean;
  promisc?: boolean;
  tstampPrecision?: 'nano' | 'micro';
  /** Size of the one reused batch buffer. */
  batchBytes?: number;
  /**
   * Summary mode: a 65536-byte UDP port table (summary.ts summaryPortTable). Each packet is then
   * decoded in the packet callback by the C fast path, and each batch is written through
   * `frameOut` (required with it); onBatch is not called.
   */
  summaryPorts?: Buffer;
  /**
   * Direct output (summary mode only): each batch is written by the addon through this writer as
   * one type-4 frame (worker-frames.ts) with `frameContext` (the EventContext as JSON, ≤ 1023
   * bytes) in its header; onBatch is then never called.
   */
  frameOut?: PcapFrameWriter;
  frameContext?: string;
  /**
   * Direct output only (0 = off): records of several wake-ups go out as one frame, at most this
   * long after the previous frame (a timer writes what is left; drain() and close() at once).
   */
  coalesceMs?: number;
  /**
   * Direct output only (0 = off): when ring blocks retire less than this far apart, read the ring
   * on a timer every busyPollMs instead of waiting on the socket, until a tick finds it empty.
   */
  busyPollMs?: number;
  /**
   * Direct output, summary mode only (0 or absent = off): per-flow counters (fold.c). Each flow
   * (either direction) sends its first foldFirst packets whole, again after a packet that may
   * start or end an exchange or a 200 ms gap; the rest are counted into counter records (status
   * 2, FOLD in core/decode/summary.ts) that go out with each batch. Records then carry their
   * frame's offset from the batch's first frame (R.frameOffset).
   */
  foldFirst?: number;
  /** The flow table's slots (a power of two, 16..2^20; default 4096). */
  foldSlots?: number;
  /**
   * Retention (-1 or absent = off): every frame the capture numbers is also written, cut to
   * retainSnaplen bytes (default 256, at most the snaplen), to a classic pcap file on this fd
   * (pcap-batch/src/retain.c), record N being frame N; past retainMaxBytes (default 64 MiB,
   * header included) or after a failed write retention stops for good and later frames are
   * counted in retainDropped. Never fatal to the capture.
   */
  retainFd?: number;
  retainSnaplen?: number;
  retainMaxBytes?: number;
  /**
   * Keep retained frames whole (to retainSnaplen); default false: headers only, each frame cut
   * where its innermost transport header ends (summary.c / headers.c).
   */
  retainPayload?: boolean;
  /** Batch mode: the UDP port table (summaryPortTable) for the headers-only cut; default ports. */
  retainPorts?: Buffer;
}

/**
 * The capture worker's one writer of frames to its parent (native/pcap-batch/src/frame_out.c):
 * writes straight to the fd when it can, queues otherwise, polls the fd until the queue is empty.
 * JavaScript must not also open a stream on the same fd.
 */
export interface PcapFrameWriter {
  /** true: written or queued; false: dropped (droppable and over the bound) or the writer failed. */
  write(frame: Uint8Array, droppable: boolean): boolean;
  /** Bytes accepted but not yet taken by the fd. */
  pending(): number;
  /** null, or why writing stopped (the parent closed its end: EPIPE). */
  error(): string | null;
  /** Stops writing (queued bytes are discarded); the fd stays open. */
  close(): void;
}

/**
 * The parent's end of a frame ring (native/pcap-batch/src/frame_ring.c): shared memory the worker
 * copies its batch frames into, announcing each with a small FRAME_RING notice on its stdout
 * (worker-frames.ts). Saves the socket copy and its accounting on both sides.
 */
export interface PcapSharedRing {
  /** The memfd (close-on-exec): pass it to the worker as a stdio fd, then close(). */
  readonly fd: number;
  /** The data area; frames are views of it, valid until their bytes are released. */
  readonly buffer: Buffer;
  readonly size: number;
  /** Everything before `end` (a notice's end) is read: the worker may reuse it. */
  release(end: number): void;
  /** Closes `fd` (the mapping stays as long as `buffer`). Idempotent. */
  close(): void;
  /**
   * Unmaps the ring now: `buffer` and every view of it become empty (detached), `fd` is closed.
   * Once the worker has exited and its output is read; else the mapping waits for GC. Idempotent.
   */
  dispose(): void;
}

/** pcap_stats of an open (or the last values of a closed) capture. */
export interface PcapBatchStats {
  /** ps_recv: packets that passed the filter, including those dropped for lack of ring space. */
  recv: number;
  /** ps_drop: dropped by the kernel for lack of ring space. */
  drop: number;
  /** ps_ifdrop: dropped by the interface (Linux: its rx_dropped since open). */
  ifdrop: number;
  /**
   * Packets handed to onBatch since open. After close (stats read after the last delivery),
   * recv - drop - delivered is what was left in the ring, unseen.
   */
  delivered: number;
  /**
   * Direct output: packets of the batches the frame writer dropped (counted in delivered). With
   * coalesceMs, delivered also counts records held for the next frame (written by close()).
   */
  outDrops: number;
  /**
   * Of delivered: records waiting in the batch for the next frame (coalesceMs), not yet written;
   * 0 once close() wrote them.
   */
  held: number;
  /** Wake-ups by the socket's readiness since open. */
  pollWakeups: number;
  /** Busy-polling ticks since open (busyPollMs). */
  timerWakeups: number;
  /** Reading on the busy-polling timer now (the socket not waited on). */
  busy: boolean;
  /**
   * Retention: frames the retention file covers (kept, or in a gap record: counted per flow, no
   * bytes), frames not (bound or failure).
   */
  retained: number;
  /** Of `retained`: frames in gap records. */
  retainSkipped: number;
  retainDropped: number;
  /** Bytes of the retention file (its header included); 0 without retention. */
  retainBytes: number;
  /** Bytes kept of each frame at most. */
  retainSnaplen: number;
  retainState: 'off' | 'on' | 'full' | 'failed';
  /** Why retention failed (strerror), when it did. */
  retainError?: string;
  /** Folding: packets counted into counter records (sent or pending), flows in the table, FAST
   * packets sent whole because the table had no free slot for their flow. */
  folded: number;
  foldFlows: number;
  foldFullSent: number;
}

/** One open capture. */
export interface PcapBatchCapture {
  /** LINKTYPE_* value (pcap file numbering). */
  readonly linktype: number;
  /** libpcap's DLT name, e.g. 'EN10MB', 'LINUX_SLL'. */
  readonly linktypeName: string;
  readonly snaplen: number;
  readonly tstampPrecision: 'nano' | 'micro';
  stats(): PcapBatchStats;
  /** Delivers what the ring holds now (retired blocks) in up to `rounds` batches; returns the count. */
  drain(rounds?: number): number;
  close(): void;
}

/**
 * Records in `buf[0, bytes)`: u32 caplen | u32 wirelen | u64 tsNs | bytes padded to 8, all
 * little-endian; `buf` is reused, so it is only valid during the call.
 */
export type PcapBatchHandler = (buf: Buffer, count: number, bytes: number) => void;

/** The addon's exports. */
export interface PcapBatchAddon {
  version: number;
  libpcapVersion: string;
  Capture: new (
    options: PcapBatchOptions,
    onBatch: PcapBatchHandler,
    onError: (code: string, message: string) => void,
  ) => PcapBatchCapture;
  /**
   * The decoder's C fast path (summary.c): summarizes the records of src[pos, end) laid out as
   * `layout` (SUMMARY_LAYOUT in summary.ts) into out (summaryBytes each); returns
   * [records written, next position, stop reason, invalid times, invalid lengths] — the last two
   * the records walked with a fraction of a second ≥ 10^6 µs / 10^9 ns (classic pcap) or a
   * captured length above the original one (classic pcap, and the pcapng Enhanced Packet Blocks;
   * pcap-file.ts CaptureFileStats.invalid; 0 for the batch layout). The pcapng layouts take the Enhanced Packet
   * Blocks of the interfaces in `ifaces` (24 bytes each, LE: link type, mul, div, a byte the addon
   * sets to 1 once it walks a packet of the interface and 3 zero, i64 if_tsoffset in s — time in
   * ns = units * mul / div + offset * 10^9, a block whose time falls outside [0, 2^64) left to the
   * caller; div 0 leaves the interface out), maxCaplen being the largest block and
   * linktype unused; each record's interface id is at R.ifaceId. With a gate
   * (offline/summary-gate.ts) only the frames it lets through get a record, and the gate says
   * which frames those are and how many useful ones it left out.
   */
  summarize(
    src: Buffer,
    pos: number,
    end: number,
    layout: number,
    linktype: number,
    maxCaplen: number,
    ports: Buffer,
    out: Buffer,
    ifaces?: Buffer,
    gate?: Buffer,
  ): [number, number, number, number, number];
  summaryBytes: number;
  /**
   * Where retention's headers-only cut of a frame falls (the end of its innermost transport
   * header as the capture callback finds it: summary.c's walk, headers.c for SLOW frames).
   */
  headersEnd(linktype: number, bytes: Buffer, ports: Buffer): number;
  /**
   * FAST summary records recs[i, end) → EventBatch `events` entries in out from pos (summary_wire.c);
   * stops at a SLOW record or when out lacks room for one more. Returns [next i, next pos].
   */
  wireRun: (
    recs: Buffer,
    i: number,
    end: number,
    ctx: Uint8Array,
    linktypeValue: number,
    frame: number,
    tables: Buffer,
    out: Buffer,
    pos: number,
  ) => [number, number];
  /**
   * fold.c on its own (tests): push() summarizes a frame as the capture callback does and returns
   * its record when it is sent, null when it was counted; flush() the pending counter records.
   */
  /** quick (default true): fold_quick before summary_one, as the capture callback does. */
  Folder: new (first: number, slots: number, quick?: boolean) => PcapFolder;
  /** ringFd: a SharedRing's fd, inherited from the parent: droppable frames then go through it. */
  FrameWriter: new (fd: number, maxQueuedBytes: number, ringFd?: number) => PcapFrameWriter;
  /** A new frame ring of `bytes` data bytes (64 KiB … 1 GiB). */
  SharedRing: new (bytes: number) => PcapSharedRing;
}

export interface PcapFolder {
  push(
    frame: Buffer,
    wireLength: number,
    tsNs: bigint,
    linktype: number,
    ports: Buffer,
    frameNo: number,
  ): Buffer | null;
  flush(): Buffer;
  /** quick: of `folded`, the packets fold_quick counted without a record. */
  stats(): { folded: number; flows: number; fullSent: number; quick: number };
}

/** The open() failure codes the addon throws with (Error.code). */
export type PcapBatchErrorCode =
  'NO_SUCH_DEVICE' | 'PERM_DENIED' | 'BAD_FILTER' | 'ACTIVATE' | 'BAD_ARGUMENT';

export type NativeLoad =
  { ok: true; addon: PcapBatchAddon; path: string } | { ok: false; reason: string };

/** The addon API version this code speaks (ADDON_VERSION in pcap_batch.c). */
const ADDON_VERSION = 17;

/** Where the built addon lives: native/pcap-batch/ beside this file, from dist/native or native. */
export function nativeAddonPath(): string {
  const override = process.env.HOPTRACE_PCAP_BATCH;
  if (override !== undefined && override !== '') return override;
  const rel = join('native', 'pcap-batch', 'build', 'Release', 'pcap_batch.node');
  const candidates = [join(__dirname, '..', '..', rel), join(__dirname, '..', rel)];
  return candidates.find((p) => existsSync(p)) ?? candidates[0] ?? rel;
}

let cached: NativeLoad | undefined;

/** Loads the addon once; the reason when it is absent or unusable. */
export function loadNativeAddon(): NativeLoad {
  cached ??= tryLoad(nativeAddonPath());
  return cached;
}

function tryLoad(path: string): NativeLoad {
  if (!existsSync(path)) {
    return {
      ok: false,
      reason: `${path} is not built (npm run build:native; needs libpcap-dev, g++, make, python3)`,
    };
  }
  let mod: unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(path);
  } catch (e) {
    return {
      ok: false,
      reason: `${path} does not load: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  const addon = mod as Partial<PcapBatchAddon> | null;
  if (
    addon?.version !== ADDON_VERSION ||
    typeof addon.Capture !== 'function' ||
    typeof addon.summarize !== 'function' ||
    typeof addon.headersEnd !== 'function' ||
    typeof addon.FrameWriter !== 'function' ||
    typeof addon.SharedRing !== 'function' ||
    typeof addon.wireRun !== 'function'
  ) {
    return {
      ok: false,
      reason: `${path} is a different build (version ${String(addon?.version)}, want ${ADDON_VERSION}); rebuild with npm run build:native`,
    };
  }
  return { ok: true, addon: addon as PcapBatchAddon, path };
}

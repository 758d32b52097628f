/**
 * Live capture with our libpcap addon (native/pcap-batch), in this process's network namespace.
 *
 * Unlike cap-source.ts: immediate mode is off (TPACKET_V3 hands over whole ring blocks, at the
 * latest after `timeoutMs`), the snaplen is small, one JS call carries a whole batch, timestamps
 * are the kernel's (ns), and drops are libpcap's exact counters. The batch buffer is reused by the
 * addon, so every packet is decoded (decodeFrame copies what it keeps) before the call returns.
 */
import { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import { decodeFrame, type DecodeOptions } from '../../core/decode/frame';
import { toPacketEvent, type EventContext } from '../../core/decode/event';
import { badFilter, noInterface, openFailed } from './capture-errors';
import { summaryPortTable } from '../../core/decode/summary';
import {
  loadNativeAddon,
  type PcapBatchAddon,
  type PcapBatchCapture,
  type PcapBatchStats,
  type PcapFrameWriter,
} from '../../native/loader';
import type { RetentionStats, RetentionTarget } from './retention';
import {
  EventBatcher,
  type BatchOptions,
  type CaptureSource,
  type CaptureSpec,
  type CaptureStats,
} from './source';

/**
 * Default bytes kept per packet. Headers of the deepest stack the decoder follows fit with room
 * to spare (Ethernet + QinQ 22, outer IPv6 40 + UDP 8 + Geneve/VXLAN 8..~40, inner Ethernet 14,
 * IPv6 40 + extension headers, TCP 60: ~260), leaving ≥ 250 payload bytes for the request-line
 * hash (128 bytes) and the probe marker in the request line. 512 rather than 262: a VXLAN-in-IPv6
 * request with options would otherwise lose its marker; TPACKET_V3 packs blocks by actual length,
 * so small packets do not pay for the larger snaplen.
 */
export const NATIVE_DEFAULT_SNAPLEN = 512;
export const NATIVE_DEFAULT_BUFFER_BYTES = 32 * 1024 * 1024;
export const NATIVE_DEFAULT_TIMEOUT_MS = 50;

const REC_HDR = 16;

export interface NativeSourceOptions {
  batch?: BatchOptions;
  decode?: DecodeOptions;
  /** Label for errors (the namespace path when run by the worker). */
  where?: string;
  /** TPACKET_V3 block timeout: the longest a packet waits before delivery (default 50 ms). */
  timeoutMs?: number;
  /** Bytes of the reused batch buffer (default 1 MiB). */
  batchBytes?: number;
  /** Promiscuous mode (default true, as tcpdump and cap). */
  promisc?: boolean;
  /** The addon (default: loadNativeAddon()). */
  addon?: PcapBatchAddon;
  /** Called with each raw batch before it is decoded (tests and benchmarks). */
  onRawBatch?: (count: number) => void;
  /**
   * Hand each capture batch to onEvents synchronously, as one array, instead of through an
   * EventBatcher (the capture worker: it encodes and writes the batch at once). `batch` is then
   * ignored and nothing is queued, so queueDrops only counts packets left in the ring at stop.
   */
  direct?: boolean;
  /** How long stop() keeps draining a ring that still fills (default 1000 ms). */
  drainMs?: number;
  /**
   * Summary mode with direct output (the capture worker): the addon decodes each packet with the
   * C fast path (summary.ts) as it comes off the ring and writes each batch through `writer` as
   * one type-4 frame (summary records plus the bytes of the frames left to the reference
   * decoder), with `context` (the EventContext as JSON) in its header. No JavaScript runs per
   * batch and onEvents is never called; decode errors are counted where the events are built
   * (the parent), batches the writer drops are counted in queueDrops.
   */
  frameOut?: {
    writer: PcapFrameWriter;
    context: string;
    coalesceMs?: number;
    /** Per-flow counters (CaptureSpec.foldFirst; the addon's foldFirst): absent = off. */
    foldFirst?: number;
    busyPollMs?: number;
  };
  /** Retain every frame into this file (retention.ts; written by the addon, pcap_batch.c). */
  retain?: RetentionTarget;
}

function errorCode(e: unknown): string {
  if (e !== null && typeof e === 'object' && 'code' in e && typeof e.code === 'string') {
    return e.code;
  }
  return '';
}

/** Live capture with the pcap-batch addon in this process's namespace. */
export class NativeSource implements CaptureSource {
  private handle: PcapBatchCapture | undefined;
  private batcher: EventBatcher | undefined;
  private onEnd: ((err: HoptraceError | null) => void) | undefined;
  private stopping: Promise<void> | undefined;
  private frames = 0;
  private lastStats: PcapBatchStats | undefined;
  /** Direct mode: events handed to onEvents, and those with a decode error. */
  private delivered = 0;
  private decodeErrors = 0;
  /** Packets left in the ring when the capture closed: received, never delivered. */
  private leftInRing = 0;
  /** libpcap's link type name of the open capture (e.g. 'EN10MB'); undefined before start. */
  linktypeName: string | undefined;

  constructor(
    private readonly spec: CaptureSpec,
    private readonly opts: NativeSourceOptions = {},
  ) {}

  start(
    onEvents: (events: PacketEvent[]) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void> {
    try {
      this.open(onEvents);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    this.onEnd = onEnd;
    return Promise.resolve();
  }

  private open(onEvents: (events: PacketEvent[]) => void): void {
    if (this.handle !== undefined || this.stopping !== undefined) {
      throw new Error('NativeSource.start() called twice');
    }
    const spec = this.spec;
    const where = this.opts.where ?? 'this namespace';
    let addon = this.opts.addon;
    if (addon === undefined) {
      const load = loadNativeAddon();
      if (!load.ok) {
        throw new HoptraceError(
          'CAPTURE_OPEN_FAILED',
          `native capture addon unavailable: ${load.reason}`,
          {
            where: `${where} interface ${spec.iface}`,
            hint: "build it with npm run build:native, or capture with source: 'cap'",
          },
        );
      }
      addon = load.addon;
    }
    const batcher =
      this.opts.direct === true ? undefined : new EventBatcher(onEvents, this.opts.batch);
    const ctx: EventContext = { point: spec.point, node: spec.node, iface: spec.iface };
    const decodeOpts = this.opts.decode;
    const onRaw = this.opts.onRawBatch;
    const frameOut = this.opts.frameOut;
    let linktype = -1;
    let view: DataView | undefined;
    const onBatch = (buf: Buffer, count: number): void => {
      onRaw?.(count);
      if (view?.buffer !== buf.buffer) view = new DataView(buf.buffer, buf.byteOffset, buf.length);
      const v = view;
      const events: PacketEvent[] = new Array<PacketEvent>(count);
      let at = 0;
      let errors = 0;
      for (let i = 0; i < count; i++) {
        const caplen = v.getUint32(at, true);
        const wireLength = v.getUint32(at + 4, true);
        const tsNs = v.getBigUint64(at + 8, true);
        const start = at + REC_HDR;
        // A view into the reused buffer: decodeFrame copies what it keeps, the view dies here.
        const d = decodeFrame(linktype, buf.subarray(start, start + caplen), decodeOpts);
        const ev = toPacketEvent({ index: ++this.frames, tsNs, wireLength }, d, ctx);
        if (batcher !== undefined) batcher.push(ev);
        else {
          events[i] = ev;
          if (ev.error !== undefined) errors++;
        }
        at = start + ((caplen + 7) & ~7);
      }
      if (batcher === undefined && count > 0) {
        this.delivered += count;
        this.decodeErrors += errors;
        onEvents(events);
      }
    };
    const onError = (code: string, message: string): void => {
      this.fail(
        code === 'IFACE_GONE'
          ? new HoptraceError('CAPTURE_INTERFACE_GONE', message, {
              where,
              hint: 'the pod was deleted or its interface removed; capture again on a live interface',
            })
          : openFailed(spec, `read error: ${message}`, where),
      );
    };
    let handle: PcapBatchCapture;
    try {
      handle = new addon.Capture(
        {
          iface: spec.iface,
          filter: spec.filter ?? '',
          snaplen: spec.snaplen ?? NATIVE_DEFAULT_SNAPLEN,
          bufferBytes: spec.bufferBytes ?? NATIVE_DEFAULT_BUFFER_BYTES,
          timeoutMs: this.opts.timeoutMs ?? NATIVE_DEFAULT_TIMEOUT_MS,
          immediate: false,
          promisc: this.opts.promisc ?? true,
          tstampPrecision: 'nano',
          ...(this.opts.batchBytes !== undefined ? { batchBytes: this.opts.batchBytes } : {}),
          ...(frameOut !== undefined
            ? {
                summaryPorts: summaryPortTable(decodeOpts),
                frameOut: frameOut.writer,
                frameContext: frameOut.context,
                ...(frameOut.coalesceMs !== undefined ? { coalesceMs: frameOut.coalesceMs } : {}),
                ...(frameOut.busyPollMs !== undefined ? { busyPollMs: frameOut.busyPollMs } : {}),
                ...(frameOut.foldFirst !== undefined ? { foldFirst: frameOut.foldFirst } : {}),
              }
            : {}),
          ...(this.opts.retain !== undefined
            ? {
                retainFd: this.opts.retain.fd,
                retainSnaplen: this.opts.retain.snaplen,
                retainMaxBytes: this.opts.retain.maxBytes,
                retainPayload: this.opts.retain.payload === true,
                ...(frameOut === undefined && this.opts.retain.payload !== true
                  ? { retainPorts: summaryPortTable(decodeOpts) }
                  : {}),
              }
            : {}),
        },
        onBatch,
        onError,
      );
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      switch (errorCode(e)) {
        case 'NO_SUCH_DEVICE':
          throw noInterface(spec, where);
        case 'BAD_FILTER':
          throw badFilter(spec, msg, where);
        default:
          throw openFailed(spec, msg, where);
      }
    }
    linktype = handle.linktype;
    this.linktypeName = handle.linktypeName;
    this.handle = handle;
    this.batcher = batcher;
  }

  /** Closes the capture (keeping its final counters) and ends delivery once. */
  private finish(err: HoptraceError | null): void {
    const h = this.handle;
    // After close() the addon keeps answering stats() with the counters read at close, after the
    // last delivery: what was received but neither delivered nor dropped stayed in the ring.
    if (h !== undefined) {
      h.close();
      const last = this.readStats(h);
      if (last !== undefined) {
        this.lastStats = last;
        this.leftInRing = Math.max(0, last.recv - last.drop - last.delivered);
      }
    }
    this.batcher?.close();
    const onEnd = this.onEnd;
    this.onEnd = undefined;
    onEnd?.(err);
  }

  private fail(err: HoptraceError): void {
    this.stopping ??= Promise.resolve();
    this.finish(err);
  }

  /**
   * Drains the ring before closing, so that packets captured before stop() are delivered: what
   * the ring holds now, then — after one block timeout, when the kernel has retired the block it
   * was filling — what it holds then, for at most drainMs while traffic keeps coming. Whatever is
   * still in the ring at close is counted in queueDrops (never silently lost).
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const h = this.handle;
      if (h !== undefined) {
        const deadline = Date.now() + (this.opts.drainMs ?? 1000);
        const drain = (): void => {
          while (h.drain(4) > 0 && Date.now() < deadline) {
            // keep reading while full batches come
          }
        };
        drain();
        await new Promise((r) =>
          setTimeout(r, (this.opts.timeoutMs ?? NATIVE_DEFAULT_TIMEOUT_MS) + 10),
        );
        drain();
      }
      this.finish(null);
    })();
    return this.stopping;
  }

  private readStats(h: PcapBatchCapture): PcapBatchStats | undefined {
    try {
      return h.stats();
    } catch {
      return undefined;
    }
  }

  /** libpcap's raw counters (ps_recv, ps_drop, ps_ifdrop); undefined before start. */
  pcapStats(): PcapBatchStats | undefined {
    const h = this.handle;
    if (h === undefined) return undefined;
    this.lastStats = this.readStats(h) ?? this.lastStats;
    return this.lastStats;
  }

  stats(): CaptureStats {
    const b = this.batcher;
    const p = this.pcapStats();
    // Direct output: the addon delivers without us; what it handed on is its own count, less
    // the batches its frame writer dropped and the records it still holds for the next frame.
    const outDrops = p?.outDrops ?? 0;
    const direct =
      this.opts.frameOut !== undefined
        ? (p?.delivered ?? 0) - outDrops - (p?.held ?? 0)
        : undefined;
    const s: CaptureStats = {
      packets: b?.delivered ?? direct ?? this.delivered,
      decodeErrors: b?.decodeErrors ?? this.decodeErrors,
      kernelDrops: p?.drop ?? null,
      ifaceDrops: p?.ifdrop ?? null,
      queueDrops: (b?.dropped ?? 0) + this.leftInRing + outDrops,
    };
    if (p !== undefined) s.received = p.recv;
    if (p !== undefined && this.opts.frameOut?.foldFirst !== undefined) {
      s.foldFullSent = p.foldFullSent;
    }
    const r = this.retention(p);
    if (r !== undefined) s.retention = r;
    return s;
  }

  /** The addon's retention counters, when the capture retains. */
  private retention(p: PcapBatchStats | undefined): RetentionStats | undefined {
    if (this.opts.retain === undefined) return undefined;
    if (p === undefined)
      return { state: 'on', retained: 0, dropped: 0, bytes: 0, snaplen: this.opts.retain.snaplen };
    const r: RetentionStats = {
      state: p.retainState,
      retained: p.retained,
      dropped: p.retainDropped,
      bytes: p.retainBytes,
      snaplen: p.retainSnaplen,
    };
    if (p.retainError !== undefined) r.error = p.retainError;
    return r;
  }
}

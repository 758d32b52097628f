/**
 * File replay as a CaptureSource: the frames of a pcap/pcapng file become the same PacketEvents a
 * live capture delivers, in batches, yielding to the event loop between batches (optionally paced
 * to the file's own timing).
 */
import { HoptraceError, isHoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import {
  decodeFrame,
  decodeFrameAndPayloadOffset,
  type DecodedFrame,
  type DecodeOptions,
} from '../../core/decode/frame';
import { toPacketEvent, type EventContext } from '../../core/decode/event';
import {
  openCaptureFile,
  type CaptureFileReader,
  type CaptureFrame,
} from '../../offline/pcap-file';
import { LazyRetention, type RetentionTarget } from './retention';
import type { CaptureSource, CaptureSpec, CaptureStats } from './source';

export interface FileSourceOptions {
  /** Playback speed relative to the file's timestamps (1 = real time); 0 or absent = unpaced. */
  speed?: number;
  /** Most events per onEvents call (default 256). */
  maxBatch?: number;
  decode?: DecodeOptions;
  /** Retain every frame into this file (retention.ts), as a live capture would. */
  retain?: RetentionTarget;
}

/** Replays `path`; `spec.iface` labels frames whose file names no interface. */
export class FileSource implements CaptureSource {
  private reader: CaptureFileReader | undefined;
  private frames: Iterator<CaptureFrame, void> | undefined;
  private onEnd: ((err: HoptraceError | null) => void) | undefined;
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private stopping: Promise<void> | undefined;
  /** A paced event not yet due. */
  private pending: PacketEvent | undefined;
  private delivered = 0;
  private decodeErrors = 0;
  /** Pacing anchor: first frame's timestamp and the wall time it was sent. */
  private anchor: { fileNs: bigint; wallMs: number } | undefined;
  private readonly retainer: LazyRetention | undefined;

  constructor(
    readonly path: string,
    private readonly spec: CaptureSpec,
    private readonly opts: FileSourceOptions = {},
  ) {
    if (opts.retain !== undefined) this.retainer = new LazyRetention(opts.retain, opts.decode);
  }

  start(
    onEvents: (events: PacketEvent[]) => void,
    onEnd: (err: HoptraceError | null) => void,
  ): Promise<void> {
    if (this.reader !== undefined || this.stopping !== undefined) {
      return Promise.reject(new Error('FileSource.start() called twice'));
    }
    if (this.spec.filter !== undefined && this.spec.filter.trim() !== '') {
      return Promise.reject(
        new HoptraceError('CAPTURE_FILTER_UNSUPPORTED', `filter '${this.spec.filter}'`, {
          where: this.path,
          hint: `replay applies no BPF filter; pre-filter with tcpdump -r in.pcap -w out.pcap 'FILTER'`,
        }),
      );
    }
    try {
      this.reader = openCaptureFile(this.path);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    this.frames = this.reader.frames();
    this.onEnd = onEnd;
    const ctx: EventContext = {
      point: this.spec.point,
      node: this.spec.node,
      iface: this.spec.iface,
    };
    this.timer = setImmediate(() => {
      this.pump(onEvents, ctx);
    });
    return Promise.resolve();
  }

  private pump(onEvents: (events: PacketEvent[]) => void, ctx: EventContext): void {
    const frames = this.frames;
    if (frames === undefined) return;
    const maxBatch = this.opts.maxBatch ?? 256;
    const speed = this.opts.speed ?? 0;
    const batch: PacketEvent[] = [];
    let waitMs = 0;
    let ended = false;
    let failure: HoptraceError | null = null;
    if (this.pending !== undefined) batch.push(this.pending);
    this.pending = undefined;
    try {
      while (batch.length < maxBatch) {
        const r = frames.next();
        if (r.done === true) {
          ended = true;
          break;
        }
        const f = r.value;
        let d: DecodedFrame;
        if (this.retainer?.headersOnly === true) {
          // One decode for both the event and retention's headers-only cut.
          const both = decodeFrameAndPayloadOffset(f.linktype, f.data, this.opts.decode);
          d = both.frame;
          this.retainer.add(f.linktype, f.tsNs, f.wireLength, f.data, both.payloadOffset);
        } else {
          this.retainer?.add(f.linktype, f.tsNs, f.wireLength, f.data);
          d = decodeFrame(f.linktype, f.data, this.opts.decode);
        }
        const ev = toPacketEvent(f, d, ctx);
        if (speed > 0) {
          this.anchor ??= { fileNs: f.tsNs, wallMs: Date.now() };
          const dueMs = this.anchor.wallMs + Number(f.tsNs - this.anchor.fileNs) / 1e6 / speed;
          waitMs = dueMs - Date.now();
          if (waitMs > 1) {
            this.pending = ev;
            break;
          }
        }
        batch.push(ev);
      }
    } catch (e) {
      ended = true;
      failure = isHoptraceError(e)
        ? e
        : new HoptraceError('FILE_NOT_FOUND', String(e), { where: this.path });
    }
    if (batch.length > 0) {
      this.delivered += batch.length;
      for (const ev of batch) if (ev.error !== undefined) this.decodeErrors++;
      onEvents(batch);
    }
    if (ended) {
      this.finish(failure);
      return;
    }
    if (this.stopping !== undefined) return;
    this.timer =
      waitMs > 1
        ? setTimeout(() => {
            this.pump(onEvents, ctx);
          }, waitMs)
        : setImmediate(() => {
            this.pump(onEvents, ctx);
          });
  }

  private finish(err: HoptraceError | null): void {
    clearTimeout(this.timer as NodeJS.Timeout | undefined);
    clearImmediate(this.timer as NodeJS.Immediate | undefined);
    this.timer = undefined;
    this.frames?.return?.();
    this.frames = undefined;
    this.pending = undefined;
    this.reader?.close();
    this.retainer?.close();
    const onEnd = this.onEnd;
    this.onEnd = undefined;
    onEnd?.(err);
  }

  stop(): Promise<void> {
    this.stopping ??= Promise.resolve().then(() => {
      this.finish(null);
    });
    return this.stopping;
  }

  stats(): CaptureStats {
    const s: CaptureStats = {
      packets: this.delivered,
      decodeErrors: this.decodeErrors,
      kernelDrops: null,
      ifaceDrops: null,
      queueDrops: 0,
    };
    if (this.retainer !== undefined) s.retention = this.retainer.stats();
    return s;
  }
}

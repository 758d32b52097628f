/**
 * Live capture with the stock `cap` 0.2.1 binding (libpcap), in this process's network namespace.
 *
 * Measured limits of cap 0.2.1 that shape this file: it forces immediate mode and a 65535-byte
 * snaplen (so a small kernel buffer holds few packets: we default to 64 MiB), emits one JS callback
 * per packet into one reused Buffer, exposes neither kernel timestamps nor drop counters (so the
 * timestamp is taken first thing in the callback and kernelDrops is reported as null, unknown),
 * and when the interface disappears libpcap's poll error trips an assert in cap's binding.cc that
 * aborts the whole process. That last one is why the agent runs every live capture in a worker
 * process (ns-capture.ts), even in its own namespace: only the worker dies, and its parent reports
 * CAPTURE_INTERFACE_GONE.
 */
import { performance } from 'node:perf_hooks';
import { Cap } from 'cap';
import type { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import {
  decodeFrame,
  decodeFrameAndPayloadOffset,
  type DecodedFrame,
  type DecodeOptions,
} from '../../core/decode/frame';
import { toPacketEvent, type EventContext } from '../../core/decode/event';
import { badFilter, noInterface, openFailed } from './capture-errors';
import { PcapRetentionWriter, type RetentionTarget } from './retention';
import {
  EventBatcher,
  type BatchOptions,
  type CaptureSource,
  type CaptureSpec,
  type CaptureStats,
} from './source';

export { listKernelInterfaces } from './capture-errors';

export const DEFAULT_BUFFER_BYTES = 64 * 1024 * 1024;
const MAX_SNAPLEN = 65535;

/** cap's link type names → LINKTYPE_* values the decoder takes. */
const CAP_LINKTYPES: Record<string, number> = {
  NULL: 0,
  ETHERNET: 1,
  RAW: 101,
  LINKTYPE_LINUX_SLL: 113,
  IEEE802_11_RADIO: 127,
};

/** Maps cap.open()'s return value to a LINKTYPE_* value (-1 when unknown). */
export function capLinktype(name: string): number {
  const known = CAP_LINKTYPES[name];
  if (known !== undefined) return known;
  const m = /^Unknown linktype (\d+)$/.exec(name);
  return m?.[1] !== undefined ? Number(m[1]) : -1;
}

/** Interface names libpcap sees in this process's namespace. */
export function listCaptureInterfaces(): string[] {
  try {
    return Cap.deviceList().map((d) => d.name);
  } catch {
    return [];
  }
}

export interface CapSourceOptions {
  batch?: BatchOptions;
  decode?: DecodeOptions;
  /** Label for errors (the namespace path when run by the worker). */
  where?: string;
  /** Retain every frame into this file (retention.ts). */
  retain?: RetentionTarget;
}

/**
 * Cap objects whose open() threw. cap 0.2.1 leaves such an object with a live pcap handle but
 * without the reference its destructor releases, so garbage-collecting it (or calling close())
 * aborts the process (Nan::ObjectWrap::Unref assertion, measured). They are kept reachable
 * instead; the worker process that runs CapSource exits after a failed start anyway.
 */
const FAILED_CAPS: Cap[] = [];

/**
 * Closed Cap objects, kept reachable for the same reason: garbage-collecting a closed Cap crashes
 * in its destructor (SIGSEGV in node::AsyncWrap::EmitDestroy from Pcap::~Pcap, measured with gdb
 * in the worker: the probe of tryOpen() was collected under the first packets' allocations).
 */
const CLOSED_CAPS: Cap[] = [];

/** Opens `iface` with `filter` and a small buffer and closes it again; the error, or null. */
function tryOpen(iface: string, filter: string): unknown {
  const probe = new Cap();
  try {
    probe.open(iface, filter, 1024 * 1024, Buffer.alloc(64));
  } catch (e) {
    FAILED_CAPS.push(probe);
    return e;
  }
  probe.close();
  CLOSED_CAPS.push(probe);
  return null;
}

/** Maps an exception from cap.open() to a HoptraceError. */
function openError(spec: CaptureSpec, e: unknown, filterIsTheCause: boolean, where: string) {
  const msg = e instanceof Error ? e.message : String(e);
  if (filterIsTheCause) return badFilter(spec, msg, where);
  if (/no such device/i.test(msg)) return noInterface(spec, where);
  return openFailed(spec, msg, where);
}

/** Live capture with cap in this process's namespace. */
export class CapSource implements CaptureSource {
  private cap: Cap | undefined;
  private batcher: EventBatcher | undefined;
  private onEnd: ((err: HoptraceError | null) => void) | undefined;
  private stopping: Promise<void> | undefined;
  private frames = 0;
  private retainer: PcapRetentionWriter | undefined;
  /** Link type name of the open capture (cap's name, e.g. 'ETHERNET'); undefined before start. */
  linktypeName: string | undefined;

  constructor(
    private readonly spec: CaptureSpec,
    private readonly opts: CapSourceOptions = {},
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
    if (this.cap !== undefined || this.stopping !== undefined) {
      throw new Error('CapSource.start() called twice');
    }
    const spec = this.spec;
    const where = this.opts.where ?? 'this namespace';
    // Check first: libpcap prints a SIOCGIFADDR warning for a missing device before failing.
    const have = listCaptureInterfaces();
    if (have.length > 0 && !have.includes(spec.iface)) throw noInterface(spec, where);

    const snaplen = Math.min(spec.snaplen ?? MAX_SNAPLEN, MAX_SNAPLEN);
    const buf = Buffer.alloc(snaplen);
    const filter = spec.filter ?? '';
    // Probe with a small buffer first: a failed open leaks its handle (see FAILED_CAPS), so the
    // big buffer is only allocated once interface and filter are known good.
    const probeError = tryOpen(spec.iface, filter);
    if (probeError !== null) {
      // cap throws one Error for every step; opening without the filter tells whether the filter
      // was the cause.
      const filterIsTheCause = filter !== '' && tryOpen(spec.iface, '') === null;
      throw openError(spec, probeError, filterIsTheCause, where);
    }
    const cap = new Cap();
    let name: string;
    try {
      name = cap.open(spec.iface, filter, spec.bufferBytes ?? DEFAULT_BUFFER_BYTES, buf);
    } catch (e) {
      FAILED_CAPS.push(cap);
      throw openError(spec, e, false, where);
    }
    this.linktypeName = name;
    const linktype = capLinktype(name);
    const ctx: EventContext = { point: spec.point, node: spec.node, iface: spec.iface };
    const batcher = new EventBatcher(onEvents, this.opts.batch);
    const decodeOpts = this.opts.decode;
    // Wall clock anchored once; per packet only the monotonic clock is read.
    const retain = this.opts.retain;
    const retainer =
      retain === undefined
        ? undefined
        : new PcapRetentionWriter(
            { ...retain, snaplen: Math.min(retain.snaplen, snaplen) },
            linktype,
            decodeOpts,
          );
    this.retainer = retainer;
    const hr0 = process.hrtime.bigint();
    const wall0 = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
    cap.on('packet', (nbytes: number) => {
      const tsNs = wall0 + (process.hrtime.bigint() - hr0);
      const index = ++this.frames;
      // `buf` is overwritten by the next packet: decodeFrame copies what it keeps into plain
      // values, and the view below does not outlive this callback.
      const bytes = buf.subarray(0, nbytes);
      let d: DecodedFrame;
      if (retainer?.headersOnly === true) {
        // One decode for both the event and retention's headers-only cut.
        const both = decodeFrameAndPayloadOffset(linktype, bytes, decodeOpts);
        d = both.frame;
        retainer.add(tsNs, nbytes, bytes, both.payloadOffset);
      } else {
        retainer?.add(tsNs, nbytes, bytes);
        d = decodeFrame(linktype, bytes, decodeOpts);
      }
      // cap reports the copied length only; the wire length is unknown beyond snaplen.
      batcher.push(toPacketEvent({ index, tsNs, wireLength: nbytes }, d, ctx));
    });
    this.cap = cap;
    this.batcher = batcher;
  }

  stop(): Promise<void> {
    this.stopping ??= Promise.resolve().then(() => {
      if (this.cap !== undefined) {
        this.cap.close();
        CLOSED_CAPS.push(this.cap);
      }
      this.cap = undefined;
      this.retainer?.close();
      this.batcher?.close();
      const onEnd = this.onEnd;
      this.onEnd = undefined;
      onEnd?.(null);
    });
    return this.stopping;
  }

  stats(): CaptureStats {
    const b = this.batcher;
    const s: CaptureStats = {
      packets: b?.delivered ?? 0,
      decodeErrors: b?.decodeErrors ?? 0,
      kernelDrops: null,
      ifaceDrops: null,
      queueDrops: b?.dropped ?? 0,
    };
    if (this.retainer !== undefined) s.retention = this.retainer.stats();
    return s;
  }
}

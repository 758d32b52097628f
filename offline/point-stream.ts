/**
 * One point's capture file as the analysis's PointStream: the native fast path (summary records
 * and the prefilters of record-scans.ts) where the addon loads, else every frame through the
 * TypeScript reader and decoder; and what the file recorded about its own capture.
 *
 * A file that ends inside a record (FILE_TRUNCATED: a capture still being written, a full disk)
 * is analysed up to there, as `decode` prints the frames before the cut: the error ends the pass,
 * and the cut goes into the point's capture health (where, and what was cut), which says so. A
 * record or block damaged after good frames (FILE_BAD_RECORD, FILE_BAD_BLOCK, FILE_TIME_RANGE) is
 * the same: no reader can find the next record past a damaged length, so the frames before it
 * are the capture, and the health says where it is damaged. Damage before any frame is the
 * file's error: there is no capture to analyse.
 */
import { countText } from '../common/counters';
import { openSummaryPcap } from './summary-file';
import { isStreamInput } from './point-inputs';
import { toPacketEvent, type EventContext } from '../core/decode/event';
import { decodeFrame } from '../core/decode/frame';
import {
  isFileStop,
  openCaptureFile,
  type CaptureFileStats,
  type FileCut,
  type ResumePoint,
} from './pcap-file';
import { type PassPlan, type PointStream, isUsefulEvent } from '../core/report/analyze';
import type { CaptureHealth } from '../core/report/capture-health';
import type { PacketEvent } from '../common/event';
import type { TimeSpan } from '../common/time-span';
import { type Scan, SelectScan, SelectFlowScan, RequestScan, LaterScan } from './record-scans';
import type { PassPool, PassTicket } from './pass-pool';

/** The reading stopped inside the file after the frames before it (a cut; damage after a frame). */
function isStop(e: unknown, read: CaptureFileStats): boolean {
  return isFileStop(e) && (e.code === 'FILE_TRUNCATED' || read.frames > 0);
}

/** Where the reading stopped, as capture health: `truncated` (a cut) or `damaged`. */
function stopHealth(at: FileCut | undefined): Pick<CaptureHealth, 'truncated' | 'damaged'> {
  if (at === undefined) return {};
  const { offset, detail, code } = at;
  return code === 'FILE_TRUNCATED'
    ? { truncated: { offset, detail } }
    : { damaged: { offset, detail, code } };
}

/** The useful events of every frame through the JS reader and decoder, up to a cut. */
function* usefulEvents(
  file: string,
  ctx: EventContext,
  onEnd: (format: 'pcap' | 'pcapng', stats: CaptureFileStats) => void,
): Generator<PacketEvent> {
  const reader = openCaptureFile(file);
  try {
    for (const f of reader.frames()) {
      const ev = toPacketEvent(f, decodeFrame(f.linktype, f.data), ctx);
      if (isUsefulEvent(ev)) yield ev;
    }
  } catch (e) {
    if (!isStop(e, reader.stats())) throw e;
  }
  onEnd(reader.format, reader.stats());
}

/**
 * One point's capture file as a PointStream. A pcap or pcapng file goes through the native decoder
 * fast path (offline/summary-file.ts): every frame is summarized in C, and a prefilter on
 * the summary records (the Scan classes of record-scans.ts) builds PacketEvents only for the frames the pass
 * can keep (PassPlan) — a superset of what analyzeEventStreams keeps, which still decides — while
 * counting every useful event. Hosts without the addon (and `fast: false`) take the JS reader +
 * decoder for every frame.
 */
export class FilePointStream implements PointStream {
  private count = 0;
  private readonly ctx: EventContext;
  /** What the file recorded about its capture, from the last pass that read it to the end. */
  private recorded: { format: 'pcap' | 'pcapng'; stats: CaptureFileStats } | null = null;
  /** Pass 2 at the first point, answered by pass 1 (see SelectScan). */
  private early: {
    syn: PacketEvent;
    windowNs: bigint;
    events: PacketEvent[];
    count: number;
  } | null = null;
  /** A later pass handed to another thread by prepare(), taken by the pass it was for. */
  private prepared: { plan: PassPlan; ticket: PassTicket } | null = null;
  /** Where the file can be read again from the middle: the points of the pass that read most. */
  private seek: readonly ResumePoint[] = [];

  constructor(
    readonly name: string,
    private readonly file: string,
    /** false: the JS reader + decoder for every frame, even where the addon loads. */
    private readonly fast: boolean,
    /** Drops the user gave for this file (`--drops`), used when the file records none. */
    private readonly givenDrops: number | undefined,
    /** false: every frame gets a summary record (the reference the gates are tested against). */
    private readonly gated = true,
    private readonly opts: {
      /** Where a later pass may run while this thread reads another point (pass-pool.ts). */
      pool?: PassPool | undefined;
      /** Called after each block of summary records (the worker's progress). */
      onBlock?: () => void;
    } = {},
  ) {
    this.ctx = { point: name, node: '', iface: 'file' };
  }

  /** What the file recorded about its capture, from the last pass that read it to the end. */
  readonly fileRecord = (): {
    format: 'pcap' | 'pcapng';
    stats: CaptureFileStats;
  } | null => this.recorded;

  /**
   * The analysis will ask this later pass soon: on the fast path it starts on another thread
   * when the pool has one idle, and events(plan) then hands over its result.
   */
  prepare(plan: PassPlan): void {
    const pool = this.opts.pool;
    if (pool === undefined || !this.fast || plan.kind !== 'later') return;
    // A stream is read here, once: a worker given up would leave its bytes half taken.
    if (isStreamInput(this.file)) return;
    const ticket = pool.submit({ name: this.name, file: this.file, gated: this.gated, plan });
    this.prepared = ticket === null ? null : { plan, ticket };
  }

  readonly capturedEvents = (): number => this.count;

  /** A stream (standard input, a pipe) is read once: the analysis asks no pass after its first. */
  get readOnce(): boolean {
    return isStreamInput(this.file);
  }

  /** The file's frames, as the last pass that read it to the end counted them. */
  readonly capturedFrames = (): number | undefined => this.recorded?.stats.frames;

  /**
   * When they were captured (null: no timed frame), from the same pass; undefined when not known —
   * a file cut or damaged before its end says nothing of the frames after the cut.
   */
  readonly capturedSpan = (): TimeSpan | null | undefined =>
    this.recorded?.stats.truncated === undefined ? this.recorded?.stats.span : undefined;

  /** Resume points in the file (offline/seek-points.ts) from the fast path's passes; [] without. */
  readonly seekPoints = (): readonly ResumePoint[] => this.seek;

  /** Keeps the points of the pass that read furthest (a long file's are thinned, so not the most). */
  private keepSeek(points: readonly ResumePoint[]): void {
    const reach = (l: readonly ResumePoint[]): number => l.at(-1)?.offset ?? -1;
    if (reach(points) >= reach(this.seek)) this.seek = points;
  }

  /** The file as a capture (capture-health.ts); null when no pass read it to the end. */
  health(): CaptureHealth | null {
    if (this.recorded === null) return null;
    const recorded = this.recorded.stats.dropped;
    const given = recorded === null ? this.givenDrops : undefined;
    return {
      point: this.name,
      node: null,
      iface: this.file,
      state: 'read',
      confirmed: true,
      packets: this.recorded.stats.frames,
      kernelDrops: given ?? recorded,
      queueDrops: 0,
      lost: 0,
      file: this.recorded.format,
      ...(given === undefined ? {} : { dropsGiven: true }),
      ...(given !== undefined || this.recorded.stats.dropsPartial === undefined
        ? {}
        : { dropsPartial: this.recorded.stats.dropsPartial }),
      ...stopHealth(this.recorded.stats.truncated),
      ...(this.recorded.stats.invalid === undefined
        ? {}
        : { invalidRecords: this.recorded.stats.invalid }),
    };
  }

  /** A note when the user gave a drop count for a file that records its own (which wins). */
  givenNote(): string | null {
    const recorded = this.recorded?.stats.dropped ?? null;
    if (this.givenDrops === undefined || recorded === null) return null;
    return `${this.name}: --drops ${this.givenDrops} not used: ${this.file} records its own count (${countText(recorded)} dropped)`;
  }

  readonly events = (plan: PassPlan): Iterable<PacketEvent> => this.pass(plan);

  /** The prefilter of one pass over the summary records (record-scans.ts), with its gate. */
  private scanFor(plan: PassPlan): Scan {
    switch (plan.kind) {
      case 'select':
        return new SelectScan(this.ctx, plan, this.gated);
      case 'select-flow':
        return new SelectFlowScan(this.ctx, plan);
      case 'request':
        return new RequestScan(this.ctx, plan, this.gated);
      case 'later':
        return new LaterScan(this.ctx, plan, this.gated);
    }
  }

  private *pass(plan: PassPlan): Generator<PacketEvent> {
    this.count = 0;
    const prepared = this.prepared;
    this.prepared = null;
    // null: the worker was given up; the pass runs here.
    const done = prepared !== null && prepared.plan === plan ? prepared.ticket.result() : null;
    if (done !== null) {
      this.count = done.count;
      this.keepSeek(done.seek);
      if (done.recorded !== null) this.recorded = done.recorded;
      yield* done.events;
      return;
    }
    const early = this.early;
    this.early = null;
    if (
      plan.kind === 'request' &&
      early !== null &&
      early.syn === plan.start &&
      early.windowNs === plan.windowNs
    ) {
      this.count = early.count;
      yield* early.events;
      return;
    }
    const scan = this.fast ? this.scanFor(plan) : null;
    const reader =
      scan === null ? null : openSummaryPcap(this.file, { gate: scan.gate ?? undefined });
    if (scan === null || reader === null) {
      const onEnd = (format: 'pcap' | 'pcapng', stats: CaptureFileStats): void => {
        this.recorded = { format, stats };
      };
      for (const ev of usefulEvents(this.file, this.ctx, onEnd)) {
        this.count++;
        yield ev;
      }
      return;
    }
    try {
      try {
        for (let b = reader.next(); b !== null; b = reader.next()) {
          scan.count += b.skipped;
          scan.block(b);
          this.opts.onBlock?.();
          this.count = scan.count;
          if (scan.out.length > 0) {
            yield* scan.out;
            scan.out.length = 0;
          }
        }
      } catch (e) {
        if (!isStop(e, reader.stats())) throw e;
      }
      yield* scan.finish();
      this.recorded = { format: reader.format, stats: reader.stats() };
    } finally {
      reader.close();
      this.keepSeek(reader.seekPoints());
    }
    if (scan instanceof SelectScan && scan.best?.valid === true) {
      const s = scan.best;
      this.early = { syn: s.syn, windowNs: plan.windowNs, events: s.events, count: this.count };
    }
  }
}

/**
 * Capture files through the decoder's C fast path: the file is read in large chunks into one
 * reused buffer, and the addon's `summarize` turns the frames of each chunk into summary records
 * (summary.ts) in one call, so a caller can look at a few fields of every frame and build
 * PacketEvents only for the frames it keeps (`hoptrace analyze`).
 *
 * Classic pcap: the reader here walks the records (one cut by the chunk end is carried over to
 * the next). The JS reader (pcap-file.ts) stays the authority on errors: the header is checked by
 * openCaptureFile itself, and when a record turns out malformed (a caplen above the bound, a file
 * cut mid-record) the JS reader is run over the file to throw its own error, after the same
 * frames it would have delivered.
 *
 * pcapng (what dumpcap, tshark and Wireshark write): the JS reader's own PcapngReader reads the
 * file, and the C side takes the runs of Enhanced Packet Blocks from its buffer (summary_run_ng,
 * with a table of the section's interfaces: link type, time scale and if_tsoffset; records carry their
 * interface id, read with linktypeAt / ifaceAt); every other block — sections, interfaces, statistics, simple packet blocks, a
 * block cut by the chunk end, anything malformed — goes through the JS parser, one block at a
 * time, so the two paths share one parser and one set of errors. A packet block the JS parser reads
 * is summarized on its own. Both add an interface's if_tsoffset, and refuse a time out of
 * 0 … 2^64 − 1 ns, with or without an offset (FILE_TIME_RANGE: the C side stops at that block,
 * the JS parser throws), so no time is wrapped.
 *
 * Hosts where the addon does not load get `null` from openSummaryPcap and stay on the JS reader +
 * reference decoder; so does a stream (standard input, a pipe: offline/point-inputs.ts).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';
import type { PacketEvent } from '../common/event';
import type { DecodeOptions } from '../core/decode/frame';
import type { EventContext } from '../core/decode/event';
import { loadNativeAddon, type PcapBatchAddon } from '../native/loader';
import type { SummaryGate } from './summary-gate';
import { TimeSpanTracker } from '../common/time-span';
import { SeekPoints } from './seek-points';
import { isStreamInput } from './point-inputs';
import {
  MAX_SNAPLEN,
  openCaptureFile,
  PcapngReader,
  packetTimeNs,
  RESUME_HEAD_BYTES,
  type CaptureFileStats,
  type InvalidRecords,
  type ResumePoint,
  type FileCut,
  type PcapngInterface,
} from './pcap-file';
import {
  R,
  SUMMARY_BYTES,
  SUMMARY_LAYOUT,
  SUMMARY_STOP,
  summaryEvent,
  summaryPortTable,
} from '../core/decode/summary';

/**
 * Default read size: large enough that per-call costs vanish, small enough that summarize reads
 * the chunk from cache right after the read wrote it (8 MiB measured ~10% slower).
 */
export const SUMMARY_CHUNK_SIZE = 2 << 20;
/** Summary records per block: 192 KiB, so they are still in cache when the caller reads them. */
export const BLOCK_RECORDS = 1024;
/**
 * The longest Enhanced Packet Block the C side takes: one holding a packet of MAX_SNAPLEN bytes
 * and no options. A longer block goes through the JS parser, which refuses a captured length
 * above MAX_SNAPLEN — so the C side never takes a packet the JS parser would refuse.
 */
const FAST_EPB_MAX = MAX_SNAPLEN + 32;
/** 32-bit words per summary record (SUMMARY_BYTES / 4). */
export const SUMMARY_WORDS = SUMMARY_BYTES / 4;

/** Summary records of consecutive frames; valid until the next `next()`. */
export interface SummaryBlock {
  /** `count` summary records (SUMMARY_BYTES each) from offset 0. */
  recs: Buffer;
  /** The same memory as host-order (little-endian) 32-bit words, SUMMARY_WORDS per record. */
  words: Uint32Array;
  count: number;
  /** The bytes the records' data offsets point into (for SLOW records). */
  src: Buffer;
  /** 1-based frame number of the block's first frame in the file (record 0's without a gate). */
  firstFrame: number;
  /**
   * With a gate (SummaryPcapOptions.gate): record i's frame is firstFrame + frameOf[i], and
   * `skipped` frames of the block whose inner transport is TCP or UDP got no record. Without one,
   * frameOf is null (record i is frame firstFrame + i) and skipped 0. Read with frameAt.
   */
  frameOf: Uint32Array | null;
  skipped: number;
  /** The frames' link type (classic pcap: the file's; unused when byIface is set). */
  linktype: number;
  /**
   * pcapng: the section's interfaces; record i's link type and name (if_name, the events' iface)
   * are those of byIface[its interface id (R.ifaceId)]. Read them with linktypeAt / ifaceAt.
   */
  byIface: readonly { linktype: number; name: string | undefined }[] | null;
}

const IFACE_WORD = R.ifaceId / 4;

/** Record i's frame number in the file. */
export function frameAt(b: SummaryBlock, i: number): number {
  return b.firstFrame + (b.frameOf === null ? i : (b.frameOf[i] ?? 0));
}

/** Record i's link type. */
export function linktypeAt(b: SummaryBlock, i: number): number {
  if (b.byIface === null) return b.linktype;
  return b.byIface[b.words[i * SUMMARY_WORDS + IFACE_WORD] ?? 0]?.linktype ?? b.linktype;
}

/** Record i's interface name (pcapng if_name), if the file gives one. */
export function ifaceAt(b: SummaryBlock, i: number): string | undefined {
  if (b.byIface === null) return undefined;
  return b.byIface[b.words[i * SUMMARY_WORDS + IFACE_WORD] ?? 0]?.name;
}

/** A capture file read as summary blocks. */
export interface SummaryReader {
  readonly path: string;
  readonly format: 'pcap' | 'pcapng';
  /** Decoder options: the UDP tunnel ports summarize uses are the decoder's. */
  readonly decode: DecodeOptions | undefined;
  /** The next block of frames in file order; null at the end of the file. Throws HoptraceError. */
  next(): SummaryBlock | null;
  /** What the file recorded about its capture, from what has been read. */
  stats(): CaptureFileStats;
  /** Where a reader can start again in what has been read (offline/seek-points.ts). */
  seekPoints(): readonly ResumePoint[];
  close(): void;
}

export interface SummaryPcapOptions {
  /** Read size in bytes (default SUMMARY_CHUNK_SIZE); tests use small ones to cut records. */
  chunkSize?: number;
  /** Decoder options: the UDP tunnel ports summarize uses must be the decoder's. */
  decode?: DecodeOptions | undefined;
  /**
   * Which frames get a record (offline/summary-gate.ts; its room: BLOCK_RECORDS). The caller may
   * change it between next() calls. A pcapng frame whose time does not fit 64 bits of ns gets one
   * always (the record would hold only its low bits).
   */
  gate?: SummaryGate | undefined;
}

/**
 * Memory a closed reader leaves to the next one on the same thread (module state is per thread):
 * on the machines measured a page touched for the first time costs ~10 µs (BENCHMARKS.md), so a
 * fresh 2 MiB chunk buffer costs ~5 ms before it holds a byte — once per pass without this. A
 * reader takes what is here (nothing is shared by two open readers) and gives it back on close.
 */
const spare: { chunks: Buffer[]; records: ArrayBuffer[] } = { chunks: [], records: [] };
const SPARE_MAX = 2;

/**
 * Adds the times of the frames one summarize call walked: the gate's earliest and latest (it
 * walks frames it gives no record), else every record's (each frame has one).
 */
function noteTimes(
  times: TimeSpanTracker,
  gate: SummaryGate | undefined,
  words: Uint32Array,
  n: number,
): void {
  if (gate !== undefined) {
    const span = gate.span;
    if (span !== null) times.addRange(span.earliestNs, span.latestNs);
    return;
  }
  if (n === 0) return;
  const lo = R.tsLo / 4;
  let minHi = Infinity;
  let minLo = 0;
  let maxHi = -1;
  let maxLo = 0;
  for (let i = 0, o = 0; i < n; i++, o += SUMMARY_WORDS) {
    const h = words[o + lo + 1] ?? 0;
    const l = words[o + lo] ?? 0;
    if (h < minHi || (h === minHi && l < minLo)) [minHi, minLo] = [h, l];
    if (h > maxHi || (h === maxHi && l > maxLo)) [maxHi, maxLo] = [h, l];
  }
  const ns = (h: number, l: number): bigint => (BigInt(h) << 32n) | BigInt(l);
  times.addRange(ns(minHi, minLo), ns(maxHi, maxLo));
}

/** The last given back first: its pages are the likeliest still in cache. */
function takeChunk(size: number): Buffer {
  let i = spare.chunks.length - 1;
  while (i >= 0 && spare.chunks[i]?.length !== size) i--;
  return i < 0
    ? Buffer.allocUnsafe(size)
    : (spare.chunks.splice(i, 1)[0] ?? Buffer.allocUnsafe(size));
}

/** Kept: the last SPARE_MAX given back (an older one of another size is let go). */
function giveBack(chunk: Buffer | null, records: ArrayBufferLike): void {
  if (chunk !== null && spare.chunks.push(chunk) > SPARE_MAX) spare.chunks.shift();
  if (records instanceof ArrayBuffer && spare.records.push(records) > SPARE_MAX)
    spare.records.shift();
}

/** A reader's one SummaryBlock, its records' memory allocated once (BLOCK_RECORDS). */
function emptyBlock(src: Buffer, linktype: number): SummaryBlock {
  const memory = spare.records.pop() ?? new ArrayBuffer(SUMMARY_BYTES * BLOCK_RECORDS);
  return {
    recs: Buffer.from(memory),
    words: new Uint32Array(memory),
    count: 0,
    src,
    firstFrame: 1,
    frameOf: null,
    skipped: 0,
    linktype,
    byIface: null,
  };
}

/** An open classic pcap file read as summary blocks. */
export class SummaryPcapReader implements SummaryReader {
  readonly format = 'pcap' as const;
  private buf: Buffer;
  private pos = 0;
  private end = 0;
  private fileOffset = 24;
  private eof = false;
  private frame = 1;
  private fd: number | null;
  private readonly ports: Buffer;
  private readonly block: SummaryBlock;
  /** Where the file ended inside a record, as the JS reader found it. */
  private cutAt: FileCut | undefined;
  /** The chunk buffer's size as taken (it grows only for a record larger than it). */
  private readonly chunkSize: number;
  private readonly seek = new SeekPoints();
  private readonly times = new TimeSpanTracker();
  /** Records walked with an invalid time or lengths, as summarize counts them (summary.h). */
  private readonly invalid: InvalidRecords = { times: 0, lengths: 0 };

  constructor(
    readonly path: string,
    private readonly addon: PcapBatchAddon,
    fd: number,
    private readonly layout: number,
    /** The header's link-type field (FCS bits included), as pcap-file.ts hands it to the decoder. */
    readonly linktype: number,
    chunkSize: number,
    readonly decode: DecodeOptions | undefined,
    private readonly gate: SummaryGate | undefined,
  ) {
    this.fd = fd;
    this.buf = takeChunk(Math.max(64, chunkSize));
    this.chunkSize = this.buf.length;
    this.ports = summaryPortTable(decode);
    this.block = emptyBlock(this.buf, linktype);
  }

  /** What the file recorded about its capture: a classic pcap file records no drop counts. */
  stats(): CaptureFileStats {
    const bad = this.invalid;
    const stats: CaptureFileStats = {
      frames: this.frame - 1,
      statsBlocks: 0,
      dropped: null,
      ...(bad.times > 0 || bad.lengths > 0 ? { invalid: { ...bad } } : {}),
      span: this.times.span(),
    };
    return this.cutAt === undefined ? stats : { ...stats, truncated: this.cutAt };
  }

  seekPoints(): readonly ResumePoint[] {
    return this.seek.points();
  }

  /** The next block of frames in file order; null at the end of the file. Throws HoptraceError. */
  next(): SummaryBlock | null {
    for (;;) {
      if (this.pos < this.end) {
        // The record at pos starts at a known offset: a resume point every SEEK_SPACING bytes.
        const at = this.fileOffset - (this.end - this.pos);
        if (this.seek.wants(at) && this.end - this.pos >= RESUME_HEAD_BYTES)
          this.seek.add({
            offset: at,
            framesBefore: this.frame - 1,
            head: this.buf.toString('hex', this.pos, this.pos + RESUME_HEAD_BYTES),
          });
        const [n, next, stop, badTimes, badLengths] = this.addon.summarize(
          this.buf,
          this.pos,
          this.end,
          this.layout,
          this.linktype,
          MAX_SNAPLEN,
          this.ports,
          this.block.recs,
          undefined,
          this.gate?.buf,
        );
        const gate = this.gate;
        const walked = gate === undefined ? n : gate.frames;
        if (walked > 0) {
          const b = this.block;
          noteTimes(this.times, gate, b.words, n);
          b.count = n;
          b.src = this.buf;
          b.firstFrame = this.frame;
          b.frameOf = gate === undefined ? null : gate.frameOf;
          b.skipped = gate === undefined ? 0 : gate.skippedUseful;
          this.frame += walked;
          this.pos = next;
          this.invalid.times += badTimes;
          this.invalid.lengths += badLengths;
          return b;
        }
        if (stop === SUMMARY_STOP.bad) return this.fail();
      }
      if (this.eof) {
        if (this.pos === this.end) {
          this.close();
          return null;
        }
        return this.fail(); // the file ends inside a record
      }
      try {
        this.refill();
      } catch {
        return this.fail(); // a read error: the JS reader meets it too and names it
      }
    }
  }

  /** Keeps the unread bytes (a partial record) at the front and reads more after them. */
  private refill(): void {
    const fd = this.fd;
    if (fd === null) throw new Error('read after close');
    const left = this.end - this.pos;
    if (this.pos > 0) this.buf.copy(this.buf, 0, this.pos, this.end);
    this.pos = 0;
    this.end = left;
    if (left === this.buf.length) {
      // One record larger than the buffer: grow to fit it, unless its caplen is above the bound
      // (summarize stops there first) or the file is too short to hold it (then it is cut); either
      // way fail() reports it as the JS reader does. So a claim is never allocated.
      const le = this.layout === SUMMARY_LAYOUT.pcapLeUs || this.layout === SUMMARY_LAYOUT.pcapLeNs;
      const caplen = le ? this.buf.readUInt32LE(8) : this.buf.readUInt32BE(8);
      const need = 16 + caplen;
      if (caplen > MAX_SNAPLEN || this.fileOffset + (need - left) > fstatSync(fd).size) {
        this.eof = true;
        return;
      }
      const bigger = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
      this.buf.copy(bigger, 0, 0, left);
      this.buf = bigger;
    }
    const got = readSync(fd, this.buf, left, this.buf.length - left, this.fileOffset);
    if (got === 0) this.eof = true;
    this.fileOffset += got;
    this.end = left + got;
  }

  /**
   * Throws the error the JS reader gives for this file (it stops at the same record), keeping
   * where the file ends inside a record when that is the error (stats()).
   */
  private fail(): never {
    this.close();
    const js = openCaptureFile(this.path);
    const frames = js.frames();
    let n = 0;
    try {
      while (frames.next().done !== true) n++;
    } catch (e) {
      this.cutAt = js.stats().truncated;
      throw e;
    }
    throw new Error(
      `summary-file: ${this.path}: the fast path stopped at frame ${this.frame} but the JS reader read ${n} frames without error`,
    );
  }

  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
    giveBack(this.buf.length === this.chunkSize ? this.buf : null, this.block.words.buffer);
  }
}

/** Bytes of an interface table entry (summary.h SUMMARY_NG_IFACE_BYTES). */
const IFACE_BYTES = 24;

/**
 * The addon's interface table (summary.h: link type, mul, div, a flag, if_tsoffset in seconds per
 * interface; div 0 leaves an interface whose scale does not fit 32 bits to the JS parser), kept up
 * to date with a section's interfaces as they are described: appended to, grown by doubling, so a
 * file that interleaves many interface blocks with packets costs linear time. The addon sets an
 * entry's flag once its run walks a packet of that interface (drops are known only when every
 * interface that carried packets recorded them: pcap-file.ts CaptureFileStats).
 */
class InterfaceTable {
  private buf = Buffer.alloc(IFACE_BYTES * 8);
  private of: readonly PcapngInterface[] = [];
  private filled = 0;

  /** The table for `list` (the section's interfaces so far). */
  for(list: readonly PcapngInterface[]): Buffer {
    if (list !== this.of) {
      this.of = list;
      this.filled = 0;
    }
    if (list.length > this.filled) {
      if (IFACE_BYTES * list.length > this.buf.length) {
        const bigger = Buffer.alloc(Math.max(IFACE_BYTES * list.length, 2 * this.buf.length));
        this.buf.copy(bigger, 0, 0, IFACE_BYTES * this.filled);
        this.buf = bigger;
      }
      for (let k = this.filled; k < list.length; k++) {
        const i = list[k];
        const native = i !== undefined && i.mul <= 0xffffffffn && i.div <= 0xffffffffn;
        const at = IFACE_BYTES * k;
        this.buf.writeUInt32LE(native ? i.linktype : 0, at);
        this.buf.writeUInt32LE(native ? Number(i.mul) : 0, at + 4);
        this.buf.writeUInt32LE(native ? Number(i.div) : 0, at + 8);
        this.buf.writeUInt32LE(0, at + 12); // the flag: no packet yet
        // if_tsoffset is a whole number of seconds (an i64 in the file), so this is exact.
        this.buf.writeBigInt64LE(native ? i.offsetNs / 1_000_000_000n : 0n, at + 16);
      }
      this.filled = list.length;
    }
    return this.buf.subarray(0, IFACE_BYTES * list.length);
  }

  /** Whether a run walked a packet of interface `id` of `list` (false for another list). */
  carried(list: readonly PcapngInterface[], id: number): boolean {
    return list === this.of && id < this.filled && this.buf[IFACE_BYTES * id + 12] !== 0;
  }
}

/**
 * An open pcapng file read as summary blocks: runs of Enhanced Packet Blocks through the addon
 * from the PcapngReader's own buffer, every other block through the PcapngReader (see the top).
 */
export class SummaryPcapngReader implements SummaryReader {
  readonly format = 'pcapng' as const;
  private readonly ports: Buffer;
  private readonly block: SummaryBlock;
  /** One frame in the batch layout (u32 caplen | u32 wire length | u64 ts ns | data). */
  private one: Buffer = Buffer.alloc(0);
  private done = false;
  private readonly table = new InterfaceTable();
  private readonly seek = new SeekPoints();
  /** The times of the frames walked (the JS parser yields none of them: ng's own span is empty). */
  private readonly times = new TimeSpanTracker();

  constructor(
    readonly path: string,
    private readonly addon: PcapBatchAddon,
    private readonly ng: PcapngReader,
    readonly decode: DecodeOptions | undefined,
    private readonly gate: SummaryGate | undefined,
  ) {
    this.ports = summaryPortTable(decode);
    this.block = emptyBlock(Buffer.alloc(0), 0);
    // The packets the addon's runs take never pass through the JS parser: it asks the table.
    ng.carriedElsewhere = (list, id) => this.table.carried(list, id);
  }

  stats(): CaptureFileStats {
    const stats = this.ng.stats();
    return stats.span === undefined ? stats : { ...stats, span: this.times.span() };
  }

  seekPoints(): readonly ResumePoint[] {
    return this.seek.points();
  }

  next(): SummaryBlock | null {
    if (this.done) return null;
    const ng = this.ng;
    const b = this.block;
    // The cursor is at a block boundary: a resume point every SEEK_SPACING bytes.
    if (this.seek.wants(ng.offset)) {
      const p = ng.resumePoint();
      if (p !== null) this.seek.add(p);
    }
    b.firstFrame = ng.frameCount + 1;
    const list = ng.interfaces();
    b.byIface = list;
    // A run of Enhanced Packet Blocks, when the cursor is at one (the addon stops at anything else).
    const w = ng.buffered();
    const [n, next, , , longer] = this.addon.summarize(
      w.buf,
      w.start,
      w.end,
      ng.littleEndian ? SUMMARY_LAYOUT.pcapngLe : SUMMARY_LAYOUT.pcapngBe,
      0,
      FAST_EPB_MAX,
      this.ports,
      b.recs,
      this.table.for(list),
      this.gate?.buf,
    );
    const gate = this.gate;
    const walked = gate === undefined ? n : gate.frames;
    if (walked > 0) {
      noteTimes(this.times, gate, b.words, n);
      ng.tookPackets(next - w.start, walked, longer);
      b.count = n;
      b.src = w.buf;
      b.frameOf = gate === undefined ? null : gate.frameOf;
      b.skipped = gate === undefined ? 0 : gate.skippedUseful;
      return b;
    }
    // Any other block, through the JS parser (which throws on a malformed one).
    const p = ng.nextPacket();
    if (p === null) {
      this.close();
      return null;
    }
    const need = 16 + p.caplen;
    if (this.one.length < need) this.one = Buffer.alloc(Math.max(need, 2048));
    const one = this.one;
    one.writeUInt32LE(p.caplen, 0);
    one.writeUInt32LE(p.wireLength, 4);
    const ns = packetTimeNs(p);
    if (p.timed) this.times.add(ns); // a Simple Packet Block has no time: not 1970
    one.writeBigUInt64LE(ns, 8); // 0 … 2^64 − 1: the JS parser refuses any other (checkTime)
    const w2 = ng.buffered();
    w2.buf.copy(one, 16, w2.start + p.at, w2.start + p.at + p.caplen);
    const loneGate = this.gate;
    const [lone] = this.addon.summarize(
      one,
      0,
      need,
      SUMMARY_LAYOUT.batch,
      p.iface.linktype,
      need,
      this.ports,
      b.recs,
      undefined,
      loneGate?.buf,
    );
    if (lone !== 1 && loneGate === undefined)
      throw new Error(`summary-file: ${this.path}: a lone frame gave ${lone} records`);
    if (lone === 1) b.recs.writeUInt32LE(p.ifaceId, R.ifaceId);
    ng.tookPackets(p.len, 1);
    b.count = lone;
    b.src = one;
    b.frameOf = loneGate === undefined ? null : loneGate.frameOf;
    b.skipped = loneGate === undefined ? 0 : loneGate.skippedUseful;
    b.byIface = ng.interfaces(); // a section header read on the way starts a new list
    return b;
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.ng.close();
    giveBack(null, this.block.words.buffer);
  }
}

function layoutOf(magic: number): number | null {
  switch (magic) {
    case 0xa1b2c3d4:
      return SUMMARY_LAYOUT.pcapLeUs;
    case 0xa1b23c4d:
      return SUMMARY_LAYOUT.pcapLeNs;
    case 0xd4c3b2a1:
      return SUMMARY_LAYOUT.pcapBeUs;
    case 0x4d3cb2a1:
      return SUMMARY_LAYOUT.pcapBeNs;
    default:
      return null;
  }
}

/**
 * Opens a capture file for the fast path. Null when the fast path does not apply — the addon is
 * not loadable, the host is big-endian, or the input is a stream read once — and the caller uses
 * the JS reader instead. Header
 * errors are the JS reader's (openCaptureFile runs first). Throws HoptraceError.
 */
export function openSummaryPcap(path: string, opts: SummaryPcapOptions = {}): SummaryReader | null {
  if (endianness() !== 'LE') return null;
  const load = loadNativeAddon();
  if (!load.ok) return null;
  // A stream (standard input, a pipe) is read once, from its start, by the JS reader: the check
  // below would take its first bytes (and, for `-`, close standard input).
  if (isStreamInput(path)) return null;
  // The JS reader checks the header (and throws its errors); a small chunk reads only the header.
  const check = openCaptureFile(path, { chunkSize: 64 });
  const format = check.format;
  check.close();
  if (format === 'pcapng') {
    const ng = openCaptureFile(path, { chunkSize: opts.chunkSize ?? SUMMARY_CHUNK_SIZE });
    if (!(ng instanceof PcapngReader)) {
      ng.close();
      return null; // changed since the check: the JS path reports it
    }
    return new SummaryPcapngReader(path, load.addon, ng, opts.decode, opts.gate);
  }
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null; // gone since the check: the JS path reports it
  }
  try {
    const header = Buffer.alloc(24);
    if (readSync(fd, header, 0, 24, 0) !== 24) throw new Error('short header');
    const magic = header.readUInt32LE(0);
    const layout = layoutOf(magic);
    if (layout === null) throw new Error('magic changed');
    const le = layout === SUMMARY_LAYOUT.pcapLeUs || layout === SUMMARY_LAYOUT.pcapLeNs;
    const linktype = le ? header.readUInt32LE(20) : header.readUInt32BE(20);
    return new SummaryPcapReader(
      path,
      load.addon,
      fd,
      layout,
      linktype,
      opts.chunkSize ?? SUMMARY_CHUNK_SIZE,
      opts.decode,
      opts.gate,
    );
  } catch {
    closeSync(fd);
    return null; // changed since the check: the JS path reports it
  }
}

/** Every frame of an open summary reader as the PacketEvent the JS reader + decoder give. */
export function* summaryEvents(
  reader: SummaryReader,
  ctx: EventContext,
): Generator<PacketEvent, void, undefined> {
  try {
    for (let b = reader.next(); b !== null; b = reader.next()) {
      for (let i = 0; i < b.count; i++) {
        const iface = ifaceAt(b, i);
        const c = iface === undefined ? ctx : { ...ctx, iface };
        yield summaryEvent(b.recs, i, b.src, linktypeAt(b, i), frameAt(b, i), c, reader.decode);
      }
    }
  } finally {
    reader.close();
  }
}

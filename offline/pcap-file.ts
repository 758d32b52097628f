/**
 * Streaming readers for pcap and pcapng capture files.
 *
 * Why not `pcap-parser` (the package named on the design card): it reads classic pcap only, with
 * microsecond magic only (no a1b23c4d nanosecond files), does not check the version or the
 * link-type reserved bits, and knows nothing of pcapng. We need all of those, so this is our own
 * reader over fs.readSync into one reused chunk buffer: memory does not grow with the file, and
 * frames are zero-copy views valid only until the next iteration.
 *
 * Formats: pcap per draft-ietf-opsawg-pcap, pcapng per draft-ietf-opsawg-pcapng; validation
 * follows libpcap's sf-pcap.c / sf-pcapng.c (same files refused).
 */
import { closeSync, fstatSync, openSync } from 'node:fs';
import { addCount, u64Count } from '../common/counters';
import { HoptraceError, isHoptraceError, type ErrorCode } from '../common/errors';
import { TimeSpanTracker, type TimeSpan } from '../common/time-span';
import { ChunkReader, DEFAULT_CHUNK_SIZE } from './chunk-reader';

/** One captured frame. `data` is a view into the reader's buffer: copy it to keep it. */
export interface CaptureFrame {
  /** 1-based frame number in the file. */
  index: number;
  /** Link-type value from the file (FCS bits in the upper 16 bits included). */
  linktype: number;
  ifaceName?: string;
  /** Timestamp, nanoseconds since the Unix epoch. */
  tsNs: bigint;
  caplen: number;
  wireLength: number;
  /** The snapshot length the file gives this frame's capture (pcap header, pcapng IDB; 0: none). */
  snaplen: number;
  data: Uint8Array;
}

/**
 * What a capture file says about its own capture. Classic pcap records nothing; pcapng writers
 * that know (dumpcap, tshark) end each interface with an Interface Statistics Block whose counters
 * run from the start of the capture.
 */
export interface CaptureFileStats {
  /** Frames read so far (every frame once frames() has finished). */
  frames: number;
  /** Interface Statistics Blocks read so far. */
  statsBlocks: number;
  /**
   * Packets the capture lost, as the file recorded them: isb_ifdrop + isb_osdrop of each
   * interface's last statistics block, summed over interfaces and sections; null unless every
   * interface that carried packets has such a block (a classic pcap file, a pcapng writer that
   * does not count, or one that counted for some interfaces only: then dropsPartial).
   */
  dropped: number | null;
  /**
   * pcapng, when some interfaces recorded drops but others that carried packets did not (dropped
   * is then null): those others and what the ones that did recorded.
   */
  dropsPartial?: DropsPartial;
  /**
   * Set when the reading stopped inside the file (FileStopCode: cut, or a damaged record or
   * block; the frames before it were read): where and what.
   */
  truncated?: FileCut;
  /**
   * Records read so far whose header no writer gives — `times`, a classic pcap record's fraction
   * of a second of 10^6 or more (10^9 with the nanosecond magic; a pcapng block has no such
   * field); `lengths`, a classic pcap record or pcapng (Enhanced) Packet Block whose captured
   * length is above its original (wire) length (a Simple Packet Block has no captured length).
   * Both are read as given, as libpcap reads them (tcpdump flags them), and counted here, never
   * refused. Absent when there is none. After a resume, counted from the resume point.
   */
  invalid?: InvalidRecords;
  /**
   * The earliest and latest time of the timed frames read so far (null: none), when the reading
   * began at the file's first frame and yielded every frame; absent when it resumed or skipped
   * further in. Whole once frames() has finished without a cut.
   */
  span?: TimeSpan | null;
}

/**
 * Why a classic pcap record that runs past the end of the file is a damaged length rather than a
 * capture cut short, or null: it claims more than the header's snaplen, and the `left` bytes after
 * its header would hold a whole record of that snaplen (a writer stopped inside a record leaves
 * fewer). Read as damage, as a length above MAX_SNAPLEN is; what follows cannot be found.
 */
export function damagedLength(
  index: number,
  offset: number,
  caplen: number,
  snaplen: number,
  left: number,
): string | null {
  if (snaplen <= 0 || caplen <= snaplen || left <= snaplen) return null;
  return (
    `record ${index} at offset ${offset} claims ${caplen} captured bytes, more than the ` +
    `header's snaplen of ${snaplen}, and the ${left} bytes after it would hold a whole record ` +
    'of that snaplen: its length is damaged, not the capture cut short'
  );
}

/** Records with an invalid time or lengths (CaptureFileStats.invalid). */
export interface InvalidRecords {
  /** Classic pcap: the fraction of a second is ≥ 10^6 µs (≥ 10^9 ns): no clock gives it. */
  times: number;
  /** The captured length exceeds the original (wire) length: no capture gives it. */
  lengths: number;
}

/** The first fraction-of-a-second value a classic pcap record cannot hold, by resolution. */
export const PCAP_FRACTION_LIMIT = { us: 1_000_000, ns: 1_000_000_000 } as const;

/** Drops a pcapng file recorded for some of its interfaces only. */
export interface DropsPartial {
  /** isb_ifdrop + isb_osdrop of the interfaces that recorded them (saturating). */
  recorded: number;
  /**
   * The interfaces that carried packets with no drop count, as "interface 1 (eth1)" (its id and
   * if_name; "of section 2" after the file's first section): the first UNRECORDED_NAMES of them.
   */
  unrecorded: string[];
  /** How many such interfaces in all. */
  count: number;
}

/** Interfaces named in DropsPartial.unrecorded at most (the rest are counted). */
export const UNRECORDED_NAMES = 8;

/**
 * The errors after which the frames before are still good (the reading stops there): the file ends
 * inside a record (FILE_TRUNCATED: still being written, cut by a full disk), or a record or block
 * is damaged (a length no writer gives, a time out of range). Neither format can be resynchronized
 * past a damaged length (no sync marker; tcpdump and tshark stop there too).
 */
export type FileStopCode =
  'FILE_TRUNCATED' | 'FILE_BAD_RECORD' | 'FILE_BAD_BLOCK' | 'FILE_TIME_RANGE';

/** Where the reading of a file stopped after good frames, and why (FileStopCode). */
export interface FileCut {
  /** File offset of the record (pcapng: block) that is cut or damaged. */
  offset: number;
  /** What was cut or damaged, as the error says it. */
  detail: string;
  code: FileStopCode;
}

/** Whether `e` stopped a reader after good frames (FileStopCode): the frames before it count. */
export function isFileStop(e: unknown): e is HoptraceError & { code: FileStopCode } {
  return (
    isHoptraceError(e) &&
    (e.code === 'FILE_TRUNCATED' ||
      e.code === 'FILE_BAD_RECORD' ||
      e.code === 'FILE_BAD_BLOCK' ||
      e.code === 'FILE_TIME_RANGE')
  );
}

export interface CaptureFileReader {
  readonly format: 'pcap' | 'pcapng';
  readonly path: string;
  /**
   * True when the reader started at OpenCaptureOptions.resume; false when it started at the
   * file's first frame (no resume point given, or the file no longer matched it).
   */
  readonly resumed: boolean;
  /** Frames in file order; throws HoptraceError (FILE_*) when the file turns out malformed. */
  frames(): Generator<CaptureFrame, void, undefined>;
  /**
   * From now on frames() reads past the frames numbered below `index` without yielding them:
   * each is checked as ever (a malformed record still throws) but builds no CaptureFrame, for a
   * reader that wants one frame further on (offline/identity-scan.ts).
   */
  skipUntil(index: number): void;
  /** What the file recorded about its capture, from what has been read (all of it after frames()). */
  stats(): CaptureFileStats;
  /** Releases the file (also done when `frames()` finishes or is abandoned with return()). */
  close(): void;
}

export interface OpenCaptureOptions {
  /** Read buffer size in bytes (default 1 MiB); tests use tiny chunks to cross boundaries. */
  chunkSize?: number;
  /**
   * Start at this point of an earlier pass over the same file (offline/seek-points.ts) instead of
   * the first frame, when the 16 bytes there are still the ones that pass saw; otherwise (the file
   * changed, or it is standard input) read from the start as without it. After a resume, frames
   * keep their numbers in the file and stats() counts from the resume point.
   */
  resume?: ResumePoint | undefined;
}

/**
 * Where a reader can start in the middle of a file: a record (pcap) or block (pcapng) boundary,
 * the frames before it, the bytes found there, and for pcapng the section's state at that point.
 */
export interface ResumePoint {
  /** File offset of a record (pcap) or block (pcapng). */
  offset: number;
  /** Frames in the file before that offset. */
  framesBefore: number;
  /** The first RESUME_HEAD_BYTES bytes at the offset, hex: the check that the file is the same. */
  head: string;
  /**
   * pcapng: the section's byte order and its interfaces — the section's one list, shared by all
   * of its points (a section only ever appends to it), of which the first `count` were described
   * before the offset. So a file that keeps describing interfaces costs one list, not a copy per
   * point. `section`: the section's number in the file (1 when absent), for naming interfaces.
   */
  ng?: { le: boolean; ifaces: readonly PcapngInterface[]; count: number; section?: number };
}

/** Bytes of a resume point's head: a pcap record header; a pcapng block's first four words. */
export const RESUME_HEAD_BYTES = 16;

export const HINT_FORMAT = 'give hoptrace a pcap or pcapng file, e.g. from tcpdump -w';
export const HINT_DAMAGED =
  'the file is damaged; re-capture it, or check it with tshark -r / tcpdump -r';
export const HINT_CUT =
  'the capture was cut short (still being written, or the disk filled); re-copy it';

/**
 * The most captured bytes a record may claim: libpcap's MAXIMUM_SNAPLEN. libpcap refuses a record
 * above max_snaplen_for_dlt(link type) as a bad dump file whatever snaplen the header gives (that
 * is MAXIMUM_SNAPLEN for every link type hoptrace decodes; only D-Bus, EBHSCR and USBPcap allow
 * more), so a header's snaplen of 0xffffffff does not raise it and no record costs more memory.
 */
export const MAX_SNAPLEN = 262144;
/** The longest pcapng block read: libpcap's INITIAL_MAX_BLOCKSIZE (sf-pcapng.c), 16 MiB. */
export const MAX_BLOCK = 16 * 1024 * 1024;

/** libpcap's pcapint_adjust_snapshot: a snaplen of 0 or above the maximum means the maximum. */
function snapshotOf(snaplen: number): number {
  return snaplen === 0 || snaplen > MAX_SNAPLEN ? MAX_SNAPLEN : snaplen;
}

/** pcap link-type field: bits 16-25 are reserved and must be zero (libpcap LT_RESERVED1). */
const LT_RESERVED1 = 0x03ff0000;

function fail(code: ErrorCode, path: string, detail: string, hint: string): never {
  throw new HoptraceError(code, detail, { where: path, hint });
}

/**
 * Opens a pcap or pcapng file and checks its header; `-` is standard input (read as a stream,
 * like any file here). Throws HoptraceError (FILE_*).
 */
export function openCaptureFile(path: string, opts: OpenCaptureOptions = {}): CaptureFileReader {
  let fd: number;
  try {
    fd = path === '-' ? 0 : openSync(path, 'r');
    // A directory opens, then fails its first read with EISDIR: say so here, plainly.
    if (fstatSync(fd).isDirectory()) {
      release(fd);
      throw new Error('it is a directory, not a capture file');
    }
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return fail(
      'FILE_NOT_FOUND',
      path,
      `cannot open: ${why}`,
      'check the path and read permission',
    );
  }
  try {
    const r = new ChunkReader(fd, opts.chunkSize ?? DEFAULT_CHUNK_SIZE);
    if (!r.fill(4)) fail('FILE_TOO_SHORT', path, `only ${r.available} bytes`, HINT_FORMAT);
    const magic = r.u32(0, true);
    const reader =
      magic === 0x0a0d0d0a ? new PcapngReader(path, fd, r) : new PcapReader(path, fd, r, magic);
    if (opts.resume !== undefined && path !== '-') reader.resumeAt(opts.resume);
    return reader;
  } catch (e) {
    release(fd);
    throw e;
  }
}

/**
 * Closes a file the reader opened; standard input (fd 0) stays open: closed, the next open()
 * would be given fd 0, and libuv aborts the process when it closes a handle on fd 0–2
 * (`uv__close: Assertion fd > STDERR_FILENO`, seen once in the unit suite).
 */
function release(fd: number): void {
  if (fd !== 0) closeSync(fd);
}

abstract class BaseReader {
  private closed = false;
  resumed = false;
  /** Frames yielded so far. */
  protected framesRead = 0;
  /** Where the reading stopped inside the file (cut or damaged), once it has. */
  protected cutAt: FileCut | undefined;
  /** Frames numbered below this are read past, not yielded (skipUntil). */
  protected skipBelow = 0;
  /** The times of the frames yielded (timed ones). */
  protected readonly times = new TimeSpanTracker();
  /** Records read with an invalid time or lengths (CaptureFileStats.invalid). */
  protected readonly invalid: InvalidRecords = { times: 0, lengths: 0 };
  /** Some frame was read past without being yielded (skipUntil): the span is not the file's. */
  private skippedSome = false;
  constructor(
    readonly path: string,
    private readonly fd: number,
  ) {}

  close(): void {
    if (this.closed) return;
    this.closed = true;
    release(this.fd);
  }

  *frames(): Generator<CaptureFrame, void, undefined> {
    try {
      yield* this.read();
    } catch (e) {
      this.readFailed(e);
    } finally {
      this.close();
    }
  }

  skipUntil(index: number): void {
    this.skipBelow = index;
    if (index > 1) this.skippedSome = true;
  }

  /** Rethrows a HoptraceError; anything else (a failed read) as FILE_NOT_FOUND. */
  protected readFailed(e: unknown): never {
    if (isHoptraceError(e)) throw e;
    const why = e instanceof Error ? e.message : String(e);
    return fail('FILE_NOT_FOUND', this.path, `read failed: ${why}`, 'check the file is readable');
  }

  /** FILE_TRUNCATED: the file ends inside the record at `offset`; stats() keeps where. */
  protected cut(offset: number, detail: string): never {
    return this.stop('FILE_TRUNCATED', offset, detail, HINT_CUT);
  }

  /** Throws a FileStopCode error for the record or block at `offset`; stats() keeps where. */
  protected stop(code: FileStopCode, offset: number, detail: string, hint: string): never {
    this.cutAt = { offset, detail, code };
    return fail(code, this.path, detail, hint);
  }

  /**
   * The stats with the cut, if the file ended inside a record, and the frames' span when every
   * frame from the first was yielded.
   */
  protected withCut(stats: CaptureFileStats): CaptureFileStats {
    const whole = !this.resumed && !this.skippedSome;
    const spanned = whole ? { ...stats, span: this.times.span() } : stats;
    const bad = this.invalid;
    const flagged =
      bad.times > 0 || bad.lengths > 0 ? { ...spanned, invalid: { ...bad } } : spanned;
    return this.cutAt === undefined ? flagged : { ...flagged, truncated: this.cutAt };
  }

  stats(): CaptureFileStats {
    return this.withCut({ frames: this.framesRead, statsBlocks: 0, dropped: null });
  }

  protected abstract read(): Generator<CaptureFrame, void, undefined>;

  /** Moves to `p` when the file still holds its head there (see OpenCaptureOptions.resume). */
  abstract resumeAt(p: ResumePoint): void;

  /**
   * Seeks `r` to `p` when the bytes there are p's head; else leaves the cursor where it was.
   * True when it moved.
   */
  protected seekTo(r: ChunkReader, p: ResumePoint): boolean {
    const back = r.offset;
    if (p.head.length !== 2 * RESUME_HEAD_BYTES || p.offset < back) return false;
    r.seek(p.offset);
    let head = '';
    try {
      if (r.fill(RESUME_HEAD_BYTES))
        head = Buffer.from(r.view(0, RESUME_HEAD_BYTES)).toString('hex');
    } catch {
      // A read that fails here fails again from the start, where the reader names it.
    }
    if (head === p.head) {
      this.framesRead = p.framesBefore;
      this.resumed = true;
      return true;
    }
    r.seek(back);
    return false;
  }
}

/*
 * pcap file header (24 bytes) and record header (16 bytes), in the writer's byte order:
 * magic a1b2c3d4 (µs) / a1b23c4d (ns) | version major 2, minor 4 | reserved (8) | snaplen |
 * link type (+ FCS bits 26-31) ; record: ts sec | ts µs or ns | caplen | wire length | data
 */
class PcapReader extends BaseReader {
  readonly format = 'pcap' as const;
  private readonly le: boolean;
  private readonly nanos: boolean;
  private readonly snaplen: number;
  private readonly linktype: number;

  constructor(
    path: string,
    fd: number,
    private readonly r: ChunkReader,
    magic: number,
  ) {
    super(path, fd);
    if (magic === 0xa1b2c3d4 || magic === 0xa1b23c4d) this.le = true;
    else if (magic === 0xd4c3b2a1 || magic === 0x4d3cb2a1) this.le = false;
    else
      fail(
        'FILE_BAD_MAGIC',
        path,
        `unknown magic 0x${magic.toString(16).padStart(8, '0')}`,
        HINT_FORMAT,
      );
    this.nanos = magic === 0xa1b23c4d || magic === 0x4d3cb2a1;
    if (!r.fill(24))
      fail('FILE_TOO_SHORT', path, `${r.available} bytes, a pcap header needs 24`, HINT_FORMAT);
    const major = r.u16(4, this.le);
    const minor = r.u16(6, this.le);
    // libpcap refuses major < 2 ("archaic") and anything newer than 2.4; 2.3 differs only in
    // old writers' caplen/len order, which we do not need to repair.
    if (major !== 2 || minor > 4 || minor < 3) {
      fail(
        'FILE_BAD_VERSION',
        path,
        `pcap version ${major}.${minor}`,
        'only pcap 2.3 and 2.4 files are read, as libpcap reads them; rewrite with editcap -F pcap',
      );
    }
    this.snaplen = r.u32(16, this.le);
    const field = r.u32(20, this.le);
    if ((field & LT_RESERVED1) !== 0) {
      const bits = `0x${(field & LT_RESERVED1).toString(16).padStart(8, '0')}`;
      fail('FILE_BAD_LINKTYPE_FIELD', path, `link-type reserved bits set (${bits})`, HINT_DAMAGED);
    }
    this.linktype = field;
    r.skip(24);
  }

  resumeAt(p: ResumePoint): void {
    if (p.ng === undefined) this.seekTo(this.r, p);
  }

  protected *read(): Generator<CaptureFrame, void, undefined> {
    const r = this.r;
    const le = this.le;
    const unit = this.nanos ? 1n : 1000n;
    const fracLimit = this.nanos ? PCAP_FRACTION_LIMIT.ns : PCAP_FRACTION_LIMIT.us;
    for (let index = this.framesRead + 1; ; index++) {
      if (!r.fill(16)) {
        if (r.available === 0) return;
        this.cut(
          r.offset,
          `record ${index} header cut after ${r.available} bytes at offset ${r.offset}`,
        );
      }
      const caplen = r.u32(8, le);
      // Checked before a byte of the record is buffered, so a claim never costs memory.
      if (caplen > MAX_SNAPLEN) {
        this.stop(
          'FILE_BAD_RECORD',
          r.offset,
          `record ${index} at offset ${r.offset} claims ${caplen} captured bytes, above ` +
            `libpcap's maximum of ${MAX_SNAPLEN} (the header's snaplen is ${this.snaplen})`,
          HINT_DAMAGED,
        );
      }
      if (!r.fill(16 + caplen)) {
        const left = r.available - 16;
        const damaged = damagedLength(index, r.offset, caplen, this.snaplen, left);
        if (damaged !== null) this.stop('FILE_BAD_RECORD', r.offset, damaged, HINT_DAMAGED);
        this.cut(
          r.offset,
          `record ${index} at offset ${r.offset} needs ${caplen} bytes, the file has ${left}`,
        );
      }
      this.framesRead = index;
      // Read as given, as libpcap does; counted, as tcpdump flags them (summary.c counts alike).
      const frac = r.u32(4, le);
      const wireLength = r.u32(12, le);
      if (frac >= fracLimit) this.invalid.times++;
      if (caplen > wireLength) this.invalid.lengths++;
      if (index < this.skipBelow) {
        r.skip(16 + caplen);
        continue;
      }
      const sec = r.u32(0, le);
      const tsNs = BigInt(sec) * 1_000_000_000n + BigInt(frac) * unit;
      this.times.add(tsNs);
      yield {
        index,
        linktype: this.linktype,
        tsNs,
        caplen,
        wireLength,
        snaplen: this.snaplen,
        data: r.view(16, caplen),
      };
      r.skip(16 + caplen);
    }
  }
}

/** A pcapng interface (IDB) as the reader keeps it. */
export interface PcapngInterface {
  linktype: number;
  snaplen: number;
  name: string | undefined;
  /** Timestamp units → ns: ts * mul / div + offsetNs. */
  mul: bigint;
  div: bigint;
  /** if_tsoffset (pcapng §4.2, option 14) in ns: seconds added to every time of the interface. */
  offsetNs: bigint;
}

const BT_SHB = 0x0a0d0d0a;
const BT_IDB = 1;
const BT_PB = 2;
const BT_SPB = 3;
const BT_ISB = 5;
const BT_EPB = 6;
const BOM = 0x1a2b3c4d;
/** ISB options (pcapng §4.6): packets dropped by the interface, by the OS (u64 each). */
const ISB_IFDROP = 5;
const ISB_OSDROP = 7;

/** IDB options (pcapng §4.2): if_name, if_tsresol, if_tsoffset (a signed 64-bit count of seconds). */
const IF_NAME = 2;
const IF_TSRESOL = 9;
const IF_TSOFFSET = 14;
/** Times hoptrace carries (a u64 of ns: PacketEvent, summary records, the wire's fixed64). */
const TIME_LIMIT_NS = 1n << 64n;

/** if_tsresol (pcapng §4.2): high bit clear = 10^-n s, set = 2^-n s. Default 10^-6. */
function resolution(v: number): { mul: bigint; div: bigint } {
  const n = v & 0x7f;
  if ((v & 0x80) !== 0) return { mul: 1_000_000_000n, div: 1n << BigInt(n) };
  return n <= 9 ? { mul: 10n ** BigInt(9 - n), div: 1n } : { mul: 1n, div: 10n ** BigInt(n - 9) };
}

/** A packet block at the reader's cursor: its frame at `at`, the block `len` bytes long. */
export interface PcapngPacket {
  /** The section's interface `ifaceId` (interfaces()[ifaceId]). */
  iface: PcapngInterface;
  ifaceId: number;
  /** Timestamp in the interface's units (packetTimeNs gives ns). */
  ts: bigint;
  /** False for a Simple Packet Block, which has no time: 0, with no if_tsoffset added. */
  timed: boolean;
  caplen: number;
  wireLength: number;
  at: number;
  len: number;
}

/**
 * A packet's time in ns since the Unix epoch: its units scaled by if_tsresol, plus if_tsoffset. A
 * Simple Packet Block has no time (0), and no offset is added to it.
 */
export function packetTimeNs(p: PcapngPacket): bigint {
  if (!p.timed) return 0n;
  const i = p.iface;
  return (p.ts * i.mul) / i.div + i.offsetNs;
}

/** What PcapngReader counts of the drops of the sections read (see CaptureFileStats). */
interface SectionDrops {
  drops: number;
  /** Some interface recorded a drop count. */
  recorded: boolean;
  /** Interfaces that carried packets but recorded none: the first names, and how many. */
  unrecorded: string[];
  count: number;
}

/*
 * pcapng block: type (32) | total length (32) | body | total length (32), lengths multiple of 4.
 * SHB body: byte-order magic 1a2b3c4d | major 1 | minor | section length (64) | options.
 * IDB: link type (16) | reserved (16) | snaplen | options (if_name 2, if_tsresol 9, if_tsoffset 14).
 * EPB: interface id | ts high | ts low | caplen | orig len | data (padded) | options.
 * SPB: orig len | data.  Option: code (16) | length (16) | value padded to 32 bits; code 0 ends.
 * ISB: interface id | ts high | ts low | options (isb_ifdrop 5, isb_osdrop 7: u64 counters since
 *      the capture started, so the last block of an interface holds its totals).
 */
export class PcapngReader extends BaseReader {
  readonly format = 'pcapng' as const;
  private le = true;
  private ifaces: PcapngInterface[] = [];
  private statsBlocks = 0;
  /** This section's number in the file, from 1. */
  private section = 0;
  /** This section's drops by interface id, from its latest statistics block that had any. */
  private sectionDrops = new Map<number, number>();
  /** This section's interfaces (by id) that carried a packet this parser read. */
  private carried: boolean[] = [];
  /** The drops of the sections before this one. */
  private earlier: SectionDrops = { drops: 0, recorded: false, unrecorded: [], count: 0 };
  /**
   * Whether interface `id` of the section's interface list `list` carried a packet that the fast
   * path took from this reader's buffer (summary-file.ts: its addon marks them in its table).
   * Asked when a section ends and by stats().
   */
  carriedElsewhere: ((list: readonly PcapngInterface[], id: number) => boolean) | undefined;

  constructor(
    path: string,
    fd: number,
    private readonly r: ChunkReader,
  ) {
    super(path, fd);
    this.readSHB();
  }

  resumeAt(p: ResumePoint): void {
    const ng = p.ng;
    if (ng === undefined || ng.count > ng.ifaces.length || !this.seekTo(this.r, p)) return;
    this.le = ng.le;
    this.ifaces = ng.ifaces.slice(0, ng.count);
    this.section = ng.section ?? 1;
  }

  /**
   * Where a reader could start at the cursor (a block boundary), or null when fewer than
   * RESUME_HEAD_BYTES bytes are buffered there. The interfaces are the section's own list (shared,
   * see ResumePoint.ng), never a copy.
   */
  resumePoint(): ResumePoint | null {
    const r = this.r;
    if (r.available < RESUME_HEAD_BYTES) return null;
    return {
      offset: r.offset,
      framesBefore: this.framesRead,
      head: Buffer.from(r.view(0, RESUME_HEAD_BYTES)).toString('hex'),
      ng: {
        le: this.le,
        ifaces: this.ifaces,
        count: this.ifaces.length,
        section: this.section,
      },
    };
  }

  private bad(detail: string): never {
    return this.stop(
      'FILE_BAD_BLOCK',
      this.r.offset,
      `${detail} (block at offset ${this.r.offset})`,
      HINT_DAMAGED,
    );
  }

  /** Checks the block at the cursor and buffers it whole; returns its total length. */
  private loadBlock(minLength: number): number {
    const len = this.blockLength(minLength);
    this.fillBlock(len);
    return len;
  }

  /** The total length of the block at the cursor (its first 8 bytes buffered), checked. */
  private blockLength(minLength: number): number {
    const len = this.r.u32(4, this.le);
    if (len > MAX_BLOCK) this.bad(`block length ${len} is above libpcap's maximum of ${MAX_BLOCK}`);
    if (len < minLength || len % 4 !== 0) this.bad(`bad block length ${len}`);
    return len;
  }

  /** Buffers the block at the cursor, `len` bytes, and checks its trailer. */
  private fillBlock(len: number): void {
    const r = this.r;
    if (!r.fill(len)) {
      this.cut(
        r.offset,
        `block at offset ${r.offset} needs ${len} bytes, the file has ${r.available}`,
      );
    }
    const trailer = r.u32(len - 4, this.le);
    if (trailer !== len)
      this.bad(`block length ${len} in the header but ${trailer} in the trailer`);
  }

  /**
   * A packet block's captured length, read before the block is buffered: one above MAX_SNAPLEN
   * is refused (libpcap refuses any above the interface's snapshot, which is at most that), so
   * an Enhanced Packet Block never costs more than its block length allows.
   */
  private checkCaplen(len: number): void {
    const r = this.r;
    if (len < 24 || !r.fill(24)) return; // too short or cut: the block checks say so
    const caplen = r.u32(20, this.le);
    if (caplen > MAX_SNAPLEN) {
      this.bad(
        `packet ${this.framesRead + 1} claims ${caplen} captured bytes, above libpcap's maximum of ${MAX_SNAPLEN}`,
      );
    }
  }

  /**
   * Walks options in [from, to) of the loaded block, calling `each` with (code, value offset,
   * length). An option that runs past the block is an error, or with `lenient` the end.
   */
  private options(
    from: number,
    to: number,
    each: (code: number, at: number, len: number) => void,
    lenient = false,
  ): void {
    const r = this.r;
    let o = from;
    while (o + 4 <= to) {
      const code = r.u16(o, this.le);
      const len = r.u16(o + 2, this.le);
      if (code === 0) return;
      if (o + 4 + len > to) {
        if (lenient) return;
        this.bad(`option ${code} of length ${len} runs past its block`);
      }
      each(code, o + 4, len);
      o += 4 + ((len + 3) & ~3);
    }
  }

  private readSHB(): void {
    const r = this.r;
    if (!r.fill(12))
      fail(
        'FILE_TOO_SHORT',
        this.path,
        `${r.available} bytes, a pcapng section header needs 28`,
        HINT_FORMAT,
      );
    const bom = r.u32(8, true);
    if (bom === BOM) this.le = true;
    else if (bom === 0x4d3c2b1a) this.le = false;
    else this.bad(`unknown byte-order magic 0x${bom.toString(16)}`);
    const len = this.loadBlock(28);
    const major = r.u16(12, this.le);
    if (major !== 1) {
      fail(
        'FILE_BAD_VERSION',
        this.path,
        `pcapng version ${major}.${r.u16(14, this.le)}`,
        'only pcapng 1.x files are read',
      );
    }
    this.options(24, len - 4, () => undefined);
    // A new section numbers its interfaces afresh: keep what the last one counted.
    this.earlier = this.dropsSoFar();
    this.ifaces = [];
    this.sectionDrops.clear();
    this.carried = [];
    this.section++;
    r.skip(len);
  }

  private readIDB(len: number): void {
    const r = this.r;
    if (len < 20) this.bad(`interface block too short (${len})`);
    const iface: PcapngInterface = {
      linktype: r.u16(8, this.le),
      snaplen: r.u32(12, this.le),
      name: undefined,
      mul: 1000n,
      div: 1n,
      offsetNs: 0n,
    };
    let offsets = 0;
    this.options(16, len - 4, (code, at, olen) => {
      if (code === IF_NAME)
        iface.name = Buffer.from(r.view(at, olen)).toString('utf8').replace(/\0+$/, '');
      else if (code === IF_TSRESOL && olen >= 1) Object.assign(iface, resolution(r.u8(at)));
      else if (code === IF_TSOFFSET) {
        // libpcap (sf-pcapng.c) refuses these two; so does this reader.
        if (olen !== 8) this.bad(`if_tsoffset option of length ${olen}, not 8`);
        if (++offsets > 1) this.bad('more than one if_tsoffset option');
        const hi = r.u32(this.le ? at + 4 : at, this.le);
        const lo = r.u32(this.le ? at : at + 4, this.le);
        iface.offsetNs = BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)) * 1_000_000_000n;
      }
    });
    this.ifaces.push(iface);
  }

  /**
   * An Interface Statistics Block. libpcap skips these, so a block too short to hold its header
   * is ignored and options stop at the first that runs past the block, rather than refusing a
   * file tcpdump opens; the block's length fields still have to be sound (loadBlock).
   */
  private readISB(len: number): void {
    if (len < 24) return;
    const r = this.r;
    const id = r.u32(8, this.le);
    const drops = { sum: 0, counted: false };
    this.options(
      20,
      len - 4,
      (code, at, olen) => {
        if ((code !== ISB_IFDROP && code !== ISB_OSDROP) || olen !== 8) return;
        const hi = r.u32(this.le ? at + 4 : at, this.le);
        const lo = r.u32(this.le ? at : at + 4, this.le);
        // Saturated, as every count hoptrace carries (common/counters.ts): never a rounded double.
        drops.sum = addCount(drops.sum, u64Count(hi, lo));
        drops.counted = true;
      },
      true,
    );
    this.statsBlocks++;
    if (!drops.counted) return;
    this.sectionDrops.set(id, drops.sum);
  }

  /**
   * The drops of the sections so far, this one included: the counts recorded, and the interfaces
   * that carried packets but no count (an interface without packets needs none). O(interfaces of
   * this section).
   */
  private dropsSoFar(): SectionDrops {
    const out = { ...this.earlier, unrecorded: [...this.earlier.unrecorded] };
    for (const n of this.sectionDrops.values()) out.drops = addCount(out.drops, n);
    if (this.sectionDrops.size > 0) out.recorded = true;
    const list = this.ifaces;
    for (let id = 0; id < list.length; id++) {
      if (this.sectionDrops.has(id)) continue;
      if (this.carried[id] !== true && this.carriedElsewhere?.(list, id) !== true) continue;
      out.count++;
      if (out.unrecorded.length >= UNRECORDED_NAMES) continue;
      const name = list[id]?.name;
      out.unrecorded.push(
        `interface ${id}${name === undefined || name === '' ? '' : ` (${name})`}` +
          (this.section > 1 ? ` of section ${this.section}` : ''),
      );
    }
    return out;
  }

  override stats(): CaptureFileStats {
    const d = this.dropsSoFar();
    // Known only when every interface that carried packets recorded its drops.
    const stats: CaptureFileStats = {
      frames: this.framesRead,
      statsBlocks: this.statsBlocks,
      dropped: d.recorded && d.count === 0 ? d.drops : null,
    };
    if (d.recorded && d.count > 0)
      stats.dropsPartial = { recorded: d.drops, unrecorded: d.unrecorded, count: d.count };
    return this.withCut(stats);
  }

  /** Frames read so far (stats().frames, without the work of the drop counts). */
  get frameCount(): number {
    return this.framesRead;
  }

  private iface(id: number): PcapngInterface {
    const i = this.ifaces[id];
    if (i === undefined)
      return this.bad(
        `packet refers to interface ${id}, but only ${this.ifaces.length} are described`,
      );
    return i;
  }

  private frame(index: number, p: PcapngPacket): CaptureFrame {
    const i = p.iface;
    const tsNs = packetTimeNs(p);
    if (p.timed) this.times.add(tsNs); // a Simple Packet Block has no time: not 1970
    const f: CaptureFrame = {
      index,
      linktype: i.linktype,
      tsNs,
      caplen: p.caplen,
      wireLength: p.wireLength,
      snaplen: i.snaplen,
      data: this.r.view(p.at, p.caplen),
    };
    if (i.name !== undefined) f.ifaceName = i.name;
    return f;
  }

  protected *read(): Generator<CaptureFrame, void, undefined> {
    for (let p = this.packetBlock(); p !== null; p = this.packetBlock()) {
      this.framesRead++;
      if (this.framesRead >= this.skipBelow) yield this.frame(this.framesRead, p);
      this.r.skip(p.len);
    }
  }

  /*
   * The native fast path (summary-file.ts) reads runs of Enhanced Packet Blocks from this reader's
   * buffer itself and hands every other block to nextPacket, so both paths share one parser of
   * sections, interfaces and statistics, and one set of errors.
   */

  /** File offset of the cursor (a block boundary between blocks). */
  get offset(): number {
    return this.r.offset;
  }

  /** The section's byte order. */
  get littleEndian(): boolean {
    return this.le;
  }

  /**
   * The section's interfaces by id, as described so far: the same array while the section lasts
   * (a new interface is appended), a new one for a new section.
   */
  interfaces(): readonly PcapngInterface[] {
    return this.ifaces;
  }

  /** The buffered bytes from the cursor: buf[start, end), valid until the reader moves on. */
  buffered(): { buf: Buffer; start: number; end: number } {
    return this.r.window();
  }

  /**
   * The next packet block, loaded at the cursor, after reading the blocks before it; null at the
   * end of the file. Throws the errors frames() throws. `tookPackets(p.len, 1)` moves past it.
   */
  nextPacket(): PcapngPacket | null {
    try {
      return this.packetBlock();
    } catch (e) {
      this.close();
      return this.readFailed(e);
    }
  }

  /**
   * Moves the cursor `bytes` on, past `frames` packet blocks read outside frames(), of which
   * `longer` had a captured length above the original length (counted as packetBlock counts).
   */
  tookPackets(bytes: number, frames: number, longer = 0): void {
    this.r.skip(bytes);
    this.framesRead += frames;
    this.invalid.lengths += longer;
  }

  /**
   * FILE_TIME_RANGE when a packet's time (its timestamp in the interface's if_tsresol units, plus
   * its if_tsoffset) is out of what hoptrace carries (0 to 2^64 − 1 ns): before 1970 or after July
   * 2554. The summary records and the wire hold a u64, so such a time would wrap silently (tcpdump
   * refuses such a file too).
   */
  private checkTime(p: PcapngPacket): void {
    const ns = packetTimeNs(p);
    if (ns >= 0n && ns < TIME_LIMIT_NS) return;
    const offset = p.iface.offsetNs / 1_000_000_000n;
    const withOffset = offset === 0n ? '' : ` with the interface's if_tsoffset of ${offset} s`;
    this.stop(
      'FILE_TIME_RANGE',
      this.r.offset,
      `packet ${this.framesRead + 1} of interface ${p.ifaceId} (block at offset ${this.r.offset}): ` +
        `its time${withOffset} is ${ns} ns since 1970, ` +
        `${ns < 0n ? 'before 1970' : 'past 2^64 ns (July 2554)'}, outside what hoptrace carries`,
      offset === 0n
        ? "the packet's timestamp or its interface's if_tsresol (option 9 of its description " +
            'block) is damaged'
        : "the interface's if_tsoffset (option 14 of its description block) does not fit its " +
            "packets' times: the file is damaged, or its writer set a wrong offset",
    );
  }

  private packetBlock(): PcapngPacket | null {
    const r = this.r;
    for (;;) {
      if (!r.fill(8)) {
        if (r.available === 0) return null;
        this.cut(r.offset, `block header cut after ${r.available} bytes at offset ${r.offset}`);
      }
      const type = r.u32(0, this.le);
      if (type === BT_SHB) {
        this.readSHB();
        continue;
      }
      const len = this.blockLength(12);
      if (type === BT_EPB || type === BT_PB) this.checkCaplen(len);
      this.fillBlock(len);
      if (type === BT_IDB) {
        this.readIDB(len);
      } else if (type === BT_EPB || type === BT_PB) {
        if (len < 32) this.bad(`packet block too short (${len})`);
        const epb = type === BT_EPB;
        const ifaceId = epb ? r.u32(8, this.le) : r.u16(8, this.le);
        const iface = this.iface(ifaceId);
        this.carried[ifaceId] = true;
        const ts = (BigInt(r.u32(12, this.le)) << 32n) | BigInt(r.u32(16, this.le));
        const caplen = r.u32(20, this.le);
        const wireLength = r.u32(24, this.le);
        if (28 + caplen > len - 4) this.bad(`captured length ${caplen} runs past its block`);
        const p = { iface, ifaceId, ts, timed: true, caplen, wireLength, at: 28, len };
        this.checkTime(p);
        // Read as given, as libpcap does; counted, as tcpdump flags it (summary.c counts alike).
        if (caplen > wireLength) this.invalid.lengths++;
        return p;
      } else if (type === BT_SPB) {
        if (len < 16) this.bad(`simple packet block too short (${len})`);
        const iface = this.iface(0);
        this.carried[0] = true;
        const wireLength = r.u32(8, this.le);
        // No captured length in the block: the packet's, cut at the interface's snapshot.
        const caplen = Math.min(wireLength, len - 16, snapshotOf(iface.snaplen));
        return { iface, ifaceId: 0, ts: 0n, timed: false, caplen, wireLength, at: 12, len };
      } else if (type === BT_ISB) {
        this.readISB(len);
      }
      // Other blocks (name resolution, decryption secrets, custom, ...) carry nothing we need.
      r.skip(len);
    }
  }
}

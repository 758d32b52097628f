/**
 * Frame retention inside a capture source: every frame the capture numbers is appended, cut to a
 * retention snaplen, to a classic pcap file on an fd the agent opened (retention-store.ts), so
 * that the collector can ask for the real bytes of the matched connection once its verdict is
 * known. The native source does this in C (native/pcap-batch/src/retain.c);
 * PcapRetentionWriter is the same writer for the `cap` fallback and the file replay.
 *
 * Headers only unless the capture asked for the payload (RetentionTarget.payload, the collector's
 * evidencePayload): each frame is kept up to the end of its innermost transport header — the
 * reference decoder's payloadOffset, the cut evidence.pcapng makes — and never past the
 * retention snaplen; a frame that carries no IP packet (ARP) to the snaplen. Without that, the
 * first 256 bytes of a plain TCP request hold ~190 bytes of its payload (the request line,
 * Authorization and Cookie headers), kept on the node nobody asked for. The record's orig_len
 * stays the wire length, so a reader sees the cut.
 *
 * Both keep one rule that the reader relies on: retention only ever stops, never resumes. The
 * first frame that does not fit the bound (or whose write fails) ends it, and it and every later
 * frame are counted as dropped; so the file holds frames 1..retained, record N being frame N
 * (the same 1-based numbering the events carry).
 */
import { writeSync } from 'node:fs';
import { payloadOffset, type DecodeOptions } from '../../core/decode/frame';

/** Bytes kept of each frame at most by default: every header of the stacks the decoder follows in
 * the common cases (Ethernet + outer IPv6 + UDP + Geneve/VXLAN + inner Ethernet + IPv4/IPv6 + TCP
 * with options is ~200 bytes); headers only, a frame is cut before this where its payload starts. */
export const RETENTION_DEFAULT_SNAPLEN = 256;
/** The bound of one capture's retention file (header included). */
export const RETENTION_DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
/** The largest frame libpcap captures (offline/pcap-file.ts MAX_SNAPLEN). */
export const RETENTION_MAX_SNAPLEN = 262144;

/** Where a capture source retains its frames: an fd open for writing, and the bounds. */
export interface RetentionTarget {
  fd: number;
  /** Bytes kept of each frame at most (64..262144; never more than the capture's snaplen). */
  snaplen: number;
  /** The file's bound in bytes, its 24-byte header included. */
  maxBytes: number;
  /**
   * Keep frames whole (up to `snaplen`): the capture asked for the payload (evidencePayload).
   * Absent or false: headers only, each frame cut where its innermost transport header ends.
   */
  payload?: boolean;
}

export type RetentionState = 'off' | 'on' | 'full' | 'failed';

/** Retention counters of one capture (CaptureStats.retention). */
export interface RetentionStats {
  /** off: not asked for; on: every frame so far kept; full: the bound was hit; failed: a write failed. */
  state: RetentionState;
  /** Frames in the file: frames 1..retained. */
  retained: number;
  /** Frames numbered after retention stopped (bound or failure): never in the file. */
  dropped: number;
  /** Bytes of the file, its header included. */
  bytes: number;
  /** Bytes kept of each frame at most. */
  snaplen: number;
  /** Why it failed. */
  error?: string;
}

const PCAP_HEADER = 24;
const RECORD_HEADER = 16;
const CHUNK = 256 * 1024;
/** pcap magic of files with nanosecond timestamps (draft-ietf-opsawg-pcap §4). */
const MAGIC_NS = 0xa1b23c4d;
const NS_PER_S = 1_000_000_000n;

/**
 * The TypeScript retention writer: a classic pcap file with nanosecond timestamps in the host's
 * (little-endian) byte order, buffered in 256 KiB chunks written with write(2) to the page cache
 * (never fsync'ed), bounded by `maxBytes`.
 */
export class PcapRetentionWriter {
  private state: RetentionState = 'on';
  private retained = 0;
  private dropped = 0;
  private bytes = PCAP_HEADER;
  private error: string | undefined;
  private readonly chunk: Buffer;
  private used = 0;
  /** Frames in the chunk, not yet written. */
  private pending = 0;
  /** The second of the last timestamp, and its start in ns: a division per second, not per frame. */
  private sec = 0;
  private secNs = -1n;

  /**
   * `linktype`: the LINKTYPE_* value of every frame to come (-1 when unknown: nothing kept);
   * `decode`: the capture's decoder options (its UDP tunnel ports), for the headers-only cut.
   */
  constructor(
    private readonly target: RetentionTarget,
    readonly linktype: number,
    private readonly decode?: DecodeOptions,
  ) {
    this.chunk = Buffer.alloc(Math.max(CHUNK, RECORD_HEADER + target.snaplen));
    if (linktype < 0 || linktype > 0xffff) {
      this.fail(`link type ${linktype} cannot be written to a pcap file`);
      return;
    }
    const h = this.chunk;
    h.writeUInt32LE(MAGIC_NS, 0);
    h.writeUInt16LE(2, 4);
    h.writeUInt16LE(4, 6);
    h.writeUInt32LE(0, 8);
    h.writeUInt32LE(0, 12);
    h.writeUInt32LE(target.snaplen, 16);
    h.writeUInt32LE(linktype, 20);
    this.used = PCAP_HEADER;
  }

  /** Whether add() cuts frames at their payload (headers only): a caller that decodes the frame
   * anyway passes its payloadOffset, so it is not decoded twice. */
  get headersOnly(): boolean {
    return this.target.payload !== true;
  }

  /**
   * Keeps one frame (its first `snaplen` bytes; headers only, up to `headersEnd`: the frame's
   * payloadOffset, null when it carries no IP packet, computed here when not given), or counts
   * it as dropped.
   */
  add(tsNs: bigint, origLen: number, data: Uint8Array, headersEnd?: number | null): void {
    if (this.state !== 'on') {
      this.dropped++;
      return;
    }
    let cut = Math.min(data.length, this.target.snaplen);
    if (this.target.payload !== true) {
      const end =
        headersEnd === undefined ? payloadOffset(this.linktype, data, this.decode) : headersEnd;
      if (end !== null && end < cut) cut = end;
    }
    if (this.bytes + RECORD_HEADER + cut > this.target.maxBytes) {
      this.state = 'full';
      this.dropped++;
      // Written out now: the file is complete whatever happens to the worker later.
      this.flush();
      return;
    }
    if (this.used + RECORD_HEADER + cut > this.chunk.length && !this.flush()) {
      this.dropped++;
      return;
    }
    const c = this.chunk;
    const at = this.used;
    let frac = tsNs - this.secNs;
    if (this.secNs < 0n || frac < 0n || frac >= NS_PER_S) {
      this.sec = Number(tsNs / NS_PER_S);
      this.secNs = BigInt(this.sec) * NS_PER_S;
      frac = tsNs - this.secNs;
    }
    c.writeUInt32LE(this.sec >>> 0, at);
    c.writeUInt32LE(Number(frac), at + 4);
    c.writeUInt32LE(cut, at + 8);
    c.writeUInt32LE(Math.max(origLen, cut), at + 12);
    c.set(data.subarray(0, cut), at + RECORD_HEADER);
    this.used = at + RECORD_HEADER + cut;
    this.bytes += RECORD_HEADER + cut;
    this.retained++;
    this.pending++;
  }

  /** Writes what is buffered; false (and retention failed) when the write fails. */
  flush(): boolean {
    let off = 0;
    try {
      while (off < this.used) {
        const n = writeSync(this.target.fd, this.chunk, off, this.used - off);
        if (n <= 0) throw new Error(`short write: ${off} of ${this.used} bytes`);
        off += n;
      }
    } catch (e) {
      // The frames of the chunk never reached the file.
      this.retained -= this.pending;
      this.dropped += this.pending;
      this.used = 0;
      this.pending = 0;
      this.fail(e instanceof Error ? e.message : String(e));
      return false;
    }
    this.used = 0;
    this.pending = 0;
    return true;
  }

  /** Writes what is buffered; the fd stays open (it is the caller's). Idempotent. */
  close(): void {
    if (this.used > 0) this.flush();
  }

  stats(): RetentionStats {
    const s: RetentionStats = {
      state: this.state,
      retained: this.retained,
      dropped: this.dropped,
      bytes: this.bytes,
      snaplen: this.target.snaplen,
    };
    if (this.error !== undefined) s.error = this.error;
    return s;
  }

  private fail(why: string): void {
    this.state = 'failed';
    this.error = why;
  }
}

/** Retention of a source whose frames may change link type (file replay): opened at the first. */
export class LazyRetention {
  private writer: PcapRetentionWriter | undefined;
  /** Frames after one of another link type ended retention (a pcap file holds one link type). */
  private afterMixed: number | undefined;

  constructor(
    private readonly target: RetentionTarget,
    private readonly decode?: DecodeOptions,
  ) {}

  get headersOnly(): boolean {
    return this.target.payload !== true;
  }

  add(
    linktype: number,
    tsNs: bigint,
    origLen: number,
    data: Uint8Array,
    headersEnd?: number | null,
  ): void {
    this.writer ??= new PcapRetentionWriter(this.target, linktype, this.decode);
    if (this.afterMixed === undefined && linktype !== this.writer.linktype) {
      this.writer.close();
      this.afterMixed = 0;
    }
    if (this.afterMixed !== undefined) this.afterMixed++;
    else this.writer.add(tsNs, origLen, data, headersEnd);
  }

  close(): void {
    this.writer?.close();
  }

  stats(): RetentionStats {
    const s = this.writer?.stats() ?? {
      state: 'on',
      retained: 0,
      dropped: 0,
      bytes: 0,
      snaplen: this.target.snaplen,
    };
    if (this.afterMixed === undefined) return s;
    if (s.state !== 'on') return { ...s, dropped: s.dropped + this.afterMixed };
    return {
      ...s,
      state: 'failed',
      dropped: s.dropped + this.afterMixed,
      error: 'the frames changed link type; a pcap file holds one',
    };
  }
}

/**
 * The agent's side of frame retention (retention.ts): one retention file per capture point, and
 * the answers to the collector's FramesRequests from it.
 *
 * Each file is created in the retention directory and unlinked at once: the agent keeps its fd
 * (and hands a copy to the capture worker, ns-capture.ts), so the bytes live exactly as long as
 * the agent holds them — released when the collector has fetched what it asked for, after a TTL
 * once the capture ended, at agent shutdown, and by the kernel if the agent dies. Nothing stale
 * is ever left on disk; the sweep at start only removes a name a crash caught between create and
 * unlink. The agent never writes the file itself and reads it with positional reads only (the
 * worker's writes move the shared file offset).
 *
 * Bounds: per file (maxBytes, default 64 MiB: past it the capture stops retaining and counts),
 * and across the agent's captures (totalBytes, default 512 MiB: a capture that would pass it gets
 * what is left, or no retention, said in every answer).
 */
import { closeSync, mkdirSync, openSync, readdirSync, readSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { FrameRecord, FramesReply, FramesRequest, MissingFrame } from '../../common/wire';
import type { ErrorCode } from '../../common/errors';
import {
  RETENTION_DEFAULT_MAX_BYTES,
  RETENTION_DEFAULT_SNAPLEN,
  RETENTION_MAX_SNAPLEN,
  type RetentionStats,
  type RetentionTarget,
} from './retention';

export const RETENTION_DEFAULT_TOTAL_BYTES = 512 * 1024 * 1024;
/** How long a finished capture's frames are kept when nobody fetches them. */
export const RETENTION_DEFAULT_TTL_MS = 10 * 60_000;
/** Bytes of frame data the agent puts in one FramesReply (the wire allows twice as much). */
export const FRAMES_REPLY_BYTES = 4 * 1024 * 1024;
/** A capture is given retention only if at least this much of the agent's budget is left. */
const MIN_RETENTION_BYTES = 64 * 1024;

export interface RetentionStoreOptions {
  /** Where retention files are created (and unlinked at once). */
  dir: string;
  /** Bytes kept of each frame by default (a capture command may ask for another number). */
  snaplen?: number;
  /** The bound of one capture point's file. */
  maxBytes?: number;
  /** The bound of all files the agent holds at once. */
  totalBytes?: number;
  /** How long a finished capture's frames stay when not fetched. */
  ttlMs?: number;
  /** Said once per distinct problem (the directory cannot be used). */
  onWarning?: (message: string) => void;
}

interface Held {
  fd: number | null;
  target: RetentionTarget | null;
  /** Why this capture has no retention. */
  off: string | undefined;
  /** The capture's last retention counters, once it ended. */
  stats: RetentionStats | undefined;
  /** The counters are the final ones (the capture ended and said so). */
  final: boolean;
  ended: boolean;
  ttl: NodeJS.Timeout | undefined;
}

const FILE_RE = /^hoptrace-retain-(\d+)-\d+\.pcap$/;

function key(captureId: string, point: string): string {
  return `${captureId}\u0000${point}`;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One capture point's retention files, the agent's budget, and the answers to FramesRequests. */
export class RetentionStore {
  private readonly held = new Map<string, Held>();
  private readonly snaplen: number;
  private readonly maxBytes: number;
  private readonly totalBytes: number;
  private readonly ttlMs: number;
  private reserved = 0;
  private seq = 0;
  private warned = new Set<string>();

  constructor(private readonly opts: RetentionStoreOptions) {
    this.snaplen = opts.snaplen ?? RETENTION_DEFAULT_SNAPLEN;
    this.maxBytes = opts.maxBytes ?? RETENTION_DEFAULT_MAX_BYTES;
    this.totalBytes = opts.totalBytes ?? RETENTION_DEFAULT_TOTAL_BYTES;
    this.ttlMs = opts.ttlMs ?? RETENTION_DEFAULT_TTL_MS;
    try {
      mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
      this.sweep();
    } catch (e) {
      this.warn(
        `retention directory ${opts.dir} unusable: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }

  /** Bytes the files held now may grow to. */
  get reservedBytes(): number {
    return this.reserved;
  }

  /** Points whose frames are held (open or ended, not yet released). */
  get heldPoints(): number {
    return this.held.size;
  }

  /**
   * Retention for a capture point about to start: the target its source writes into, or null
   * (the reason is kept and given in every answer). `snaplen`: what the capture command asked for
   * (0 = the default), cut to the capture's own snaplen when it has one; `payload`: keep frames
   * whole (the capture asked for the payload), else headers only.
   */
  open(
    captureId: string,
    point: string,
    snaplen: number,
    captureSnaplen: number,
    payload = false,
  ): RetentionTarget | null {
    const k = key(captureId, point);
    const had = this.held.get(k);
    if (had !== undefined) return had.target; // a resent command: the same capture
    const h: Held = {
      fd: null,
      target: null,
      off: undefined,
      stats: undefined,
      final: false,
      ended: false,
      ttl: undefined,
    };
    this.held.set(k, h);
    const want = Math.min(
      Math.max(snaplen > 0 ? snaplen : this.snaplen, 64),
      captureSnaplen > 0 ? Math.max(captureSnaplen, 64) : RETENTION_MAX_SNAPLEN,
      RETENTION_MAX_SNAPLEN,
    );
    const left = this.totalBytes - this.reserved;
    const bound = Math.min(this.maxBytes, left);
    if (left < Math.min(MIN_RETENTION_BYTES, this.maxBytes)) {
      h.off = `the agent's retention budget (${this.totalBytes} bytes) is held by ${this.held.size - 1} other capture points`;
      return null;
    }
    const path = join(this.opts.dir, `hoptrace-retain-${process.pid}-${++this.seq}.pcap`);
    let fd: number;
    try {
      fd = openSync(path, 'wx+', 0o600);
    } catch (e) {
      h.off = `cannot create a retention file in ${this.opts.dir}: ${e instanceof Error ? e.message : String(e)}`;
      this.warn(h.off);
      return null;
    }
    try {
      unlinkSync(path);
    } catch {
      // Still usable; the sweep at the next start removes the name.
    }
    h.fd = fd;
    h.target = { fd, snaplen: want, maxBytes: bound };
    if (payload) h.target.payload = true;
    this.reserved += bound;
    return h.target;
  }

  /**
   * The capture ended: its last retention counters (`final` when they are the capture's last
   * word, not a periodic status cut short); the TTL starts.
   */
  ended(captureId: string, point: string, stats: RetentionStats | undefined, final: boolean): void {
    const k = key(captureId, point);
    const h = this.held.get(k);
    if (h === undefined || h.ended) return;
    h.ended = true;
    h.stats = stats;
    h.final = final;
    h.ttl = setTimeout(() => {
      this.release(captureId, point);
    }, this.ttlMs);
    h.ttl.unref();
  }

  /** Drops a point's frames (closes its file). Idempotent. */
  release(captureId: string, point: string): void {
    const k = key(captureId, point);
    const h = this.held.get(k);
    if (h === undefined) return;
    this.held.delete(k);
    clearTimeout(h.ttl);
    if (h.fd !== null) {
      try {
        closeSync(h.fd);
      } catch {
        // Already closed: nothing held.
      }
    }
    if (h.target !== null) this.reserved -= h.target.maxBytes;
  }

  /** Releases everything (agent shutdown). */
  close(): void {
    for (const k of [...this.held.keys()]) {
      const [captureId = '', point = ''] = k.split('\u0000');
      this.release(captureId, point);
    }
  }

  /**
   * The answer to a request for a capture that has ended (the runtime waits for that): the frames
   * found, with at most `maxBytes` of data; those that did not fit are in neither list (the
   * collector asks again); the others missing with a reason.
   */
  answer(req: FramesRequest, maxBytes = FRAMES_REPLY_BYTES): FramesReply {
    const h = this.held.get(key(req.captureId, req.point));
    const reply: FramesReply = {
      requestId: req.requestId,
      captureId: req.captureId,
      point: req.point,
      linkType: null,
      snaplen: 0,
      records: [],
      missing: [],
      retained: h?.stats?.retained ?? 0,
      retentionDropped: h?.stats?.dropped ?? 0,
      errorCode: '',
      message: '',
    };
    const frames = [...new Set(req.frames)].sort((a, b) => a - b);
    const all = (code: ErrorCode, message: string): FramesReply => {
      reply.errorCode = code;
      reply.message = message;
      reply.missing = frames.map((frame) => ({ frame, reason: code }));
      return reply;
    };
    if (h === undefined)
      return all('RETENTION_GONE', 'this agent holds no frames of that capture point');
    if (h.fd === null) return all('RETENTION_OFF', h.off ?? 'no retention');
    let scan: Scan;
    try {
      scan = scanRetained(h.fd, frames, maxBytes);
    } catch (e) {
      return all(
        'RETENTION_FAILED',
        `reading the retention file: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    reply.linkType = scan.linkType;
    reply.snaplen = scan.snaplen;
    reply.records = scan.records;
    const found = new Set(scan.records.map((r) => r.frame));
    const deferred = new Set(scan.deferred);
    const s = h.stats;
    for (const frame of frames) {
      if (found.has(frame) || deferred.has(frame)) continue;
      reply.missing.push({ frame, reason: whyMissing(frame, scan, s, h.final) });
    }
    if (s?.error !== undefined) reply.message = s.error;
    return reply;
  }

  private sweep(): void {
    for (const name of readdirSync(this.opts.dir)) {
      const m = FILE_RE.exec(name);
      if (m === null) continue;
      const pid = Number(m[1]);
      if (pid !== process.pid && alive(pid)) continue; // another agent's, being set up
      try {
        unlinkSync(join(this.opts.dir, name));
      } catch {
        // Gone meanwhile.
      }
    }
  }

  private warn(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    if (this.opts.onWarning !== undefined) this.opts.onWarning(message);
    else process.emitWarning(message, { code: 'HOPTRACE_RETENTION' });
  }
}

/** Why a frame asked for is not in the file (it is not one that merely did not fit the reply). */
function whyMissing(
  frame: number,
  scan: Scan,
  s: RetentionStats | undefined,
  final: boolean,
): MissingFrame['reason'] {
  if (scan.damagedAt !== null && frame >= scan.damagedAt) return 'RETENTION_FAILED';
  if (scan.gaps.some(([from, to]) => frame >= from && frame <= to)) return 'RETENTION_COUNTED';
  // The capture's last word: it never numbered this frame.
  if (s !== undefined && final && frame > s.retained + s.dropped) return 'FRAMES_NOT_CAPTURED';
  // A failed write may have taken frames counted as written with it.
  if (s?.state === 'failed') return 'RETENTION_FAILED';
  // The file holds frames 1..retained: a frame within that it lacks was cut off.
  if (s !== undefined && frame <= s.retained) return 'RETENTION_CUT';
  if (s?.state === 'full') return 'RETENTION_FULL';
  return 'RETENTION_CUT';
}

interface Scan {
  linkType: number | null;
  snaplen: number;
  records: FrameRecord[];
  /** Found, but beyond the reply's byte budget. */
  deferred: number[];
  /** Records the file holds up to the last frame asked for. */
  count: number;
  /** The first record that cannot be a record (a caplen beyond the snaplen), or null. */
  damagedAt: number | null;
  /** Frames [from, to] a gap record stands for: counted per flow, no bytes kept. */
  gaps: [number, number][];
}

const CHUNK = 1024 * 1024;
/** A gap record's ts_sec (native/pcap-batch/src/retain.h RETAIN_GAP_SEC). */
const GAP_SEC = 0xffffffff;

/**
 * Reads the records of `frames` (sorted, unique) from the retention file with positional reads:
 * record N is frame N (retention.ts). Stops after the last frame asked for, at the end of the
 * file, or at a record that cannot be one. Throws only when the file cannot be read at all.
 */
function scanRetained(fd: number, frames: readonly number[], maxBytes: number): Scan {
  const scan: Scan = {
    linkType: null,
    snaplen: 0,
    records: [],
    deferred: [],
    count: 0,
    damagedAt: null,
    gaps: [],
  };
  const head = Buffer.alloc(24);
  if (readSync(fd, head, 0, 24, 0) < 24) return scan; // nothing written: no header yet
  const magic = head.readUInt32LE(0);
  const le = magic === 0xa1b2c3d4 || magic === 0xa1b23c4d;
  const be = magic === 0xd4c3b2a1 || magic === 0x4d3cb2a1;
  if (!le && !be) throw new Error(`not a pcap file (magic 0x${magic.toString(16)})`);
  const nanos = magic === 0xa1b23c4d || magic === 0x4d3cb2a1;
  const u32 = (b: Buffer, at: number): number => (le ? b.readUInt32LE(at) : b.readUInt32BE(at));
  scan.snaplen = Math.min(u32(head, 16), RETENTION_MAX_SNAPLEN);
  scan.linkType = u32(head, 20) & 0xffff;
  const last = frames[frames.length - 1];
  if (last === undefined) return scan;
  const wanted = new Set(frames);
  const buf = Buffer.alloc(CHUNK);
  let bufAt = 24; // file offset of buf[0]
  let bufLen = 0;
  let pos = 24;
  let budget = maxBytes;
  /** Makes file[pos, pos + n) readable in buf; false at the end of the file. */
  const ensure = (n: number): boolean => {
    if (pos + n <= bufAt + bufLen) return true;
    bufAt = pos;
    bufLen = 0;
    for (;;) {
      const got = readSync(fd, buf, bufLen, CHUNK - bufLen, bufAt + bufLen);
      if (got <= 0) break;
      bufLen += got;
      if (bufLen >= n) break;
    }
    return bufLen >= n;
  };
  for (let frame = 1; frame <= last; frame++) {
    if (!ensure(16)) break;
    const o = pos - bufAt;
    const caplen = u32(buf, o + 8);
    // A gap record (retain.h RETAIN_GAP_SEC): ts_frac frames counted per flow, no bytes.
    if (caplen === 0 && u32(buf, o + 12) === 0 && u32(buf, o) === GAP_SEC && u32(buf, o + 4) > 0) {
      const n = u32(buf, o + 4);
      scan.gaps.push([frame, frame + n - 1]);
      frame += n - 1;
      scan.count = frame;
      pos += 16;
      continue;
    }
    if (caplen > scan.snaplen) {
      scan.damagedAt = frame;
      break;
    }
    if (!ensure(16 + caplen)) break;
    scan.count = frame;
    if (wanted.has(frame)) {
      if (caplen > budget) {
        scan.deferred.push(frame);
      } else {
        const r = pos - bufAt;
        const sec = BigInt(u32(buf, r));
        const frac = BigInt(u32(buf, r + 4));
        scan.records.push({
          frame,
          tsNs: sec * 1_000_000_000n + (nanos ? frac : frac * 1000n),
          origLen: Math.max(u32(buf, r + 12), caplen),
          data: Buffer.from(buf.subarray(r + 16, r + 16 + caplen)),
        });
        budget -= caplen;
      }
    }
    pos += 16 + caplen;
  }
  return scan;
}

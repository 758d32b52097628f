/**
 * Sequential reads over a file descriptor through one reusable buffer (1 MiB by default), so
 * memory stays flat however large the capture is. Views returned by `view` point into the buffer
 * and stay valid only until the next `fill`, which may move bytes to the front or grow the buffer.
 */
import { readSync } from 'node:fs';

export const DEFAULT_CHUNK_SIZE = 1 << 20;

export class ChunkReader {
  private buf: Buffer;
  private start = 0;
  private end = 0;
  private eof = false;
  /** File offset of the cursor. */
  offset = 0;
  /** Where the next read starts, after seek(); null: the descriptor's own position (a stream). */
  private readAt: number | null = null;

  constructor(
    private readonly fd: number,
    chunkSize: number = DEFAULT_CHUNK_SIZE,
  ) {
    this.buf = Buffer.allocUnsafe(Math.max(64, chunkSize));
  }

  /** Bytes buffered from the cursor on. */
  get available(): number {
    return this.end - this.start;
  }

  /** Makes `n` bytes from the cursor readable; false when the file ends first. */
  fill(n: number): boolean {
    if (this.end - this.start >= n) return true;
    if (this.eof) return false;
    if (this.start > 0) {
      this.buf.copy(this.buf, 0, this.start, this.end);
      this.end -= this.start;
      this.start = 0;
    }
    while (this.end < n) {
      // A record larger than the chunk: the buffer grows only once it is full of bytes actually
      // read, at most doubling, so a length a header claims (bounded by the callers' checks) never
      // allocates more than twice what the file holds.
      if (this.end === this.buf.length) {
        const bigger = Buffer.allocUnsafe(Math.min(n, this.buf.length * 2));
        this.buf.copy(bigger, 0, 0, this.end);
        this.buf = bigger;
      }
      const got = readSync(this.fd, this.buf, this.end, this.buf.length - this.end, this.readAt);
      if (got === 0) {
        this.eof = true;
        return false;
      }
      this.end += got;
      if (this.readAt !== null) this.readAt += got;
    }
    return true;
  }

  /** Zero-copy view of `n` bytes at `rel` from the cursor (after a successful fill). */
  view(rel: number, n: number): Uint8Array {
    return this.buf.subarray(this.start + rel, this.start + rel + n);
  }

  /** The buffered bytes from the cursor: buf[start, end), valid until the next fill. */
  window(): { buf: Buffer; start: number; end: number } {
    return { buf: this.buf, start: this.start, end: this.end };
  }

  u8(rel: number): number {
    return this.buf[this.start + rel] ?? 0;
  }

  u16(rel: number, le: boolean): number {
    const at = this.start + rel;
    return le ? this.buf.readUInt16LE(at) : this.buf.readUInt16BE(at);
  }

  u32(rel: number, le: boolean): number {
    const at = this.start + rel;
    return le ? this.buf.readUInt32LE(at) : this.buf.readUInt32BE(at);
  }

  /** Moves the cursor forward (the bytes must have been filled). */
  skip(n: number): void {
    this.start += n;
    this.offset += n;
  }

  /**
   * Moves the cursor to file offset `offset` (a regular file only: reads from then on are
   * positioned), dropping what is buffered.
   */
  seek(offset: number): void {
    this.start = 0;
    this.end = 0;
    this.eof = false;
    this.offset = offset;
    this.readAt = offset;
  }

  /** Reads and discards `n` bytes, which may exceed what is buffered; false at end of file. */
  discard(n: number): boolean {
    let left = n;
    while (left > 0) {
      if (this.available === 0 && !this.fill(1)) return false;
      const k = Math.min(left, this.available);
      this.skip(k);
      left -= k;
    }
    return true;
  }
}

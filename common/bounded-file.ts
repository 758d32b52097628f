/**
 * A small text file named by a flag (an inventory, doctor's JSON), read whole but never more than
 * a bound: a file above it, /dev/zero or an endless pipe is refused once the bound is passed
 * instead of filling memory (readFileSync on /dev/zero grew to 8 GB, or aborted the process with
 * std::bad_alloc). A pipe or process substitution (`--inventory <(kubectl …)`) is still read.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** `64 MiB`, `512 KiB`, or bytes. */
export function sizeText(bytes: number): string {
  if (bytes >= 1 << 20 && bytes % (1 << 20) === 0) return `${bytes / (1 << 20)} MiB`;
  if (bytes >= 1 << 10 && bytes % (1 << 10) === 0) return `${bytes / (1 << 10)} KiB`;
  return `${bytes} bytes`;
}

/** The file holds more than the bound: the message says so ("it holds more than 64 MiB"). */
export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`it holds more than ${sizeText(limit)}`);
    this.name = 'TooLargeError';
  }
}

/**
 * The UTF-8 text of `path`, at most `limit` bytes of it. Throws the read's own error, or a
 * TooLargeError; the caller puts it under its code.
 */
export function readBoundedText(path: string, limit: number): string {
  return readBoundedBytes(path, limit).toString('utf8');
}

/**
 * The bytes of `path`, at most `limit` of them (as readBoundedText): what a report hashes and
 * copies is then what was parsed, even from a pipe or a file that changes afterwards.
 */
export function readBoundedBytes(path: string, limit: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    const st = fstatSync(fd);
    // A regular file says its size; anything else is read until it passes the bound.
    if (st.isFile() && st.size > limit) throw new TooLargeError(limit);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const want = Math.min(1 << 20, limit + 1 - total);
      const chunk = Buffer.allocUnsafe(want);
      const n = readSync(fd, chunk, 0, want, null);
      if (n === 0) break;
      total += n;
      if (total > limit) throw new TooLargeError(limit);
      chunks.push(chunk.subarray(0, n));
    }
    return Buffer.concat(chunks, total);
  } finally {
    closeSync(fd);
  }
}

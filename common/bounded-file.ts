/**
 * A small text file named by a flag (an inventory, doctor's JSON), read whole but never more than
 * a bound: a file above it, /dev/zero or an endless pipe is refused once the bound is passed
 * instead of filling memory (readFileSync on /dev/zero grew to 8 GB, or aborted the process with
 * std::bad_alloc). A pipe or process substitution (`--inventory <(kubectl …)`) is still read.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';

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

/** The path is not a regular file: the message says what it is ("it is a FIFO, not a regular file"). */
export class NotRegularError extends Error {
  constructor(readonly kind: string) {
    super(`it is ${kind}, not a regular file`);
    this.name = 'NotRegularError';
  }
}

function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * The UTF-8 text of `path`, at most `limit` bytes of it. With `regularOnly`, anything but a
 * regular file is refused before a byte is read (a FIFO without a writer is not waited for).
 * Throws the read's own error, a TooLargeError or a NotRegularError; the caller puts it under its
 * code.
 */
export function readBoundedText(
  path: string,
  limit: number,
  opts: { regularOnly?: boolean } = {},
): string {
  return readBoundedBytes(path, limit, opts).toString('utf8');
}

/**
 * The bytes of `path`, at most `limit` of them (as readBoundedText): what a report hashes and
 * copies is then what was parsed, even from a pipe or a file that changes afterwards.
 */
export function readBoundedBytes(
  path: string,
  limit: number,
  opts: { regularOnly?: boolean } = {},
): Buffer {
  // O_NONBLOCK: open(2) of a FIFO waits for a writer; of a regular file it changes nothing.
  const fd = openSync(
    path,
    opts.regularOnly === true ? constants.O_RDONLY | constants.O_NONBLOCK : 'r',
  );
  try {
    const st = fstatSync(fd);
    if (opts.regularOnly === true && !st.isFile()) throw new NotRegularError(kindOf(st));
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

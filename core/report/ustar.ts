/*
 * A POSIX ustar archive writer (POSIX.1-2017, pax, "ustar Interchange Format"), for a bundle as one
 * download: regular files and directories, each a 512-byte header then its bytes padded to a
 * multiple of 512, the archive ended by two blocks of zeros. Pure: names, sizes, the time and the
 * bytes in, the archive's bytes out, chunk by chunk, so a large file goes through in bounded
 * memory.
 *
 * Header (offsets and lengths in bytes; numbers are zero-filled octal ending in a NUL; text
 * fields are NUL-padded, a 100-byte name may fill its field without one):
 *
 *   name 0 +100 | mode 100 +8 | uid 108 +8 | gid 116 +8 | size 124 +12 | mtime 136 +12
 *   chksum 148 +8 | typeflag 156 +1 | linkname 157 +100 | magic 257 +6 "ustar\0" | version 263 +2 "00"
 *   uname 265 +32 | gname 297 +32 | devmajor 329 +8 | devminor 337 +8 | prefix 345 +155 | 12 unused
 *
 * chksum is the sum of the header's 512 bytes as unsigned values with chksum itself taken as 8
 * spaces, written as 6 octal digits, a NUL and a space (what every tar writes and reads). Only the
 * name field carries the path (prefix stays empty): a path must fit its 100 bytes, and is kept to
 * the portable filename characters (POSIX 3.282) so no reader, shell or file system reads it as
 * anything else.
 */
import { HoptraceError } from '../../common/errors';

/** Every header and every file's padded bytes come in blocks of this size. */
export const USTAR_BLOCK = 512;
/** The name field's size: the longest path written. */
export const USTAR_NAME_MAX = 100;
/** The largest size or time 11 octal digits hold (8 GiB − 1 bytes; the year 2242). */
export const USTAR_NUMBER_MAX = 0o77777777777;
/** A file's mode: rw-r--r--. A directory's adds search (rwxr-xr-x), without which it cannot be entered. */
export const USTAR_FILE_MODE = 0o644;
export const USTAR_DIR_MODE = 0o755;

/** One member: a file (`size` bytes of `body`) or a directory (a name ending in `/`, no bytes). */
export interface UstarEntry {
  name: string;
  size: number;
  /** The file's bytes in order, as many as `size` in all (none for a directory); read once. */
  body?: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

/** The two zero blocks that end an archive. */
const END = new Uint8Array(2 * USTAR_BLOCK);

/** Components of portable characters (letters, digits, `.`, `_`, `-`), not `.` or `..`. */
const COMPONENT_RE = /^[A-Za-z0-9._-]+$/;

/** Why `name` cannot be a member's path, or null: relative, portable, at most 100 bytes. */
export function ustarNameProblem(name: string): string | null {
  const isDir = name.endsWith('/');
  const parts = (isDir ? name.slice(0, -1) : name).split('/');
  if (name.length > USTAR_NAME_MAX)
    return `${JSON.stringify(name.slice(0, 40))}… is ${name.length} bytes, more than the ${USTAR_NAME_MAX} of a ustar name field`;
  if (parts.some((p) => !COMPONENT_RE.test(p) || p === '.' || p === '..'))
    return `${JSON.stringify(name)} is not a relative path of portable names (A-Z a-z 0-9 . _ -, no empty, . or .. part)`;
  return null;
}

const BUG = 'a bundle holds plain file names under one directory: this is a bug (please report)';

function refuse(detail: string, hint = BUG): HoptraceError {
  return new HoptraceError('BUNDLE_ARCHIVE', detail, { where: 'ustar', hint });
}

const CHANGED = 'the file changed while the archive was sent: download it again';

/** A size or a time that 11 octal digits hold, else BUNDLE_ARCHIVE. */
function checkNumber(what: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0 || n > USTAR_NUMBER_MAX)
    throw refuse(
      `${what} ${n} is not a whole number from 0 to ${USTAR_NUMBER_MAX}`,
      'a file of 8 GiB or more does not fit a ustar archive: download the files one by one',
    );
}

/** Writes `value` as zero-filled octal in `len - 1` digits and a NUL at `at`. */
function octal(h: Uint8Array, at: number, len: number, value: number): void {
  h.set(Buffer.from(`${value.toString(8).padStart(len - 1, '0')}\0`, 'ascii'), at);
}

/**
 * The 512-byte header of `e` (`mtimeSec`: seconds since the Unix epoch); BUNDLE_ARCHIVE when its
 * name, size or time cannot be written.
 */
export function ustarHeader(e: Pick<UstarEntry, 'name' | 'size'>, mtimeSec: number): Uint8Array {
  const problem = ustarNameProblem(e.name);
  if (problem !== null) throw refuse(problem);
  const isDir = e.name.endsWith('/');
  checkNumber(`${e.name}: the size`, e.size);
  checkNumber(`${e.name}: the time`, mtimeSec);
  if (isDir && e.size !== 0) throw refuse(`${e.name}: a directory holds no bytes`);
  const h = new Uint8Array(USTAR_BLOCK);
  h.set(Buffer.from(e.name, 'ascii'), 0);
  octal(h, 100, 8, isDir ? USTAR_DIR_MODE : USTAR_FILE_MODE);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  octal(h, 124, 12, e.size);
  octal(h, 136, 12, mtimeSec);
  h.fill(0x20, 148, 156);
  h[156] = (isDir ? '5' : '0').charCodeAt(0);
  h.set(Buffer.from('ustar\u000000', 'ascii'), 257);
  octal(h, 329, 8, 0);
  octal(h, 337, 8, 0);
  const sum = h.reduce((n, b) => n + b, 0);
  h.set(Buffer.from(`${sum.toString(8).padStart(6, '0')}\0 `, 'ascii'), 148);
  return h;
}

/** The zeros after `size` bytes of a file, up to its next block. */
export function ustarPadding(size: number): Uint8Array {
  return new Uint8Array((USTAR_BLOCK - (size % USTAR_BLOCK)) % USTAR_BLOCK);
}

/** The archive's length in bytes (a Content-Length before the first byte is read). */
export function ustarLength(entries: readonly Pick<UstarEntry, 'size'>[]): number {
  return entries.reduce(
    (n, e) => n + USTAR_BLOCK + e.size + ustarPadding(e.size).length,
    END.length,
  );
}

/**
 * The archive of `entries` in order, all stamped `mtimeSec`. Every header is checked before the
 * first byte; a body that gives more or fewer bytes than its size throws BUNDLE_ARCHIVE where it
 * does (its header is out already: whoever sends the archive must cut it there, not end it).
 */
export async function* ustarChunks(
  entries: readonly UstarEntry[],
  mtimeSec: number,
): AsyncGenerator<Uint8Array> {
  const headers = entries.map((e) => ustarHeader(e, mtimeSec));
  for (const [i, e] of entries.entries()) {
    yield headers[i] ?? new Uint8Array(0);
    let got = 0;
    for await (const chunk of e.body ?? []) {
      got += chunk.length;
      if (got > e.size) throw refuse(`${e.name}: more than its ${e.size} bytes`, CHANGED);
      yield chunk;
    }
    if (got !== e.size) throw refuse(`${e.name}: ${got} of its ${e.size} bytes`, CHANGED);
    if (e.size % USTAR_BLOCK !== 0) yield ustarPadding(e.size);
  }
  yield END;
}

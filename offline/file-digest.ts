/**
 * A capture file's SHA-256 and size, for the report's inputs: proof of which bytes a verdict was
 * computed from. Read in 1 MiB chunks into one buffer, so memory stays flat whatever the file.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { HoptraceError } from '../common/errors';
import { isStreamInput } from './point-inputs';

export interface FileDigest {
  /** Hex SHA-256 of every byte of the file. */
  sha256: string;
  bytes: number;
  /** Modification time (ms), to notice a file that changed while it was analysed. */
  mtimeMs: number;
  /** Its size when hashed was not its size before the analysis (digest-pool.ts). */
  changed?: true;
}

/**
 * Whether `path` is an input to hash: anything but a stream (point-inputs.ts isStreamInput:
 * standard input, pipes, sockets, devices cannot be read twice) — a regular file, or one that
 * cannot be read (hashing it throws FILE_NOT_FOUND, which names it).
 */
export function hashableInput(path: string): boolean {
  return !isStreamInput(path);
}

/** The digest of `path`; FILE_NOT_FOUND when it cannot be read. */
export function fileDigest(path: string): FileDigest {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw new HoptraceError('FILE_NOT_FOUND', e instanceof Error ? e.message : String(e), {
      where: path,
      hint: 'check the path and permissions',
    });
  }
  try {
    const hash = createHash('sha256');
    const buf = Buffer.allocUnsafe(1 << 20);
    let bytes = 0;
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      bytes += n;
    }
    return { sha256: hash.digest('hex'), bytes, mtimeMs: fstatSync(fd).mtimeMs };
  } finally {
    closeSync(fd);
  }
}

/** The size and modification time now, to compare with a digest taken before (null: gone). */
export function fileStamp(path: string): { bytes: number; mtimeMs: number } | null {
  try {
    const fd = openSync(path, 'r');
    try {
      const st = fstatSync(fd);
      return { bytes: st.size, mtimeMs: st.mtimeMs };
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

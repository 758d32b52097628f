/**
 * A small tmpfs this run mounts for itself (root only) and always unmounts: when `fn` ends, and on
 * the way out of the process should it end first (lab/live-procs.ts exits on SIGINT/SIGTERM, and
 * `exit` handlers still run then).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const mounted = new Set<string>();
let hooked = false;

function unmount(dir: string): void {
  mounted.delete(dir);
  try {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Mounts a tmpfs of `size` (mount's syntax: 512k, 64m) on a new temp dir, runs `fn`, unmounts. */
export async function withTmpfs<T>(size: string, fn: (dir: string) => Promise<T>): Promise<T> {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const d of mounted) unmount(d);
    });
  }
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-rel-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir]);
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  mounted.add(dir);
  try {
    return await fn(dir);
  } finally {
    unmount(dir);
  }
}

/** Gives a mounted tmpfs a new size (space coming back to a full disk). */
export function resizeTmpfs(dir: string, size: string): void {
  execFileSync('mount', ['-o', `remount,size=${size}`, dir]);
}

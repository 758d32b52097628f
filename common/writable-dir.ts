/**
 * Directories hoptrace is told to write into (`--data-dir`, `--report-dir`): created, or refused
 * at once with a clear error. A path inside a kernel pseudo-filesystem (/proc, /sys, cgroup …)
 * can never hold files, and Node's recursive mkdir there loops forever at 100 % CPU, so such a
 * path is refused before mkdir is tried (statfs of the nearest existing ancestor).
 */
import { mkdirSync, statfsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { HoptraceError, type ErrorCode } from './errors';

/** statfs f_type of filesystems that cannot hold a data or report directory. */
const PSEUDO_FS: Record<number, string> = {
  0x9fa0: 'proc',
  0x62656572: 'sysfs',
  0x27e0eb: 'cgroup',
  0x63677270: 'cgroup2',
  0x64626720: 'debugfs',
  0x74726163: 'tracefs',
  0x73636673: 'securityfs',
  0x6e736673: 'nsfs',
  0x1cd1: 'devpts',
  0xcafe4a11: 'bpf',
};

/** Creates `path` (and its parents) as a directory; throws `code` saying why it cannot be. */
export function makeWritableDir(path: string, what: string, code: ErrorCode): void {
  const abs = resolve(path);
  let existing = abs;
  for (;;) {
    try {
      statSync(existing);
      break;
    } catch {
      const up = dirname(existing);
      if (up === existing) break;
      existing = up;
    }
  }
  let fsType: number | undefined;
  try {
    fsType = statfsSync(existing).type;
  } catch {
    fsType = undefined;
  }
  const pseudo = fsType === undefined ? undefined : PSEUDO_FS[fsType];
  if (pseudo !== undefined) {
    throw new HoptraceError(code, `${abs} is inside ${existing}, a ${pseudo} filesystem`, {
      where: what,
      hint: 'give a directory on a real filesystem, e.g. /var/lib/hoptrace',
    });
  }
  try {
    mkdirSync(abs, { recursive: true });
  } catch (e) {
    throw new HoptraceError(
      code,
      `cannot create the directory ${abs} (${e instanceof Error ? e.message : String(e)})`,
      {
        where: what,
        hint: 'give a directory path that is not a file, on a filesystem you may write to',
      },
    );
  }
  if (!statSync(abs).isDirectory())
    throw new HoptraceError(code, `${abs} is not a directory`, {
      where: what,
      hint: 'give a directory',
    });
}

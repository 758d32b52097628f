/**
 * What `analyze` is given as its points' files, checked before anything is read or written.
 *
 * A stream — standard input (`-`), a pipe (`<(tcpdump -w - …)`, /dev/stdin on a pipe), a socket
 * or a character device — can be read once, from its start. The analysis reads each later point
 * once (core/report/analyze.ts analyzeEventStreams), so a stream can be a later point; the first
 * point is read twice (to select the request, then to follow it), so it must be a file. What reads
 * a file again afterwards (identity-scan.ts, evidence.ts, file-digest.ts) leaves a stream out and
 * says so. Standard input redirected from a regular file (`--point decap=- < decap.pcap`) is that
 * file (stdinFile), read from its start, hashed and read again like any path.
 */
import { fstatSync, readlinkSync, statSync, type Stats } from 'node:fs';
import { resolve } from 'node:path';
import { HoptraceError } from '../common/errors';

function statOf(path: string): Stats | null {
  try {
    return path === '-' ? fstatSync(0) : statSync(path);
  } catch {
    return null; // opening it reports why
  }
}

/**
 * `-` when standard input is a regular file (`< decap.pcap`): that file's path, as
 * /proc/self/fd/0 names it, when the path still leads to the same file (device and inode); any
 * other path, and `-` on a pipe or terminal, unchanged.
 */
export function stdinFile(path: string): string {
  if (path !== '-') return path;
  try {
    const fd0 = fstatSync(0);
    if (!fd0.isFile()) return path;
    const linked = readlinkSync('/proc/self/fd/0');
    const s = statSync(linked);
    return s.isFile() && s.dev === fd0.dev && s.ino === fd0.ino ? linked : path;
  } catch {
    return path; // no /proc, a deleted file: read as a stream, as before
  }
}

/** What kind of stream `path` is ('standard input', 'a pipe', …), or null for a file. */
export function streamKind(path: string): string | null {
  if (path === '-') return 'standard input';
  const s = statOf(path);
  if (s === null || s.isFile() || s.isDirectory()) return null;
  if (s.isFIFO()) return 'a pipe';
  if (s.isSocket()) return 'a socket';
  if (s.isCharacterDevice()) return 'a character device';
  return 'not a regular file';
}

/** Whether `path` can be read only once, from its start (see the file's comment). */
export function isStreamInput(path: string): boolean {
  return streamKind(path) !== null;
}

/** `-` as "standard input (-)", a stream as "PATH (a pipe)", a file as its path. */
export function inputText(path: string): string {
  const kind = streamKind(path);
  if (path === '-') return 'standard input (-)';
  return kind === null ? path : `${path} (${kind})`;
}

/** Why a stream is left out of what reads the points again, and how to have it: `toHave`. */
export function readOnceText(path: string, toHave: string): string {
  return `${inputText(path)} was read once, by the analysis, and cannot be read again (save it to a file ${toHave})`;
}

/**
 * Refuses (CLI_BAD_POINT) a first point that is a stream, and two points that read the same file
 * — the same path, or the same device and inode (a link, /dev/stdin beside `-`): one capture given
 * twice would count as two independent witnesses of the request.
 */
export function checkPointInputs(points: readonly { name: string; file: string }[]): void {
  const first = points[0];
  if (first !== undefined && isStreamInput(first.file)) {
    throw new HoptraceError(
      'CLI_BAD_POINT',
      `${first.name}=${first.file}: ${inputText(first.file)} cannot be the first point: analyze reads the first point's capture twice (to select the request, then to follow it), and a stream can be read only once`,
      {
        where: '--point',
        hint: `save it to a file first — tcpdump -w ${first.name}.pcap, or cat > ${first.name}.pcap — and give that path; a later point may be standard input or a pipe`,
      },
    );
  }
  const seen: { name: string; file: string; path: string; id: string | null }[] = [];
  for (const p of points) {
    const s = statOf(p.file);
    const path = p.file === '-' ? '-' : resolve(p.file);
    const id = s === null ? null : `${s.dev}:${s.ino}`;
    const same = seen.find((q) => q.path === path || (id !== null && q.id === id));
    if (same !== undefined) {
      const how =
        same.path === path
          ? `both read ${inputText(p.file)}`
          : `${same.file} and ${p.file} are the same file (device ${s?.dev ?? '?'}, inode ${s?.ino ?? '?'})`;
      throw new HoptraceError(
        'CLI_BAD_POINT',
        `points '${same.name}' and '${p.name}' read the same capture: ${how}`,
        {
          where: '--point',
          hint: 'each point is the capture taken at that point; give each point its own file',
        },
      );
    }
    seen.push({ name: p.name, file: p.file, path, id });
  }
}

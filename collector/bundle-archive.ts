/**
 * A bundle as one download, `hoptrace-<id>.tar`: a ustar archive (core/report/ustar.ts) of the
 * directory `hoptrace-<id>/` holding each file its SHA256SUMS lists, then SHA256SUMS, so
 * `tar xf hoptrace-<id>.tar && cd hoptrace-<id> && sha256sum -c SHA256SUMS` checks a download
 * without renaming a file. Sent file by file as the client reads it (a large evidence.pcapng
 * never sits whole in memory), its length known before the first byte.
 *
 * The files are those SHA256SUMS vouches for. From the data directory, SHA256SUMS is read and each
 * file it lists opened in one synchronous step; the store writes a bundle and its SHA256SUMS in one
 * synchronous step too (store.ts withManifest), each file replaced by a rename, which leaves a file
 * already open as it was. So the descriptors hold the very bytes SHA256SUMS was computed from,
 * however often the bundle is rewritten while the archive streams: new files are never paired with
 * an old SHA256SUMS. Each file is also hashed as it is sent: one changed in place (by hand, by a
 * disk fault) ends the archive with BUNDLE_CHECKSUM right after its bytes, so the download fails
 * instead of carrying a file `sha256sum -c` would refuse. A bundle without SHA256SUMS (a repro
 * still running, a capture an older collector finished) is not offered as an archive: nothing
 * would check it.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, read, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { HoptraceError } from '../common/errors';
import { MANIFEST, parseManifest } from '../common/sha256sums';
import { ustarChunks, ustarLength, type UstarEntry } from '../core/report/ustar';
import type { StreamBody } from './api-message';

/** The archive of one bundle, ready to send. */
export interface BundleArchive extends StreamBody {
  /** `hoptrace-<id>.tar`, the download's name. */
  fileName: string;
}

/** Why a bundle is not offered as an archive, as the HTTP status and words to answer with. */
export interface ArchiveRefusal {
  status: 404 | 503;
  detail: string;
  /** A 503's error code: the data directory could not be read, or the bundle not archived. */
  code?: 'STORE_IO' | 'BUNDLE_ARCHIVE';
}

/** The download's name of bundle `id`'s archive. */
export const archiveName = (id: string): string => `hoptrace-${id}.tar`;

/** A file of the bundle: its listed digest, its size, its bytes read on demand. */
interface Member {
  name: string;
  size: number;
  sha256: string;
  read(): AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

/** Bytes read from a file at a time. */
const CHUNK = 1 << 16;
const readAt = promisify(read);

/** `size` bytes of open file `fd` from its start, a chunk at a time (fewer if it was cut). */
async function* readFd(fd: number, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < size;) {
    // A new buffer each time: the response may still hold the last one.
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, size - at));
    const { bytesRead } = await readAt(fd, buf, 0, buf.length, at);
    if (bytesRead === 0) return;
    at += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

/** `m`'s bytes, then BUNDLE_CHECKSUM if they are not the ones SHA256SUMS lists. */
async function* checked(id: string, m: Member): AsyncGenerator<Uint8Array> {
  const hash = createHash('sha256');
  for await (const chunk of m.read()) {
    hash.update(chunk);
    yield chunk;
  }
  const got = hash.digest('hex');
  if (got !== m.sha256)
    throw new HoptraceError(
      'BUNDLE_CHECKSUM',
      `${m.name}: its SHA-256 is ${got.slice(0, 16)}…, ${MANIFEST} lists ${m.sha256.slice(0, 16)}…: the archive is cut after it`,
      {
        where: archiveName(id),
        hint: "it changed on the collector's disk after it was written (captures/<id>/ or repros/<id>/ in the data directory)",
      },
    );
}

/** The archive of SHA256SUMS (`manifest`) and `members`; `release` lets go of their files. */
function archiveOf(
  id: string,
  manifest: Buffer,
  mtimeMs: number,
  members: readonly Member[],
  release: () => void,
): BundleArchive {
  const top = `hoptrace-${id}/`;
  const entries: UstarEntry[] = [
    { name: top, size: 0 },
    ...members.map((m) => ({ name: top + m.name, size: m.size, body: checked(id, m) })),
    { name: top + MANIFEST, size: manifest.length, body: [manifest] },
  ];
  const mtimeSec = Math.floor(mtimeMs / 1000);
  return {
    fileName: archiveName(id),
    length: ustarLength(entries),
    async *chunks() {
      try {
        yield* ustarChunks(entries, mtimeSec);
      } finally {
        release();
      }
    },
    release,
  };
}

/** SHA256SUMS's names and digests, or why it cannot list this bundle (`known`: its file names). */
function listed(
  text: string,
  known: readonly string[],
): { sums: ReadonlyMap<string, string> } | ArchiveRefusal {
  const parsed = parseManifest(text);
  if (!parsed.ok)
    return { status: 503, detail: `${MANIFEST} is not a checksum file: ${parsed.problem}` };
  const strange = [...parsed.sums.keys()].filter((n) => n === MANIFEST || !known.includes(n));
  if (strange.length > 0)
    return {
      status: 503,
      detail: `${MANIFEST} lists ${strange.join(', ')}, not a file of this bundle (BUNDLE_ARCHIVE)`,
    };
  return { sums: parsed.sums };
}

const NO_MANIFEST: ArchiveRefusal = {
  status: 404,
  detail: `the bundle has no ${MANIFEST} (yet): the whole bundle is offered once it is written with its ${MANIFEST} (a repro when it finishes; a capture once it has a verdict — one an older collector finished gets it when its reports are next rewritten)`,
};

/**
 * The bundle in directory `dir` as its SHA256SUMS lists it (`known`: the names a file of it may
 * have), every file opened now; a refusal when there is no SHA256SUMS, or it names a file that is
 * not there.
 */
export function dirBundleArchive(
  id: string,
  dir: string,
  known: readonly string[],
): BundleArchive | ArchiveRefusal {
  const fds: number[] = [];
  const release = (): void => {
    for (const fd of fds.splice(0)) {
      try {
        closeSync(fd);
      } catch {
        // Closed already: nothing is held.
      }
    }
  };
  const open = (name: string): { fd: number; size: number; mtimeMs: number } => {
    const fd = openSync(join(dir, name), 'r');
    fds.push(fd);
    const st = fstatSync(fd);
    return { fd, size: st.size, mtimeMs: st.mtimeMs };
  };
  // From here to the return nothing waits: SHA256SUMS and the files it lists are one version.
  let m: { fd: number; size: number; mtimeMs: number };
  let manifest: Buffer;
  try {
    m = open(MANIFEST);
    manifest = readFileSync(m.fd);
  } catch (e) {
    release();
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return NO_MANIFEST;
    return {
      status: 503,
      code: 'STORE_IO',
      detail: `${MANIFEST} cannot be read (${String(e)}) (STORE_IO)`,
    };
  }
  const list = listed(manifest.toString('utf8'), known);
  if (!('sums' in list)) {
    release();
    return list;
  }
  const members: Member[] = [];
  for (const [name, sha256] of list.sums) {
    try {
      const f = open(name);
      members.push({ name, size: f.size, sha256, read: () => readFd(f.fd, f.size) });
    } catch (e) {
      release();
      return {
        status: 503,
        code: 'BUNDLE_ARCHIVE',
        detail: `${MANIFEST} lists ${name}, which cannot be opened (${String(e)}) (BUNDLE_ARCHIVE)`,
      };
    }
  }
  // The bundle's time: when its SHA256SUMS, written last, was written.
  return archiveOf(id, manifest, m.mtimeMs, members, release);
}

/** A bundle held in memory (a repro's as it finished, written at `atMs`), as SHA256SUMS lists it. */
export function memoryBundleArchive(
  id: string,
  files: ReadonlyMap<string, Uint8Array>,
  atMs: number,
  known: readonly string[],
): BundleArchive | ArchiveRefusal {
  const manifest = files.get(MANIFEST);
  if (manifest === undefined) return NO_MANIFEST;
  const list = listed(Buffer.from(manifest).toString('utf8'), known);
  if (!('sums' in list)) return list;
  const members: Member[] = [];
  for (const [name, sha256] of list.sums) {
    const body = files.get(name);
    if (body === undefined)
      return {
        status: 503,
        detail: `${MANIFEST} lists ${name}, which is not held (BUNDLE_ARCHIVE)`,
      };
    members.push({ name, size: body.length, sha256, read: () => [body] });
  }
  return archiveOf(id, Buffer.from(manifest), atMs, members, () => undefined);
}

/**
 * A bundle's checksum file, `SHA256SUMS` in the format `sha256sum` writes and `sha256sum -c`
 * checks: one `<64 hex>  <name>` line per file. Written by every bundle hoptrace makes (`analyze
 * --report-dir`, the collector's capture and repro bundles) and read back by whoever downloads
 * one (`kubectl hoptrace report`), so both sides speak one format. The reader takes bytes from a
 * peer: it refuses what is not that format, bounds the lines and takes only plain file names.
 */
import { createHash } from 'node:crypto';

/** The checksum file's name in every bundle. */
export const MANIFEST = 'SHA256SUMS';

/** A bundle holds a handful of files: more lines than this is not a bundle's manifest. */
export const MANIFEST_MAX_LINES = 64;

/** The SHA-256 of `body` (a string as UTF-8), in lower-case hex. */
export function sha256Hex(body: string | Uint8Array): string {
  return createHash('sha256').update(body).digest('hex');
}

/** SHA256SUMS's text for `files`: `<hex>  <name>\n` each, in the order given. */
export function manifestOf(files: Iterable<readonly [string, string | Uint8Array]>): string {
  let out = '';
  for (const [name, body] of files) out += `${sha256Hex(body)}  ${name}\n`;
  return out;
}

/** A file name a bundle may hold: no directory, no leading dot, nothing a shell or path reads. */
export const BUNDLE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** SHA256SUMS read: digest by file name, or what is wrong with it (the first line that is not one). */
export type ParsedManifest =
  { ok: true; sums: ReadonlyMap<string, string> } | { ok: false; problem: string };

/**
 * Reads a SHA256SUMS text: `<64 hex><space><space or *><name>` per line (`*` is sha256sum's
 * binary mode: the same digest on Linux). A name must be a plain file name (BUNDLE_NAME_RE) and
 * appear once; at most MANIFEST_MAX_LINES lines.
 */
export function parseManifest(text: string): ParsedManifest {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length === 0) return { ok: false, problem: 'it is empty' };
  if (lines.length > MANIFEST_MAX_LINES)
    return { ok: false, problem: `it has ${lines.length} lines (at most ${MANIFEST_MAX_LINES})` };
  const sums = new Map<string, string>();
  for (const [i, line] of lines.entries()) {
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line);
    const name = m?.[2];
    const shown = JSON.stringify(line.length > 80 ? `${line.slice(0, 80)}…` : line);
    if (m === null || name === undefined)
      return { ok: false, problem: `line ${i + 1} is not '<sha256>  <name>': ${shown}` };
    if (!BUNDLE_NAME_RE.test(name))
      return { ok: false, problem: `line ${i + 1} names no plain file: ${shown}` };
    if (sums.has(name)) return { ok: false, problem: `line ${i + 1} names ${name} again` };
    sums.set(name, m[1] ?? '');
  }
  return { ok: true, sums };
}

/** What a set of files is against a manifest. */
export interface ManifestCheck {
  /** Files whose SHA-256 is the one listed. */
  verified: string[];
  /** Files whose SHA-256 differs from the one listed. */
  mismatched: { name: string; listed: string; actual: string; bytes: number }[];
  /** Files listed that are not in the set. */
  absent: string[];
  /** Files in the set that are not listed. */
  unlisted: string[];
}

/** Each of `files` hashed and compared with `sums` (the manifest itself is not among the files). */
export function checkManifest(
  sums: ReadonlyMap<string, string>,
  files: ReadonlyMap<string, Uint8Array>,
): ManifestCheck {
  const out: ManifestCheck = { verified: [], mismatched: [], absent: [], unlisted: [] };
  for (const [name, body] of files) {
    const listed = sums.get(name);
    if (listed === undefined) {
      out.unlisted.push(name);
      continue;
    }
    const actual = sha256Hex(body);
    if (actual === listed) out.verified.push(name);
    else out.mismatched.push({ name, listed, actual, bytes: body.length });
  }
  for (const name of sums.keys()) if (!files.has(name)) out.absent.push(name);
  return out;
}

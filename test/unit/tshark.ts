/**
 * tshark (Debian's, installed by scripts/setup.sh) reading a capture file back: one row per packet
 * and one string per field asked for, as `tshark -r FILE -T fields -e F …` prints them (tabs
 * between fields; an empty field stays an empty string). Every test that checks a pcapng the
 * project wrote reads it through here. Throws — the test fails, never skips — when tshark is
 * missing or does not read the file.
 */
import { spawnSync } from 'node:child_process';

export interface TsharkRead {
  rows: string[][];
  /** What tshark said on stderr (a damaged or cut file is reported there, with exit 0). */
  stderr: string;
}

/** `fields` of every packet of `file`; `extra`: more tshark options (e.g. `-E occurrence=f`). */
export function tsharkRead(
  file: string,
  fields: readonly string[],
  extra: readonly string[] = [],
): TsharkRead {
  const args = ['-r', file, '-T', 'fields', '-E', 'separator=/t', ...extra];
  for (const f of fields) args.push('-e', f);
  const r = spawnSync('tshark', args, { encoding: 'utf8', timeout: 60_000 });
  if (r.error !== undefined)
    throw new Error(
      `tshark is required to read ${file} back (scripts/setup.sh installs it): ${r.error.message}`,
    );
  if (r.status !== 0)
    throw new Error(`tshark -r ${file} exited ${String(r.status)}: ${r.stderr.trim()}`);
  // Not trim(): a last row's empty fields are tabs too.
  const out = r.stdout.replace(/\n$/, '');
  return { rows: out === '' ? [] : out.split('\n').map((l) => l.split('\t')), stderr: r.stderr };
}

/** `fields` of every packet of `file` (tsharkRead without stderr). */
export function tsharkFields(
  file: string,
  fields: readonly string[],
  extra: readonly string[] = [],
): string[][] {
  return tsharkRead(file, fields, extra).rows;
}

/** One field of every packet of `file`. */
export function tsharkColumn(file: string, field: string): string[] {
  return tsharkFields(file, [field]).map((r) => r[0] ?? '');
}

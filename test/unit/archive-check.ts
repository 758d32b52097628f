/**
 * A bundle's whole-bundle archive (collector/bundle-archive.ts) read as whoever downloads it reads
 * it: the bytes written to `hoptrace-<id>.tar`, `tar xf` in an empty directory, then what is there.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StreamBody } from '../../collector/api-message';
import type { ArchiveRefusal } from '../../collector/bundle-archive';

/** Every byte of an archive, read as the listener reads it; throws when it is not one. */
export async function archiveBytes(a: StreamBody | ArchiveRefusal | null): Promise<Buffer> {
  if (a === null || 'status' in a) throw new Error(`no archive: ${JSON.stringify(a)}`);
  const out: Uint8Array[] = [];
  for await (const c of a.chunks()) out.push(c);
  return Buffer.concat(out);
}

/** What `tar xf` made of `tar` in `dir`/x: its status, its complaints, the directories made. */
export function untar(
  tar: Buffer,
  dir: string,
): { status: number | null; stderr: string; root: string; tops: string[] } {
  const root = join(dir, 'x');
  mkdirSync(root, { recursive: true });
  const file = join(dir, 'bundle.tar');
  writeFileSync(file, tar);
  const r = spawnSync('tar', ['-xf', file, '-C', root], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr, root, tops: readdirSync(root).sort() };
}

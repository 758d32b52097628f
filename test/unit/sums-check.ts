/**
 * A downloaded or written bundle checked as its reader would: `sha256sum -c SHA256SUMS` in its
 * directory where the tool exists, else the same check computed here (common/sha256sums.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseManifest, sha256Hex } from '../../common/sha256sums';

/** Whether every file SHA256SUMS lists in `dir` matches, how that was checked, and what it said. */
export function checkSums(dir: string): { ok: boolean; how: string; out: string } {
  const tool = spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir, encoding: 'utf8' });
  if (tool.error === undefined)
    return { ok: tool.status === 0, how: 'sha256sum -c', out: tool.stdout + tool.stderr };
  const parsed = parseManifest(readFileSync(join(dir, 'SHA256SUMS'), 'utf8'));
  if (!parsed.ok) return { ok: false, how: 'computed', out: parsed.problem };
  const bad = [...parsed.sums].filter(
    ([name, sum]) => sha256Hex(readFileSync(join(dir, name))) !== sum,
  );
  return {
    ok: bad.length === 0,
    how: 'computed',
    out: bad.map(([n]) => `${n}: FAILED`).join('\n'),
  };
}

/** The names SHA256SUMS's lines list, sorted (a line not in sha256sum's format is named as such). */
export function listedNames(text: string): string[] {
  return text
    .trimEnd()
    .split('\n')
    .map((l) => /^[0-9a-f]{64} {2}(\S+)$/.exec(l)?.[1] ?? `bad line: ${l}`)
    .sort();
}

/**
 * The version of this hoptrace, from its package.json: what `hoptrace --version` prints and what a
 * report names as the program that wrote it. Compiled to dist/common/, two folders below the
 * package root (the layout `npm pack` ships and the image copies).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

let cached: string | undefined;

/** package.json's `version`, or `unknown` when it cannot be read (never throws). */
export function hoptraceVersion(): string {
  if (cached !== undefined) return cached;
  try {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    cached = typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    cached = 'unknown';
  }
  return cached;
}

/** What this process runs on, for a report's runtime line: Node's version, the OS and CPU. */
export function processRuntime(): { node: string; platform: string } {
  return { node: process.version, platform: `${process.platform} ${process.arch}` };
}

/**
 * A bundle brought home through the port-forward (`kubectl hoptrace report`, and `capture` and
 * `repro` when they end): every file of a capture's or a repro's bundle, checked against the
 * SHA256SUMS the collector served with it before anything is written. A file that does not match
 * (cut short, altered on the way or on the collector's disk) is BUNDLE_CHECKSUM and nothing is
 * written; a collector that serves no SHA256SUMS (older than this hoptrace, a repro still running)
 * leaves the files unverified, and the lines say so.
 *
 * The collector rewrites a capture's reports when late counters, conntrack entries, doctor's
 * findings or the evidence frames arrive, each time with its SHA256SUMS, and never answers in the
 * middle of such a write. So SHA256SUMS is read before and after the files: the same both times,
 * the files are of that bundle; different, the bundle changed meanwhile and is downloaded again.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { BUNDLE_FILES, REPRO_FILES } from '../../collector';
import { HoptraceError } from '../../common/errors';
import { checkManifest, MANIFEST, parseManifest } from '../../common/sha256sums';
import type { CollectorClient } from '../collector-client';

/** Downloads of a bundle that changed while it was read, before its files are left unverified. */
export const DOWNLOAD_ATTEMPTS = 3;

export interface Downloaded {
  dir: string;
  files: string[];
  /** Files the collector did not have (yet), with why. */
  missing: { file: string; reason: string }[];
  /** How many files matched SHA256SUMS, or why they could not be checked. */
  check: { verified: number } | { unverified: string };
}

/** SHA256SUMS as served, or the collector's reason for serving none. */
type Served = { bytes: Buffer } | { absent: string };

const notFound = (e: unknown): e is HoptraceError =>
  e instanceof HoptraceError && e.code === 'API_NOT_FOUND';

async function getManifest(client: CollectorClient, prefix: string): Promise<Served> {
  try {
    return { bytes: await client.bytes(`${prefix}/${MANIFEST}`) };
  } catch (e) {
    if (notFound(e)) return { absent: e.detail };
    throw e;
  }
}

const sameServed = (a: Served, b: Served): boolean =>
  'bytes' in a ? 'bytes' in b && a.bytes.equals(b.bytes) : !('bytes' in b);

/** The bundle's files; evidence.pcapng is waited for up to `evidenceWaitMs`. */
async function getFiles(
  client: CollectorClient,
  prefix: string,
  names: readonly string[],
  evidenceWaitMs: number,
  pollMs: number,
): Promise<{ got: Map<string, Buffer>; missing: Downloaded['missing'] }> {
  const got = new Map<string, Buffer>();
  const missing: Downloaded['missing'] = [];
  for (const name of names) {
    const deadline = Date.now() + (name === 'evidence.pcapng' ? evidenceWaitMs : 0);
    for (;;) {
      try {
        got.set(name, await client.bytes(`${prefix}/${name}`));
        break;
      } catch (e) {
        if (!notFound(e)) throw e;
        if (name === 'report.md') throw e; // no verdict yet: nothing to bring home
        if (Date.now() >= deadline) {
          missing.push({ file: name, reason: e.message });
          break;
        }
        await delay(pollMs);
      }
    }
  }
  return { got, missing };
}

const short = (hex: string): string => `${hex.slice(0, 16)}…`;

/**
 * The files against SHA256SUMS as served: how many match, or why there is nothing to check them
 * against. Throws BUNDLE_CHECKSUM naming each file that differs, is listed and was not served, or
 * was served and is not listed; COLLECTOR_BAD_RESPONSE when SHA256SUMS is not one.
 */
function verify(
  prefix: string,
  served: Served,
  got: ReadonlyMap<string, Buffer>,
  missing: Downloaded['missing'],
): Downloaded['check'] {
  if (!('bytes' in served))
    return {
      unverified: `the collector serves no ${MANIFEST} for this bundle (${served.absent}): a collector older than this hoptrace, a capture one finished, or a repro still running; the files are as received, unchecked`,
    };
  const parsed = parseManifest(served.bytes.toString('utf8'));
  if (!parsed.ok)
    throw new HoptraceError(
      'COLLECTOR_BAD_RESPONSE',
      `${MANIFEST} is not a checksum file: ${parsed.problem}`,
      {
        where: `GET ${prefix}/${MANIFEST}`,
        hint: 'check the collector is a hoptrace collector; nothing was written',
      },
    );
  const c = checkManifest(parsed.sums, got);
  const problems = [
    ...c.mismatched.map(
      (m) =>
        `${m.name}: ${m.bytes} bytes received whose SHA-256 is ${short(m.actual)}, ${MANIFEST} lists ${short(m.listed)}`,
    ),
    ...c.absent.map(
      (n) =>
        `${n}: listed in ${MANIFEST}, not served (${missing.find((m) => m.file === n)?.reason ?? 'not asked for'})`,
    ),
    ...c.unlisted.map((n) => `${n}: served, not listed in ${MANIFEST}`),
  ];
  if (problems.length > 0)
    throw new HoptraceError('BUNDLE_CHECKSUM', `${problems.join('; ')}; nothing was written`, {
      where: `GET ${prefix}/…`,
      hint: "download it again; if the same file fails again, it changed on the collector's disk after it was written",
    });
  return { verified: c.verified.length };
}

function writeFiles(dir: string, files: ReadonlyMap<string, Buffer>): void {
  try {
    mkdirSync(dir, { recursive: true });
    for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes);
  } catch (e) {
    throw new HoptraceError('FILE_WRITE', e instanceof Error ? e.message : String(e), {
      where: dir,
      hint: 'give a writable --out DIR',
    });
  }
}

/** Writes the bundle of capture or repro `id` into `dir`, checked against its SHA256SUMS. */
export async function downloadBundle(
  client: CollectorClient,
  id: string,
  dir: string,
  o: { evidenceWaitMs: number; pollMs?: number },
): Promise<Downloaded> {
  const prefix = id.startsWith('r-') ? `/v1/repros/${id}` : `/v1/captures/${id}`;
  const known: readonly string[] = (id.startsWith('r-') ? REPRO_FILES : BUNDLE_FILES).filter(
    (n) => n !== MANIFEST,
  );
  let last: { got: Map<string, Buffer>; missing: Downloaded['missing'] } | null = null;
  for (let attempt = 0; attempt < DOWNLOAD_ATTEMPTS; attempt++) {
    const before = await getManifest(client, prefix);
    // A file a newer collector lists that this hoptrace does not know is brought home too (its
    // name is a plain file name: parseManifest).
    const parsed = 'bytes' in before ? parseManifest(before.bytes.toString('utf8')) : null;
    const listed = parsed?.ok === true ? [...parsed.sums.keys()] : [];
    const names = [...known, ...listed.filter((n) => !known.includes(n))];
    // evidence.pcapng is waited for once; a download again takes what there is.
    const wait = attempt === 0 ? o.evidenceWaitMs : 0;
    const { got, missing } = await getFiles(client, prefix, names, wait, o.pollMs ?? 1000);
    const after = await getManifest(client, prefix);
    if (sameServed(before, after)) {
      const check = verify(prefix, after, got, missing);
      if ('bytes' in after && 'verified' in check) got.set(MANIFEST, after.bytes);
      writeFiles(dir, got);
      return { dir, files: [...got.keys()], missing, check };
    }
    last = { got, missing };
  }
  const got = last?.got ?? new Map<string, Buffer>();
  writeFiles(dir, got);
  return {
    dir,
    files: [...got.keys()],
    missing: last?.missing ?? [],
    check: {
      unverified: `the bundle changed on the collector during each of ${DOWNLOAD_ATTEMPTS} downloads (its reports are rewritten as late counters, conntrack entries, doctor's findings or evidence frames arrive): the files are as received, unchecked; download it again in a moment`,
    },
  };
}

/** The lines that say where the bundle is, what is not in it, and whether it was verified. */
export function downloadedLines(d: Downloaded): string[] {
  return [
    `bundle: ${d.dir}/ (${d.files.join(', ')})`,
    ...d.missing.map((m) => `  not in it: ${m.file} (${m.reason})`),
    'verified' in d.check
      ? `  verified ${d.check.verified} files against ${MANIFEST}`
      : `  not verified against ${MANIFEST}: ${d.check.unverified}`,
  ];
}

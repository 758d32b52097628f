/**
 * `kubectl hoptrace report ID`: the bundle of a finished capture (report.md, report.json,
 * report.html, sequence.svg, evidence.pcapng, inventory.json) or of a repro (`r-…`: the same with
 * timeline.svg for sequence.svg), downloaded through the port-forward into
 * `./hoptrace-<ID>/`. evidence.pcapng exists only once the agents answered for their frames, a
 * few seconds after the verdict: it is waited for (--evidence-wait), then left out with a note.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { BUNDLE_FILES, CAPTURE_ID_RE, REPRO_FILES, REPRO_ID_RE } from '../../collector';
import { HoptraceError } from '../../common/errors';
import { parseDuration } from '../capture';
import type { CollectorClient } from '../collector-client';
import { EXIT } from '../exit-codes';
import { linkCollector } from './collector-link';
import { KUBE_USAGE, parseKubectlArgs, type KubectlDeps } from './flags';

export const USAGE = `kubectl hoptrace report ID [--out DIR] [--evidence-wait 30s] ${KUBE_USAGE}`;

export interface Downloaded {
  dir: string;
  files: string[];
  /** Files the collector did not have (yet), with why. */
  missing: { file: string; reason: string }[];
}

/** Writes the bundle of capture or repro `id` into `dir`. */
export async function downloadBundle(
  client: CollectorClient,
  id: string,
  dir: string,
  o: { evidenceWaitMs: number; pollMs?: number },
): Promise<Downloaded> {
  const repro = id.startsWith('r-');
  const prefix = repro ? `/v1/repros/${id}` : `/v1/captures/${id}`;
  const names: readonly string[] = repro ? REPRO_FILES : BUNDLE_FILES;
  const got = new Map<string, Buffer>();
  const missing: Downloaded['missing'] = [];
  for (const name of names) {
    const deadline = Date.now() + (name === 'evidence.pcapng' ? o.evidenceWaitMs : 0);
    for (;;) {
      try {
        got.set(name, await client.bytes(`${prefix}/${name}`));
        break;
      } catch (e) {
        if (!(e instanceof HoptraceError) || e.code !== 'API_NOT_FOUND') throw e;
        if (name === 'report.md') throw e; // no verdict yet: nothing to bring home
        if (Date.now() >= deadline) {
          missing.push({ file: name, reason: e.message });
          break;
        }
        await delay(o.pollMs ?? 1000);
      }
    }
  }
  try {
    mkdirSync(dir, { recursive: true });
    for (const [name, bytes] of got) writeFileSync(join(dir, name), bytes);
  } catch (e) {
    throw new HoptraceError('FILE_WRITE', e instanceof Error ? e.message : String(e), {
      where: dir,
      hint: 'give a writable --out DIR',
    });
  }
  return { dir, files: [...got.keys()], missing };
}

/** The lines that say where the bundle is and what is not in it. */
export function downloadedLines(d: Downloaded): string[] {
  return [
    `bundle: ${d.dir}/ (${d.files.join(', ')})`,
    ...d.missing.map((m) => `  not in it: ${m.file} (${m.reason})`),
  ];
}

export async function runReport(argv: string[], deps: KubectlDeps): Promise<number> {
  const { values, positionals, kube, hoptraceNamespace } = parseKubectlArgs('report', USAGE, argv, {
    out: { type: 'string' },
    'evidence-wait': { type: 'string' },
  });
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0 || !(CAPTURE_ID_RE.test(id) || REPRO_ID_RE.test(id))) {
    throw new HoptraceError(
      'CLI_USAGE',
      id === undefined
        ? 'give the capture or repro ID'
        : `'${positionals.join(' ')}' is not one capture or repro ID`,
      { where: 'kubectl hoptrace report', hint: `usage: ${USAGE}` },
    );
  }
  const evidenceWaitMs = parseDuration(values['evidence-wait'] ?? '30s', '--evidence-wait');
  const cluster = await deps.connect(kube);
  const link = await linkCollector(cluster, hoptraceNamespace);
  const dir = resolve(deps.cwd, values.out ?? `hoptrace-${id}`);
  const d = await downloadBundle(link.client, id, dir, {
    evidenceWaitMs,
    ...(deps.pollMs === undefined ? {} : { pollMs: deps.pollMs }),
  });
  for (const l of downloadedLines(d)) deps.out(l);
  return EXIT.ok;
}

/**
 * The bundle of an analysis of files (`analyze --report-dir`, and every offline lab scenario):
 * report.md, report.json, report.html, sequence.svg, evidence.pcapng (the matched connection's
 * frames, read again from the files), inventory.json (the inventory as used, which the Reproduce
 * line names), doctor.json (`--doctor`'s file as read) and SHA256SUMS (every other file's
 * digest). A shell: it hashes the inputs and writes files; the documents are built by core/report.
 */
import { renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { renderReportJson, renderReportMarkdown, type ReportMeta } from '../core/report/report';
import type {
  EvidenceSummary,
  GivenFiles,
  ReportInput,
  ReportRuntime,
} from '../core/report/report-document';
import { analyzeCommand } from '../core/report/reproduce';
import type { DoctorEvidence } from '../core/report/what-to-change';
import { renderReportHtml } from '../core/report/report-html';
import { renderSequenceSvg } from '../core/report/sequence-svg';
import { findingNotes } from '../core/report/finding-notes';
import type { AnalysisResult } from '../core/report/analysis-result';
import { HoptraceError } from '../common/errors';
import type { Inventory } from '../common/inventory';
import { MANIFEST, manifestOf, sha256Hex } from '../common/sha256sums';
import { hoptraceVersion, processRuntime } from '../common/version';
import { loadNativeAddon } from '../native/loader';
import { fileDigest, fileStamp, hashableInput, type FileDigest } from './file-digest';
import { PendingDigests } from './digest-pool';
import { buildEvidencePcapng } from './evidence';
import type { PointFile, RequestSelector } from './analyze-files';
import type { ResumePoint } from './pcap-file';
import { inputText, isStreamInput } from './point-inputs';

/** FILE_WRITE for one file of the bundle: what, where, and what to do. */
function writeError(dir: string, name: string, e: unknown, renamed: string[] = []): HoptraceError {
  const errno = (e as NodeJS.ErrnoException).code;
  const state =
    renamed.length === 0
      ? 'nothing of this bundle was written'
      : `${renamed.join(', ')} of this bundle were written, the rest not`;
  return new HoptraceError(
    'FILE_WRITE',
    `cannot write ${join(dir, name)} (${e instanceof Error ? e.message : String(e)}); ${state}`,
    {
      where: '--report-dir',
      hint:
        errno === 'EISDIR'
          ? `a directory named ${name} is in the way: remove it or give another --report-dir`
          : 'check free space and permissions',
    },
  );
}

/** The files a bundle may hold besides the ones always written: an earlier run's is removed. */
const OPTIONAL_FILES = ['doctor.json'] as const;

/**
 * Writes the bundle's files into `dir`, all or none: a bundle's files name each other (report.json
 * its evidence.pcapng and inventory.json), so one that failed half-way would leave this run's
 * files beside an earlier run's. Each is written under a temporary name beside it, and renamed
 * over its name only once every one is written; a failure removes the temporary files and leaves
 * the directory as it was. SHA256SUMS, hashed from the very bytes written, is renamed last: a
 * bundle with it is whole. An earlier run's optional file this run does not write (doctor.json)
 * is removed after, so the directory holds no file the manifest does not cover.
 */
function writeBundle(dir: string, given: readonly (readonly [string, string | Buffer])[]): void {
  const files = [...given, [MANIFEST, manifestOf(given)] as const];
  for (const [name] of files) {
    let isDir = false;
    try {
      isDir = statSync(join(dir, name)).isDirectory();
    } catch {
      // absent: written below
    }
    if (isDir)
      throw writeError(dir, name, Object.assign(new Error('is a directory'), { code: 'EISDIR' }));
  }
  const written: string[] = [];
  const tmpOf = (name: string): string => join(dir, `.${name}.${process.pid}.tmp`);
  try {
    for (const [name, body] of files) {
      try {
        writeFileSync(tmpOf(name), body);
      } catch (e) {
        throw writeError(dir, name, e);
      }
      written.push(tmpOf(name));
    }
    const renamed: string[] = [];
    for (const [name] of files) {
      try {
        renameSync(tmpOf(name), join(dir, name));
      } catch (e) {
        throw writeError(dir, name, e, renamed);
      }
      renamed.push(name);
    }
    for (const name of OPTIONAL_FILES) {
      if (files.some(([n]) => n === name)) continue;
      try {
        rmSync(join(dir, name), { force: true });
      } catch (e) {
        throw writeError(dir, name, e, renamed);
      }
    }
  } finally {
    for (const t of written) rmSync(t, { force: true });
  }
}

/** The digests of the point files that can be hashed (file-digest.ts hashableInput), here and now. */
export function pointDigests(points: PointFile[]): Map<string, FileDigest> {
  const out = new Map<string, FileDigest>();
  for (const p of points) if (hashableInput(p.file)) out.set(p.name, fileDigest(p.file));
  return out;
}

/** The digests of the point files, hashed beside the analysis (digest-pool.ts). */
export function startDigests(points: PointFile[]): PendingDigests {
  return new PendingDigests(points);
}

/** Files that changed between their digest and the end of the analysis. */
function changedSince(points: PointFile[], before: Map<string, FileDigest>): string[] {
  return points.flatMap((p) => {
    const d = before.get(p.name);
    if (d === undefined) return [];
    const now = fileStamp(p.file);
    return d.changed !== true && now !== null && now.bytes === d.bytes && now.mtimeMs === d.mtimeMs
      ? []
      : [
          `${p.file} changed while it was analysed (a capture still being written?): its SHA-256 is of the bytes read while it was hashed, which may differ from the bytes analysed and from the file now`,
        ];
  });
}

export interface ReportDirInput {
  dir: string;
  points: PointFile[];
  drops: Map<string, number>;
  inventory: Inventory;
  inventoryFile: string | undefined;
  /** SHA-256 and size of the `--inventory` file's bytes as read. */
  inventoryDigest?: { sha256: string; bytes: number } | undefined;
  selector: RequestSelector;
  doctorFile: string | undefined;
  /** The `--doctor` file's bytes as read (null: it could not be read); copied as doctor.json. */
  doctorBytes?: Buffer | null | undefined;
  doctor: DoctorEvidence;
  before: Map<string, FileDigest>;
  /** evidence.pcapng keeps the payload bytes (`--evidence-payload`), else headers only. */
  payload: boolean;
  /** The analysis's resume points by point name (analyzeFiles' `seek`): evidence reads from them. */
  seek?: ReadonlyMap<string, readonly ResumePoint[]>;
}

/** The Node, platform and decoder this process analysed with (native/loader.ts caches the load). */
export function reportRuntime(): ReportRuntime {
  return {
    analyzedBy: 'analyze',
    ...processRuntime(),
    nativeDecoder: loadNativeAddon().ok ? 'loaded' : 'not-loaded',
  };
}

/**
 * Writes the bundle into `--report-dir`: report.md, report.json, report.html, sequence.svg,
 * evidence.pcapng (the matched connection's frames, read back from the files), inventory.json
 * (as used), doctor.json (`--doctor`'s file, when it could be read) and SHA256SUMS, last. Returns
 * the names written.
 */
export function writeReportDir(r: AnalysisResult, o: ReportDirInput): string[] {
  const inventoryJson = JSON.stringify(o.inventory, null, 2) + '\n';
  const doctorBytes = o.doctorFile === undefined ? null : (o.doctorBytes ?? null);
  const givenFiles: GivenFiles = {
    inventory:
      o.inventoryFile === undefined
        ? null
        : {
            file: resolve(o.inventoryFile),
            sha256: o.inventoryDigest?.sha256 ?? null,
            bytes: o.inventoryDigest?.bytes ?? null,
            copy: 'inventory.json',
            verbatim: false,
          },
    doctor:
      o.doctorFile === undefined
        ? null
        : {
            file: resolve(o.doctorFile),
            sha256: doctorBytes === null ? null : sha256Hex(doctorBytes),
            bytes: doctorBytes === null ? null : doctorBytes.length,
            copy: doctorBytes === null ? null : 'doctor.json',
            verbatim: true,
          },
  };
  const points = o.points.map((p) => ({
    name: p.name,
    file: p.file === '-' ? '-' : resolve(p.file),
  }));
  const inputs: ReportInput[] = points.map((p) => {
    const d = o.before.get(p.name);
    return { ...p, sha256: d?.sha256 ?? null, bytes: d?.bytes ?? null };
  });
  // The bundle's own files by their names alone, so the command still runs once the bundle is
  // moved or attached to an incident; the captures are outside it and keep their absolute paths.
  const doctorArg =
    o.doctorFile === undefined
      ? undefined
      : doctorBytes === null
        ? resolve(o.doctorFile)
        : 'doctor.json';
  const reproduce = analyzeCommand({
    points,
    drops: [...o.drops].map(([point, count]) => ({ point, count })),
    inventory: 'inventory.json',
    selector: o.selector,
    doctor: doctorArg,
  });
  const copies =
    doctorArg === 'doctor.json'
      ? "inventory.json and doctor.json are the bundle's copies (the inventory as this analysis used it, doctor's JSON as read)"
      : "inventory.json is the bundle's copy of the inventory as this analysis used it";
  reproduce.notes.push(
    `run it in the bundle's directory: ${copies}; the capture files are named by their absolute paths, outside the bundle`,
    ...(doctorArg === undefined || doctorArg === 'doctor.json'
      ? []
      : ['--doctor names the file given: it could not be read, so the bundle holds no copy']),
    ...changedSince(o.points, o.before),
    // `-` has its own note (reproduce.ts); a pipe's path names nothing once it is read.
    ...o.points
      .filter((p) => p.file !== '-' && isStreamInput(p.file))
      .map((p) => `${p.name} was read from ${inputText(p.file)}: give it the same bytes again`),
  );
  const meta: ReportMeta = {
    generatedAt: new Date().toISOString(),
    inputs,
    inventory: o.inventoryFile === undefined ? undefined : resolve(o.inventoryFile),
    selector: o.selector,
    hoptraceVersion: hoptraceVersion(),
    source: 'files',
    inventoryUsed: o.inventory,
    doctor: o.doctor,
    reproduce,
    givenFiles,
    runtime: reportRuntime(),
    manifest: MANIFEST,
  };
  const ev = buildEvidencePcapng({
    points: o.points,
    result: r,
    version: hoptraceVersion(),
    payload: o.payload,
    seek: o.seek,
  });
  const evidence: EvidenceSummary = {
    file: 'evidence.pcapng',
    packets: ev.packets,
    headersOnly: ev.headersOnly,
    interfaces: ev.interfaces.map((i) => ({ point: i.point, name: i.name, packets: i.packets })),
    problems: ev.problems.map((p) => ({ point: p.point, code: p.code, detail: p.detail })),
    note: ev.note,
    sha256: sha256Hex(ev.bytes),
    bytes: ev.bytes.length,
  };
  const full = { ...meta, evidence };
  const notes = o.doctor.status === 'given' ? findingNotes(r.points, o.doctor.result.findings) : [];
  const files: [string, string | Buffer][] = [
    ['report.md', renderReportMarkdown(r, full)],
    ['report.json', renderReportJson(r, full)],
    ['report.html', renderReportHtml(r, full, { notes })],
    ['sequence.svg', renderSequenceSvg(r, { notes })],
    ['evidence.pcapng', ev.bytes],
    ['inventory.json', inventoryJson],
    ...(doctorBytes === null ? [] : [['doctor.json', doctorBytes] as [string, Buffer]]),
  ];
  writeBundle(o.dir, files);
  return [...files.map(([name]) => name), MANIFEST];
}

/**
 * `hoptrace analyze`: capture files from ordered points → file replay (the agent's events) →
 * correlate → attribute → report. This file is the composition root for offline analysis; the
 * pure work happens in agent/ (decode) and collector/ (correlate, attribute, report).
 */
import { resolve } from 'node:path';
import { readBoundedBytes } from '../common/bounded-file';
import type { DoctorEvidence } from '../core/report/what-to-change';
import { parseDoctorJson } from '../core/doctor/doctor-json';
import { makeWritableDir } from '../common/writable-dir';
import type { FileDigest } from '../offline/file-digest';
import type { ResumePoint } from '../offline/pcap-file';
import type { AnalysisResult } from '../core/report/analysis-result';
import { scanIdentityHeaders } from '../offline/identity-scan';
import { parseAnalyzeArgs } from './analyze-args';
import { EXIT } from './exit-codes';
import {
  analyzeFiles,
  type AnalyzeFilesInput,
  type PointFile,
  type RequestSelector,
} from '../offline/analyze-files';

export { analyzeFiles, type AnalyzeFilesInput, type PointFile, type RequestSelector };
export {
  USAGE,
  parseDropsArgs,
  parseDstArg,
  parseParallelArg,
  parsePointArg,
  parseReportDirArg,
} from './analyze-args';

/**
 * The most of a --doctor file read: `hoptrace doctor --json` prints a few KB (a finding per check
 * and namespace); 4 MiB is a thousand times that.
 */
export const DOCTOR_MAX_BYTES = 4 << 20;

/**
 * Doctor's findings from the JSON `hoptrace doctor --json` printed; a file that cannot be read, is
 * larger than DOCTOR_MAX_BYTES or is not that JSON is said to be so in the report (never read as
 * "no findings").
 */
export function readDoctorFile(path: string): DoctorEvidence {
  return readDoctorInput(path).evidence;
}

/**
 * readDoctorFile's evidence with the bytes it was read from (null: the file could not be read),
 * which the bundle copies and hashes: the copy is what shaped the answers, whatever the file
 * holds later.
 */
export function readDoctorInput(path: string): { evidence: DoctorEvidence; raw: Buffer | null } {
  const source = resolve(path);
  let raw: Buffer;
  try {
    raw = readBoundedBytes(path, DOCTOR_MAX_BYTES);
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    return { evidence: { status: 'unreadable', source, detail }, raw: null };
  }
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return { evidence: { status: 'unreadable', source, detail: `not JSON (${why})` }, raw };
  }
  const parsed = parseDoctorJson(value);
  const evidence: DoctorEvidence =
    'error' in parsed
      ? {
          status: 'unreadable',
          source,
          detail: `not what \`hoptrace doctor --json\` prints: ${parsed.error}`,
        }
      : { status: 'given', source, result: parsed.result };
  return { evidence, raw };
}

/**
 * Runs `hoptrace analyze`. The text report and the report bundle are loaded only when asked for
 * (`--json` alone needs neither): their modules are ~a fifth of what analyze would load, and a
 * run on small files is mostly Node's start and module loading.
 */
export async function runAnalyze(argv: string[], out: (line: string) => void): Promise<number> {
  // Every flag is checked (and the inventory read) before anything is created.
  const args = parseAnalyzeArgs(argv);
  const { points, inventory, selector, drops } = args;
  const dir = args.reportDir;
  // Refused before the analysis: an unwritable directory is known at once.
  if (dir !== undefined) makeWritableDir(dir, '--report-dir', 'FILE_WRITE');
  const bundle = dir === undefined ? undefined : await import('../offline/report-dir');
  // Hashed beside the analysis, on a worker thread (offline/digest-pool.ts): a file that changes
  // meanwhile is noted in the report.
  const digests = bundle?.startDigests(points);
  try {
    const parallel = args.parallel;
    // Where each file can be read again from the middle (the identity headers, evidence.pcapng).
    const seek = new Map<string, readonly ResumePoint[]>();
    const analysed = analyzeFiles(
      // No request found is the verdict unknown (exit 3), its report and bundle still written.
      { points, inventory, selector, drops, noRequest: 'verdict' },
      parallel === undefined ? { seek } : { parallel, seek },
    );
    // The request's data segments read again at each point: the identity headers its head carried.
    const result: AnalysisResult = {
      ...analysed,
      identityHeaders: scanIdentityHeaders(points, analysed, seek),
    };
    const given = args.doctorFile === undefined ? undefined : readDoctorInput(args.doctorFile);
    const doctor: DoctorEvidence = given?.evidence ?? {
      status: 'not-run',
      detail: 'doctor was not run (no --doctor FILE)',
    };

    // With --doctor, what became of its file, as report.json's `doctor` (and the text's "doctor:"
    // line) say it: a file that could not be read is never silently left out.
    if (args.json)
      out(JSON.stringify(args.doctorFile === undefined ? result : { ...result, doctor }));
    else {
      const { renderVerdictText } = await import('../core/report/report');
      out(renderVerdictText(result, args.doctorFile === undefined ? undefined : doctor));
    }

    if (dir !== undefined && bundle !== undefined) {
      const before = digests === undefined ? new Map<string, FileDigest>() : await digests.take();
      const written = bundle.writeReportDir(result, {
        dir,
        points,
        drops,
        inventory,
        inventoryFile: args.inventoryFile,
        inventoryDigest: args.inventoryDigest,
        selector,
        doctorFile: args.doctorFile,
        doctorBytes: given?.raw ?? null,
        doctor,
        before,
        payload: args.payload,
        seek,
      });
      if (!args.json) out(`bundle written to ${dir}: ${written.join(', ')}`);
    }
    // As `capture`: 0 when the captures answered (a layer named, or preserved, no return, dropped),
    // 3 when they could not (no request found, a point without a capture, an ambiguous match).
    return result.verdict.layer === 'unknown' ? EXIT.inconclusive : EXIT.ok;
  } finally {
    // Whatever failed, the process does not wait for the hashing worker (a no-op after take()).
    await digests?.close();
  }
}

/**
 * `hoptrace analyze`: capture files from ordered points → file replay (the agent's events) →
 * correlate → attribute → report. This file is the composition root for offline analysis; the
 * pure work happens in agent/ (decode) and collector/ (correlate, attribute, report).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import type { DoctorEvidence } from '../core/report/what-to-change';
import { parseDoctorJson } from '../core/doctor/doctor-json';
import { HoptraceError } from '../common/errors';
import { readInventoryFile } from '../common/inventory-file';
import { makeWritableDir } from '../common/writable-dir';
import type { FileDigest } from '../offline/file-digest';
import type { ResumePoint } from '../offline/pcap-file';
import type { AnalysisResult } from '../core/report/analysis-result';
import { scanIdentityHeaders } from '../offline/identity-scan';
import { parseCommandLine } from './args';
import { EXIT } from './exit-codes';
import {
  analyzeFiles,
  type AnalyzeFilesInput,
  type PointFile,
  type RequestSelector,
} from '../offline/analyze-files';

export { analyzeFiles, type AnalyzeFilesInput, type PointFile, type RequestSelector };

export const USAGE =
  'hoptrace analyze --point NAME=FILE [--point NAME=FILE]... [--drops NAME=N]... [--inventory inv.json] [--client IP] [--dst IP[:PORT]] [--doctor doctor.json] [--json] [--report-dir DIR [--evidence-payload]] [--parallel auto|on|off]';

/** Parses `NAME=FILE`. */
export function parsePointArg(value: string): PointFile {
  const eq = value.indexOf('=');
  const name = value.slice(0, eq);
  const file = value.slice(eq + 1);
  if (eq <= 0 || file === '' || !/^[a-z][a-z0-9-]{0,31}$/.test(name)) {
    throw new HoptraceError('CLI_BAD_POINT', `'${value}' is not NAME=FILE`, {
      where: '--point',
      hint: 'e.g. --point decap=decap.pcap; NAME is lower-case letters, digits and dashes',
    });
  }
  return { name, file };
}

/**
 * Parses the `--drops NAME=N` values against the points: the packets a point's capture dropped, as
 * its tool printed them when it stopped (tcpdump: "N packets dropped by kernel").
 */
export function parseDropsArgs(values: string[], points: PointFile[]): Map<string, number> {
  const drops = new Map<string, number>();
  for (const value of values) {
    const m = /^([a-z][a-z0-9-]{0,31})=(\d{1,15})$/.exec(value);
    if (m === null) {
      throw new HoptraceError('CLI_USAGE', `'${value}' is not NAME=N`, {
        where: '--drops',
        hint: 'the count tcpdump printed for that point\'s file ("N packets dropped by kernel"), e.g. --drops backend=0',
      });
    }
    const [, name = '', n = '0'] = m;
    if (!points.some((p) => p.name === name)) {
      throw new HoptraceError('CLI_BAD_POINT', `--drops names '${name}', which is not a point`, {
        where: '--drops',
        hint: `the points are ${points.map((p) => p.name).join(', ')}`,
      });
    }
    if (drops.has(name))
      throw new HoptraceError('CLI_BAD_POINT', `--drops for '${name}' is given twice`, {
        where: '--drops',
      });
    drops.set(name, Number(n));
  }
  return drops;
}

/**
 * `--parallel auto|on|off`: the later points on worker threads when a later file holds 64 MiB or
 * more (auto, the default), whatever their size (on), or never (off). undefined is auto.
 */
export function parseParallelArg(value: string | undefined): boolean | undefined {
  if (value === undefined || value === 'auto') return undefined;
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new HoptraceError('CLI_USAGE', `'${value}' is not auto, on or off`, {
    where: '--parallel',
    hint: 'auto (the default): worker threads for later files of 64 MiB or more; on: always; off: never',
  });
}

/** Parses `IP` or `IP:PORT` / `[IPv6]:PORT` for --dst. */
export function parseDstArg(value: string): { dst: string; dport?: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(value) ?? /^([^:]+)(?::(\d+))?$/.exec(value);
  const ip = m?.[1] ?? value;
  const port = m?.[2];
  if (isIP(ip) === 0 || (port !== undefined && (Number(port) < 1 || Number(port) > 65535))) {
    if (isIP(value) !== 0) return { dst: value }; // a bare IPv6 address
    throw new HoptraceError('CLI_USAGE', `'${value}' is not IP or IP:PORT`, {
      where: '--dst',
      hint: 'e.g. --dst 10.96.0.10:80',
    });
  }
  return port === undefined ? { dst: ip } : { dst: ip, dport: Number(port) };
}

/**
 * Doctor's findings from the JSON `hoptrace doctor --json` printed; a file that cannot be read or
 * is not that JSON is said to be so in the report (never read as "no findings").
 */
export function readDoctorFile(path: string): DoctorEvidence {
  const source = resolve(path);
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (e) {
    return { status: 'unreadable', source, detail: e instanceof Error ? e.message : String(e) };
  }
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return { status: 'unreadable', source, detail: `not JSON (${why})` };
  }
  const parsed = parseDoctorJson(value);
  return 'error' in parsed
    ? {
        status: 'unreadable',
        source,
        detail: `not what \`hoptrace doctor --json\` prints: ${parsed.error}`,
      }
    : { status: 'given', source, result: parsed.result };
}

/**
 * Runs `hoptrace analyze`. The text report and the report bundle are loaded only when asked for
 * (`--json` alone needs neither): their modules are ~a fifth of what analyze would load, and a
 * run on small files is mostly Node's start and module loading.
 */
export async function runAnalyze(argv: string[], out: (line: string) => void): Promise<number> {
  const { values, positionals } = parseCommandLine('analyze', USAGE, argv, {
    point: { type: 'string', multiple: true },
    drops: { type: 'string', multiple: true },
    inventory: { type: 'string' },
    client: { type: 'string' },
    dst: { type: 'string' },
    doctor: { type: 'string' },
    json: { type: 'boolean' },
    'report-dir': { type: 'string' },
    'evidence-payload': { type: 'boolean' },
    parallel: { type: 'string' },
  });
  if (positionals.length > 0) {
    throw new HoptraceError('CLI_USAGE', `unexpected argument '${String(positionals[0])}'`, {
      where: 'hoptrace analyze',
      hint: `usage: ${USAGE}`,
    });
  }
  const points = (values.point ?? []).map(parsePointArg);
  if (points.length < 2) {
    throw new HoptraceError('CLI_USAGE', 'give at least two capture points, in path order', {
      where: 'hoptrace analyze',
      hint: 'e.g. --point decap=A.pcap --point egress=B.pcap --point backend=C.pcap',
    });
  }
  const seen = new Set<string>();
  for (const p of points) {
    if (seen.has(p.name))
      throw new HoptraceError('CLI_BAD_POINT', `point '${p.name}' is given twice`, {
        where: '--point',
      });
    seen.add(p.name);
  }
  const selector: RequestSelector = {};
  if (values.client !== undefined) {
    if (isIP(values.client) === 0) {
      throw new HoptraceError('CLI_USAGE', `'${values.client}' is not an IP address`, {
        where: '--client',
        hint: 'the client tunnel address, e.g. --client 10.90.0.42',
      });
    }
    selector.client = values.client;
  }
  if (values.dst !== undefined) Object.assign(selector, parseDstArg(values.dst));
  const inventory =
    values.inventory === undefined ? { nodes: {}, pods: {} } : readInventoryFile(values.inventory);

  const drops = parseDropsArgs(values.drops ?? [], points);
  const dir = values['report-dir'];
  // Refused before the analysis: an unwritable directory is known at once.
  if (dir !== undefined) makeWritableDir(dir, '--report-dir', 'FILE_WRITE');
  const bundle = dir === undefined ? undefined : await import('../offline/report-dir');
  // Hashed beside the analysis, on a worker thread (offline/digest-pool.ts): a file that changes
  // meanwhile is noted in the report.
  const digests = bundle?.startDigests(points);
  try {
    const parallel = parseParallelArg(values.parallel);
    // Where each file can be read again from the middle (the identity headers, evidence.pcapng).
    const seek = new Map<string, readonly ResumePoint[]>();
    const analysed = analyzeFiles(
      { points, inventory, selector, drops },
      parallel === undefined ? { seek } : { parallel, seek },
    );
    // The request's data segments read again at each point: the identity headers its head carried.
    const result: AnalysisResult = {
      ...analysed,
      identityHeaders: scanIdentityHeaders(points, analysed, seek),
    };
    const doctor: DoctorEvidence =
      values.doctor === undefined
        ? { status: 'not-run', detail: 'doctor was not run (no --doctor FILE)' }
        : readDoctorFile(values.doctor);

    if (values.json === true) out(JSON.stringify(result));
    else {
      const { renderVerdictText } = await import('../core/report/report');
      out(renderVerdictText(result, values.doctor === undefined ? undefined : doctor));
    }

    if (dir !== undefined && bundle !== undefined) {
      const before = digests === undefined ? new Map<string, FileDigest>() : await digests.take();
      bundle.writeReportDir(result, {
        dir,
        points,
        drops,
        inventory,
        inventoryFile: values.inventory,
        selector,
        doctorFile: values.doctor,
        doctor,
        before,
        payload: values['evidence-payload'] === true,
        seek,
      });
      if (values.json !== true)
        out(
          `bundle written to ${dir}: report.md, report.json, report.html, sequence.svg, evidence.pcapng, inventory.json`,
        );
    }
    // As `capture`: 0 when the captures answered (a layer named, or preserved, no return, dropped),
    // 3 when they could not (no request found, a point without a capture, an ambiguous match).
    return result.verdict.layer === 'unknown' ? EXIT.inconclusive : EXIT.ok;
  } finally {
    // Whatever failed, the process does not wait for the hashing worker (a no-op after take()).
    await digests?.close();
  }
}

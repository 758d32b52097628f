/**
 * `hoptrace analyze`: capture files from ordered points → file replay (the agent's events) →
 * correlate → attribute → report. This file is the composition root for offline analysis; the
 * pure work happens in agent/ (decode) and collector/ (correlate, attribute, report).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import {
  renderReportJson,
  renderReportMarkdown,
  renderVerdictText,
  type ReportMeta,
} from '../core/report/report';
import type { ReportInput } from '../core/report/report-document';
import { analyzeCommand } from '../core/report/reproduce';
import type { DoctorEvidence } from '../core/report/what-to-change';
import { parseDoctorJson } from '../core/doctor/doctor-json';
import { HoptraceError } from '../common/errors';
import type { Inventory } from '../common/inventory';
import { readInventoryFile } from '../common/inventory-file';
import { hoptraceVersion } from '../common/version';
import { makeWritableDir } from '../common/writable-dir';
import { fileDigest, fileStamp, type FileDigest } from '../offline/file-digest';
import { scanIdentityHeaders } from '../offline/identity-scan';
import { buildEvidencePcapng } from '../offline/evidence';
import { renderReportHtml } from '../core/report/report-html';
import { renderSequenceSvg } from '../core/report/sequence-svg';
import { findingNotes } from '../core/report/finding-notes';
import type { EvidenceSummary } from '../core/report/report-document';
import { parseCommandLine } from './args';
import {
  analyzeFiles,
  type AnalyzeFilesInput,
  type PointFile,
  type RequestSelector,
} from '../offline/analyze-files';

export { analyzeFiles, type AnalyzeFilesInput, type PointFile, type RequestSelector };

export const USAGE =
  'hoptrace analyze --point NAME=FILE [--point NAME=FILE]... [--drops NAME=N]... [--inventory inv.json] [--client IP] [--dst IP[:PORT]] [--doctor doctor.json] [--json] [--report-dir DIR [--evidence-payload]]';

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

/** Writes one report file into `--report-dir`; FILE_WRITE (a clear error) when it cannot. */
function writeReport(dir: string, name: string, text: string | Buffer): void {
  try {
    writeFileSync(join(dir, name), text);
  } catch (e) {
    throw new HoptraceError(
      'FILE_WRITE',
      `cannot write ${join(dir, name)} (${e instanceof Error ? e.message : String(e)})`,
      {
        where: '--report-dir',
        hint: 'check free space and permissions',
      },
    );
  }
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

/** The digests of the point files ('-', standard input, is not hashed: reading it would use it up). */
function digests(points: PointFile[]): Map<string, FileDigest> {
  const out = new Map<string, FileDigest>();
  for (const p of points) if (p.file !== '-') out.set(p.name, fileDigest(p.file));
  return out;
}

/** Files that changed between their digest and the end of the analysis. */
function changedSince(points: PointFile[], before: Map<string, FileDigest>): string[] {
  return points.flatMap((p) => {
    const d = before.get(p.name);
    if (d === undefined) return [];
    const now = fileStamp(p.file);
    return now !== null && now.bytes === d.bytes && now.mtimeMs === d.mtimeMs
      ? []
      : [
          `${p.file} changed while it was analysed (a capture still being written?): its SHA-256 is of the bytes before the analysis`,
        ];
  });
}

interface ReportDirInput {
  dir: string;
  points: PointFile[];
  drops: Map<string, number>;
  inventory: Inventory;
  inventoryFile: string | undefined;
  selector: RequestSelector;
  doctorFile: string | undefined;
  doctor: DoctorEvidence;
  before: Map<string, FileDigest>;
  /** evidence.pcapng keeps the payload bytes (`--evidence-payload`), else headers only. */
  payload: boolean;
}

/**
 * Writes the bundle into `--report-dir`: report.md, report.json, report.html, sequence.svg,
 * evidence.pcapng (the matched connection's frames, read back from the files) and inventory.json
 * (as used).
 */
function writeReportDir(r: ReturnType<typeof analyzeFiles>, o: ReportDirInput): void {
  const dir = resolve(o.dir);
  const inventoryPath = join(dir, 'inventory.json');
  writeReport(o.dir, 'inventory.json', JSON.stringify(o.inventory, null, 2) + '\n');
  const points = o.points.map((p) => ({
    name: p.name,
    file: p.file === '-' ? '-' : resolve(p.file),
  }));
  const inputs: ReportInput[] = points.map((p) => {
    const d = o.before.get(p.name);
    return { ...p, sha256: d?.sha256 ?? null, bytes: d?.bytes ?? null };
  });
  const reproduce = analyzeCommand({
    points,
    drops: [...o.drops].map(([point, count]) => ({ point, count })),
    inventory: inventoryPath,
    selector: o.selector,
    doctor: o.doctorFile === undefined ? undefined : resolve(o.doctorFile),
  });
  reproduce.notes.push(
    `--inventory names ${inventoryPath}, the inventory as this analysis used it (written beside the report)`,
    ...changedSince(o.points, o.before),
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
  };
  const ev = buildEvidencePcapng({
    points: o.points,
    result: r,
    version: hoptraceVersion(),
    payload: o.payload,
  });
  writeReport(o.dir, 'evidence.pcapng', ev.bytes);
  const evidence: EvidenceSummary = {
    file: 'evidence.pcapng',
    packets: ev.packets,
    headersOnly: ev.headersOnly,
    interfaces: ev.interfaces.map((i) => ({ point: i.point, name: i.name, packets: i.packets })),
    problems: ev.problems.map((p) => ({ point: p.point, code: p.code, detail: p.detail })),
    note: ev.note,
  };
  const full = { ...meta, evidence };
  const notes = o.doctor.status === 'given' ? findingNotes(r.points, o.doctor.result.findings) : [];
  writeReport(o.dir, 'report.md', renderReportMarkdown(r, full));
  writeReport(o.dir, 'report.json', renderReportJson(r, full));
  writeReport(o.dir, 'report.html', renderReportHtml(r, full, { notes }));
  writeReport(o.dir, 'sequence.svg', renderSequenceSvg(r, { notes }));
}

export function runAnalyze(argv: string[], out: (line: string) => void): number {
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
  // Hashed before the analysis: the digest is of the bytes analysed (a change is noted).
  const before = dir === undefined ? new Map<string, FileDigest>() : digests(points);
  const analysed = analyzeFiles({ points, inventory, selector, drops });
  // The request's first data segment read again at each point: the identity headers it carried.
  const result = { ...analysed, identityHeaders: scanIdentityHeaders(points, analysed) };
  const doctor: DoctorEvidence =
    values.doctor === undefined
      ? { status: 'not-run', detail: 'doctor was not run (no --doctor FILE)' }
      : readDoctorFile(values.doctor);

  if (values.json === true) out(JSON.stringify(result));
  else out(renderVerdictText(result, values.doctor === undefined ? undefined : doctor));

  if (dir !== undefined) {
    writeReportDir(result, {
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
    });
    if (values.json !== true)
      out(
        `bundle written to ${dir}: report.md, report.json, report.html, sequence.svg, evidence.pcapng, inventory.json`,
      );
  }
  return 0;
}

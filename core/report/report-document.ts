/**
 * report.json as evidence: the analysis (the same top-level members `hoptrace analyze --json`
 * prints, so every reader of the analysis reads this too) beside what it was computed from — the
 * inputs with their SHA-256 (files) or agents, nodes, interfaces and filters (a live capture), the
 * inventory as used, the selector, doctor's findings, the hoptrace version — what to change, and the
 * command that repeats it. Its contract is proto/report.schema.json (`schemaVersion`). Pure: hashes,
 * the version and the time are passed in by the shell.
 */
import type { Inventory } from '../../common/inventory';
import type { AnalysisResult } from './analysis-result';
import { analyzeCommand, type ReproduceCommand } from './reproduce';
import { whatToChange, type DoctorEvidence, type WhatToChange } from './what-to-change';

/** The version of report.json's shape; raised when a member changes meaning or goes away. */
export const REPORT_SCHEMA_VERSION = 1;

/** Where a live capture point captured (the collector's point record). */
export interface LivePointInput {
  agentId: string | null;
  /** The agent's version from its hello, when it was connected at the end. */
  agentVersion: string | null;
  node: string | null;
  target: string;
  netns: string | null;
  iface: string;
  /** The BPF filter given for the point (null: none). */
  filter: string | null;
  /**
   * The events the collector received from the point's agent and stored, at the verdict (absent:
   * a report written before it was recorded).
   */
  eventsReceived?: number;
  /**
   * The point's events as the collector stored them, hashed once the appends in flight at the
   * verdict were on disk (null: it stored none, no event arrived; absent: not recorded — a report
   * written before they were hashed, or by an older collector).
   */
  eventsFile?: StoredEventsFile | null;
}

/**
 * A point's events file as the collector stored it (collector/event-file.ts records), so someone
 * holding the data directory can tell the events a report was made from. It may hold a batch
 * that arrived while the capture finished (stored and acknowledged, not analysed, not counted in
 * `eventsReceived`).
 */
export interface StoredEventsFile {
  /** Its path in the collector's data directory (`--data-dir`): `captures/<id>/events-<point>.pb`. */
  file: string;
  /** Its size and SHA-256 (hex) as stored. */
  bytes: number;
  sha256: string;
}

/** One input of a report: a capture file (with its digest) or a live capture point. */
export interface ReportInput {
  name: string;
  /** A file's absolute path, or a live point's one-line description. */
  file: string;
  /** SHA-256 (hex) and size of the file's bytes; null: not hashed (standard input). */
  sha256?: string | null | undefined;
  bytes?: number | null | undefined;
  live?: LivePointInput | undefined;
}

/** What a live capture was asked for and how it ended. */
export interface LiveCaptureMeta {
  id: string;
  /** The collector's URL; null when it listens on every address (no one URL). */
  collector: string | null;
  state: string;
  reason: string;
  /** The capture as POST /v1/captures takes it (the inventory given is `inventoryGiven`). */
  request: {
    points: { name: string; target: string; iface: string; node?: string; filter?: string }[];
    client?: string;
    dst?: string;
    dport?: number;
    timeoutMs: number;
    settleMs: number;
    stopOnFirstMatch: boolean;
    evidencePayload?: boolean;
    doctor?: { tunnelRange: string };
  };
  inventoryGiven: Inventory | null;
}

/** What evidence.pcapng (the bundle's packets) holds, or why it holds less. */
export interface EvidenceSummary {
  /** The file's name in the bundle; null: not written (`note` says why). */
  file: string | null;
  packets: number;
  /** Each frame cut right after its innermost transport header (else as captured). */
  headersOnly: boolean;
  /** One Interface Description Block per point (and per interface of a point's file). */
  interfaces: { point: string; name: string; packets: number }[];
  /** Points whose frames could not be had (a changed file, frames not retained, an agent gone). */
  problems: { point: string; code: string; detail: string }[];
  /** One paragraph: what the file holds, how its times were corrected. */
  note: string;
  /** SHA-256 (hex) and size of the file as written (absent: not recorded, an older report). */
  sha256?: string;
  bytes?: number;
}

/**
 * A file given by a flag beside the captures (`--inventory`, `--doctor`): the file as given and
 * its copy in the bundle, which the reproduce command names.
 */
export interface GivenFile {
  /** The absolute path given. */
  file: string;
  /** SHA-256 (hex) and size of the bytes read from it; null: it could not be read. */
  sha256: string | null;
  bytes: number | null;
  /** The copy's name in the bundle; null: none (not read). */
  copy: string | null;
  /** The copy holds the very bytes hashed (doctor.json); false: re-serialised (inventory.json). */
  verbatim: boolean;
}

/** The files given by flag, as given (absent: none given). */
export interface GivenFiles {
  inventory: GivenFile | null;
  doctor: GivenFile | null;
}

/** What analysed files: `hoptrace analyze` (the reproduce command's `hoptrace`), on this Node. */
export interface AnalyzeRuntime {
  /** Absent in reports written before the collector recorded its own. */
  analyzedBy?: 'analyze';
  /** process.version, e.g. `v20.11.1`. */
  node: string;
  /** process.platform and process.arch, e.g. `linux x64` (absent: an older report). */
  platform?: string;
  /** The native addon's decoder loaded (its fast path read the files), or the TypeScript path. */
  nativeDecoder: 'loaded' | 'not-loaded';
}

/**
 * What analysed a live capture: the collector, on this Node (the agents captured and decoded the
 * packets; their versions are the inputs').
 */
export interface CollectorRuntime {
  analyzedBy: 'collector';
  node: string;
  platform: string;
}

/** What ran the analysis: `hoptrace analyze` on files, or the collector of a live capture. */
export type ReportRuntime = AnalyzeRuntime | CollectorRuntime;

/** What produced the report, so a reader can check and reproduce it. */
export interface ReportMeta {
  /** ISO 8601 time, passed in (the renderer reads no clock). */
  generatedAt: string;
  /** Capture inputs in path order (as the CLI passes them). */
  inputs: ReportInput[];
  /** The inventory file given (a path), if any. */
  inventory?: string | undefined;
  selector?:
    | { client?: string | undefined; dst?: string | undefined; dport?: number | undefined }
    | undefined;
  /** The exact command line (older reports); `reproduce` supersedes it. */
  command?: string | undefined;
  /** package.json's version of the hoptrace that wrote the report. */
  hoptraceVersion?: string | undefined;
  source?: 'files' | 'live' | undefined;
  /** The inventory the verdict was computed from (a live one: built from agents and the API). */
  inventoryUsed?: Inventory | undefined;
  /** Doctor's findings, or why there are none (absent: not run). */
  doctor?: DoctorEvidence | undefined;
  capture?: LiveCaptureMeta | undefined;
  /** The command that repeats this report's analysis or capture. */
  reproduce?: ReproduceCommand | undefined;
  /** evidence.pcapng of the bundle (absent: not written with this report). */
  evidence?: EvidenceSummary | undefined;
  /** The `--inventory` and `--doctor` files as given, with their copies in the bundle. */
  givenFiles?: GivenFiles | undefined;
  /** What ran the analysis: `hoptrace analyze` or the collector (absent: not recorded). */
  runtime?: ReportRuntime | undefined;
  /** The bundle's checksum file (`SHA256SUMS`), covering every other file of the bundle. */
  manifest?: string | undefined;
}

/** A file input as report.json holds it. */
export interface FileInputRecord {
  name: string;
  file: string;
  sha256: string | null;
  bytes: number | null;
}

/** A live point input as report.json holds it (`eventsReceived` null: not recorded). */
export interface LiveInputRecord extends Omit<LivePointInput, 'eventsReceived'> {
  name: string;
  file: string;
  eventsReceived: number | null;
}

/** report.json (proto/report.schema.json): the analysis's members, then the evidence around it. */
export interface ReportDocument extends AnalysisResult {
  schemaVersion: typeof REPORT_SCHEMA_VERSION;
  hoptraceVersion: string;
  generatedAt: string;
  source: 'files' | 'live';
  inputs: (FileInputRecord | LiveInputRecord)[];
  capture: LiveCaptureMeta | null;
  /** The inventory the verdict was computed from; null: not recorded (an older report's inputs). */
  inventory: Inventory | null;
  inventoryFile: string | null;
  selector: { client: string | null; dst: string | null; dport: number | null };
  doctor: DoctorEvidence;
  whatToChange: WhatToChange;
  reproduce: ReproduceCommand;
  /** evidence.pcapng: what it holds; null: no packets were written with this report. */
  evidence?: EvidenceSummary | null;
  givenFiles?: GivenFiles;
  runtime?: ReportRuntime;
  /** The bundle's checksum file (absent: the report was not written with one). */
  manifest?: string;
}

const NOT_RUN: DoctorEvidence = { status: 'not-run', detail: 'doctor was not run' };

/** The source of a report: given, else live when any input is a live point. */
export function sourceOf(meta: ReportMeta): 'files' | 'live' {
  return meta.source ?? (meta.inputs.some((i) => i.live !== undefined) ? 'live' : 'files');
}

/** The reproduce command of a report: given, an older report's command line, or composed. */
export function reproduceOf(meta: ReportMeta): ReproduceCommand {
  if (meta.reproduce !== undefined) return meta.reproduce;
  if (meta.command !== undefined)
    return {
      argv: [],
      command: meta.command,
      notes: ['the words of this command were not recorded (a report of an older hoptrace)'],
    };
  return analyzeCommand({
    points: meta.inputs,
    inventory: meta.inventory,
    selector: meta.selector,
  });
}

function inputRecord(i: ReportInput, live: boolean): FileInputRecord | LiveInputRecord {
  if (!live)
    return { name: i.name, file: i.file, sha256: i.sha256 ?? null, bytes: i.bytes ?? null };
  const l = i.live;
  return {
    name: i.name,
    file: i.file,
    agentId: l?.agentId ?? null,
    agentVersion: l?.agentVersion ?? null,
    node: l?.node ?? null,
    target: l?.target ?? '',
    netns: l?.netns ?? null,
    iface: l?.iface ?? '',
    filter: l?.filter ?? null,
    eventsReceived: l?.eventsReceived ?? null,
    ...(l?.eventsFile === undefined ? {} : { eventsFile: l.eventsFile }),
  };
}

/** Doctor's evidence of a report: given, or "not run". */
export const doctorOf = (meta: ReportMeta): DoctorEvidence => meta.doctor ?? NOT_RUN;

/** The report as report.json holds it. */
export function reportDocument(result: AnalysisResult, meta: ReportMeta): ReportDocument {
  const source = sourceOf(meta);
  const doctor = doctorOf(meta);
  const sel = meta.selector;
  return {
    schemaVersion: REPORT_SCHEMA_VERSION,
    hoptraceVersion: meta.hoptraceVersion ?? 'unknown',
    generatedAt: meta.generatedAt,
    source,
    inputs: meta.inputs.map((i) => inputRecord(i, source === 'live')),
    capture: meta.capture ?? null,
    inventory: meta.inventoryUsed ?? null,
    inventoryFile: meta.inventory ?? null,
    selector: { client: sel?.client ?? null, dst: sel?.dst ?? null, dport: sel?.dport ?? null },
    doctor,
    whatToChange: whatToChange(result, doctor, meta.inventoryUsed),
    reproduce: reproduceOf(meta),
    evidence: meta.evidence ?? null,
    ...(meta.givenFiles === undefined ? {} : { givenFiles: meta.givenFiles }),
    ...(meta.runtime === undefined ? {} : { runtime: meta.runtime }),
    ...(meta.manifest === undefined ? {} : { manifest: meta.manifest }),
    ...result,
  };
}

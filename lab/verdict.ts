/**
 * The lab's one link to the analyzer: runs `analyzeFiles` in-process on a scenario's captures and
 * keeps the verdict fields the lab compares. Loaded lazily by lab/run.ts, so the topology and
 * capture half of the lab still runs (and keeps its pcaps) while the analyzer is being built.
 */
import { analyzeFiles } from '../offline/analyze-files';
import { scanIdentityHeaders } from '../offline/identity-scan';
import { pointDigests, writeReportDir } from '../offline/report-dir';
import type { FileDigest } from '../offline/file-digest';
import type { Inventory } from '../common/inventory';

/** A tuple as one point observed it. */
export interface ObservedTuple {
  src: string;
  sport?: number;
  dst: string;
  dport?: number;
}

/** The verdict's outer connection finding (core/attribute/outer-finding.ts). */
export type { OuterFinding } from '../core/attribute/outer-finding';
import type { OuterFinding } from '../core/attribute/outer-finding';

/** The verdict fields the lab checks and prints. */
export interface LabVerdict {
  layer: string;
  rewrittenBetween: [string, string] | null;
  observed: Record<string, ObservedTuple | null>;
  evidence: { point?: string; matchedBy?: string[]; detail: string }[];
  hint: string;
  reason?: string;
  /** The outer connection's finding, when the engine reports one. */
  outer?: OuterFinding;
  /** Files only: what each capture file recorded about its capture (format, frames, drops). */
  files?: { point: string; format: string; frames: number; dropped: number | null }[];
  /** Files only: the cautions those records give rise to. */
  caveats?: string[];
}

/**
 * Analyzes the capture files of one run and writes its bundle into `bundleDir` the way
 * `hoptrace analyze --report-dir` does (same writer, doctor not run, headers only).
 */
export function analyzeRun(
  points: { name: string; file: string }[],
  inventory: Inventory,
  selector: { client: string; dst: string; dport?: number },
  bundleDir?: string,
): LabVerdict {
  const before = bundleDir === undefined ? new Map<string, FileDigest>() : pointDigests(points);
  const analysed = analyzeFiles({ points, inventory, selector });
  const { verdict, captureHealth, caveats } = analysed;
  if (bundleDir !== undefined)
    writeReportDir(
      { ...analysed, identityHeaders: scanIdentityHeaders(points, analysed) },
      {
        dir: bundleDir,
        points,
        drops: new Map(),
        inventory,
        inventoryFile: undefined,
        selector,
        doctorFile: undefined,
        doctor: { status: 'not-run', detail: 'doctor was not run (the lab analyses files only)' },
        before,
        payload: false,
      },
    );
  const out: LabVerdict = {
    layer: verdict.layer,
    rewrittenBetween: verdict.rewrittenBetween,
    observed: verdict.observed,
    evidence: verdict.evidence,
    hint: verdict.hint,
    files: (captureHealth ?? []).map((h) => ({
      point: h.point,
      format: h.file ?? '?',
      frames: h.packets,
      dropped: h.kernelDrops,
    })),
    caveats: caveats ?? [],
  };
  if (verdict.reason !== undefined) out.reason = verdict.reason;
  if (verdict.outer !== undefined) out.outer = verdict.outer;
  return out;
}

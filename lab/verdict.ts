/**
 * The lab's one link to the analyzer: runs `analyzeFiles` in-process on a scenario's captures and
 * keeps the verdict fields the lab compares. Loaded lazily by lab/run.ts, so the topology and
 * capture half of the lab still runs (and keeps its pcaps) while the analyzer is being built.
 */
import { analyzeFiles } from '../offline/analyze-files';
import type { Inventory } from '../common/inventory';

/** A tuple as one point observed it. */
export interface ObservedTuple {
  src: string;
  sport?: number;
  dst: string;
  dport?: number;
}

/**
 * The engine's finding about the outer connection (issue 15 item 6): the outer source the VPN pod
 * sees for the client's tunnel, at the point where the tunnel packet carrying the request was found.
 */
export interface OuterFinding {
  point: string;
  tunnel: string;
  src: string;
  sport: number;
  dst: string;
  dport: number;
  class: 'node' | 'pod' | 'external';
  node?: string;
  by: string;
  detail: string;
}

/**
 * `verdict.outer` of an engine verdict, read through a narrow type so the lab compiles against an
 * engine that does not report it yet (type-only: lab/live.ts uses it without loading the analyzer).
 */
export type WithOuter = { outer?: OuterFinding };

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

/** Analyzes the capture files of one run. */
export function analyzeRun(
  points: { name: string; file: string }[],
  inventory: Inventory,
  selector: { client: string; dst: string; dport?: number },
): LabVerdict {
  const { verdict, captureHealth, caveats } = analyzeFiles({ points, inventory, selector });
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
  const { outer } = verdict as WithOuter;
  if (outer !== undefined) out.outer = outer;
  return out;
}

/**
 * Offline analysis of capture files: one PointStream per file for core/report/analyze.ts. Capture
 * files (pcap and pcapng) go through the native decoder's summary records
 * (offline/summary-file.ts) and a record-level prefilter that keeps a superset of what the
 * streaming analysis keeps, so events are built only for the frames the request can need; on hosts
 * without the addon every frame is replayed through the TypeScript decoder (the reference the fast
 * path is tested against).
 */
import { analyzeEventStreams, type AnalysisResult } from '../core/report/analyze';
import { withCaptureHealth } from '../core/report/capture-health';
import type { Inventory } from '../common/inventory';
import { statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { FilePointStream } from './point-stream';
import { PassPool } from './pass-pool';
import { loadNativeAddon } from '../native/loader';
import type { ResumePoint } from './pcap-file';
import type { NoRequest } from '../core/report/no-request';
import { findSameFiles, sameFilesCaveat } from './same-files';

export interface PointFile {
  name: string;
  file: string;
}

export interface RequestSelector {
  client?: string;
  dst?: string;
  dport?: number;
}

export interface AnalyzeFilesInput {
  points: PointFile[];
  inventory: Inventory;
  selector: RequestSelector;
  /**
   * Packets each point's capture dropped, by point name, as its tool printed them when it stopped
   * (tcpdump: "N packets dropped by kernel"): used where the file records no count of its own.
   */
  drops?: ReadonlyMap<string, number>;
  /** No request at the first point: CLI_NO_REQUEST (the default) or the verdict unknown. */
  noRequest?: NoRequest;
}

/** Options of analyzeFiles. */
export interface AnalyzeFilesOptions {
  fast?: boolean;
  gate?: boolean;
  parallel?: boolean;
  /**
   * Filled with each point's resume points by point name (offline/seek-points.ts), for reading
   * frames again afterwards (identity-scan.ts, evidence.ts) without walking the file from its start.
   */
  seek?: Map<string, readonly ResumePoint[]>;
}

/**
 * Reads every point's capture file and analyses the selected request, streaming: the first file is
 * read twice (select the request, then keep its packets), the others once, and only the events that
 * can matter to the request are kept, so memory does not grow with the files. Capture files
 * take the native fast path when the addon loads (FilePointStream); `fast: false` forces the JS
 * reader + decoder for every frame (the reference the fast path is tested against); `gate: false`
 * gives every frame a summary record (offline/summary-gate.ts; the reference the gates are tested
 * against); `parallel: false` keeps every pass on this thread (by default, with three points or
 * more, the later points after the first are read by worker threads meanwhile, one per spare
 * core, when one of those files holds PARALLEL_MIN_BYTES or more: offline/pass-pool.ts; `true`
 * whatever their size).
 */
export function analyzeFiles(
  input: AnalyzeFilesInput,
  opts: AnalyzeFilesOptions = {},
): AnalysisResult {
  const fast = opts.fast !== false;
  const pool = fast && opts.parallel !== false ? openPool(input.points, opts.parallel) : undefined;
  try {
    return analyzed(input, opts, pool);
  } finally {
    pool?.close();
  }
}

/**
 * Below this, a later file is read here sooner than a worker thread starts (~50 ms to load its
 * modules): bench files of 14 MiB took 0.20 s with a worker, 0.15 s without; 55 MiB the same.
 */
export const PARALLEL_MIN_BYTES = 64 << 20;

/**
 * Worker threads for the later points after the first (offline/pass-pool.ts): one per spare core,
 * none with fewer than three points, one core, or no addon (the JS path stays on this thread), and
 * unless `always`, none when every one of those files is below PARALLEL_MIN_BYTES.
 */
function openPool(points: PointFile[], always: boolean | undefined): PassPool | undefined {
  const size = Math.min(points.length - 2, availableParallelism() - 1);
  if (size < 1) return undefined;
  const bytes = (file: string): number => {
    try {
      return statSync(file).size;
    } catch {
      return 0; // the pass reports the file's error
    }
  };
  if (always !== true && !points.slice(2).some((p) => bytes(p.file) >= PARALLEL_MIN_BYTES))
    return undefined;
  if (!loadNativeAddon().ok) return undefined;
  return new PassPool({ size });
}

function analyzed(
  input: AnalyzeFilesInput,
  opts: AnalyzeFilesOptions,
  pool: PassPool | undefined,
): AnalysisResult {
  const streams = input.points.map(
    ({ name, file }) =>
      new FilePointStream(
        name,
        file,
        opts.fast !== false,
        input.drops?.get(name),
        opts.gate !== false,
        { pool },
      ),
  );
  const result = analyzeEventStreams({
    points: streams,
    inventory: input.inventory,
    selector: input.selector,
    noRequest: input.noRequest,
  });
  for (const s of streams) opts.seek?.set(s.name, s.seekPoints());
  // What each file recorded about its own capture (drop counts: pcapng statistics blocks), and
  // the cautions it gives rise to. A file no pass read to the end (the analysis stopped before
  // it) has nothing to say.
  const health = streams.map((s) => s.health()).filter((h) => h !== null);
  const withHealth = withCaptureHealth(result, health);
  const notes = streams.map((s) => s.givenNote()).filter((n) => n !== null);
  // A copy of one capture given for two points: the analysis compares it with itself.
  notes.push(...findSameFiles(input.points).map(sameFilesCaveat));
  if (notes.length === 0) return withHealth;
  return { ...withHealth, caveats: [...(withHealth.caveats ?? []), ...notes] };
}

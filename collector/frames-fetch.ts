/**
 * Evidence frames of a finished live capture: once the verdict is final, each point's agent is
 * asked for the retained bytes of that point's matched connection (the analysis's `flow` frames
 * and the frame that proved the match), and what it answers is stored per point
 * (store.saveFrames, read back with store.loadFrames). The agent is not trusted: a record it was
 * not asked for, or a second one for a frame, is ignored; one larger than its snaplen or of
 * another link type is refused (FRAMES_MALFORMED); a frame it names missing keeps the agent's
 * reason, and one it never answers is named missing too — nothing is ever made up.
 */
import { isHoptraceError } from '../common/errors';
import { FRAMES_LIMITS, type StoredFrames } from '../common/frames-wire';
import type { FrameRecord } from '../common/wire';
import type { AnalysisResult } from '../core/report/analysis-result';
import type { AgentRequests } from './agent-requests';
import type { CollectorLogger } from './logger';
import type { CaptureStore } from './store';

/**
 * How long one frames request may take: the agent first waits for the capture to stop (the stop
 * goes out just before; a worker drains for ~1 s, and is killed after 10 s), then reads its file.
 */
export const FRAMES_TIMEOUT_MS = 25_000;
/** Requests per point at most (each must bring an answer for at least one frame). */
const MAX_ROUNDS = 64;

/** Per point, the frames whose bytes the evidence needs (sorted, unique, at most 512). */
export function framesToFetch(result: AnalysisResult): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const p of result.points) {
    const frames = new Set(p.flow.map((f) => f.frame));
    if (p.frame !== null) frames.add(p.frame);
    const sorted = [...frames]
      .filter((f) => Number.isSafeInteger(f) && f > 0)
      .sort((a, b) => a - b)
      .slice(0, FRAMES_LIMITS.storedFrames);
    out.set(p.name, sorted);
  }
  return out;
}

export interface FramesPoint {
  name: string;
  /** The agent the point was armed on; null = never armed. */
  agentId: string | null;
}

/**
 * Fetches one point's frames from its agent, in requests of at most 256 frames, asking again for
 * those that did not fit a reply; the last request lets the agent drop its retention. Never
 * throws: what could not be fetched is in `missing`, with the reason.
 */
export async function fetchPointFrames(
  requests: Pick<AgentRequests, 'frames'>,
  captureId: string,
  point: FramesPoint,
  frames: readonly number[],
  nowMs: () => number,
  timeoutMs = FRAMES_TIMEOUT_MS,
): Promise<StoredFrames> {
  const records = new Map<number, FrameRecord>();
  const missing = new Map<number, string>();
  const out: StoredFrames = {
    captureId,
    point: point.name,
    agentId: point.agentId ?? '',
    linkType: null,
    snaplen: 0,
    records: [],
    missing: [],
    fetchedUnixMs: 0,
    retained: 0,
    retentionDropped: 0,
  };
  let want = [...new Set(frames)].sort((a, b) => a - b);
  const giveUp = (reason: string): void => {
    for (const f of want) if (!records.has(f)) missing.set(f, reason);
    want = [];
  };
  const agentId = point.agentId;
  if (agentId === null) giveUp('FRAMES_NO_AGENT');
  else if (want.length === 0) {
    // Nothing to fetch here: the agent may drop this point's retention now rather than at its TTL.
    await requests
      .frames(agentId, { captureId, point: point.name, frames: [], release: true }, timeoutMs)
      .catch(() => undefined);
  }
  for (let round = 0; agentId !== null && want.length > 0; round++) {
    if (round >= MAX_ROUNDS) {
      giveUp('FRAMES_MALFORMED');
      break;
    }
    const batch = want.slice(0, FRAMES_LIMITS.frames);
    const asked = new Set(batch);
    const last = want.length <= FRAMES_LIMITS.frames;
    let reply;
    try {
      reply = await requests.frames(
        agentId,
        { captureId, point: point.name, frames: batch, release: last },
        timeoutMs,
      );
    } catch (e) {
      giveUp(isHoptraceError(e) ? e.code : 'FRAMES_NO_AGENT');
      break;
    }
    if (reply.captureId !== captureId || reply.point !== point.name) {
      giveUp('FRAMES_MALFORMED');
      break;
    }
    out.retained = Math.max(out.retained, reply.retained);
    out.retentionDropped = Math.max(out.retentionDropped, reply.retentionDropped);
    let answered = 0;
    if (reply.records.length > 0) {
      if (out.linkType === null && reply.linkType !== null) {
        out.linkType = reply.linkType;
        out.snaplen = reply.snaplen;
      }
      const consistent = reply.linkType === out.linkType && reply.snaplen === out.snaplen;
      for (const r of reply.records) {
        if (!asked.has(r.frame) || records.has(r.frame) || missing.has(r.frame)) continue;
        answered++;
        if (!consistent || r.data.length > out.snaplen) missing.set(r.frame, 'FRAMES_MALFORMED');
        else records.set(r.frame, r);
      }
    }
    for (const m of reply.missing) {
      if (!asked.has(m.frame) || records.has(m.frame) || missing.has(m.frame)) continue;
      answered++;
      missing.set(m.frame, m.reason);
    }
    // An agent that answers nothing would be asked forever.
    if (answered === 0) {
      giveUp('FRAMES_MALFORMED');
      break;
    }
    want = want.filter((f) => !records.has(f) && !missing.has(f));
  }
  out.records = [...records.values()].sort((a, b) => a.frame - b.frame);
  out.missing = [...missing].map(([frame, reason]) => ({ frame, reason }));
  out.missing.sort((a, b) => a.frame - b.frame);
  out.fetchedUnixMs = nowMs();
  return out;
}

/** What fetchCaptureFrames needs of the collector. */
export interface FramesDeps {
  requests: Pick<AgentRequests, 'frames'>;
  store: Pick<CaptureStore, 'saveFrames'>;
  log: CollectorLogger;
  nowMs: () => number;
  /** The collector is shutting down: nothing more is stored. */
  closed: () => boolean;
}

/**
 * Fetches and stores every point's evidence frames of a finished capture (points in parallel:
 * each has its own agent); logs what is missing and why. Never throws.
 */
export async function fetchCaptureFrames(
  deps: FramesDeps,
  captureId: string,
  points: readonly FramesPoint[],
  analysis: AnalysisResult,
  onStored: (point: string) => void,
): Promise<void> {
  const wanted = framesToFetch(analysis);
  await Promise.all(
    points.map(async (p) => {
      const frames = wanted.get(p.name) ?? [];
      const stored = await fetchPointFrames(deps.requests, captureId, p, frames, deps.nowMs);
      if (deps.closed()) return;
      const at = { captureId, point: p.name };
      try {
        deps.store.saveFrames(captureId, stored);
      } catch (e) {
        const err = e instanceof Error ? e.message : String(e);
        deps.log.error({ ...at, code: 'STORE_IO', err }, 'cannot store the evidence frames');
        return;
      }
      const reasons = [...new Set(stored.missing.map((m) => m.reason))];
      const line = `evidence frames: ${stored.records.length} of ${frames.length} fetched`;
      if (reasons[0] === undefined) deps.log.info({ ...at, count: stored.records.length }, line);
      else
        deps.log.warn(
          { ...at, count: stored.missing.length, code: reasons[0] },
          `${line}; ${stored.missing.length} missing (${reasons.join(', ')})`,
        );
      onStored(p.name);
    }),
  );
}

/**
 * Offline analysis: events from ordered points → correlate → attribute, as one JSON-safe result
 * (what `hoptrace analyze --json` prints). Pure: the events are already in memory.
 */

import { HoptraceError } from '../common/errors';
import type { PacketEvent } from '../common/event';
import type { Inventory } from '../common/inventory';
import { attributeSourceRewrite, type Verdict } from './attribute';
import {
  correlateRequest,
  type Endpoint,
  type Journey,
  type MatchKey,
  type PointStatus,
} from './correlate';

/** One point's view of the request, JSON-safe (timestamps as decimal nanosecond strings). */
export interface PointSummary {
  name: string;
  status: PointStatus;
  /** Request and reply packets of the matched connection at this point. */
  packets: number;
  requestPackets: number;
  replyPackets: number;
  retransmits: number;
  /** All events captured at this point, matched or not. */
  capturedEvents: number;
  seenRequest: boolean;
  seenSyn: boolean;
  seenReply: boolean;
  proxied: boolean;
  observed: Endpoint | null;
  matchedBy: MatchKey[];
  replyMatchedBy: MatchKey[];
  /** Frame number of the packet that proved the match. */
  frame: number | null;
  firstTsNs: string | null;
  lastTsNs: string | null;
  detail: string;
}

export interface AnalysisResult {
  verdict: Verdict;
  points: PointSummary[];
}

export interface AnalyzeInput {
  points: { name: string; events: PacketEvent[] }[];
  inventory: Inventory;
  selector: { client?: string | undefined; dst?: string | undefined; dport?: number | undefined };
  windowNs?: bigint | undefined;
}

/** Summaries of a journey's points, with bigints turned into strings. */
export function summarizePoints(journey: Journey): PointSummary[] {
  return journey.points.map((p) => ({
    name: p.point,
    status: p.status,
    packets: p.requestPackets + p.replyPackets,
    requestPackets: p.requestPackets,
    replyPackets: p.replyPackets,
    retransmits: p.retransmits,
    capturedEvents: p.capturedEvents,
    seenRequest: p.seenRequest,
    seenSyn: p.seenSyn,
    seenReply: p.seenReply,
    proxied: p.proxied,
    observed: p.observed,
    matchedBy: p.matchedBy,
    replyMatchedBy: p.replyMatchedBy,
    frame: p.packet?.frame ?? null,
    firstTsNs: p.firstTsNs === null ? null : p.firstTsNs.toString(),
    lastTsNs: p.lastTsNs === null ? null : p.lastTsNs.toString(),
    detail: p.detail,
  }));
}

/**
 * Correlate the selected request and attribute its source rewrite.
 * Throws HoptraceError CLI_NO_REQUEST when the first point holds no matching new TCP connection:
 * there is nothing to attribute, and the user must change the selector or the capture, so this is a
 * usage error rather than a verdict. Every other outcome, however incomplete, is a verdict.
 */
export function analyzeEvents(input: AnalyzeInput): AnalysisResult {
  const journey = correlateRequest(input.points, input.selector, { windowNs: input.windowNs });
  if (journey.request === null) {
    throw new HoptraceError('CLI_NO_REQUEST', journey.reason ?? 'no request found', {
      where: input.points[0]?.name ?? 'first point',
      hint: 'check --client/--dst, and that the first capture holds the start (SYN) of a fresh connection',
    });
  }
  const verdict = attributeSourceRewrite(journey, input.inventory, {
    clientIp: input.selector.client,
  });
  return { verdict, points: summarizePoints(journey) };
}

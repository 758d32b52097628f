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
  type PointEvents,
  type PointStatus,
} from './correlate';
import { DEFAULT_WINDOW_NS, findRequests, matchesSelector, tcpView } from './match-point';

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

/** One point whose events can be read (again) from the start, e.g. a capture file replay. */
export interface PointStream {
  name: string;
  /** A fresh pass over the point's events; called once or twice. */
  events: () => Iterable<PacketEvent>;
}

export interface AnalyzeStreamInput {
  points: PointStream[];
  inventory: Inventory;
  selector: AnalyzeInput['selector'];
  windowNs?: bigint | undefined;
}

const SYN = 0x02;
const FIN = 0x01;
const ACK = 0x10;

/** Bounds of the per-connection buffers of not-yet-related connections at a later point. */
const PENDING_PER_CONNECTION = 16;
const PENDING_TOTAL = 65_536;

const absDiff = (a: bigint, b: bigint): bigint => (a > b ? a - b : b - a);

function earlier(a: PacketEvent, b: PacketEvent): boolean {
  return a.tsNs !== b.tsNs ? a.tsNs < b.tsNs : a.frame < b.frame;
}

/** Direction-free key of a TCP connection. */
function connectionKey(src: string, sport: number, dst: string, dport: number): string {
  const a = `${src}:${sport}`;
  const b = `${dst}:${dport}`;
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

/**
 * Streaming `analyzeEvents` with memory bounded by the request, not by the files: pass 1 streams
 * the first point to select the request (the selector's first SYN, by time); pass 2 streams every
 * point and keeps only events within the window around that SYN that can matter to correlation —
 * the request's connection at the first point; at later points every connection that carries a
 * key of the request (ISN, a client seq, the SYN-ACK's ack, an acknowledged client seq, a payload
 * key). A later point's connection that is not (yet) related is buffered, up to
 * PENDING_PER_CONNECTION events since its last data segment (PENDING_TOTAL in all), so a proxy's
 * new connection keeps its SYN until its first data segment decides. Correlating the kept events
 * gives the same result as correlating all of them (counts stay the totals captured).
 */
export function analyzeEventStreams(input: AnalyzeStreamInput): AnalysisResult {
  const windowNs = input.windowNs ?? DEFAULT_WINDOW_NS;
  const sel = input.selector;
  const analyze = (points: PointEvents[]): AnalysisResult =>
    analyzeEvents({ points, inventory: input.inventory, selector: sel, windowNs: input.windowNs });
  const [first, ...rest] = input.points;
  if (first === undefined) return analyze([]);

  // Pass 1: the request's SYN at the first point.
  let syn: PacketEvent | null = null;
  let firstCount = 0;
  for (const ev of first.events()) {
    firstCount++;
    const t = ev.inner;
    if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined) continue;
    const f = ev.keys.tcpFlags ?? 0;
    if ((f & SYN) === 0 || (f & ACK) !== 0 || ev.keys.tcpSeq === undefined) continue;
    if (!matchesSelector({ src: t.src, sport: t.sport, dst: t.dst, dport: t.dport }, sel)) continue;
    if (syn === null || earlier(ev, syn)) syn = ev;
  }
  const synView = syn === null ? null : tcpView(syn);
  if (synView === null || synView.seq === null) {
    // Nothing selected: the same outcome (and error) as with every event in memory.
    return analyze(
      input.points.map((p, i) => ({
        name: p.name,
        events: [],
        capturedEvents: i === 0 ? firstCount : 0,
      })),
    );
  }
  const synTs = synView.ev.tsNs;
  const inWindow = (ev: PacketEvent): boolean => absDiff(ev.tsNs, synTs) <= windowNs;
  const tuple = synView.tuple;
  const isn = synView.seq;

  // Pass 2, first point: the request's connection (both directions) within the window.
  const firstKept: PacketEvent[] = [];
  firstCount = 0;
  for (const ev of first.events()) {
    firstCount++;
    const t = ev.inner;
    if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined) continue;
    const fwd =
      t.src === tuple.src &&
      t.sport === tuple.sport &&
      t.dst === tuple.dst &&
      t.dport === tuple.dport;
    const back =
      t.src === tuple.dst &&
      t.sport === tuple.dport &&
      t.dst === tuple.src &&
      t.dport === tuple.sport;
    if ((fwd || back) && inWindow(ev)) firstKept.push(ev);
  }
  const firstPoint: PointEvents = {
    name: first.name,
    events: firstKept,
    capturedEvents: firstCount,
  };
  const [id] = findRequests(firstPoint, sel, windowNs);
  const data = id?.data ?? null;
  // Client seqs (what later request packets carry) and what replies acknowledge.
  const clientSeqs = new Set<number>();
  const acked = new Set<number>();
  for (const ev of firstKept) {
    const t = ev.inner;
    const seq = ev.keys.tcpSeq;
    if (t === null || seq === undefined || t.src !== tuple.src || t.sport !== tuple.sport) continue;
    clientSeqs.add(seq);
    const f = ev.keys.tcpFlags ?? 0;
    acked.add((seq + ev.keys.payloadLength + ((f & (SYN | FIN)) !== 0 ? 1 : 0)) >>> 0);
  }
  const synAckAck = (isn + 1) >>> 0;

  const later: PointEvents[] = rest.map((p) => {
    const kept: PacketEvent[] = [];
    const related = new Set<string>();
    const pending = new Map<string, PacketEvent[]>();
    let pendingTotal = 0;
    let sentinel: PacketEvent | null = null;
    let count = 0;
    for (const ev of p.events()) {
      count++;
      const t = ev.inner;
      if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined)
        continue;
      if (!inWindow(ev)) continue;
      const key = connectionKey(t.src, t.sport, t.dst, t.dport);
      if (related.has(key)) {
        kept.push(ev);
        continue;
      }
      const k = ev.keys;
      const f = k.tcpFlags ?? 0;
      const seq = k.tcpSeq;
      const isSyn = (f & SYN) !== 0;
      const trigger =
        (isSyn && (f & ACK) === 0 && seq === isn) ||
        (!isSyn && seq !== undefined && clientSeqs.has(seq)) ||
        (isSyn && (f & ACK) !== 0 && k.tcpAck === synAckAck) ||
        ((f & ACK) !== 0 && k.tcpAck !== undefined && acked.has(k.tcpAck)) ||
        (!isSyn &&
          k.payloadLength > 0 &&
          data !== null &&
          ((data.probeMarker !== null && k.probeMarker === data.probeMarker) ||
            (data.requestLineHash !== null && k.requestLineHash === data.requestLineHash) ||
            (data.payloadHash !== null && k.payloadHash === data.payloadHash)));
      const buf = pending.get(key);
      if (trigger) {
        related.add(key);
        if (buf !== undefined) {
          for (const b of buf) kept.push(b);
          pendingTotal -= buf.length;
          pending.delete(key);
        }
        kept.push(ev);
        continue;
      }
      sentinel ??= ev;
      if (k.payloadLength > 0) {
        // A data segment without the request's keys: this connection's start is decided.
        if (buf !== undefined) {
          pendingTotal -= buf.length;
          pending.delete(key);
        }
        continue;
      }
      if (buf === undefined) pending.set(key, [ev]);
      else if (buf.length < PENDING_PER_CONNECTION) buf.push(ev);
      else continue;
      pendingTotal++;
      while (pendingTotal > PENDING_TOTAL) {
        const oldest = pending.keys().next();
        if (oldest.done === true) break;
        pendingTotal -= pending.get(oldest.value)?.length ?? 0;
        pending.delete(oldest.value);
      }
    }
    // An unrelated event keeps "TCP seen within the window" true for the not-seen detail.
    if (kept.length === 0 && sentinel !== null) kept.push(sentinel);
    return { name: p.name, events: kept, capturedEvents: count };
  });
  return analyze([firstPoint, ...later]);
}

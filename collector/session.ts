/**
 * One capture session as a state machine: which points are armed, what they reported, the events
 * they delivered, and when the session is finished. Pure apart from `analyzeEvents`: the clock is
 * passed in (`nowMs`), timers and I/O live in collector/sessions.ts.
 *
 *   arming ──(a point reports capturing)──► capturing ──► resolved | timeout | failed
 *      └───────────────(DELETE)──────────────────┴──────► cancelled
 *
 * When it ends (with stopOnFirstMatch):
 *   - a conclusive verdict: a rewrite layer or a proxy, or `preserved` with the reply seen back at
 *     the first point → resolved;
 *   - the request was seen but the analysis has not changed for settleMs → resolved with what we
 *     have (no-return, dropped, unknown …);
 *   - timeoutMs after creation → timeout;
 *   - the first point failed, or every point failed → failed (no request can ever be seen).
 * A point that failed or never reported capturing, and delivered nothing, is "missing": the verdict
 * names it with its error instead of calling an empty capture a drop.
 */

import { isHoptraceError } from '../common/errors';
import type { PacketEvent } from '../common/event';
import type { Inventory } from '../common/inventory';
import type { CaptureStatus, ErrorReport, Lost } from '../common/wire';
import {
  analyzeEvents,
  isUsefulEvent,
  type AnalysisResult,
  type PointSummary,
} from '../core/report/analyze';
import type { Evidence, Layer, Verdict } from '../core/attribute/attribute';
import { addCount } from '../common/counters';

export type SessionState = 'arming' | 'capturing' | 'resolved' | 'timeout' | 'cancelled' | 'failed';
export type PointState = 'pending' | 'arming' | 'capturing' | 'stopped' | 'failed';

export const FINAL_STATES: readonly SessionState[] = ['resolved', 'timeout', 'cancelled', 'failed'];

/** One capture point as the user asked for it. */
export interface PointSpec {
  name: string;
  /** Pod IP, namespace path or PID. */
  target: string;
  iface: string;
  filter?: string;
  /** The agent's node name (needed for path/PID targets when several agents are connected). */
  node?: string;
}

/** A validated capture request (POST /v1/captures with defaults applied). */
export interface CaptureSpec {
  points: PointSpec[];
  client?: string;
  dst?: string;
  dport?: number;
  timeoutMs: number;
  stopOnFirstMatch: boolean;
  settleMs: number;
  inventory?: Inventory;
  /**
   * Keep the payload in evidence.pcapng: the agents retain whole frames (up to the capture's
   * snaplen) instead of their first 256 bytes, so fewer frames fit their bounds.
   */
  evidencePayload?: boolean;
  /**
   * Every packet an event: the agents do not fold flows into counters (PacketEvent.fold) — more
   * events, more agent and collector CPU, every packet matchable.
   */
  perPacket?: boolean;
  /**
   * Run doctor's checks through the agents when the capture ends (VPN and backend: the first and
   * the last point's targets), so the report's What to change carries its findings.
   */
  doctor?: CaptureDoctorSpec;
}

/** The `doctor` part of a capture request. */
export interface CaptureDoctorSpec {
  /** The VPN's tunnel range (IPv4 or IPv6 CIDR). */
  tunnelRange: string;
}

export interface PointError {
  code: string;
  message: string;
}

/** What the collector knows about one point of a session (persisted in session.json). */
export interface PointRecord {
  name: string;
  agentId: string | null;
  node: string | null;
  target: string;
  iface: string;
  state: PointState;
  /** Packets the agent captured (its status), or the events stored when more. */
  packets: number;
  /** Events stored for this point (flow counter events included). */
  events: number;
  /**
   * Of `events`: flow counter events (PacketEvent.fold), and the packets they count (the agent
   * counted them per flow instead of sending each). Absent: none arrived.
   */
  foldEvents?: number;
  foldedPackets?: number;
  /** The agent's count of packets sent whole because its flow table was full (absent: none). */
  foldFullSent?: number;
  /** null = the capture source cannot know. */
  kernelDrops: number | null;
  queueDrops: number;
  /** Events the agent reported lost (spool overflow, queue full). */
  lost: number;
  /** The agent confirmed the capture runs (a status 'capturing' or 'stopped' arrived). */
  confirmed: boolean;
  netns: string | null;
  netnsAddresses: string[];
  error?: PointError;
  /**
   * Why the capture may not be where the target is now: a `namespace/pod` target taken from the
   * collector's last pod list because reading it from the API failed.
   */
  targetNote?: string;
  /**
   * The highest agent seq applied to this point (its agent's spool numbering): a message at or
   * below it is a resend of one already stored (a collector killed before it recorded the seq),
   * acknowledged and not applied twice. Absent in files of older versions (= 0).
   */
  appliedSeq?: number;
  /**
   * When the point's agent disconnected during the capture and has not come back: what it did
   * not report cannot be read as absent (a verdict about it says so).
   */
  agentLostAtMs?: number;
  /** Events stored but not held for analysis (the capture passed MAX_HELD_EVENTS). */
  unanalysed?: number;
}

/** The persisted state of a session (session.json). */
export interface SessionRecord {
  id: string;
  createdAtMs: number;
  updatedAtMs: number;
  finishedAtMs: number | null;
  state: SessionState;
  spec: CaptureSpec;
  points: PointRecord[];
  verdict: Verdict | null;
  /** Why the session ended (settled, timeout, conclusive, cancelled, failed point). */
  finalReason: string | null;
}

export type Decision =
  | { kind: 'continue' }
  | { kind: 'finish'; state: 'resolved' | 'timeout' | 'failed'; reason: string };

export const DEFAULT_TIMEOUT_MS = 30_000;
/**
 * Events of one capture held in memory for correlation (about 650 MiB at this count): beyond it
 * events are stored but not analysed, counted per point (`unanalysed`) and named in the verdict.
 */
export const MAX_HELD_EVENTS = 1_000_000;
export const DEFAULT_SETTLE_MS = 2_000;

const CONCLUSIVE: readonly Layer[] = ['vpn-pod', 'cni-masquerade', 'kube-proxy', 'proxy'];

/** When a finished capture finished (its last update, for a record of an older version). */
export function finishedAtMs(r: Pick<SessionRecord, 'finishedAtMs' | 'updatedAtMs'>): number {
  return r.finishedAtMs ?? r.updatedAtMs;
}

export function isFinalState(s: SessionState): boolean {
  return FINAL_STATES.includes(s);
}

function newPoint(p: PointSpec): PointRecord {
  return {
    name: p.name,
    agentId: null,
    node: p.node ?? null,
    target: p.target,
    iface: p.iface,
    state: 'pending',
    packets: 0,
    events: 0,
    kernelDrops: null,
    queueDrops: 0,
    lost: 0,
    confirmed: false,
    netns: null,
    netnsAddresses: [],
  };
}

export class CaptureSession {
  readonly record: SessionRecord;
  private readonly events = new Map<string, PacketEvent[]>();
  /** Useful events per point (also once the events live in the analysis worker). */
  private readonly useful = new Map<string, number>();
  /** The events were handed to the analysis worker (collector/analysis-offload.ts). */
  private offloaded = false;
  private dirty = true;
  private live: AnalysisResult | null = null;
  private fingerprint = '';
  private lastProgressMs: number;
  private requestSeen = false;

  /** A session from its record and the events already stored (after a restart). */
  constructor(record: SessionRecord, events?: ReadonlyMap<string, PacketEvent[]>) {
    this.record = record;
    for (const p of record.points) {
      const list = (events?.get(p.name) ?? []).filter(isUsefulEvent);
      this.events.set(p.name, list);
      this.useful.set(p.name, list.length);
    }
    this.lastProgressMs = record.updatedAtMs;
  }

  static create(id: string, spec: CaptureSpec, nowMs: number): CaptureSession {
    return new CaptureSession({
      id,
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
      finishedAtMs: null,
      state: 'arming',
      spec,
      points: spec.points.map(newPoint),
      verdict: null,
      finalReason: null,
    });
  }

  get id(): string {
    return this.record.id;
  }

  isFinal(): boolean {
    return isFinalState(this.record.state);
  }

  point(name: string): PointRecord | undefined {
    return this.record.points.find((p) => p.name === name);
  }

  /** The latest analysis while capturing (null before the request is seen). */
  liveResult(): AnalysisResult | null {
    return this.live;
  }

  /** The command for a point went to `agentId`. */
  markArmed(name: string, agentId: string, node: string, nowMs: number, targetNote?: string): void {
    const p = this.point(name);
    if (!p || this.isFinal()) return;
    p.agentId = agentId;
    p.node = node;
    p.state = 'arming';
    if (targetNote !== undefined) p.targetNote = targetNote;
    this.touch(nowMs);
  }

  markFailed(name: string, error: PointError, nowMs: number): void {
    const p = this.point(name);
    if (!p) return;
    p.state = 'failed';
    p.error = error;
    this.dirty = true;
    this.touch(nowMs);
  }

  /**
   * The capture's counters from a status (packets, kernel and queue drops); also for a finished
   * capture, whose agents send their final counters when they stop. True when any changed.
   */
  applyCounts(s: CaptureStatus): boolean {
    const p = this.point(s.point);
    if (!p) return false;
    const packets = Math.max(s.packets, accounted(p));
    const changed =
      packets !== p.packets || s.kernelDrops !== p.kernelDrops || s.queueDrops !== p.queueDrops;
    p.packets = packets;
    p.kernelDrops = s.kernelDrops;
    p.queueDrops = s.queueDrops;
    if (s.foldFullSent !== undefined) p.foldFullSent = s.foldFullSent;
    return changed;
  }

  applyStatus(s: CaptureStatus, nowMs: number): void {
    const p = this.point(s.point);
    if (!p) return;
    this.applyCounts(s);
    if (s.netns !== '') p.netns = s.netns;
    if (s.netnsAddresses.length > 0) p.netnsAddresses = [...s.netnsAddresses];
    if (s.state === 'failed') {
      p.state = 'failed';
      p.error = {
        code: s.errorCode === '' ? 'CAPTURE_WORKER_FAILED' : s.errorCode,
        message: s.message,
      };
      this.dirty = true;
    } else if (p.state !== 'failed') {
      p.state = s.state;
      if (s.state === 'capturing' || s.state === 'stopped') p.confirmed = true;
    }
    if (this.record.state === 'arming' && p.state === 'capturing') this.record.state = 'capturing';
    this.touch(nowMs);
  }

  /** Events an agent reported lost; also for a finished capture. True when any were counted. */
  countLost(l: Lost): boolean {
    const p = this.point(l.point);
    if (!p) return false;
    p.lost = addCount(p.lost, l.count);
    return l.count !== 0;
  }

  applyLost(l: Lost, nowMs: number): void {
    if (!this.point(l.point)) return;
    this.countLost(l);
    this.touch(nowMs);
  }

  /** An error report about one point: the point fails (an error without a point is ignored here). */
  applyError(e: ErrorReport, nowMs: number): void {
    if (e.point === '') return;
    this.markFailed(e.point, { code: e.code, message: e.message }, nowMs);
  }

  /**
   * Adds delivered (already stored) events; returns the ones held for correlation (the manager
   * hands them to the analysis worker when the capture is offloaded).
   */
  addEvents(
    point: string,
    events: readonly PacketEvent[],
    nowMs: number,
    /** Events this capture may hold at most (the manager's share of its collector-wide bound). */
    limit = MAX_HELD_EVENTS,
  ): PacketEvent[] {
    const p = this.point(point);
    const list = this.events.get(point);
    if (!p || !list) return [];
    p.events = addCount(p.events, events.length);
    // Events prove the capture runs even when the status was lost.
    if (events.length > 0) p.confirmed = true;
    const held: PacketEvent[] = [];
    let room = Math.min(limit, MAX_HELD_EVENTS) - this.totalUsefulEvents();
    let over = 0;
    for (const e of events) {
      if (e.fold !== undefined) {
        // Saturating: an agent's counters must not push a stored count past what loads again.
        p.foldEvents = addCount(p.foldEvents ?? 0, 1);
        p.foldedPackets = addCount(p.foldedPackets ?? 0, e.fold.packets);
      }
      if (!isUsefulEvent(e)) continue;
      if (room <= 0) {
        over++;
        continue;
      }
      room--;
      held.push(e);
      if (!this.offloaded) list.push(e);
    }
    if (over > 0) p.unanalysed = (p.unanalysed ?? 0) + over;
    p.packets = Math.max(p.packets, accounted(p));
    const kept = held.length;
    this.useful.set(point, (this.useful.get(point) ?? 0) + kept);
    if (this.record.state === 'arming' && events.length > 0) this.record.state = 'capturing';
    if (kept > 0) this.dirty = true;
    this.touch(nowMs);
    return held;
  }

  /**
   * Points that delivered nothing and either failed or never confirmed their capture, and points
   * whose agent went away during the capture and did not come back.
   */
  missingPoints(): PointRecord[] {
    return this.record.points.filter(
      (p) =>
        (this.usefulEvents(p.name) === 0 && (p.state === 'failed' || !p.confirmed)) ||
        (p.agentLostAtMs !== undefined && p.state !== 'failed'),
    );
  }

  /**
   * The agent `agentId` disconnected (at `atMs`) or came back (null). True when a point of this
   * capture is its.
   */
  agentGone(agentId: string, atMs: number | null): boolean {
    let changed = false;
    for (const p of this.record.points) {
      if (p.agentId !== agentId || p.state === 'failed') continue;
      if (atMs === null) {
        if (p.agentLostAtMs === undefined) continue;
        delete p.agentLostAtMs;
      } else if (p.agentLostAtMs === undefined) p.agentLostAtMs = atMs;
      else continue;
      changed = true;
    }
    if (changed) this.dirty = true;
    return changed;
  }

  /** Events of a point that correlation can use. */
  usefulEvents(point: string): number {
    return this.useful.get(point) ?? 0;
  }

  /** Useful events at every point together. */
  totalUsefulEvents(): number {
    let n = 0;
    for (const v of this.useful.values()) n += v;
    return n;
  }

  /**
   * Hands the events to the caller (the analysis worker) and keeps only their counts: from now on
   * `analyze` does nothing; the manager analyses off the main thread and calls `applyAnalysis`.
   */
  offload(): Map<string, PacketEvent[]> {
    const out = new Map(this.events);
    for (const name of this.events.keys()) this.events.set(name, []);
    this.offloaded = true;
    this.dirty = true;
    return out;
  }

  isOffloaded(): boolean {
    return this.offloaded;
  }

  /** New events (or failed points) since the last analysis. */
  needsAnalysis(): boolean {
    return this.dirty;
  }

  /** The last analysis did not happen (the worker failed): the next step runs it again. */
  markDirty(): void {
    this.dirty = true;
  }

  /** What an analysis of this session is asked with (the points' events are the analyser's). */
  analysisRequest(inventory: Inventory): {
    points: string[];
    inventory: Inventory;
    selector: { client: string | undefined; dst: string | undefined; dport: number | undefined };
  } {
    const spec = this.record.spec;
    this.dirty = false;
    return {
      points: spec.points.map((p) => p.name),
      inventory,
      selector: { client: spec.client, dst: spec.dst, dport: spec.dport },
    };
  }

  /** Re-runs the analysis when new events arrived; the manager debounces calls. */
  analyze(nowMs: number, inventory: Inventory): AnalysisResult | null {
    if (!this.dirty || this.offloaded) return this.live;
    const req = this.analysisRequest(inventory);
    const points = req.points.map((name) => ({ name, events: this.events.get(name) ?? [] }));
    let result: AnalysisResult | null;
    try {
      result = analyzeEvents({ points, inventory: req.inventory, selector: req.selector });
    } catch (e) {
      if (!isHoptraceError(e) || e.code !== 'CLI_NO_REQUEST') throw e;
      result = null;
    }
    return this.applyAnalysis(result, nowMs);
  }

  /** Takes the core's result (null: no request found) as the live result. */
  applyAnalysis(core: AnalysisResult | null, nowMs: number): AnalysisResult | null {
    let result = core;
    if (result !== null) {
      result = {
        ...result,
        verdict: this.withUnanalysed(this.withMissingPoints(result.verdict)),
      };
      this.requestSeen = true;
    }
    const fp = JSON.stringify([
      result?.verdict.layer ?? null,
      result?.points.map((p) => [p.status, p.seenRequest, p.seenReply, p.packets]) ?? null,
    ]);
    if (fp !== this.fingerprint) {
      this.fingerprint = fp;
      this.lastProgressMs = nowMs;
    }
    this.live = result;
    return result;
  }

  /** Decides whether the session is finished (call after analyze, and when a deadline passes). */
  evaluate(nowMs: number): Decision {
    if (this.isFinal()) return { kind: 'continue' };
    const { spec, points } = this.record;
    const first = points[0];
    if (first?.state === 'failed') {
      return {
        kind: 'finish',
        state: 'failed',
        reason: `the first point ${first.name} failed (${errorText(first)}): the request cannot be seen`,
      };
    }
    if (points.every((p) => p.state === 'failed')) {
      return { kind: 'finish', state: 'failed', reason: 'every capture point failed' };
    }
    const live = this.live;
    if (spec.stopOnFirstMatch && live !== null) {
      const v = live.verdict;
      if (CONCLUSIVE.includes(v.layer))
        return { kind: 'finish', state: 'resolved', reason: `conclusive verdict ${v.layer}` };
      if (v.layer === 'preserved' && live.points[0]?.seenReply === true) {
        return {
          kind: 'finish',
          state: 'resolved',
          reason: 'preserved, and the reply came back to the first point',
        };
      }
      if (nowMs - this.lastProgressMs >= spec.settleMs) {
        return {
          kind: 'finish',
          state: 'resolved',
          reason: `settled: nothing new about the request for ${spec.settleMs} ms`,
        };
      }
    }
    if (nowMs - this.record.createdAtMs >= spec.timeoutMs) {
      return { kind: 'finish', state: 'timeout', reason: `timeout after ${spec.timeoutMs} ms` };
    }
    return { kind: 'continue' };
  }

  /** When `evaluate` should run again without new input (settle or timeout), or null when final. */
  nextDeadlineMs(): number | null {
    if (this.isFinal()) return null;
    const timeout = this.record.createdAtMs + this.record.spec.timeoutMs;
    if (this.record.spec.stopOnFirstMatch && this.requestSeen) {
      return Math.min(timeout, this.lastProgressMs + this.record.spec.settleMs);
    }
    return timeout;
  }

  /**
   * Ends the session: the final analysis (re-run over everything), a verdict that names missing
   * points, state and reason. Returns the result the reports are rendered from.
   */
  finish(
    state: 'resolved' | 'timeout' | 'failed' | 'cancelled',
    reason: string,
    nowMs: number,
    inventory: Inventory,
  ): AnalysisResult {
    this.dirty = true;
    return this.finishWith(state, reason, nowMs, this.analyze(nowMs, inventory));
  }

  /** Ends the session with a final analysis made elsewhere (the analysis worker's `core`). */
  finishWith(
    state: 'resolved' | 'timeout' | 'failed' | 'cancelled',
    reason: string,
    nowMs: number,
    live: AnalysisResult | null,
  ): AnalysisResult {
    const result = live ?? this.noRequestResult(reason);
    // A finished capture's events stay on disk only: its reports are written from `result`.
    for (const name of this.events.keys()) this.events.set(name, []);
    this.record.state = state;
    this.record.finishedAtMs = nowMs;
    this.record.finalReason = reason;
    this.record.verdict = result.verdict;
    for (const p of this.record.points) {
      if (p.state === 'arming' || p.state === 'capturing' || p.state === 'pending')
        p.state = 'stopped';
    }
    this.touch(nowMs);
    return result;
  }

  private touch(nowMs: number): void {
    this.record.updatedAtMs = Math.max(this.record.updatedAtMs, nowMs);
  }

  private missingText(): string {
    return this.missingPoints()
      .map((p) => `${p.name}: ${p.state === 'failed' ? errorText(p) : whyNothing(p)}`)
      .join('; ');
  }

  /** Names the events stored past the in-memory limit, which the verdict did not see. */
  private withUnanalysed(v: Verdict): Verdict {
    const over = this.record.points.filter((p) => (p.unanalysed ?? 0) > 0);
    if (over.length === 0) return v;
    const text = over.map((p) => `${p.unanalysed ?? 0} at ${p.name}`).join(', ');
    return {
      ...v,
      reason: `${v.reason ?? v.layer}; not analysed: ${text} (stored, but past the events the collector holds in memory for analysis)`,
    };
  }

  /** Names missing points in the verdict; an empty failed capture is never called a drop. */
  private withMissingPoints(v: Verdict): Verdict {
    const missing = this.missingPoints();
    if (missing.length === 0) return v;
    const text = this.missingText();
    const evidence: Evidence[] = v.evidence.map((e) => {
      const m = missing.find((p) => p.name === e.point);
      return m === undefined ? e : { ...e, detail: `${e.detail} [capture: ${whyMissing(m)}]` };
    });
    for (const m of missing) {
      if (!evidence.some((e) => e.point === m.name))
        evidence.push({ point: m.name, matchedBy: [], detail: `capture: ${whyMissing(m)}` });
    }
    const names = missing.map((p) => p.name).join(', ');
    const silent = missing.every((p) => p.agentLostAtMs === undefined);
    if (v.layer === 'dropped' || v.layer === 'no-return' || v.layer === 'unknown') {
      return {
        ...v,
        layer: 'unknown',
        evidence,
        reason:
          `${silent ? 'no events from' : 'no complete capture from'} ${names} (${text})` +
          (v.layer === 'unknown' && v.reason !== undefined
            ? `; ${v.reason}`
            : `; without it "${v.layer}" cannot be told from a capture that did not run`),
        hint: `make the capture at ${names} work (agent connected, target and interface exist), then capture again`,
      };
    }
    return { ...v, evidence, reason: `${v.reason ?? v.layer}; missing: ${text}` };
  }

  /** The verdict when no request was ever seen at the first point. */
  private noRequestResult(reason: string): AnalysisResult {
    const { spec, points } = this.record;
    const first = points[0];
    const firstEvents = first ? this.usefulEvents(first.name) : 0;
    const who = spec.client === undefined ? 'any client' : spec.client;
    const missing = this.missingText();
    const why =
      first?.state === 'failed'
        ? `the first point ${first.name} failed (${errorText(first)}), so the request could not be seen`
        : `no new TCP connection from ${who} was seen at ${first?.name ?? 'the first point'} (${firstEvents} usable events there; ${reason})`;
    const verdict: Verdict = {
      layer: 'unknown',
      rewrittenBetween: null,
      client: null,
      observed: Object.fromEntries(points.map((p) => [p.name, null])),
      evidence: points.map((p) => ({
        point: p.name,
        matchedBy: [],
        detail: p.state === 'failed' ? `capture failed: ${errorText(p)}` : `${p.events} events`,
      })),
      reason: missing === '' ? why : `${why}; missing: ${missing}`,
      hint: 'start the capture before sending the request, check --client/--dst, and that every point has a connected agent',
    };
    const summaries: PointSummary[] = points.map((p) => ({
      name: p.name,
      status: this.usefulEvents(p.name) === 0 ? 'no-capture' : 'not-seen',
      packets: 0,
      requestPackets: 0,
      replyPackets: 0,
      retransmits: 0,
      capturedEvents: this.usefulEvents(p.name),
      seenRequest: false,
      seenSyn: false,
      seenReply: false,
      proxied: false,
      observed: null,
      matchedBy: [],
      replyMatchedBy: [],
      frame: null,
      firstTsNs: null,
      lastTsNs: null,
      detail: p.state === 'failed' ? `capture failed: ${errorText(p)}` : 'no request selected',
      node: p.node ?? null,
      iface: p.iface,
      flow: [],
      flowOmitted: 0,
    }));
    return { verdict, points: summaries };
  }
}

/**
 * Packets a point's stored events stand for: each packet event, and what each counter counts (a
 * PointRecord, or the PointView GET /v1/captures/:id serves of it).
 */
export function accounted(p: Pick<PointRecord, 'events' | 'foldEvents' | 'foldedPackets'>): number {
  return addCount(Math.max(0, p.events - (p.foldEvents ?? 0)), p.foldedPackets ?? 0);
}

function errorText(p: PointRecord): string {
  if (p.error === undefined) return 'failed';
  const { code, message } = p.error;
  // An agent's HoptraceError message already starts with its code: do not say it twice.
  return message.startsWith(`${code}:`) ? message : `${code}: ${message}`;
}

function whyNothing(p: PointRecord): string {
  if (p.agentId === null) return 'no agent was armed';
  if (p.agentLostAtMs !== undefined)
    return `agent ${p.agentId} disconnected at ${new Date(p.agentLostAtMs).toISOString()} and did not come back`;
  return `agent ${p.agentId} never reported the capture running and sent no events`;
}

function whyMissing(p: PointRecord): string {
  return p.state === 'failed' ? `failed, ${errorText(p)}` : whyNothing(p);
}

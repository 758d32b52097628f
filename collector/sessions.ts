/**
 * The session manager: arms agents through the AgentHub, stores what they send, re-analyses
 * (debounced) and finishes sessions. The timers live here; the decisions in collector/session.ts.
 *
 * Ordering that makes a restart lossless: an events batch is appended and flushed to the store
 * before `handleMessage` resolves, and the hub acknowledges the message to the agent only then.
 */

import { randomBytes } from 'node:crypto';
import { HoptraceError } from '../common/errors';
import type { Inventory } from '../common/inventory';
import type { CaptureCommand } from '../common/wire';
import type { AnalysisResult } from './analyze';
import type { Verdict } from './attribute';
import type { AgentHub, AgentInfo, AgentMessage } from './hub-types';
import { parsePodTarget } from './capture-request';
import {
  buildLiveInventory,
  resolveTarget,
  type CapturedNamespace,
  type ClusterFacts,
  type PodTargetResolution,
  type TargetResolution,
} from './inventory-live';
import type { CollectorLogger } from './logger';
import { K8sPodDeleter } from './k8s/repro-deleter';
import { K8sInventorySource } from './k8s/source';
import { ReproManager } from './repro';
import type { ReturnRoute } from './repro-core';
import { inCidr } from '../common/cidr';
import { withCaptureHealth, type CaptureHealth } from './capture-health';
import { renderReportJson, renderReportMarkdown, type ReportMeta } from './report';
import { AgentRequests } from './agent-requests';
import { conntrackForCapture } from './conntrack-remote';
import { withConntrackEvidence } from './conntrack-evidence';
import {
  CaptureSession,
  type CaptureSpec,
  type PointState,
  type SessionRecord,
  type SessionState,
} from './session';
import type { CaptureStore, ReportKind } from './store';

/**
 * How long a session resumed after a collector restart waits for the agents of its points to
 * reconnect before it may conclude from missing events (the agents' reconnect backoff tops out at
 * 10 s).
 */
const RESUME_GRACE_MS = 15_000;

export interface Clock {
  /** Wall-clock milliseconds (also sent to agents as deadlines). */
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

/** One point in `GET /v1/captures/:id`. */
export interface PointView {
  name: string;
  agentId: string | null;
  node: string | null;
  target: string;
  iface: string;
  state: PointState;
  packets: number;
  events: number;
  kernelDrops: number | null;
  queueDrops: number;
  lost: number;
  error?: { code: string; message: string };
  /** The target came from a stale pod list (reading the pod from the API failed): why. */
  targetNote?: string;
}

/** A finished capture's analysis and report inputs; capture health is added at each write. */
interface FinalReport {
  state: string;
  reason: string;
  result: AnalysisResult;
  meta: ReportMeta;
}

/** A FinalReport as report-inputs.json; `null` (read back as none) if it cannot be JSON. */
function inputsJson(f: FinalReport): string {
  try {
    return JSON.stringify(f) + '\n';
  } catch {
    return 'null\n';
  }
}

/** A FinalReport read back from report-inputs.json; null when the file is missing or not one. */
function reportInputs(raw: unknown): FinalReport | null {
  if (typeof raw !== 'object' || raw === null) return null;
  const f = raw as Partial<FinalReport>;
  const ok =
    typeof f.state === 'string' &&
    typeof f.reason === 'string' &&
    typeof f.result?.verdict === 'object' &&
    Array.isArray(f.result.points) &&
    typeof f.meta?.generatedAt === 'string' &&
    Array.isArray(f.meta.inputs);
  return ok ? (f as FinalReport) : null;
}

/** `GET /v1/captures/:id`. */
export interface CaptureView {
  id: string;
  state: SessionState;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
  request: {
    client: string | null;
    dst: string | null;
    dport: number | null;
    timeoutMs: number;
    stopOnFirstMatch: boolean;
    settleMs: number;
  };
  points: PointView[];
  /** The live analysis: whether the request was seen and the provisional layer. */
  progress: { requestSeen: boolean; layer: string | null };
  verdict: Verdict | null;
  finalReason: string | null;
  reportUrls: { markdown: string; json: string } | null;
}

/** `GET /v1/agents`. */
export interface AgentView {
  agentId: string;
  node: string;
  version: string;
  connected: boolean;
  connectedAt: string;
  lastSeen: string;
  nodeAddresses: string[];
  namespaces: { path: string; addresses: string[]; interfaces: string[] }[];
}

export interface SessionManagerOptions {
  hub: AgentHub;
  store: CaptureStore;
  logger: CollectorLogger;
  clock?: Clock;
  /** Re-analysis delay after an events batch (default 100 ms). */
  debounceMs?: number;
  /** Snaplen asked of agents (default 65535). */
  snaplen?: number;
  /** The Kubernetes API's view (`--kubernetes`): inventory facts and `namespace/pod` targets. */
  cluster?: ClusterFacts;
  /** Ask the agents for the flow's conntrack entries when a capture finishes (default false). */
  conntrack?: boolean;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export class SessionManager {
  private readonly hub: AgentHub;
  private readonly store: CaptureStore;
  private readonly log: CollectorLogger;
  private readonly clock: Clock;
  private readonly debounceMs: number;
  private readonly snaplen: number;
  private readonly cluster: ClusterFacts | undefined;
  private readonly sessions = new Map<string, CaptureSession>();
  /** What the reports of finished captures are written from (rewritten by late counts, conntrack). */
  private readonly finals = new Map<string, FinalReport>();
  private readonly debounce = new Map<string, NodeJS.Timeout>();
  private readonly deadline = new Map<string, NodeJS.Timeout>();
  /** Resumed sessions are not timed out before agents had a chance to resend. */
  private readonly resumeUntil = new Map<string, number>();
  /** When an agent last (re)connected (resumed sessions give its resend a settle period). */
  private agentBackAtMs = 0;
  private readonly listeners = new Set<(view: CaptureView) => void>();
  private closed = false;
  /** `hoptrace repro` sessions (`/v1/repros`): their `r-…` capture messages are handed there. */
  readonly repros: ReproManager;
  /** Doctor and conntrack requests to agents (shared: one reply handler on the hub). */
  readonly requests: AgentRequests;
  private readonly conntrack: boolean;

  constructor(opts: SessionManagerOptions) {
    this.hub = opts.hub;
    this.store = opts.store;
    this.log = opts.logger;
    this.clock = opts.clock ?? systemClock;
    this.debounceMs = opts.debounceMs ?? 100;
    this.snaplen = opts.snaplen ?? 65535;
    this.cluster = opts.cluster;
    this.requests = new AgentRequests(opts.hub, 5_000);
    this.conntrack = opts.conntrack ?? false;
    this.repros = new ReproManager({
      hub: opts.hub,
      logger: opts.logger,
      nowMs: () => this.clock.nowMs(),
      snaplen: this.snaplen,
      readRoutes: (nodes, agentIds, client) => this.readReturnRoutes(nodes, agentIds, client),
      store: opts.store,
      // With --kubernetes/--kubeconfig, repro selects, deletes and follows pods through the API.
      ...(opts.cluster instanceof K8sInventorySource
        ? { kubernetes: new K8sPodDeleter(opts.cluster.api) }
        : {}),
    });
  }

  /** The agents as the hub knows them, with their hellos (the doctor reads their namespaces). */
  agentInfos(): AgentInfo[] {
    return this.hub.agents();
  }

  /** Loads stored sessions (unfinished ones resume) and subscribes to the hub. */
  start(): void {
    const now = this.clock.nowMs();
    this.repros.restore();
    for (const loaded of this.store.loadSessions()) {
      const s = new CaptureSession(loaded.record, loaded.events);
      this.sessions.set(s.id, s);
      for (const r of loaded.repaired) {
        this.log.warn(
          { captureId: s.id, point: r.point, code: 'STORE_IO', count: r.corruptRecords },
          `event file repaired: ${r.tornBytes} torn bytes dropped, ${r.corruptRecords} corrupt records skipped`,
        );
      }
      if (s.isFinal()) {
        // Its report inputs, so agents' final counters that arrive now still rewrite its reports.
        const inputs = reportInputs(this.store.readReportInputs(s.id));
        if (inputs !== null) this.finals.set(s.id, inputs);
      } else {
        this.resumeUntil.set(s.id, now + Math.max(s.record.spec.settleMs, RESUME_GRACE_MS));
        this.log.info({ captureId: s.id, state: s.record.state }, 'session resumed');
        this.step(s);
      }
    }
    this.hub.onMessage((msg) => this.handleMessage(msg));
    this.repros.start();
    this.hub.onAgent((a) => {
      this.log.info(
        { agentId: a.agentId, node: a.node, state: a.connected ? 'connected' : 'disconnected' },
        'agent',
      );
      // A resumed session waits for its agents; one coming back may let it conclude.
      if (!a.connected) return;
      this.agentBackAtMs = this.clock.nowMs();
      for (const id of this.resumeUntil.keys()) {
        const s = this.sessions.get(id);
        if (s && !s.isFinal()) this.step(s);
      }
    });
  }

  /** Starts a capture. Throws API_NO_AGENT when no point can be armed. */
  async create(spec: CaptureSpec): Promise<CaptureView> {
    // The inventory the verdict will use is listed again now, so it is as fresh as the capture
    // (the periodic list may be up to an interval old: a pod recreated since has a new IP). Not
    // awaited: arming does not wait for a cluster-wide list.
    void this.cluster?.refresh();
    // namespace/pod targets are read from the API first; the agents and the clock after that.
    const pods = await Promise.all(spec.points.map((p) => this.resolvePodTarget(p.target)));
    const now = this.clock.nowMs();
    const agents = this.hub.agents();
    const resolved = spec.points.map((p, i) => ({ p, r: this.resolvePoint(p, pods[i], agents) }));
    if (!resolved.some((x) => x.r.ok)) {
      const why = resolved
        .map(({ p, r }) => `${p.name}: ${r.ok ? 'ok' : `${r.code} ${r.message}`}`)
        .join('; ');
      throw new HoptraceError('API_NO_AGENT', why, {
        where: 'POST /v1/captures',
        hint: 'start hoptrace agents on the nodes (GET /v1/agents lists them) or give "node"',
      });
    }
    const id = `c-${now.toString(36)}-${randomBytes(4).toString('hex')}`;
    const s = CaptureSession.create(id, spec, now);
    this.sessions.set(id, s);
    this.store.saveSession(s.record);
    for (const { p, r } of resolved) {
      if (!r.ok) {
        s.markFailed(p.name, { code: r.code, message: r.message }, now);
        this.log.warn({ captureId: id, point: p.name, code: r.code }, r.message);
        continue;
      }
      const capture: CaptureCommand = {
        captureId: id,
        point: p.name,
        target: r.sendTarget,
        iface: p.iface,
        filter: p.filter ?? '',
        snaplen: this.snaplen,
        // The agent stops by itself at this time should the collector be gone.
        deadlineUnixMs: now + spec.timeoutMs + 10_000,
      };
      if (this.hub.send(r.agent.agentId, { kind: 'capture', capture })) {
        s.markArmed(p.name, r.agent.agentId, r.agent.node, now, r.stale);
        this.log.info({ captureId: id, point: p.name, agentId: r.agent.agentId }, 'point armed');
      } else {
        const message = `the agent ${r.agent.agentId} on ${r.agent.node} disconnected before the command`;
        s.markFailed(p.name, { code: 'AGENT_NOT_CONNECTED', message }, now);
        this.log.warn(
          { captureId: id, point: p.name, agentId: r.agent.agentId, code: 'AGENT_NOT_CONNECTED' },
          message,
        );
      }
    }
    this.log.info({ captureId: id, state: s.record.state }, 'capture created');
    this.step(s);
    return this.view(s);
  }

  /** A `namespace/pod` target's pod as the API says now (undefined: not such a target). */
  private async resolvePodTarget(target: string): Promise<PodTargetResolution | undefined> {
    const pod = parsePodTarget(target);
    if (pod === null) return undefined;
    if (this.cluster === undefined) {
      const message = `${target} is a namespace/pod target and the collector does not read the Kubernetes API; start it with --kubernetes (in a cluster) or --kubeconfig FILE, or give the pod IP`;
      return { ok: false, code: 'K8S_CONFIG', message };
    }
    const found = await this.cluster.resolvePodTarget(pod.namespace, pod.name);
    if (found.ok && found.stale !== undefined)
      this.log.warn({ code: 'K8S_API_UNREACHABLE' }, `capture target ${target}: ${found.stale}`);
    return found;
  }

  /**
   * The agent for a point, and the target it is sent: a `namespace/pod` target (`pod`, resolved
   * already) becomes the pod's IP on the pod's node (the agent finds the namespace holding that
   * IP, as for any pod IP).
   */
  private resolvePoint(
    p: CaptureSpec['points'][number],
    pod: PodTargetResolution | undefined,
    agents: ReturnType<AgentHub['agents']>,
  ): TargetResolution & { sendTarget: string; stale?: string } {
    if (pod === undefined)
      return { ...resolveTarget(p.target, p.node, agents), sendTarget: p.target };
    if (!pod.ok) return { ...pod, sendTarget: p.target };
    const r = { ...resolveTarget(pod.ip, pod.node, agents), sendTarget: pod.ip };
    return pod.stale === undefined ? r : { ...r, stale: pod.stale };
  }

  get(id: string): CaptureView | undefined {
    const s = this.sessions.get(id);
    return s && this.view(s);
  }

  list(): CaptureView[] {
    return [...this.sessions.values()].map((s) => this.view(s));
  }

  /** Cancels a capture (stops the agents); a finished capture stays as it is. */
  cancel(id: string): CaptureView | undefined {
    const s = this.sessions.get(id);
    if (!s) return undefined;
    if (!s.isFinal()) this.finish(s, 'cancelled', 'cancelled by the user');
    return this.view(s);
  }

  report(id: string, kind: ReportKind): string | null {
    const s = this.sessions.get(id);
    if (!s?.isFinal() || s.record.verdict === null) return null;
    return this.store.readReport(id, kind);
  }

  agents(): AgentView[] {
    return this.hub.agents().map((a) => ({
      agentId: a.agentId,
      node: a.node,
      version: a.hello.version,
      connected: a.connected,
      connectedAt: iso(a.connectedAtMs),
      lastSeen: iso(a.lastSeenMs),
      nodeAddresses: a.hello.nodeAddresses,
      namespaces: a.hello.namespaces.map((n) => ({
        path: n.path,
        addresses: n.addresses,
        interfaces: n.interfaces,
      })),
    }));
  }

  /** Called for every view change that matters (state, verdict). */
  onChange(fn: (view: CaptureView) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The inventory a session is attributed with. */
  inventoryFor(s: CaptureSession): Inventory {
    const captured: CapturedNamespace[] = [];
    for (const p of s.record.points) {
      if (p.node === null) continue;
      const addresses =
        p.netnsAddresses.length > 0
          ? p.netnsAddresses
          : /^[0-9a-f.:]+$/i.test(p.target)
            ? [p.target]
            : [];
      captured.push({ point: p.name, node: p.node, netns: p.netns ?? p.target, addresses });
    }
    return buildLiveInventory(
      this.hub.agents(),
      captured,
      s.record.spec.inventory,
      this.cluster?.inventory(),
    );
  }

  /** Stores and applies one agent message; resolves once it is safe to acknowledge. */
  async handleMessage(msg: AgentMessage): Promise<void> {
    const captureId = captureIdOf(msg);
    if (this.repros.owns(captureId)) return this.repros.handle(msg);
    const s = this.sessions.get(captureId);
    if (s?.isFinal() === true) this.lateCounts(s, msg);
    if (!s || s.isFinal()) {
      // Late or unknown: acknowledge and drop, or the agent would resend it forever.
      this.log.debug(
        { captureId, agentId: msg.agentId, state: msg.kind },
        'message for no live capture',
      );
      return;
    }
    const pointName = pointOf(msg);
    const p = s.point(pointName);
    if (p === undefined || (p.agentId !== null && p.agentId !== msg.agentId)) {
      this.log.warn(
        { captureId, agentId: msg.agentId, point: pointName },
        'message for a point this agent does not capture; dropped',
      );
      return;
    }
    const now = this.clock.nowMs();
    switch (msg.kind) {
      case 'events':
        if (msg.batch.events.length === 0) return;
        await this.store.appendEvents(captureId, pointName, msg.batch.events);
        if (s.isFinal()) return;
        s.addEvents(pointName, msg.batch.events, now);
        this.scheduleAnalysis(s);
        return;
      case 'status':
        s.applyStatus(msg.status, now);
        if (msg.status.state === 'failed') {
          this.log.warn(
            { captureId, agentId: msg.agentId, point: pointName, code: msg.status.errorCode },
            msg.status.message,
          );
        }
        break;
      case 'lost':
        s.applyLost(msg.lost, now);
        this.log.warn(
          { captureId, agentId: msg.agentId, point: pointName, count: msg.lost.count },
          `events lost: ${msg.lost.reason}`,
        );
        break;
      case 'error':
        s.applyError(msg.error, now);
        this.log.warn(
          { captureId, agentId: msg.agentId, point: pointName, code: msg.error.code },
          msg.error.message,
        );
        break;
    }
    this.store.saveSession(s.record);
    this.step(s);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.repros.close();
    for (const t of [...this.debounce.values(), ...this.deadline.values()]) clearTimeout(t);
    this.debounce.clear();
    this.deadline.clear();
    for (const s of this.sessions.values()) if (!s.isFinal()) this.store.saveSession(s.record);
    await this.store.close();
  }

  private scheduleAnalysis(s: CaptureSession): void {
    if (this.closed || this.debounce.has(s.id)) return;
    const t = setTimeout(() => {
      this.debounce.delete(s.id);
      this.step(s);
      if (!s.isFinal()) this.store.saveSession(s.record);
    }, this.debounceMs);
    this.debounce.set(s.id, t);
  }

  /** Analyse, decide, and either finish or wait for the next deadline. */
  private step(s: CaptureSession): void {
    if (this.closed || s.isFinal()) return;
    const now = this.clock.nowMs();
    const before = s.record.state;
    try {
      s.analyze(now, this.inventoryFor(s));
    } catch (e) {
      // analyzeEvents is total apart from CLI_NO_REQUEST; anything else is a bug worth a log line.
      this.log.error(
        { captureId: s.id, err: e instanceof Error ? e.message : String(e) },
        'analysis failed',
      );
    }
    const d = s.evaluate(now);
    const grace = this.resumeUntil.get(s.id) ?? 0;
    // After a collector restart, agents reconnect with backoff and resend what was not
    // acknowledged: until every armed point's agent is back (or the grace ends), missing events
    // are in flight, not absent, so no verdict is drawn from their absence.
    // An agent that just came back resends right after its hello: give it a settle period.
    const back = this.armedAgentsConnected(s);
    const quietUntil = this.agentBackAtMs + s.record.spec.settleMs;
    const waiting = now < grace && (!back || now < quietUntil);
    if (d.kind === 'finish' && !waiting && !(d.state === 'timeout' && now < grace)) {
      this.finish(s, d.state, d.reason);
      return;
    }
    if (s.record.state !== before) this.emit(s);
    let next = s.nextDeadlineMs() ?? now;
    if (now < grace) next = Math.max(next, back ? Math.min(quietUntil, grace) : grace);
    const old = this.deadline.get(s.id);
    if (old) clearTimeout(old);
    const t = setTimeout(
      () => {
        this.deadline.delete(s.id);
        this.step(s);
      },
      Math.max(0, next - now),
    );
    this.deadline.set(s.id, t);
  }

  /** Routes toward `client` in the node namespaces of these nodes/agents, read by their agents. */
  private async readReturnRoutes(
    nodes: string[],
    agentIds: string[],
    client: string,
  ): Promise<ReturnRoute[]> {
    const agents = this.hub
      .agents()
      .filter((a) => a.connected && (nodes.includes(a.node) || agentIds.includes(a.agentId)));
    const out: ReturnRoute[] = [];
    for (const a of agents) {
      const report = await this.requests.doctor(a.agentId, [
        { name: 'node', target: '', routeTo: [client] },
      ]);
      for (const f of report.facts)
        for (const r of f.routes)
          if (r.dst !== 'default' && inCidr(client, r.dst.includes('/') ? r.dst : `${r.dst}/32`))
            out.push({
              node: a.node,
              dst: r.dst,
              via: r.gateway === '' ? null : r.gateway,
              dev: r.dev === '' ? null : r.dev,
            });
    }
    return out;
  }

  /** Every point that was armed has its agent connected (again). */
  private armedAgentsConnected(s: CaptureSession): boolean {
    const connected = new Set(
      this.hub
        .agents()
        .filter((a) => a.connected)
        .map((a) => a.agentId),
    );
    return s.record.points.every((p) => p.agentId === null || connected.has(p.agentId));
  }

  private finish(
    s: CaptureSession,
    state: 'resolved' | 'timeout' | 'failed' | 'cancelled',
    reason: string,
  ): void {
    const now = this.clock.nowMs();
    for (const m of [this.debounce, this.deadline]) {
      const t = m.get(s.id);
      if (t) clearTimeout(t);
      m.delete(s.id);
    }
    const armed = s.record.points.filter((p) => p.agentId !== null && p.state !== 'failed');
    const analysis = s.finish(state, reason, now, this.inventoryFor(s));
    for (const p of armed) {
      if (p.agentId === null) continue;
      this.hub.send(p.agentId, { kind: 'stop', stop: { captureId: s.id, point: p.name } });
    }
    const meta: ReportMeta = {
      generatedAt: iso(now),
      inputs: s.record.points.map((p) => ({
        name: p.name,
        file: `live ${p.node ?? '?'}:${p.target} ${p.iface} (capture ${s.id})`,
      })),
      selector: {
        client: s.record.spec.client,
        dst: s.record.spec.dst,
        dport: s.record.spec.dport,
      },
      command: reproduceCommand(s.record),
    };
    const final: FinalReport = { state, reason, result: analysis, meta };
    this.finals.set(s.id, final);
    this.writeReports(s, final, 'cannot write the report');
    this.log.info(
      { captureId: s.id, state, code: analysis.verdict.layer },
      `capture finished: ${reason}`,
    );
    this.emit(s);
    if (this.conntrack && analysis.verdict.client !== null) void this.attachConntrack(s, final);
  }

  /**
   * Conntrack evidence, right after the verdict (entries are fresh): the agents of the egress and
   * backend points list the flow's entries; the verdict and the report are rewritten with them.
   * Best effort: a failure is logged and the packet verdict stands as written.
   */
  private async attachConntrack(s: CaptureSession, final: FinalReport): Promise<void> {
    const { entries, errors } = await conntrackForCapture(
      this.requests,
      s.id,
      s.record.points,
      final.result.verdict,
    );
    if (this.closed) return;
    if (errors.length > 0)
      this.log.warn({ captureId: s.id, code: 'CONNTRACK_READ_FAILED' }, errors.join('; '));
    const verdict = withConntrackEvidence(final.result.verdict, entries);
    s.record.verdict = verdict;
    final.result = { ...final.result, verdict };
    this.writeReports(s, final, 'cannot write the report with conntrack evidence');
    this.emit(s);
  }

  /** Each point's capture as its agent last reported it (the report's capture health). */
  private health(s: CaptureSession): CaptureHealth[] {
    return s.record.points.map((p) => ({
      point: p.name,
      node: p.node,
      iface: p.iface,
      state: p.state,
      confirmed: p.confirmed,
      packets: p.packets,
      kernelDrops: p.kernelDrops,
      queueDrops: p.queueDrops,
      lost: p.lost,
      ...(p.targetNote === undefined ? {} : { targetNote: p.targetNote }),
    }));
  }

  /** (Re)writes verdict.json, report.md and report.json of a finished capture. */
  private writeReports(s: CaptureSession, f: FinalReport, failure: string): void {
    const result = withCaptureHealth(f.result, this.health(s));
    try {
      this.store.writeFinal(s.id, {
        verdict:
          JSON.stringify({ state: f.state, reason: f.reason, verdict: result.verdict }, null, 2) +
          '\n',
        markdown: renderReportMarkdown(result, f.meta),
        json: renderReportJson(result),
        // The inputs without the capture health, so a collector started again can rewrite the
        // reports when an agent's final counters arrive after the restart.
        inputs: inputsJson(f),
      });
      this.store.saveSession(s.record);
    } catch (e) {
      this.log.error(
        { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        failure,
      );
    }
  }

  /**
   * A status or lost count that arrives after the verdict (each agent's final counters come when
   * its capture stops): the counts are applied and the report rewritten with them, so its capture
   * health is the final one. Nothing else about the finished capture changes.
   */
  private lateCounts(s: CaptureSession, msg: AgentMessage): void {
    const final = this.finals.get(s.id);
    if (final === undefined || (msg.kind !== 'status' && msg.kind !== 'lost')) return;
    const p = s.point(pointOf(msg));
    if (p === undefined || p.agentId !== msg.agentId) return;
    const changed = msg.kind === 'status' ? s.applyCounts(msg.status) : s.countLost(msg.lost);
    if (!changed) return;
    this.writeReports(s, final, 'cannot rewrite the report with the final counts');
    this.emit(s);
  }

  private emit(s: CaptureSession): void {
    const v = this.view(s);
    for (const fn of this.listeners) fn(v);
  }

  private view(s: CaptureSession): CaptureView {
    const r = s.record;
    const live = s.liveResult();
    const final = s.isFinal() && r.verdict !== null;
    return {
      id: r.id,
      state: r.state,
      createdAt: iso(r.createdAtMs),
      updatedAt: iso(r.updatedAtMs),
      finishedAt: r.finishedAtMs === null ? null : iso(r.finishedAtMs),
      request: {
        client: r.spec.client ?? null,
        dst: r.spec.dst ?? null,
        dport: r.spec.dport ?? null,
        timeoutMs: r.spec.timeoutMs,
        stopOnFirstMatch: r.spec.stopOnFirstMatch,
        settleMs: r.spec.settleMs,
      },
      points: r.points.map((p) => {
        const v: PointView = {
          name: p.name,
          agentId: p.agentId,
          node: p.node,
          target: p.target,
          iface: p.iface,
          state: p.state,
          packets: p.packets,
          events: p.events,
          kernelDrops: p.kernelDrops,
          queueDrops: p.queueDrops,
          lost: p.lost,
        };
        if (p.error) v.error = p.error;
        if (p.targetNote !== undefined) v.targetNote = p.targetNote;
        return v;
      }),
      progress: {
        requestSeen: live !== null || (final && r.verdict?.client != null),
        layer: live?.verdict.layer ?? null,
      },
      verdict: final ? r.verdict : null,
      finalReason: r.finalReason,
      reportUrls: final
        ? { markdown: `/v1/captures/${r.id}/report.md`, json: `/v1/captures/${r.id}/report.json` }
        : null,
    };
  }
}

function captureIdOf(m: AgentMessage): string {
  switch (m.kind) {
    case 'events':
      return m.batch.captureId;
    case 'status':
      return m.status.captureId;
    case 'lost':
      return m.lost.captureId;
    case 'error':
      return m.error.captureId;
  }
}

function pointOf(m: AgentMessage): string {
  switch (m.kind) {
    case 'events':
      return m.batch.point;
    case 'status':
      return m.status.point;
    case 'lost':
      return m.lost.point;
    case 'error':
      return m.error.point;
  }
}

function shellWord(s: string): string {
  return /^[\w@%+=:,./[\]-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The `hoptrace capture` command that repeats this session. */
export function reproduceCommand(r: SessionRecord): string {
  const args = ['hoptrace', 'capture'];
  for (const p of r.spec.points) {
    const target = p.target.includes(':') ? `[${p.target}]` : p.target;
    const withNode = p.node === undefined ? target : `${p.node}/${target}`;
    args.push('--point', shellWord(`${p.name}=${withNode}:${p.iface}`));
  }
  if (r.spec.client !== undefined) args.push('--client', r.spec.client);
  if (r.spec.dst !== undefined) {
    const dst = r.spec.dst.includes(':') ? `[${r.spec.dst}]` : r.spec.dst;
    args.push('--dst', r.spec.dport === undefined ? dst : `${dst}:${r.spec.dport}`);
  }
  args.push('--timeout', `${r.spec.timeoutMs}ms`);
  return args.join(' ');
}

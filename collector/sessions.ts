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
import { readReturnRoutes } from './return-routes-remote';
import { AgentRequests } from './agent-requests';
import { conntrackForCapture } from './conntrack-remote';
import { doctorViaAgents } from './doctor-remote';
import { fetchCaptureFrames } from './frames-fetch';
import { storedEventsFiles, withEventsFiles } from './events-digest';
import { liveEvidencePcapng, type RetainedFrames } from '../core/report/live-evidence';
import { liveIdentityHeaders } from '../core/report/identity-scan';
import { sha256Hex } from '../common/sha256sums';
import { hoptraceVersion } from '../common/version';
import { withConntrackEvidence } from '../core/attribute/conntrack-evidence';
import {
  CaptureSession,
  isFinalState,
  MAX_HELD_EVENTS,
  type CaptureSpec,
  finishedAtMs,
} from './session';
import { RecentFinished } from './recent-finished';
import { DEFAULT_RETAIN_FINISHED, expiredFinished, type RetentionPolicy } from './disk-retention';
import { sweepExpired } from './retention-sweep';
import { BUNDLE_FILES, type BundleFileName, type CaptureStore, type ReportKind } from './store';
import { dirBundleArchive, type ArchiveRefusal, type BundleArchive } from './bundle-archive';
import { captureIdOf, ownEvents, pointOf } from './agent-messages';
import {
  reportInputs,
  liveReportMeta,
  runCaptureDoctor,
  writeCaptureReports,
  type FinalReport,
} from './capture-reports';
import { agentView, captureView, type AgentView, type CaptureView } from './capture-views';
import { AnalysisOffload } from './analysis-offload';
import { countByAgent, refuseBeyondAgentCapacity } from './agent-capacity';
import { logInvalidAgentRecords } from './agent-records';
import type { AnalysisResult } from '../core/report/analysis-result';

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
  /**
   * Fetch the evidence frames (the matched connection's retained bytes at each point) from the
   * agents when a capture finishes, into frames-<point>.pb (default true; needs a hub that
   * carries replies).
   */
  frames?: boolean;
  /**
   * Bytes of each frame the agents retain for the evidence at most (default: theirs, 256); they
   * keep headers only (each frame cut where its payload starts) unless a capture asked for the
   * payload (`evidencePayload`: whole frames, `retainPayload`, up to the snaplen instead).
   */
  retainSnaplen?: number;
  /**
   * A capture holding this many useful events is analysed on the analysis worker thread, not on
   * the event loop (default 5,000; 0 = every capture).
   */
  offloadAbove?: number;
  /**
   * Events all live captures together hold in memory for analysis (default 400,000, about
   * 450 MiB); past it a capture's new events are stored, not analysed, counted and named.
   */
  maxHeldEvents?: number;
  /**
   * Captures and repros that may be live (not finished) at once (default 32,
   * `--max-live-captures`): each arms packet captures on up to 8 agents, a capture worker process
   * each, for up to an hour; past it a new one is refused (API_TOO_MANY_CAPTURES, 429). An API
   * token holder made 1,000 captures in 3 s.
   */
  maxLiveCaptures?: number;
  /**
   * Finished captures held in memory, the most recent by when they finished (default 1,000,
   * `--keep-finished`); an older one stays in the data directory and is read from there when asked
   * for by id (its view, reports and bundle), but is no longer listed, and counters its agents send
   * after that are not applied to its report. Without a bound every capture ever made stayed in
   * memory (~27 KB each): an API token holder made and cancelled ~1 M a day.
   */
  maxFinishedHeld?: number;
  /** Finished repros held in memory likewise (default 50, `--keep-finished-repros`; repro.ts). */
  maxFinishedRepros?: number;
  /**
   * Finished captures the data directory keeps (collector/disk-retention.ts; `--retain-finished`,
   * `--retain-age`): the others are removed after a capture finishes, at start and hourly.
   * Default: the 10,000 most recent, no age limit.
   */
  retainFinished?: RetentionPolicy;
  /** Finished repros likewise (`--retain-finished-repros`, `--retain-age`; default 1,000). */
  retainFinishedRepros?: RetentionPolicy;
}

/** How often the data directory is looked at for finished captures and repros past their age. */
const RETENTION_SWEEP_MS = 3_600_000;

/** The default of SessionManagerOptions.maxFinishedHeld. */
export const DEFAULT_MAX_FINISHED_HELD = 1_000;

/** The default of SessionManagerOptions.maxLiveCaptures. */
export const DEFAULT_MAX_LIVE_CAPTURES = 32;

export class SessionManager {
  private readonly hub: AgentHub;
  private readonly store: CaptureStore;
  private readonly log: CollectorLogger;
  private readonly clock: Clock;
  private readonly debounceMs: number;
  private readonly snaplen: number;
  private readonly cluster: ClusterFacts | undefined;
  private readonly sessions = new Map<string, CaptureSession>();
  /** `captureId/point` whose agent's events claimed another point, node or interface (warned). */
  private readonly claimWarned = new Set<string>();
  /** What the reports of finished captures are written from (rewritten by late counts, conntrack). */
  private readonly finals = new Map<string, FinalReport>();
  private readonly debounce = new Map<string, NodeJS.Timeout>();
  private readonly deadline = new Map<string, NodeJS.Timeout>();
  /** Resumed sessions are not timed out before agents had a chance to resend. */
  private readonly resumeUntil = new Map<string, number>();
  /** When an agent last (re)connected (resumed sessions give its resend a settle period). */
  private agentBackAtMs = 0;
  private readonly listeners = new Set<(view: CaptureView) => void>();
  private readonly frameListeners = new Set<(captureId: string, point: string) => void>();
  private closed = false;
  /** `hoptrace repro` sessions (`/v1/repros`): their `r-…` capture messages are handed there. */
  readonly repros: ReproManager;
  /** Doctor and conntrack requests to agents (shared: one reply handler on the hub). */
  readonly requests: AgentRequests;
  private readonly conntrack: boolean;
  private readonly frames: boolean;
  private readonly retainSnaplen: number;
  private readonly offloadAbove: number;
  private readonly maxHeldEvents: number;
  private readonly maxLiveCaptures: number;
  /** The finished captures held in `sessions` (and `finals`); older ones are read from the store. */
  private readonly recent: RecentFinished;
  private readonly retain: RetentionPolicy;
  private retentionTimer: NodeJS.Timeout | undefined;
  private readonly offload: AnalysisOffload;
  /** Captures whose analysis runs on the worker now; their next one waits for it. */
  private readonly analysing = new Set<string>();
  /** Captures being finished: their final analysis runs on the worker. */
  private readonly finishing = new Set<string>();
  /** Finished captures whose evidence, digests or doctor findings are still being written. */
  private readonly attaching = new Set<string>();
  /** The last failure of the finished index that was logged. */
  private indexErrorSaid: string | null = null;
  private onLoopAnalyses = 0;
  /**
   * The URL the collector's API listens at, for the reproduce command of reports (set once it
   * listens); null when unknown or when it listens on every address (no one URL to name).
   */
  private collectorUrl: string | null = null;

  constructor(opts: SessionManagerOptions) {
    this.hub = opts.hub;
    this.store = opts.store;
    this.log = opts.logger;
    this.clock = opts.clock ?? systemClock;
    this.debounceMs = opts.debounceMs ?? 100;
    this.snaplen = opts.snaplen ?? 65535;
    this.cluster = opts.cluster;
    this.requests = new AgentRequests(opts.hub, 5_000, this.log);
    this.conntrack = opts.conntrack ?? false;
    this.frames = (opts.frames ?? true) && opts.hub.onReply !== undefined;
    this.retainSnaplen = opts.retainSnaplen ?? 0;
    this.offloadAbove = opts.offloadAbove ?? 5_000;
    this.maxHeldEvents = opts.maxHeldEvents ?? 400_000;
    this.maxLiveCaptures = opts.maxLiveCaptures ?? DEFAULT_MAX_LIVE_CAPTURES;
    this.retain = opts.retainFinished ?? { maxCount: DEFAULT_RETAIN_FINISHED, maxAgeMs: null };
    // Never more held in memory than the data directory keeps.
    const held = Math.min(
      opts.maxFinishedHeld ?? DEFAULT_MAX_FINISHED_HELD,
      this.retain.maxCount ?? Infinity,
    );
    this.recent = new RecentFinished(Math.max(1, held), (id) => {
      this.sessions.delete(id);
      this.finals.delete(id);
    });
    this.offload = new AnalysisOffload((why) => {
      this.reseedWorker(why);
    });
    this.repros = new ReproManager({
      hub: opts.hub,
      logger: opts.logger,
      nowMs: () => this.clock.nowMs(),
      snaplen: this.snaplen,
      readRoutes: (nodes, agentIds, client) =>
        readReturnRoutes(this.hub.agents(), this.requests, nodes, agentIds, client),
      store: opts.store,
      // The bundle's evidence.pcapng: the agents' retained frames of the probes' connections.
      ...(this.frames ? { frames: this.requests } : {}),
      // A repro is refused up front, as a capture, when it needs more of a node than its agent runs.
      liveCaptures: () => this.liveCapturesByAgent(),
      refuseBeyondLive: (where) => {
        this.refuseBeyondLiveCap(where);
      },
      ...(opts.maxFinishedRepros !== undefined ? { maxFinishedHeld: opts.maxFinishedRepros } : {}),
      ...(opts.retainFinishedRepros !== undefined ? { retain: opts.retainFinishedRepros } : {}),
      maxHeldEvents: this.maxHeldEvents,
      // With --kubernetes/--kubeconfig, repro selects, deletes and follows pods through the API.
      ...(opts.cluster instanceof K8sInventorySource
        ? { kubernetes: new K8sPodDeleter(opts.cluster.api) }
        : {}),
    });
  }

  /** How many analyses ran on the analysis worker, and on the event loop. */
  analysisCounts(): { offThread: number; onLoop: number } {
    return { offThread: this.offload.analyses, onLoop: this.onLoopAnalyses };
  }

  /** Kills the analysis worker (tests: a lost worker is recovered from the store). */
  killAnalysisWorker(): Promise<void> {
    return this.offload.terminateWorker();
  }

  /** The agents as the hub knows them, with their hellos (the doctor reads their namespaces). */
  agentInfos(): AgentInfo[] {
    return this.hub.agents();
  }

  /** Loads stored sessions (unfinished ones resume) and subscribes to the hub. */
  start(): void {
    const now = this.clock.nowMs();
    this.repros.restore();
    const loadedSessions = this.store.loadSessions(this.recent.max);
    for (const q of this.store.quarantined)
      this.log.warn(
        { code: 'STORE_IO' },
        `not loaded from the data directory, moved to ${q.path}: ${q.reason}`,
      );
    logInvalidAgentRecords(this.log, this.store.invalidAgentRecords);
    // Of the finished ones, the most recent are held (by when they finished); the others stay
    // in the data directory unread (the store's index knows them), read when asked for by id.
    const finished = loadedSessions.filter((l) => isFinalState(l.record.state));
    finished.sort((a, b) => finishedAtMs(a.record) - finishedAtMs(b.record));
    for (const l of finished) this.recent.add(l.record.id);
    this.recent.countOlder(this.store.finishedNotLoaded);
    for (const loaded of loadedSessions) {
      const s = new CaptureSession(loaded.record, loaded.events);
      this.sessions.set(s.id, s);
      this.maybeOffload(s);
      for (const r of loaded.repaired) {
        this.log.warn(
          { captureId: s.id, point: r.point, code: 'STORE_IO', count: r.corruptRecords },
          `event file repaired: ${r.tornBytes} torn bytes dropped, ${r.corruptRecords} damaged runs skipped, ${r.duplicateEvents} events of batches stored twice skipped` +
            (r.missingEvents > 0
              ? `; ${r.missingEvents} events that session.json counted are not in it (the file was cut or emptied)`
              : ''),
        );
      }
      if (s.isFinal()) {
        // Its report inputs, so agents' final counters that arrive now still rewrite its reports.
        const inputs = reportInputs(this.store.readReportInputs(s.id));
        if (inputs !== null) this.finals.set(s.id, inputs);
        else if (s.record.verdict !== null)
          this.log.warn(
            { captureId: s.id, code: 'STORE_IO' },
            'report-inputs.json is missing or damaged: its reports stay as written (late counters will not rewrite them)',
          );
      } else {
        this.resumeUntil.set(s.id, now + Math.max(s.record.spec.settleMs, RESUME_GRACE_MS));
        this.log.info({ captureId: s.id, state: s.record.state }, 'session resumed');
        this.step(s);
      }
    }
    this.applyRetention();
    this.retentionTimer = setInterval(() => {
      this.applyRetention();
      this.repros.applyRetention();
    }, RETENTION_SWEEP_MS);
    this.retentionTimer.unref();
    this.hub.onMessage((msg) => this.handleMessage(msg));
    this.repros.start();
    this.hub.onAgent((a) => {
      this.log.info(
        { agentId: a.agentId, node: a.node, state: a.connected ? 'connected' : 'disconnected' },
        'agent',
      );
      // A point whose agent went away cannot vouch for what it did not see (an agent killed
      // after its capture started would otherwise read as a drop); one that comes back can.
      for (const s of this.sessions.values())
        if (!s.isFinal() && s.agentGone(a.agentId, a.connected ? null : this.clock.nowMs()))
          this.scheduleAnalysis(s);
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
    this.refuseBeyondLiveCap('POST /v1/captures');
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
    // Again: other requests may have started captures while the pods were read.
    this.refuseBeyondLiveCap('POST /v1/captures');
    // Each agent runs at most its own number (its hello's maxCaptures): one more would fail its
    // point with AGENT_BUSY once the capture started. From here to the commands nothing waits.
    refuseBeyondAgentCapacity(
      resolved.flatMap(({ r }) => (r.ok ? [r.agent] : [])),
      this.liveCapturesByAgent(),
    );
    const id = `c-${now.toString(36)}-${randomBytes(4).toString('hex')}`;
    const s = CaptureSession.create(id, spec, now);
    this.sessions.set(id, s);
    this.maybeOffload(s);
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
        ...this.retainFor(spec),
        ...(spec.perPacket === true ? {} : { foldFlows: true }),
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
    return captureView(s);
  }

  /**
   * Throws API_TOO_MANY_CAPTURES when maxLiveCaptures captures and repros together are not
   * finished yet (`where`: the request refused).
   */
  private refuseBeyondLiveCap(where: string): void {
    let captures = 0;
    for (const s of this.sessions.values()) if (!s.isFinal()) captures++;
    const repros = this.repros.running();
    const live = captures + repros;
    if (live < this.maxLiveCaptures) return;
    const what =
      repros === 0
        ? `${captures} ${captures === 1 ? 'capture is' : 'captures are'}`
        : `${captures} ${captures === 1 ? 'capture' : 'captures'} and ${repros} ${repros === 1 ? 'repro' : 'repros'} are`;
    throw new HoptraceError(
      'API_TOO_MANY_CAPTURES',
      `${what} live; this collector runs at most ${this.maxLiveCaptures} at once`,
      {
        where,
        hint: "wait for one to finish or cancel one (GET /v1/captures lists the captures, DELETE /v1/captures/:id cancels one; GET /v1/repros the repros, POST /v1/repros/:id/finish ends one); the collector's --max-live-captures sets the limit",
      },
    );
  }

  /**
   * What the agents retain of each frame for a capture: whole frames (the snaplen; the agent
   * bounds it again by its own maximum and by its byte bounds, which then hold fewer frames) when
   * the capture asked for the payload, else the collector's setting or the agents' default.
   */
  private retainFor(spec: CaptureSpec): { retainSnaplen?: number; retainPayload?: boolean } {
    const payload = spec.evidencePayload === true;
    const n = payload ? this.snaplen : this.retainSnaplen;
    return { ...(n > 0 ? { retainSnaplen: n } : {}), ...(payload ? { retainPayload: true } : {}) };
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
    if (pod === undefined) {
      // A pod IP the API knows is captured on the pod's node: an agent elsewhere that claims the
      // address in its hello (a stale namespace, a peer lying) is not asked.
      const node = p.node ?? this.nodeOfPodIp(p.target);
      return { ...resolveTarget(p.target, node, agents), sendTarget: p.target };
    }
    if (!pod.ok) return { ...pod, sendTarget: p.target };
    const r = { ...resolveTarget(pod.ip, pod.node, agents), sendTarget: pod.ip };
    return pod.stale === undefined ? r : { ...r, stale: pod.stale };
  }

  /** The node of the pod holding `ip`, as the last API list says (undefined: not known). */
  private nodeOfPodIp(ip: string): string | undefined {
    const pods = this.cluster?.inventory()?.pods;
    if (pods === undefined) return undefined;
    for (const pod of Object.values(pods)) if (pod.ip === ip && pod.node !== '') return pod.node;
    return undefined;
  }

  /**
   * A capture's view: a live or recently finished one from memory, an older finished one from
   * the data directory (STORE_IO when its record there cannot be read).
   */
  get(id: string): CaptureView | undefined {
    const s = this.sessions.get(id) ?? this.storedFinished(id);
    return s && captureView(s);
  }

  /** The live captures and the finished ones held in memory (olderFinished() counts the rest). */
  list(): CaptureView[] {
    return [...this.sessions.values()].map((s) => captureView(s));
  }

  /** Finished captures in the data directory that list() leaves out (the older ones). */
  olderFinished(): number {
    return this.recent.older();
  }

  /** Cancels a capture (stops the agents); a finished capture stays as it is. */
  cancel(id: string): CaptureView | undefined {
    const s = this.sessions.get(id) ?? this.storedFinished(id);
    if (!s) return undefined;
    if (!s.isFinal()) this.finish(s, 'cancelled', 'cancelled by the user');
    return captureView(s);
  }

  report(id: string, kind: ReportKind): string | null {
    if (!this.hasVerdict(id)) return null;
    return this.store.readReport(id, kind);
  }

  /** One file of a finished capture's bundle (store.ts BUNDLE_FILES), null until it exists. */
  bundleFile(id: string, name: BundleFileName): Buffer | null {
    if (!this.hasVerdict(id)) return null;
    return this.store.readBundleFile(id, name);
  }

  /**
   * A finished capture's bundle as one archive (collector/bundle-archive.ts), its files opened
   * now; a refusal while it has no SHA256SUMS, null until it has a verdict.
   */
  bundleArchive(id: string): BundleArchive | ArchiveRefusal | null {
    if (!this.hasVerdict(id)) return null;
    return dirBundleArchive(id, this.store.sessionDir(id), BUNDLE_FILES);
  }

  /** The capture finished with a verdict (its reports are written). */
  private hasVerdict(id: string): boolean {
    const s = this.sessions.get(id) ?? this.storedFinished(id);
    return s !== undefined && s.isFinal() && s.record.verdict !== null;
  }

  /**
   * A finished capture no longer held in memory, as its data directory has it (read for this
   * request, not held); undefined when there is none.
   */
  private storedFinished(id: string): CaptureSession | undefined {
    const record = this.store.loadFinishedRecord(id);
    return record === null ? undefined : new CaptureSession(record, new Map());
  }

  agents(): AgentView[] {
    const live = this.liveCapturesByAgent();
    return this.hub.agents().map((a) => agentView(a, live.get(a.agentId) ?? 0));
  }

  /**
   * Capture points live on each agent: those of captures not finished (arming or capturing) and
   * of running repros. A point whose capture finished is not counted (its stop went out).
   */
  liveCapturesByAgent(): Map<string, number> {
    const ids = this.repros.liveCaptureAgents();
    for (const s of this.sessions.values()) {
      if (s.isFinal()) continue;
      for (const p of s.record.points)
        if (p.agentId !== null && (p.state === 'arming' || p.state === 'capturing'))
          ids.push(p.agentId);
    }
    return countByAgent(ids);
  }

  /** Called for every view change that matters (state, verdict). */
  onChange(fn: (view: CaptureView) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Names the collector's API URL in reports' reproduce commands (null: none to name). */
  setCollectorUrl(url: string | null): void {
    this.collectorUrl = url;
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
    // Only the agent the point was armed on speaks for it: not another agent, and nobody for a
    // point that failed to arm (its agentId is null).
    if (p === undefined || p.agentId !== msg.agentId) {
      this.log.warn(
        { captureId, agentId: msg.agentId, point: pointName, code: 'WIRE_UNEXPECTED' },
        'message for a point this agent does not capture; dropped',
      );
      return;
    }
    if (msg.seq > 0 && msg.seq <= (p.appliedSeq ?? 0)) {
      // Stored before a crash that came before the hub recorded its seq: the resend is a duplicate.
      this.log.debug(
        { captureId, agentId: msg.agentId, point: pointName },
        `message seq ${msg.seq} already applied; acknowledged again`,
      );
      return;
    }
    const now = this.clock.nowMs();
    switch (msg.kind) {
      case 'events': {
        if (msg.batch.events.length === 0) return;
        // Each event names its point, node and interface, and the report and the clock analysis
        // read them: what the collector armed decides them, not what a peer claims (an agent on
        // one node could otherwise put its packets under another node and its clock).
        const batch = ownEvents(msg.batch.events, pointName, p.node, p.iface);
        if (batch !== msg.batch.events && !this.claimWarned.has(`${captureId}/${pointName}`)) {
          this.claimWarned.add(`${captureId}/${pointName}`);
          const e = msg.batch.events.find((x, i) => x !== batch[i]);
          this.log.warn(
            { captureId, agentId: msg.agentId, point: pointName, code: 'WIRE_UNEXPECTED' },
            `events that claim point ${JSON.stringify(e?.point)}, node ${JSON.stringify(e?.node)}, interface ${JSON.stringify(e?.iface)} from the agent armed for point ${pointName} on node ${JSON.stringify(p.node)}, interface ${JSON.stringify(p.iface)}: taken as the armed point's (said once per point)`,
          );
        }
        // The stored record holds the events as applied: rewritten ones are encoded again.
        await this.store.appendEvents(
          captureId,
          pointName,
          batch,
          msg.seq,
          batch === msg.batch.events ? msg.batch.raw : undefined,
        );
        p.appliedSeq = Math.max(p.appliedSeq ?? 0, msg.seq);
        if (s.isFinal()) return;
        const overBefore = p.unanalysed ?? 0;
        const held = s.addEvents(pointName, batch, now, this.holdLimit(s));
        if (s.isOffloaded()) this.offload.add(captureId, pointName, held);
        else this.maybeOffload(s);
        if (overBefore === 0 && (p.unanalysed ?? 0) > 0)
          this.log.warn(
            { captureId, point: pointName, count: s.totalUsefulEvents() },
            `the capture's share of the events held in memory (${MAX_HELD_EVENTS} per capture, ${this.maxHeldEvents} for all) is full: later ones are stored, not analysed (counted, named in the verdict)`,
          );
        this.scheduleAnalysis(s);
        return;
      }
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
    // Saved with the seq before the ack: a resend after a crash is recognised as applied. Off the
    // event loop and coalesced (store.saveSessionSoon): a fleet's statuses and Lost counts share
    // session.json writes instead of each blocking the collector for an fsync.
    p.appliedSeq = Math.max(p.appliedSeq ?? 0, msg.seq);
    await this.store.saveSessionSoon(s.record);
    // A failed point may decide the capture at once; counters only need the next analysis.
    if (msg.kind === 'error' || (msg.kind === 'status' && msg.status.state === 'failed'))
      this.step(s);
    else this.scheduleAnalysis(s);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.retentionTimer);
    this.repros.close();
    await this.offload.close();
    for (const t of [...this.debounce.values(), ...this.deadline.values()]) clearTimeout(t);
    this.debounce.clear();
    this.deadline.clear();
    const saves: Promise<void>[] = [];
    for (const s of this.sessions.values()) if (!s.isFinal()) saves.push(this.saveQuietly(s));
    await Promise.all(saves);
    await this.store.close();
  }

  /**
   * Saves session.json where nobody waits for the answer (a timer, shutdown), off the event loop
   * and coalesced (store.saveSessionSoon): a failed write (disk full, the directory gone) is
   * logged; the session goes on in memory and the next save tries again. Never thrown from a
   * timer, where it would end the collector.
   */
  private saveQuietly(s: CaptureSession): Promise<void> {
    return this.store.saveSessionSoon(s.record).catch((e: unknown) => {
      this.log.error(
        { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        'cannot save session.json',
      );
    });
  }

  private scheduleAnalysis(s: CaptureSession): void {
    if (this.closed || this.debounce.has(s.id)) return;
    const t = setTimeout(() => {
      this.debounce.delete(s.id);
      this.step(s);
      if (!s.isFinal()) void this.saveQuietly(s);
    }, this.debounceMs);
    this.debounce.set(s.id, t);
  }

  /** What `s` may hold: what it holds plus what the live captures together may still take. */
  private holdLimit(s: CaptureSession): number {
    let held = 0;
    for (const x of this.sessions.values()) if (!x.isFinal()) held += x.totalUsefulEvents();
    return s.totalUsefulEvents() + Math.max(0, this.maxHeldEvents - held);
  }

  /** A capture that has grown large enough gives its events to the analysis worker. */
  private maybeOffload(s: CaptureSession): void {
    if (s.isOffloaded() || s.isFinal() || s.totalUsefulEvents() < this.offloadAbove) return;
    for (const [point, events] of s.offload()) this.offload.add(s.id, point, events);
    this.log.info(
      { captureId: s.id, count: s.totalUsefulEvents() },
      'large capture: analysed off the main thread from now on',
    );
  }

  /** The worker died (and its events with it): the new one gets them again from the store. */
  private reseedWorker(why: string): void {
    this.log.error({ code: 'STORE_IO', err: why }, 'analysis worker lost; reloading its captures');
    for (const s of this.sessions.values()) {
      if (!s.isOffloaded() || s.isFinal()) continue;
      const names = s.record.points.map((p) => p.name);
      try {
        for (const [point, events] of this.store.loadEvents(s.id, names))
          this.offload.add(s.id, point, events);
      } catch (e) {
        this.log.error(
          { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
          'cannot reload the events of a capture for the analysis worker',
        );
      }
    }
  }

  /** Runs an offloaded capture's analysis on the worker; its completion steps the capture again. */
  private analyseOffThread(s: CaptureSession): void {
    if (this.analysing.has(s.id)) return; // the completion sees it still dirty and runs again
    this.analysing.add(s.id);
    const ask = s.analysisRequest(this.inventoryFor(s));
    this.offload.analyze(s.id, ask).then(
      (core) => {
        this.analysing.delete(s.id);
        if (this.closed || s.isFinal() || this.finishing.has(s.id)) return;
        s.applyAnalysis(core, this.clock.nowMs());
        this.step(s);
      },
      (e: unknown) => {
        this.analysing.delete(s.id);
        if (this.closed || s.isFinal()) return;
        this.log.error(
          { captureId: s.id, err: e instanceof Error ? e.message : String(e) },
          'analysis failed; trying again',
        );
        s.markDirty();
        this.scheduleAnalysis(s);
      },
    );
  }

  /** Analyse, decide, and either finish or wait for the next deadline. */
  private step(s: CaptureSession): void {
    if (this.closed || s.isFinal() || this.finishing.has(s.id)) return;
    if (s.isOffloaded() && s.needsAnalysis()) {
      this.analyseOffThread(s);
      return;
    }
    const now = this.clock.nowMs();
    const before = s.record.state;
    try {
      if (s.needsAnalysis()) this.onLoopAnalyses++;
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
    for (const m of [this.debounce, this.deadline]) {
      const t = m.get(s.id);
      if (t) clearTimeout(t);
      m.delete(s.id);
    }
    // The inventory the final analysis uses, kept for the report (the inventory as used).
    const inventory = this.inventoryFor(s);
    if (!s.isOffloaded()) {
      this.finishWith(
        s,
        state,
        reason,
        s.finish(state, reason, this.clock.nowMs(), inventory),
        inventory,
      );
      return;
    }
    // The final analysis of a large capture runs on the worker too; until it is back the
    // capture is not final (a cancel answers with the view as it is).
    if (this.finishing.has(s.id)) return;
    this.finishing.add(s.id);
    this.offload.analyze(s.id, s.analysisRequest(inventory)).then(
      (core) => {
        this.finishing.delete(s.id);
        if (this.closed || s.isFinal()) return;
        const now = this.clock.nowMs();
        this.finishWith(
          s,
          state,
          reason,
          s.finishWith(state, reason, now, s.applyAnalysis(core, now)),
          inventory,
        );
      },
      (e: unknown) => {
        this.finishing.delete(s.id);
        if (this.closed || s.isFinal()) return;
        // No worker: the last live result stands as the final one, and the report says so. (Its
        // inventory is the one of the last live analysis; the report names today's.)
        this.log.error(
          { captureId: s.id, err: e instanceof Error ? e.message : String(e) },
          'final analysis failed; finishing with the last live analysis',
        );
        this.finishWith(
          s,
          state,
          reason,
          s.finishWith(state, reason, this.clock.nowMs(), s.liveResult()),
          inventory,
        );
      },
    );
  }

  /** The rest of finishing, once the final analysis is known. */
  private finishWith(
    s: CaptureSession,
    state: 'resolved' | 'timeout' | 'failed' | 'cancelled',
    reason: string,
    analysis: AnalysisResult,
    inventory: Inventory,
  ): void {
    const now = this.clock.nowMs();
    this.offload.drop(s.id);
    const armed = s.record.points.filter((p) => p.agentId !== null && p.state !== 'failed');
    for (const p of armed) {
      if (p.agentId === null) continue;
      this.hub.send(p.agentId, { kind: 'stop', stop: { captureId: s.id, point: p.name } });
    }
    const meta = liveReportMeta({
      record: s.record,
      agents: this.hub.agents(),
      collector: this.collectorUrl,
      state,
      reason,
      inventory,
      generatedAt: new Date(now).toISOString(),
    });
    const final: FinalReport = { state, reason, result: analysis, meta };
    this.finals.set(s.id, final);
    this.resumeUntil.delete(s.id);
    for (const p of s.record.points) this.claimWarned.delete(`${s.id}/${p.name}`);
    this.writeReports(s, final, 'cannot write the report');
    this.log.info(
      { captureId: s.id, state, code: analysis.verdict.layer },
      `capture finished: ${reason}`,
    );
    this.emit(s);
    // What is still written into its directory after the verdict: retention keeps it until done.
    const attaching: Promise<unknown>[] = [];
    if (this.conntrack && analysis.verdict.client !== null)
      attaching.push(this.attachConntrack(s, final));
    if (s.record.spec.doctor !== undefined) attaching.push(this.attachDoctor(s, final));
    if (this.frames) attaching.push(this.fetchFrames(s, final));
    // Its events files are hashed once their appends are on disk, and closed then.
    attaching.push(this.attachEventsFiles(s, final).finally(() => this.releaseStored(s)));
    this.attaching.add(s.id);
    void Promise.allSettled(attaching).then(() => {
      this.attaching.delete(s.id);
      // Kept while it was written to: the sweep it was kept from is made again.
      if (!this.closed) this.applyRetention();
    });
    // Held among the recent finished; the attachments above keep their own reference to it.
    this.recent.add(s.id);
    this.applyRetention();
  }

  /**
   * Removes the finished captures the data directory no longer keeps (collector/disk-retention.ts),
   * from memory too. One that cannot be removed is logged and tried again at the next sweep.
   */
  private applyRetention(): void {
    const now = this.clock.nowMs();
    const expired = expiredFinished(
      this.store.finishedEntries(),
      now,
      this.retain,
      (id) =>
        this.finishing.has(id) ||
        this.attaching.has(id) ||
        this.sessions.get(id)?.isFinal() === false,
    );
    sweepExpired(
      expired,
      { one: 'capture', policy: this.retain },
      (id) => {
        this.store.removeCapture(id);
      },
      (id) => {
        this.sessions.delete(id);
        this.finals.delete(id);
        this.recent.forget(id);
      },
      this.log,
    );
    // Said once per failure (not at every finish while the disk stays full).
    const indexError = this.store.indexError;
    if (indexError !== null && indexError !== this.indexErrorSaid) {
      this.log.warn(
        { code: 'STORE_IO', err: indexError },
        'the index of finished captures could not be read or written: the captures it does not list are read at the next start',
      );
      this.indexErrorSaid = indexError;
    }
  }

  /**
   * Each point's stored events file in the report's inputs (collector/events-digest.ts): hashed
   * once the appends in flight at the verdict are on disk, then the reports rewritten with them.
   * A file that cannot be read is logged; the inputs then name no digest for any point.
   */
  private async attachEventsFiles(s: CaptureSession, final: FinalReport): Promise<void> {
    let files: Awaited<ReturnType<typeof storedEventsFiles>>;
    try {
      files = await storedEventsFiles(
        this.store,
        s.id,
        s.record.points.map((p) => p.name),
      );
    } catch (e) {
      this.log.warn(
        { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        'cannot hash the stored events for the report',
      );
      return;
    }
    if (this.closed) return;
    final.meta = { ...final.meta, inputs: withEventsFiles(final.meta.inputs, files) };
    this.writeReports(s, final, 'cannot rewrite the report with its events files');
    this.emit(s);
  }

  /** Closes a finished capture's events files (a failure to close is logged, nothing else). */
  private async releaseStored(s: CaptureSession): Promise<void> {
    try {
      await this.store.releaseCapture(
        s.id,
        s.record.points.map((p) => p.name),
      );
    } catch (e) {
      this.log.warn(
        { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        'cannot close the events files of a finished capture',
      );
    }
  }

  /**
   * The evidence frames, right after the verdict (the stops went out just before: each agent
   * answers once its capture has stopped): every point's agent is asked for the retained bytes of
   * the matched connection's packets there, stored per point (store.loadFrames). Best effort:
   * what could not be fetched is stored as missing with its reason, and logged.
   */
  private async fetchFrames(s: CaptureSession, final: FinalReport): Promise<void> {
    await fetchCaptureFrames(
      {
        requests: this.requests,
        store: this.store,
        log: this.log,
        nowMs: () => this.clock.nowMs(),
        closed: () => this.closed,
      },
      s.id,
      s.record.points,
      final.result,
      (point) => {
        for (const fn of this.frameListeners) fn(s.id, point);
      },
    );
    if (!this.closed) this.writeEvidence(s, final);
  }

  /**
   * evidence.pcapng from the frames fetched for a finished capture (core/report/live-evidence.ts),
   * and the reports rewritten to say what it holds. A point whose frames file cannot be read is
   * named in the file's problems, never left out silently.
   */
  private writeEvidence(s: CaptureSession, final: FinalReport): void {
    const frames = new Map<string, RetainedFrames>();
    const unreadable: { point: string; code: string; detail: string }[] = [];
    for (const p of s.record.points) {
      try {
        const f = this.store.loadFrames(s.id, p.name);
        if (f !== null) frames.set(p.name, f);
      } catch (e) {
        unreadable.push({
          point: p.name,
          code: 'STORE_IO',
          detail: `its stored frames cannot be read (${e instanceof Error ? e.message : String(e)})`,
        });
      }
    }
    const payload = s.record.spec.evidencePayload === true;
    // The request's identity headers, from the same retained bytes (core/report/identity-scan.ts).
    final.result = {
      ...final.result,
      identityHeaders: liveIdentityHeaders(
        final.result,
        frames,
        payload,
        new Map(unreadable.map((u) => [u.point, `${u.detail} (${u.code})`])),
      ),
    };
    const ev = liveEvidencePcapng(final.result, frames, hoptraceVersion(), { payload });
    for (const u of unreadable) {
      ev.summary.problems = ev.summary.problems.filter((x) => x.point !== u.point);
      ev.summary.problems.push(u);
    }
    try {
      this.store.writeEvidence(s.id, ev.bytes);
    } catch (e) {
      this.log.error(
        { captureId: s.id, code: 'STORE_IO', err: e instanceof Error ? e.message : String(e) },
        'cannot write evidence.pcapng',
      );
      return;
    }
    // The digest of the very bytes written, for the report's inputs (SHA256SUMS lists it too).
    const written = { sha256: sha256Hex(ev.bytes), bytes: ev.bytes.length };
    final.meta = { ...final.meta, evidence: { ...ev.summary, ...written } };
    this.writeReports(s, final, 'cannot rewrite the report with its evidence');
    this.emit(s);
  }

  /** Called when a point's evidence frames were stored (tests, and whoever builds the bundle). */
  onFrames(fn: (captureId: string, point: string) => void): () => void {
    this.frameListeners.add(fn);
    return () => this.frameListeners.delete(fn);
  }

  /**
   * Conntrack evidence, right after the verdict (entries are fresh): the agents of the egress and
   * backend points list the flow's entries; the verdict and the report are rewritten with them.
   * Best effort: a failure is logged and the packet verdict stands as written.
   */
  private async attachConntrack(s: CaptureSession, final: FinalReport): Promise<void> {
    const { entries, errors, leftOut } = await conntrackForCapture(
      this.requests,
      s.id,
      s.record.points,
      final.result.verdict,
    );
    if (this.closed) return;
    if (errors.length > 0)
      this.log.warn({ captureId: s.id, code: 'CONNTRACK_READ_FAILED' }, errors.join('; '));
    // A read that failed is judged as entries not seen (before, `consistent` or `no-entries`
    // could speak of a node whose conntrack table was never read).
    const verdict = withConntrackEvidence(final.result.verdict, entries, leftOut, errors);
    s.record.verdict = verdict;
    final.result = { ...final.result, verdict };
    this.writeReports(s, final, 'cannot write the report with conntrack evidence');
    this.emit(s);
  }

  /**
   * Doctor's checks through the agents when the capture asked for them (`doctor`): the report's
   * doctor meta is their result, or says what could not be read; What to change and the picture's
   * notes follow from it.
   */
  private async attachDoctor(s: CaptureSession, final: FinalReport): Promise<void> {
    const doctor = await runCaptureDoctor(s.record, (spec) =>
      doctorViaAgents(this.hub.agents(), this.requests, spec),
    );
    if (this.closed || doctor === null) return;
    if (doctor.status === 'unreadable')
      this.log.warn({ captureId: s.id, code: 'DOCTOR_READ_FAILED' }, doctor.detail);
    final.meta = { ...final.meta, doctor };
    this.writeReports(s, final, 'cannot write the report with doctor findings');
    this.emit(s);
  }

  /** (Re)writes the reports of a finished capture; an I/O failure is logged, not thrown. */
  private writeReports(s: CaptureSession, f: FinalReport, failure: string): void {
    try {
      writeCaptureReports(this.store, s, f);
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
    if (msg.seq > 0 && msg.seq <= (p.appliedSeq ?? 0)) return; // a resend: counted already
    p.appliedSeq = Math.max(p.appliedSeq ?? 0, msg.seq);
    const changed = msg.kind === 'status' ? s.applyCounts(msg.status) : s.countLost(msg.lost);
    if (!changed) {
      void this.saveQuietly(s);
      return;
    }
    this.writeReports(s, final, 'cannot rewrite the report with the final counts');
    this.emit(s);
  }

  private emit(s: CaptureSession): void {
    const v = captureView(s);
    for (const fn of this.listeners) fn(v);
  }
}

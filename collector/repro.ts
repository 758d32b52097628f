/**
 * The repro sessions of the collector (`/v1/repros`): one backend capture for the whole run, and
 * decap/egress captures that follow the VPN workload. Every agent hello (agents re-send theirs when
 * their namespaces change) and every failed capture re-plans the attachment (repro-core.ts): the old
 * incarnation is detached when its namespace disappears, the new one attached as soon as an agent
 * reports it — no new command from the user. Probes and marks (pod deleted, replacement ready) are
 * reported by the prober; verdicts per probe are computed from the events on demand.
 *
 * Sessions live in memory only: a collector restart ends them (a repro is minutes long and re-run
 * in one command). Capture ids are `r-…` so the SessionManager hands their messages here.
 */
import { randomBytes } from 'node:crypto';
import { HoptraceError } from '../common/errors';
import type { Inventory } from '../common/inventory';
import type { AgentHub, AgentMessage } from './hub-types';
import { buildLiveInventory, resolveTarget, type CapturedNamespace } from './inventory-live';
import type { CollectorLogger } from './logger';
import {
  instanceKey,
  matchK8sWorkload,
  matchWorkload,
  MAX_REPRO_MARKS,
  MAX_REPRO_PROBES,
  planAttachment,
  summarizeRepro,
  type LossSpan,
  type PodDeleter,
  type ProbeReport,
  type ReproMark,
  type ReturnRoute,
  type WorkloadInstance,
  type WorkloadLister,
  type WorkloadPod,
} from '../core/repro/repro-core';
import {
  routeGapsText,
  type ReturnRouteRead,
  type RouteTableGap,
} from '../core/repro/return-routes';
import { isUsefulEvent } from '../core/report/analyze';
import {
  captureLabel,
  currentAttachment,
  iso,
  newPoint,
  REPRO_SAVE_EVERY_MS,
  reproEvents,
  served,
  type Attachment,
  type PointRec,
  type Repro,
  type ReproSpec,
  type ReproStore,
  type ReproView,
} from './repro-state';
import { reproProbes, reproTimeline, reproView } from './repro-views';
import type { AgentRequests } from './agent-requests';
import { fetchPointFrames } from './frames-fetch';
import {
  dirBundleArchive,
  memoryBundleArchive,
  type ArchiveRefusal,
  type BundleArchive,
} from './bundle-archive';
import { ownEvents } from './agent-messages';
import {
  captureKey,
  reproEvidencePcapng,
  reproFramesToFetch,
  type ReproCapture,
  type ReproEvidence,
} from '../core/repro/repro-evidence';
import type { RetainedFrames } from '../core/report/live-evidence';
import { hoptraceVersion } from '../common/version';
import { MANIFEST } from '../common/sha256sums';
import { collectorRuntime } from './capture-reports';
import {
  renderReproBundle,
  renderReproFile,
  REPRO_FILES,
  REPRO_TYPES,
  type ReproFileName,
} from './repro-bundle';
import { addCount } from '../common/counters';
import { addLossSpan } from '../core/repro/loss-spans';
import { ProbeCache } from '../core/repro/probe-cache';
import { refuseBeyondAgentCapacity } from './agent-capacity';
import { RecentFinished } from './recent-finished';
import {
  DEFAULT_RETAIN_FINISHED_REPROS,
  expiredFinished,
  RETAIN_SETTLE_MS,
  type RetentionPolicy,
} from './disk-retention';
import { sweepExpired } from './retention-sweep';
import { letGoByCapture, pointHoldCap, type LetGo } from './repro-hold';

export type { ReproSpec, ReproView } from './repro-state';

export interface ReproManagerOptions {
  hub: AgentHub;
  logger: CollectorLogger;
  nowMs?: () => number;
  snaplen?: number;
  /** Deletes pods for `POST /v1/repros/:id/delete` (default: `kubernetes`). */
  deleter?: PodDeleter;
  /** The Kubernetes API (collector --kubernetes/--kubeconfig): lists and deletes workload pods. */
  kubernetes?: PodDeleter & WorkloadLister;
  /**
   * Reads, through the agents of these nodes, the routes toward `client` (the return path), for
   * the summary's "why" when the prober cannot (it runs on the VPN client, not on a node), and
   * names each node whose route table was not read in full.
   */
  readRoutes?: (nodes: string[], agentIds: string[], client: string) => Promise<ReturnRouteRead>;
  /** Keeps each repro's view in the data directory, so it outlives the collector (restore()). */
  store?: ReproStore;
  /** Asks agents for retained frames (the bundle's evidence.pcapng); absent: no evidence. */
  frames?: Pick<AgentRequests, 'frames'>;
  /**
   * Capture points live on each agent now, captures' and repros' (SessionManager's count): a repro
   * that would take an agent past its max captures is refused before it is armed. Absent: no check.
   */
  liveCaptures?: () => ReadonlyMap<string, number>;
  /**
   * Throws when the collector runs as many live captures and repros as it allows (SessionManager:
   * `--max-live-captures` counts both). Absent: no limit.
   */
  refuseBeyondLive?: (where: string) => void;
  /** What one repro keeps at most (MAX_REPRO_PROBES, MAX_REPRO_MARKS; tests: fewer). */
  maxProbes?: number;
  maxMarks?: number;
  /**
   * Finished repros held in memory, the most recent (default 50, `--keep-finished-repros`): an
   * older one is read from the data directory when asked for by id, not listed. One whose bundle
   * or view could not be written stays (it lives nowhere else).
   */
  maxFinishedHeld?: number;
  /**
   * Events the running repros hold together for their verdicts (default 400,000, ~450 MiB, the
   * same number as SessionManager's budget for captures, a budget of its own): each live repro's
   * points share it equally; past its share a point lets its oldest go, counted (repro-hold.ts).
   */
  maxHeldEvents?: number;
  /**
   * Finished repros the data directory keeps (`--retain-finished-repros`, `--retain-age`;
   * collector/disk-retention.ts), by when each finished: the others' views and bundles are removed
   * after a repro's bundle is written, at start and hourly. Default: the 1,000 most recent, no
   * age limit.
   */
  retain?: RetentionPolicy;
}

/** The default of ReproManagerOptions.maxFinishedHeld. */
export const DEFAULT_MAX_FINISHED_REPROS = 50;

/** A saved view of a repro an earlier collector left running: interrupted, what it saved kept. */
function interruptedIfRunning(v: ReproView): ReproView {
  if (v.state !== 'running') return v;
  return {
    ...v,
    state: 'interrupted',
    waiting: false,
    finalReason: `the collector stopped while this repro ran; what it had saved at ${v.savedAt ?? v.createdAt} is kept`,
  };
}

/** REPRO_FULL (429) when a repro already holds `max` of `what`. */
function refuseWhenFull(held: number, max: number, what: string, id: string): void {
  if (held < max) return;
  throw new HoptraceError(
    'REPRO_FULL',
    `repro ${id} holds ${held} ${what}, as many as the collector keeps for one repro`,
    {
      where: `POST /v1/repros/${id}/${what}`,
      hint: `finish it (POST /v1/repros/${id}/finish: its bundle keeps what it holds) and start another repro`,
    },
  );
}

/** Owns every repro session of the collector. */
export class ReproManager {
  private readonly hub: AgentHub;
  private readonly log: CollectorLogger;
  private readonly nowMs: () => number;
  private readonly snaplen: number;
  private readonly deleter: PodDeleter | undefined;
  private readonly k8s: WorkloadLister | undefined;
  private readonly readRoutes: ReproManagerOptions['readRoutes'];
  private readonly repros = new Map<string, Repro>();
  /** Repros of an earlier run of the collector, as saved (read-only). */
  private readonly restored = new Map<string, ReproView>();
  private readonly store: ReproStore | undefined;
  private readonly frames: Pick<AgentRequests, 'frames'> | undefined;
  private readonly liveCaptures: (() => ReadonlyMap<string, number>) | undefined;
  private readonly refuseBeyondLive: ((where: string) => void) | undefined;
  private readonly maxProbes: number;
  private readonly maxMarks: number;
  private readonly maxHeldEvents: number;
  /** The finished repros held (in `repros` or `restored`); older ones are read from the store. */
  private readonly recent: RecentFinished;
  private readonly retain: RetentionPolicy;
  private closing = false;

  constructor(opts: ReproManagerOptions) {
    this.hub = opts.hub;
    this.log = opts.logger;
    this.nowMs = opts.nowMs ?? Date.now;
    this.snaplen = opts.snaplen ?? 65535;
    this.deleter = opts.deleter ?? opts.kubernetes;
    this.k8s = opts.kubernetes;
    this.readRoutes = opts.readRoutes;
    this.store = opts.store;
    this.frames = opts.frames;
    this.liveCaptures = opts.liveCaptures;
    this.refuseBeyondLive = opts.refuseBeyondLive;
    this.maxProbes = opts.maxProbes ?? MAX_REPRO_PROBES;
    this.maxMarks = opts.maxMarks ?? MAX_REPRO_MARKS;
    this.maxHeldEvents = opts.maxHeldEvents ?? 400_000;
    this.retain = opts.retain ?? { maxCount: DEFAULT_RETAIN_FINISHED_REPROS, maxAgeMs: null };
    this.recent = new RecentFinished(
      Math.max(
        1,
        Math.min(
          opts.maxFinishedHeld ?? DEFAULT_MAX_FINISHED_REPROS,
          this.retain.maxCount ?? Infinity,
        ),
      ),
      (id) => {
        this.repros.delete(id);
        this.restored.delete(id);
      },
      (id) => {
        const r = this.repros.get(id);
        return r !== undefined && (!r.bundleStored || r.unsaved);
      },
    );
  }

  /**
   * Reads the repros an earlier run of the collector saved. Those that were still running are
   * kept as `interrupted` (their captures and prober are gone; the timeline ends at the last
   * save) and saved so again. Files that are not a repro view are named in the log and skipped.
   */
  restore(): void {
    if (this.store === undefined) return;
    // The most recent are held; older ones are read when asked for by id (storedView).
    const { views, skipped, older } = this.store.loadRepros(this.recent.max);
    this.recent.countOlder(older ?? 0);
    for (const path of skipped)
      this.log.warn({ code: 'STORE_IO' }, `not a saved repro, skipped: ${path}`);
    for (const stored of views) {
      if (this.repros.has(stored.id)) continue;
      const saved = stored as unknown as ReproView;
      const v = interruptedIfRunning(saved);
      if (v !== saved) this.save(v);
      this.restored.set(v.id, v);
      this.recent.add(v.id);
    }
    this.applyRetention();
  }

  /**
   * Removes the finished repros the data directory no longer keeps (views and bundles), from
   * memory too; a running one, and one whose bundle or view is not saved, is kept. One that
   * cannot be removed is logged and tried again at the next sweep.
   */
  applyRetention(): void {
    if (this.store?.reproEntries === undefined || this.store.removeRepro === undefined) return;
    const now = this.nowMs();
    // Finished ones only (a running one's view is saved too, and is not counted); ordered by
    // when each view was last saved — a finished one's when its bundle was written.
    const finished = this.store
      .reproEntries()
      .filter((e) => this.repros.get(e.id)?.finishedAtMs !== null);
    const expired = expiredFinished(finished, now, this.retain, (id) => {
      const r = this.repros.get(id);
      return (
        r !== undefined &&
        ((r.finishedAtMs !== null && now - r.finishedAtMs < RETAIN_SETTLE_MS) ||
          !r.bundleStored ||
          r.unsaved)
      );
    });
    const store = this.store;
    sweepExpired(
      expired,
      { one: 'repro', policy: this.retain },
      (id) => {
        store.removeRepro?.(id);
      },
      (id) => {
        this.repros.delete(id);
        this.restored.delete(id);
        this.recent.forget(id);
      },
      this.log,
    );
  }

  /**
   * A finished repro no longer held in memory, as the data directory has it (read for this
   * request; one an earlier collector left running reads as interrupted, as restore() makes it).
   */
  private storedView(id: string): ReproView | undefined {
    const stored = this.store?.loadRepro?.(id) ?? null;
    return stored === null ? undefined : interruptedIfRunning(stored as unknown as ReproView);
  }

  /** Re-plans every running repro when an agent connects, re-sends its hello or leaves. */
  start(): void {
    this.hub.onAgent(() => {
      for (const r of this.repros.values()) this.reconcile(r);
    });
  }

  /** Capture ids of repro sessions: their agent messages come here. */
  owns(captureId: string): boolean {
    return captureId.startsWith('r-');
  }

  async create(spec: ReproSpec): Promise<ReproView> {
    // Before the Kubernetes API is asked anything for it; again below, after the last await.
    this.refuseBeyondLive?.('POST /v1/repros');
    const kube = spec.workload.kubernetes;
    let pods: WorkloadPod[] = [];
    if (kube !== undefined) {
      if (this.k8s === undefined) {
        throw new HoptraceError(
          'REPRO_NOT_SUPPORTED',
          'a Kubernetes workload selector needs the Kubernetes API: this collector runs without --kubernetes or --kubeconfig',
          {
            where: 'workload.kubernetes',
            hint: 'start the collector with --kubernetes (in a pod) or --kubeconfig FILE, or select by namespace name: workload.netns',
          },
        );
      }
      pods = await this.k8s.listWorkload(kube.namespace, kube.labelSelector);
    }
    const agents = this.hub.agents();
    const first = (
      kube === undefined ? matchWorkload(agents, spec.workload) : matchK8sWorkload(agents, pods)
    )[0];
    if (first === undefined) {
      throw new HoptraceError(
        'REPRO_NO_WORKLOAD',
        kube === undefined
          ? `no connected agent reports a namespace matching ${JSON.stringify(spec.workload)}`
          : `no Running pod of ${kube.namespace} (${kube.labelSelector}) is reported by the agent of its node (pods: ${pods.map((p) => `${p.name} ${p.phase} ${p.ip ?? 'no IP'} on ${p.node ?? '?'}`).join(', ') || 'none'})`,
        {
          where: 'POST /v1/repros',
          hint:
            kube === undefined
              ? 'GET /v1/agents lists the namespaces agents report'
              : `kubectl -n ${kube.namespace} get pods -l '${kube.labelSelector}' -o wide; GET /v1/agents lists the namespaces agents report`,
        },
      );
    }
    const b = resolveTarget(spec.backend.target, spec.backend.node, agents);
    // A repro runs its three points for up to its timeout, as a capture does: it counts toward
    // the collector's live limit (checked after the last await, so requests arriving together
    // cannot pass it between them).
    this.refuseBeyondLive?.('POST /v1/repros');
    // As a capture's points (sessions.ts): the backend point, and decap and egress on the
    // workload's agent, each one of its max captures; one past it would fail with AGENT_BUSY once
    // the repro had started. From here to the commands nothing waits.
    if (this.liveCaptures !== undefined) {
      const workloadAgent = agents.filter((a) => a.agentId === first.agentId);
      refuseBeyondAgentCapacity(
        [...(b.ok ? [b.agent] : []), ...workloadAgent, ...workloadAgent],
        this.liveCaptures(),
        'repro',
      );
    }
    const now = this.nowMs();
    const id = `r-${now.toString(36)}-${randomBytes(4).toString('hex')}`;
    const r: Repro = {
      id,
      spec,
      createdAtMs: now,
      finishedAtMs: null,
      finalReason: null,
      backend: newPoint('backend'),
      attachments: [],
      retired: new Set(),
      events: reproEvents(),
      probeCache: new ProbeCache(),
      probes: [],
      losses: [],
      marks: [],
      routes: [],
      summary: null,
      timer: undefined,
      pods,
      listing: undefined,
      listError: null,
      deleted: null,
      savedAtMs: -Infinity,
      unsaved: false,
      bundle: null,
      bundleFiles: null,
      bundleStored: false,
      bundleAtMs: null,
      bundleDone: null,
    };
    this.repros.set(id, r);
    if (b.ok) {
      this.arm(
        r,
        `${id}-b`,
        'backend',
        b.agent,
        spec.backend.target,
        spec.backend.iface,
        r.backend,
      );
    } else {
      r.backend.state = 'failed';
      r.backend.error = { code: b.code, message: b.message };
    }
    this.attach(r, first);
    // Agent hellos drive the attachment; the tick catches an agent that left without one.
    r.timer = setInterval(() => {
      if (this.nowMs() - r.createdAtMs > spec.timeoutMs) this.finish(r, 'timeout', []);
      else if (kube !== undefined) void this.refreshPods(r);
      else this.reconcile(r);
      // Probes that came after the last save, once the prober has gone quiet.
      if (r.unsaved && this.nowMs() - r.savedAtMs >= REPRO_SAVE_EVERY_MS)
        this.persist(r, reproView(r, this.inventory(r)));
    }, 1000);
    r.timer.unref();
    this.log.info({ captureId: id, node: first.node }, `repro created, attached to ${first.name}`);
    const v = reproView(r, this.inventory(r));
    this.persist(r, v);
    return v;
  }

  /**
   * The agent of each capture point a running repro has on an agent now (arming or capturing, a
   * detached one until its agent says it stopped), once per point: what the agents' capacity
   * counts (sessions.ts).
   */
  liveCaptureAgents(): string[] {
    const out: string[] = [];
    for (const r of this.repros.values()) {
      if (r.finishedAtMs !== null) continue;
      for (const p of [r.backend, ...r.attachments.flatMap((a) => a.points)])
        if (p.agentId !== null && (p.state === 'arming' || p.state === 'capturing'))
          out.push(p.agentId);
    }
    return out;
  }

  /** Events the repros hold in memory to judge their probes (a finished one's are let go). */
  heldEvents(): number {
    let n = 0;
    for (const r of this.repros.values()) for (const l of r.events.values()) n += l.events.length;
    return n;
  }

  /** Repros not finished: what the collector's live limit counts of them. */
  running(): number {
    let n = 0;
    for (const r of this.repros.values()) if (r.finishedAtMs === null) n++;
    return n;
  }

  get(id: string): ReproView | undefined {
    const r = this.repros.get(id);
    return r ? reproView(r, this.inventory(r)) : (this.restored.get(id) ?? this.storedView(id));
  }

  /** Finished repros in the data directory that list() leaves out (the older ones). */
  olderFinished(): number {
    return this.recent.older();
  }

  /**
   * Finished repros held in memory only: their bundle or view is not in the data directory (none
   * given, or writing there failed: logged as STORE_IO). Never let go, gone when the collector stops.
   */
  pinned(): number {
    return this.recent.pinnedCount();
  }

  /** The running repros and the finished ones held (olderFinished() counts the rest). */
  list(): ReproView[] {
    return [
      ...this.restored.values(),
      ...[...this.repros.values()].map((r) => reproView(r, this.inventory(r))),
    ];
  }

  addProbe(id: string, p: ProbeReport): ReproView | undefined {
    const r = this.repros.get(id);
    if (!r) return this.get(id);
    if (r.finishedAtMs === null) {
      refuseWhenFull(r.probes.length, this.maxProbes, 'probes', id);
      r.probes.push(p);
      r.unsaved = true;
    }
    const v = reproView(r, this.inventory(r));
    if (r.unsaved && this.nowMs() - r.savedAtMs >= REPRO_SAVE_EVERY_MS) this.persist(r, v);
    return v;
  }

  addMark(id: string, m: ReproMark): ReproView | undefined {
    const r = this.repros.get(id);
    if (!r) return this.get(id);
    if (r.finishedAtMs === null) {
      refuseWhenFull(r.marks.length, this.maxMarks, 'marks', id);
      r.marks.push(m);
    }
    this.reconcile(r);
    const v = reproView(r, this.inventory(r));
    this.persist(r, v);
    return v;
  }

  /** Deletes the attached pod through the configured PodDeleter. */
  async deletePod(id: string): Promise<ReproView | undefined> {
    const r = this.repros.get(id);
    const old = r === undefined ? this.get(id) : undefined;
    if (!r && old)
      throw new HoptraceError('API_BAD_REQUEST', `repro ${id} is ${old.state}: no pod to delete`, {
        where: `POST /v1/repros/${id}/delete`,
        hint: 'start a new repro (POST /v1/repros)',
      });
    if (!r) return undefined;
    if (this.deleter === undefined) {
      throw new HoptraceError(
        'REPRO_NOT_SUPPORTED',
        'this collector cannot delete pods: it runs without --kubernetes or --kubeconfig',
        {
          where: `POST /v1/repros/${id}/delete`,
          hint: 'start the collector with --kubernetes/--kubeconfig, or delete the pod yourself (kubectl delete pod) and POST a "deleted" mark',
        },
      );
    }
    const cur = currentAttachment(r);
    if (cur === undefined)
      throw new HoptraceError('API_BAD_REQUEST', 'no pod is attached right now', { where: id });
    const done = await this.deleter.deletePod(cur.pod);
    r.marks.push({ kind: 'deleted', atMs: done.deletedAtMs, detail: done.detail });
    if (cur.pod.k8s !== undefined) {
      r.deleted = {
        uid: cur.pod.k8s.uid,
        owner: cur.pod.k8s.owner,
        before: [cur.pod.k8s.uid, ...r.pods.map((p) => p.uid)],
      };
      await this.refreshPods(r);
    }
    const v = reproView(r, this.inventory(r));
    this.persist(r, v);
    return v;
  }

  /**
   * Lists a `kubernetes` workload's pods again and re-plans (concurrent calls share one list). A
   * failed list keeps the last pods and is logged once per distinct error.
   */
  refreshPods(id: string | Repro): Promise<void> {
    const r = typeof id === 'string' ? this.repros.get(id) : id;
    const kube = r?.spec.workload.kubernetes;
    if (r === undefined || kube === undefined || this.k8s === undefined) return Promise.resolve();
    const k8s = this.k8s;
    r.listing ??= (async () => {
      try {
        r.pods = await k8s.listWorkload(kube.namespace, kube.labelSelector);
        r.listError = null;
      } catch (e) {
        const text = e instanceof Error ? e.message : String(e);
        if (text !== r.listError)
          this.log.warn({ captureId: r.id }, `repro ${r.id}: listing the workload failed: ${text}`);
        r.listError = text;
      } finally {
        r.listing = undefined;
      }
      this.reconcile(r);
    })();
    return r.listing;
  }

  /**
   * Like finishById; when the prober sent no routes, the agents of the nodes on the path read
   * them first. A table not read in full (no agent, a failed request, a part cut) is named in the
   * summary's why wherever a route there could have explained it (core/repro/return-routes.ts).
   */
  async finishReadingRoutes(id: string, routes: ReturnRoute[]): Promise<ReproView | undefined> {
    const r = this.repros.get(id);
    let read: ReturnRouteRead = { routes, unread: [] };
    if (r && r.finishedAtMs === null && routes.length === 0 && this.readRoutes) {
      const nodes = [...new Set(r.attachments.map((a) => a.pod.node))];
      const agentIds = r.backend.agentId === null ? [] : [r.backend.agentId];
      try {
        read = await this.readRoutes(nodes, agentIds, r.spec.client);
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        read = { routes: [], unread: nodes.map((node) => ({ node, detail: `not read (${why})` })) };
      }
      if (read.unread.length > 0)
        this.log.warn(
          { captureId: id, code: 'DOCTOR_READ_FAILED' },
          `return routes not all read: ${routeGapsText(read.unread)}`,
        );
    }
    this.finishById(id, read.routes, read.unread);
    // The prober's answer comes with the bundle written (bounded by the frames requests' timeout).
    await r?.bundleDone;
    return this.get(id);
  }

  /**
   * Stops the captures and computes the summary (routes: the return routes read at the end;
   * unread: the route tables not read in full).
   */
  finishById(
    id: string,
    routes: ReturnRoute[],
    unread: readonly RouteTableGap[] = [],
  ): ReproView | undefined {
    const r = this.repros.get(id);
    if (!r) return this.get(id);
    if (r.finishedAtMs === null) this.finish(r, 'finished by the prober', routes, unread);
    return reproView(r, this.inventory(r));
  }

  close(): void {
    this.closing = true;
    for (const r of this.repros.values())
      if (r.finishedAtMs === null) this.finish(r, 'collector closing', []);
  }

  /**
   * One file of a repro's bundle: as written once it finished (in memory, or in the data
   * directory for a repro of an earlier run), else rendered now from its view (evidence.pcapng
   * exists only as written). Null when there is no such file (yet).
   */
  bundleFile(id: string, name: ReproFileName): { contentType: string; body: Buffer } | null {
    const r = this.repros.get(id);
    const written = r?.bundleFiles?.get(name) ?? this.store?.readReproFile?.(id, name) ?? null;
    if (written !== null) return { contentType: REPRO_TYPES[name], body: written };
    if (r?.bundle?.state === 'written') return null; // written without it (no inventory, no evidence)
    const v = this.get(id);
    if (v === undefined) return null;
    const body = renderReproFile(
      {
        view: v,
        generatedAt: iso(this.nowMs()),
        inventory: r === undefined ? null : this.inventory(r),
        evidence: null,
        evidenceMissing:
          v.state === 'running'
            ? 'the repro is still running: evidence.pcapng is written when it finishes'
            : (v.bundle?.detail ?? 'this repro finished before its bundle was written as files'),
        agentVersions: this.agentVersions(),
        runtime: collectorRuntime(),
      },
      name,
    );
    return body === null ? null : { contentType: REPRO_TYPES[name], body: Buffer.from(body) };
  }

  /**
   * A finished repro's bundle as one archive (collector/bundle-archive.ts): as written, in memory
   * or in the data directory for a repro of an earlier run; a refusal while it has no SHA256SUMS,
   * null for no such repro.
   */
  bundleArchive(id: string): BundleArchive | ArchiveRefusal | null {
    const r = this.repros.get(id);
    if (r?.bundleFiles && r.bundleAtMs !== null)
      return memoryBundleArchive(id, r.bundleFiles, r.bundleAtMs, REPRO_FILES);
    // Known first: the store's directory of an id that is not a repro's is an error of its own.
    if (this.get(id) === undefined) return null;
    const dir = this.store?.reproBundleDir?.(id);
    if (dir === undefined) return null;
    return dirBundleArchive(id, dir, REPRO_FILES);
  }

  /** The bundle files there are of a repro now (the web view's downloads). */
  bundleNames(id: string): ReproFileName[] {
    const r = this.repros.get(id);
    const written = r?.bundleFiles;
    if (written) return REPRO_FILES.filter((n) => written.has(n));
    const stored = REPRO_FILES.filter((n) => (this.store?.readReproFile?.(id, n) ?? null) !== null);
    if (stored.length > 0) return stored;
    // Not written (yet): the text forms are rendered on request; inventory.json of a live one.
    const rendered = REPRO_FILES.filter((n) => n !== 'evidence.pcapng' && n !== MANIFEST);
    if (r !== undefined) return rendered;
    if (this.get(id) !== undefined) return rendered.filter((n) => n !== 'inventory.json');
    return [];
  }

  /** An agent message for a repro capture; resolves at once (nothing is persisted). */
  handle(msg: AgentMessage): Promise<void> {
    const captureId =
      msg.kind === 'events'
        ? msg.batch.captureId
        : msg.kind === 'status'
          ? msg.status.captureId
          : msg.kind === 'lost'
            ? msg.lost.captureId
            : msg.error.captureId;
    const m = /^(r-[a-z0-9]+-[0-9a-f]{8})-(b|e(\d+))$/.exec(captureId);
    const r = m?.[1] === undefined ? undefined : this.repros.get(m[1]);
    if (m === null || r === undefined || r.finishedAtMs !== null) return Promise.resolve();
    const epoch = m[3] === undefined ? 0 : Number(m[3]);
    const att = epoch === 0 ? undefined : r.attachments.find((a) => a.epoch === epoch);
    const pointName =
      msg.kind === 'events'
        ? msg.batch.point
        : msg.kind === 'status'
          ? msg.status.point
          : msg.kind === 'lost'
            ? msg.lost.point
            : msg.error.point;
    const p = epoch === 0 ? r.backend : att?.points.find((x) => x.name === pointName);
    // Only the agent a point was armed on speaks for it (not one for a point not armed yet).
    if (p === undefined || p.agentId !== msg.agentId) return Promise.resolve();
    switch (msg.kind) {
      case 'events': {
        p.events = addCount(p.events, msg.batch.events.length);
        // Into the armed point's list, as its node's and interface's, whatever the events claim
        // (as for a capture: agent-messages.ts ownEvents).
        const log = r.events.get(p.name);
        if (log === undefined) break;
        const own = ownEvents(
          msg.batch.events,
          p.name,
          p.armed?.node ?? null,
          p.armed?.iface ?? '',
        );
        const cap = pointHoldCap(this.maxHeldEvents, this.running());
        const gone = log.add(
          own.filter(isUsefulEvent).map((event) => ({ epoch, event })),
          cap,
        );
        for (const g of letGoByCapture(gone)) this.letGo(r, p.name, g);
        break;
      }
      case 'status':
        if (msg.status.state === 'failed') {
          p.state = 'failed';
          p.error = {
            code: msg.status.errorCode === '' ? 'CAPTURE_WORKER_FAILED' : msg.status.errorCode,
            message: msg.status.message,
          };
        } else if (p.state !== 'failed') p.state = msg.status.state;
        if (msg.status.state === 'capturing') p.capturingAtMs ??= this.nowMs();
        p.packets = msg.status.packets;
        this.lossSpan(r, att, p, {
          kernelDrops: Math.max(0, (msg.status.kernelDrops ?? 0) - (p.kernelDrops ?? 0)),
          queueDrops: Math.max(0, msg.status.queueDrops - p.queueDrops),
          lost: 0,
        });
        p.kernelDrops = msg.status.kernelDrops;
        p.queueDrops = msg.status.queueDrops;
        p.reportedAtMs = this.nowMs();
        break;
      case 'error':
        p.state = 'failed';
        p.error = { code: msg.error.code, message: msg.error.message };
        break;
      case 'lost':
        p.lost = addCount(p.lost, msg.lost.count);
        this.lossSpan(r, att, p, { kernelDrops: 0, queueDrops: 0, lost: msg.lost.count });
        this.log.warn(
          { captureId, point: pointName, count: msg.lost.count },
          `events lost: ${msg.lost.reason}`,
        );
        break;
    }
    // A decap or egress capture that failed (its namespace is gone, most often) ends the attachment.
    if (att !== undefined && att.detachedAtMs === null && p.state === 'failed') {
      this.detach(
        r,
        att,
        `${p.name} capture failed: ${p.error?.code ?? '?'} ${p.error?.message ?? ''}`.trim(),
      );
      this.reconcile(r);
    }
    return Promise.resolve();
  }

  private reconcile(r: Repro): void {
    if (r.finishedAtMs !== null) return;
    const attachedUid = currentAttachment(r)?.pod.k8s?.uid;
    const candidates =
      r.spec.workload.kubernetes === undefined
        ? matchWorkload(this.hub.agents(), r.spec.workload)
        : matchK8sWorkload(this.hub.agents(), r.pods, {
            ...(attachedUid === undefined ? {} : { keepUid: attachedUid }),
            ...(r.deleted === null ? {} : { replacing: r.deleted }),
          });
    for (;;) {
      const cur = currentAttachment(r);
      const plan = planAttachment(cur?.pod ?? null, candidates, r.retired);
      if (plan.kind === 'detach' && cur !== undefined) {
        this.detach(r, cur, plan.reason);
        continue;
      }
      if (plan.kind === 'attach') this.attach(r, plan.to);
      return;
    }
  }

  private attach(r: Repro, pod: WorkloadInstance): void {
    const epoch = r.attachments.length + 1;
    const att: Attachment = {
      epoch,
      captureId: `${r.id}-e${epoch}`,
      pod,
      attachedAtMs: this.nowMs(),
      detachedAtMs: null,
      detachReason: null,
      points: [newPoint('decap'), newPoint('egress')],
    };
    r.attachments.push(att);
    r.retired.add(instanceKey(pod));
    const gone = r.deleted;
    if (gone !== null && pod.k8s !== undefined && pod.k8s.uid !== gone.uid) {
      const how =
        gone.owner === null ? 'a new pod the selector matched' : `same controller ${gone.owner}`;
      r.marks.push({
        kind: 'replacement-ready',
        atMs: this.nowMs(),
        detail: `${pod.name} (${pod.ip}, uid ${pod.k8s.uid}) on ${pod.node}: ${how}; decap/egress re-attached`,
      });
      r.deleted = null;
    }
    const [decap, egress] = att.points;
    if (decap === undefined || egress === undefined) return;
    this.arm(r, att.captureId, 'decap', pod, pod.netns, r.spec.decapIface, decap);
    this.arm(r, att.captureId, 'egress', pod, pod.netns, r.spec.egressIface, egress);
    this.log.info(
      { captureId: att.captureId, agentId: pod.agentId, node: pod.node },
      `repro ${r.id}: decap and egress attached to ${pod.name} (${pod.ip})`,
    );
  }

  private detach(r: Repro, att: Attachment, reason: string): void {
    att.detachedAtMs = this.nowMs();
    att.detachReason = reason;
    for (const p of att.points) {
      if (p.agentId !== null && p.state !== 'failed')
        this.hub.send(p.agentId, {
          kind: 'stop',
          stop: { captureId: att.captureId, point: p.name },
        });
    }
    this.log.info(
      { captureId: att.captureId },
      `repro ${r.id}: detached from ${att.pod.name}: ${reason}`,
    );
  }

  private arm(
    r: Repro,
    captureId: string,
    point: string,
    agent: { agentId: string; node: string },
    target: string,
    iface: string,
    rec: PointRec,
  ): void {
    const agentId = agent.agentId;
    rec.armed = { captureId, node: agent.node, target, iface };
    const sent = this.hub.send(agentId, {
      kind: 'capture',
      capture: {
        captureId,
        point,
        target,
        iface,
        filter: '',
        snaplen: this.snaplen,
        deadlineUnixMs: r.createdAtMs + r.spec.timeoutMs + 10_000,
      },
    });
    rec.agentId = agentId;
    if (sent) rec.state = 'arming';
    else {
      rec.state = 'failed';
      rec.error = { code: 'AGENT_NOT_CONNECTED', message: `the agent ${agentId} is not connected` };
    }
  }

  private finish(
    r: Repro,
    reason: string,
    routes: ReturnRoute[],
    unread: readonly RouteTableGap[] = [],
  ): void {
    const now = this.nowMs();
    if (r.timer) clearInterval(r.timer);
    const cur = currentAttachment(r);
    if (cur !== undefined) this.detach(r, cur, `repro ended: ${reason}`);
    if (r.backend.agentId !== null && r.backend.state !== 'failed')
      this.hub.send(r.backend.agentId, {
        kind: 'stop',
        stop: { captureId: `${r.id}-b`, point: 'backend' },
      });
    r.routes = routes;
    r.finishedAtMs = now;
    r.finalReason = reason;
    const rows = reproTimeline(r, this.inventory(r));
    r.summary = summarizeRepro({
      rows,
      marks: r.marks,
      attachments: r.attachments.map((a) => ({
        served: served(a),
        addresses: a.pod.addresses,
        attachedAtMs: a.attachedAtMs,
      })),
      routes,
      routesUnread: unread,
      endMs: r.probes.at(-1)?.endedAtMs ?? now,
    });
    this.log.info({ captureId: r.id }, `repro finished: ${r.summary.why}`);
    r.bundle = { state: 'gathering', detail: 'asking the agents for the evidence frames' };
    this.persist(r, reproView(r, this.inventory(r)));
    r.bundleDone = this.writeBundle(r);
  }

  /**
   * The bundle, once the repro finished (its stops went out just before: each agent answers once
   * its capture has stopped): every capture's agent is asked for the retained frames of the
   * probes' matched connections there (bounded, repro-evidence.ts), then every file is rendered,
   * kept in memory and written to the data directory. Never throws; what could not be fetched is
   * named in evidence.pcapng's summary (report.json `evidence.problems`).
   */
  private async writeBundle(r: Repro): Promise<void> {
    const inventory = this.inventory(r);
    const { rows, flows } = reproProbes(r, inventory);
    const captures = reproCaptureList(r);
    const wanted = reproFramesToFetch(flows);
    let evidence: ReproEvidence | null = null;
    let evidenceMissing = '';
    const requests = this.frames;
    if (requests === undefined)
      evidenceMissing = 'this collector does not fetch frames from its agents';
    else if (this.closing)
      evidenceMissing = 'the collector was closing when the repro ended: no frames were fetched';
    else {
      const fetched = new Map<string, RetainedFrames>();
      await Promise.all(
        captures.map(async (c) => {
          const k = captureKey(c.point, c.epoch);
          const frames = wanted.get(k)?.frames ?? [];
          const got = await fetchPointFrames(
            requests,
            c.captureId,
            { name: c.point, agentId: c.agentId },
            frames,
            this.nowMs,
          );
          fetched.set(k, {
            point: c.point,
            linktype: got.linkType,
            snaplen: got.snaplen,
            frames: got.records.map((x) => ({
              frame: x.frame,
              tsNs: x.tsNs,
              origLen: x.origLen,
              bytes: x.data,
            })),
            missing: got.missing,
          });
          if (got.missing.length > 0)
            this.log.warn(
              { captureId: c.captureId, point: c.point, count: got.missing.length },
              `repro ${r.id}: ${got.missing.length} of ${frames.length} evidence frames missing at ${c.label} (${[...new Set(got.missing.map((m) => m.reason))].join(', ')})`,
            );
        }),
      );
      evidence = reproEvidencePcapng({
        rows,
        flows,
        captures,
        wanted,
        frames: fetched,
        version: hoptraceVersion(),
      });
    }
    const at = this.nowMs();
    const files = renderReproBundle(
      {
        view: reproView(r, inventory),
        generatedAt: iso(at),
        inventory,
        evidence: evidence?.summary ?? null,
        evidenceMissing,
        agentVersions: this.agentVersions(),
        runtime: collectorRuntime(),
      },
      evidence?.bytes ?? null,
    );
    r.bundleFiles = files;
    r.bundleAtMs = at;
    let detail = `${files.size} files${evidence === null ? ` (no evidence.pcapng: ${evidenceMissing})` : `; evidence.pcapng: ${evidence.summary.packets} packets, ${evidence.summary.problems.length === 0 ? 'nothing missing' : `missing: ${evidence.summary.problems.map((p) => `${p.capture} ${p.code}`).join(', ')}`}`}`;
    try {
      if (this.store?.writeReproBundle !== undefined) {
        this.store.writeReproBundle(r.id, files);
        r.bundleStored = true;
      }
    } catch (e) {
      const err = e instanceof Error ? e.message : String(e);
      this.log.error({ captureId: r.id, code: 'STORE_IO', err }, 'cannot write the repro bundle');
      detail += `; not in the data directory (${err}): served from memory until the collector stops`;
    }
    r.bundle = { state: 'written', detail };
    this.log.info({ captureId: r.id }, `repro bundle written: ${detail}`);
    this.persist(r, reproView(r, inventory));
    // Settled: the view is what the bundle says; its events (and late ones) are not kept.
    r.frozen = reproView(r, inventory);
    r.events = new Map();
    r.probeCache.clear();
    this.recent.add(r.id);
    this.applyRetention();
  }

  private agentVersions(): Map<string, string> {
    return new Map(this.hub.agents().map((a) => [a.agentId, a.hello.version]));
  }

  /** Saves a live repro's view (a failed write is logged, the repro goes on in memory). */
  private persist(r: Repro, v: ReproView): void {
    r.savedAtMs = this.nowMs();
    // A failed write leaves it unsaved: not let go from memory, and tried again at the next
    // probe or mark while it runs (a finished one is not tried again: it stays in memory).
    r.unsaved = !this.save({ ...v, savedAt: iso(r.savedAtMs) });
  }

  /** Saves a view; false when the store could not (logged). */
  private save(v: ReproView): boolean {
    if (this.store === undefined) return false;
    try {
      this.store.saveRepro(v);
      return true;
    } catch (e) {
      this.log.warn(
        { captureId: v.id, code: 'STORE_IO' },
        `saving repro ${v.id} failed: ${e instanceof Error ? e.message : String(e)}`,
      );
      return false;
    }
  }

  private inventory(r: Repro): Inventory {
    const captured: CapturedNamespace[] = r.attachments.map((a) => ({
      point: 'decap',
      node: a.pod.node,
      netns: a.pod.netns,
      addresses: a.pod.addresses,
    }));
    return buildLiveInventory(this.hub.agents(), captured, r.spec.inventory);
  }

  /**
   * Events of a point let go past the memory bound (repro-hold.ts): counted on their capture's
   * point and as a loss span of their capture times, so the probes judged then say so.
   */
  private letGo(r: Repro, point: string, g: LetGo): void {
    const att = g.epoch === 0 ? undefined : r.attachments.find((a) => a.epoch === g.epoch);
    const rec = g.epoch === 0 ? r.backend : att?.points.find((x) => x.name === point);
    if (rec === undefined) return;
    rec.unheld = addCount(rec.unheld ?? 0, g.count);
    addLossSpan(r.losses, {
      capture: att === undefined ? 'backend' : captureLabel(att, rec),
      epoch: g.epoch,
      fromMs: g.fromMs,
      toMs: g.toMs,
      kernelDrops: 0,
      queueDrops: 0,
      lost: 0,
      unheld: g.count,
    });
  }

  /**
   * Records what a capture lost since its last status (or since it was armed): the span the
   * probes in flight then are checked against (repro-core lossesInFlight), merged with the
   * capture's last one when they touch and bounded per repro (core/repro/loss-spans.ts).
   */
  private lossSpan(
    r: Repro,
    att: Attachment | undefined,
    p: PointRec,
    counts: Pick<LossSpan, 'kernelDrops' | 'queueDrops' | 'lost'>,
  ): void {
    if (counts.kernelDrops + counts.queueDrops + counts.lost === 0) return;
    addLossSpan(r.losses, {
      capture: att === undefined ? 'backend' : captureLabel(att, p),
      epoch: att?.epoch ?? 0,
      fromMs: p.reportedAtMs ?? att?.attachedAtMs ?? r.createdAtMs,
      toMs: this.nowMs(),
      ...counts,
    });
  }
}

/** Every capture of a repro whose frames its evidence may hold: the backend, then each attachment's. */
function reproCaptureList(r: Repro): ReproCapture[] {
  const one = (
    label: string,
    captureId: string,
    epoch: number,
    p: PointRec,
    pod: string | null,
  ): ReproCapture => ({
    label,
    captureId,
    point: p.name,
    epoch,
    agentId: p.agentId,
    node: p.armed?.node ?? null,
    iface: p.armed?.iface ?? '?',
    pod,
  });
  return [
    one('backend', `${r.id}-b`, 0, r.backend, null),
    ...r.attachments.flatMap((a) =>
      a.points.map((p) => one(captureLabel(a, p), a.captureId, a.epoch, p, a.pod.name)),
    ),
  ];
}

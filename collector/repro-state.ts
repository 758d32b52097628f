/**
 * What one repro session holds (the collector's memory of it) and the views `GET /v1/repros/:id`
 * serves of it: the backend capture, the attachments of the decap and egress points to each
 * incarnation of the VPN workload, probes, marks, losses and the summary.
 */
import type { Inventory } from '../common/inventory';
import type { CaptureState } from '../common/wire';
import type {
  DeletedPod,
  LossSpan,
  ProbeReport,
  ReproMark,
  ReproSummary,
  ReturnRoute,
  ServedBy,
  TimelineRow,
  WorkloadInstance,
  WorkloadPod,
  WorkloadSelector,
} from '../core/repro/repro-core';
import { PointEventLog } from '../core/repro/event-log';
import type { ProbeCache } from '../core/repro/probe-cache';
import type { StoredRepro } from './store';
import type { FinishedEntry } from './disk-retention';

/** `POST /v1/repros`. */
export interface ReproSpec {
  workload: WorkloadSelector;
  decapIface: string;
  egressIface: string;
  backend: { target: string; iface: string; node?: string };
  /** The client's tunnel address (the probes' source at the decap point). */
  client: string;
  /** The whole run ends by itself after this long (default 10 min). */
  timeoutMs: number;
  inventory?: Inventory;
}

/** One capture point's state as the agent reported it. */
export interface ReproPointView {
  name: string;
  agentId: string | null;
  state: CaptureState | 'pending';
  events: number;
  /** The agent's last status: packets captured, kernel drops (null = cannot count), agent drops. */
  packets: number;
  kernelDrops: number | null;
  queueDrops: number;
  /** Events the agent reported lost on the way to the collector. */
  lost: number;
  /** Events the collector received and let go, unanalysed, past its memory bound (when any). */
  unheld?: number;
  error?: { code: string; message: string };
  /** Where it was armed (absent in views saved before, and while pending). */
  captureId?: string;
  node?: string;
  target?: string;
  iface?: string;
}

/** One pod incarnation the decap and egress points were attached to. */
export interface AttachmentView {
  epoch: number;
  pod: WorkloadInstance;
  attachedAt: string;
  detachedAt: string | null;
  detachReason: string | null;
  points: ReproPointView[];
}

/** `GET /v1/repros/:id`. */
export interface ReproView {
  id: string;
  /**
   * `interrupted`: the collector stopped while the repro ran; this is what it had saved then
   * (`savedAt`), read back from the data directory when it started again.
   */
  state: 'running' | 'finished' | 'interrupted';
  createdAt: string;
  finishedAt: string | null;
  finalReason: string | null;
  spec: ReproSpec;
  backend: ReproPointView;
  attachments: AttachmentView[];
  /** Waiting for a new incarnation of the workload (none attached). */
  waiting: boolean;
  marks: ReproMark[];
  timeline: TimelineRow[];
  summary: ReproSummary | null;
  /** The timeline and summary as text (what `hoptrace repro` prints). */
  text: string[];
  /** The lines about what the captures lost (the end of `text`; absent in views stored before). */
  lossText?: string[];
  /** When the collector last saved this view to its data directory. */
  savedAt?: string;
  /**
   * The bundle's files: `gathering` once finished (the agents are asked for the evidence frames),
   * `written` when every file is there (GET /v1/repros/:id/<file> serves them as written),
   * `failed` (detail says why; the files are rendered on request then, without evidence).
   */
  bundle?: { state: 'gathering' | 'written' | 'failed'; detail: string };
}

export interface PointRec {
  name: string;
  agentId: string | null;
  /** Collector time of the first 'capturing' status. */
  capturingAtMs?: number;
  state: CaptureState | 'pending';
  events: number;
  packets: number;
  kernelDrops: number | null;
  queueDrops: number;
  lost: number;
  /** Events received and let go past the collector's memory bound for repros (repro-hold.ts). */
  unheld?: number;
  error?: { code: string; message: string };
  /** Collector time of the last status: where the next loss span starts. */
  reportedAtMs?: number;
  /** Where it was armed: the capture id, the agent's node, the target and the interface. */
  armed?: { captureId: string; node: string; target: string; iface: string };
}

/** A point not armed yet. */
export function newPoint(name: string): PointRec {
  return {
    name,
    agentId: null,
    state: 'pending',
    events: 0,
    packets: 0,
    kernelDrops: null,
    queueDrops: 0,
    lost: 0,
  };
}

export interface Attachment {
  epoch: number;
  captureId: string;
  pod: WorkloadInstance;
  attachedAtMs: number;
  detachedAtMs: number | null;
  detachReason: string | null;
  points: PointRec[];
}

export interface Repro {
  id: string;
  spec: ReproSpec;
  createdAtMs: number;
  finishedAtMs: number | null;
  finalReason: string | null;
  backend: PointRec;
  attachments: Attachment[];
  retired: Set<string>;
  /** Each point's events (every attachment's), bounded: reproEvents(). */
  events: ReadonlyMap<string, PointEventLog>;
  /** The verdicts judged so far, judged again only for a probe whose inputs changed. */
  probeCache: ProbeCache;
  probes: ProbeReport[];
  /**
   * When each capture lost packets (its counters rose), for the probes in flight then: spans that
   * touch merged, MAX_REPRO_LOSS_SPANS at most (core/repro/loss-spans.ts addLossSpan).
   */
  losses: LossSpan[];
  marks: ReproMark[];
  routes: ReturnRoute[];
  summary: ReproSummary | null;
  timer: NodeJS.Timeout | undefined;
  /** A `kubernetes` workload: its pods at the last list, a list in flight, the last list error. */
  pods: WorkloadPod[];
  listing: Promise<void> | undefined;
  listError: string | null;
  /** The pod deleted through the API (its replacement is the next attachment). */
  deleted: DeletedPod | null;
  /** When the view was last saved to the store (-Infinity: never), and whether probes came since. */
  savedAtMs: number;
  unsaved: boolean;
  /** The bundle once finished (null before): its state, and its files once written. */
  bundle: NonNullable<ReproView['bundle']> | null;
  bundleFiles: ReadonlyMap<string, Buffer> | null;
  /** Its bundle files are in the data directory (else they live in `bundleFiles` alone). */
  bundleStored: boolean;
  /** When those files were rendered (null before): the time its archive stamps them with. */
  bundleAtMs: number | null;
  /**
   * The view once the bundle is written, served from then on: the events it was judged from (up
   * to 3 × MAX_EVENTS_PER_POINT) are let go, so a collector that ran many repros does not keep
   * every one's packets for its life (found by a review: finished repros were never released).
   */
  frozen?: ReproView;
  /** Resolves when the bundle is written or failed (finish starts it). */
  bundleDone: Promise<void> | null;
}

/** A running repro's view is saved at most this often for its probes (and at every mark, at the end). */
export const REPRO_SAVE_EVERY_MS = 5_000;

/** Where repro views are kept across collector restarts (collector/store.ts CaptureStore). */
export interface ReproStore {
  saveRepro(view: ReproView): void;
  /** The `newest` saved views (`older`: how many were left unread; undefined counts none). */
  loadRepros(newest?: number): { views: StoredRepro[]; skipped: string[]; older?: number };
  /** One saved view, read when asked for by id (no longer held); null when there is none. */
  loadRepro?(id: string): StoredRepro | null;
  /** A finished repro's bundle files (collector/repro-bundle.ts), and one of them read back. */
  writeReproBundle?(id: string, files: ReadonlyMap<string, Uint8Array>): void;
  readReproFile?(id: string, name: string): Buffer | null;
  /** The directory a finished repro's bundle is written to (its whole-bundle archive reads it). */
  reproBundleDir?(id: string): string;
  /** The saved repros, each with when its view was last saved (retention's order). */
  reproEntries?(): FinishedEntry[];
  /** Removes a saved repro's view and bundle (retention); throws STORE_IO when it cannot. */
  removeRepro?(id: string): void;
}

export const POINTS = ['decap', 'egress', 'backend'] as const;
/** Events one point holds at most, whatever the budget (collector/repro-hold.ts pointHoldCap). */
export const MAX_EVENTS_PER_POINT = 500_000;
export const iso = (ms: number): string => new Date(ms).toISOString();

/** An empty event log per point, each keeping MAX_EVENTS_PER_POINT at most. */
export function reproEvents(): Map<string, PointEventLog> {
  return new Map(POINTS.map((p) => [p, new PointEventLog(p, MAX_EVENTS_PER_POINT)]));
}

/** The attachment the decap and egress points follow now, if any. */
export function currentAttachment(r: Repro): Attachment | undefined {
  const last = r.attachments.at(-1);
  return last !== undefined && last.detachedAtMs === null ? last : undefined;
}

/** How the text names an attachment's capture: `decap (vpn/wg-0)`. */
export function captureLabel(a: Attachment, p: PointRec): string {
  return `${p.name} (${a.pod.name})`;
}

export function served(a: Attachment): ServedBy {
  return { epoch: a.epoch, name: a.pod.name, ip: a.pod.ip, node: a.pod.node };
}

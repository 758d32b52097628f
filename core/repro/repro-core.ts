/**
 * The pure core of `hoptrace repro`: which namespace is the VPN workload right now, which events
 * belong to which probe, one verdict per probe, and the summary of a reschedule. No clock, timers
 * or I/O: collector/repro.ts (the shell) owns those.
 *
 * A probe is identified by its client source port: the prober binds a distinct local port per probe
 * (`curl --local-port`), so its SYN is found at the decap point even when the handshake never
 * completes (no-return, dropped), where no payload — and so no probe marker — exists.
 */
import { isHoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import type { Inventory } from '../../common/inventory';
import { analyzeEvents } from '../report/analyze';
import type { PointSummary } from '../report/analysis-result';
import type { Layer } from '../attribute/attribute';
import { lossPhrase } from '../report/capture-health';
import { utcMillis } from '../report/times';
import { isIP } from '../../common/cidr';
import type { Hello } from '../../common/wire';
import { hostPort } from '../../common/endpoint';
import { globMatches } from '../../common/glob';
import { addCount } from '../../common/counters';
import { routeGapsText, type ReturnRoute, type RouteTableGap } from './return-routes';

/**
 * Which namespaces are the VPN workload. `netns`: a glob (`*`, `?`) on the namespace file's base
 * name, as agents report it (the lab names its pods; `/run/netns/cni-<uuid>` on a real node says
 * nothing about the workload, so a cluster needs `kubernetes`: owner/labels through the API).
 */
/** What the repro core reads of an agent the collector knows (the collector's AgentInfo fits). */
export interface KnownAgent {
  agentId: string;
  node: string;
  connected: boolean;
  hello: Pick<Hello, 'namespaces'>;
}

export interface WorkloadSelector {
  netns?: string;
  /**
   * Where the pod IP is (IPv4 CIDR): a VPN pod's namespace also holds its tunnel and underlay
   * addresses, and agents report a namespace's addresses without their interface.
   */
  podCidr?: string;
  kubernetes?: { namespace: string; labelSelector: string };
}

/** One namespace that matches the workload: a pod incarnation. */
export interface WorkloadInstance {
  agentId: string;
  node: string;
  /** The namespace file as the agent reported it (also the capture target). */
  netns: string;
  /** Base name of `netns` (the pod's name in the lab). */
  name: string;
  /** First usable address (the pod IP) and every address (a VIP it holds, say). */
  ip: string;
  addresses: string[];
  /** The Kubernetes pod behind the namespace (a `kubernetes` workload only). */
  k8s?: { namespace: string; name: string; uid: string; owner: string | null };
}

/** One pod of a Kubernetes workload as the API lists it. */
export interface WorkloadPod {
  namespace: string;
  name: string;
  uid: string;
  node: string | null;
  /** status.podIP, null while pending. */
  ip: string | null;
  phase: string;
  /** metadata.deletionTimestamp is set. */
  terminating: boolean;
  /** The controlling ownerReference (`Kind/name/uid`), null for a bare pod. */
  owner: string | null;
}

/** Lists the pods of a Kubernetes workload (namespace + label selector) through the API. */
export interface WorkloadLister {
  listWorkload(namespace: string, labelSelector: string): Promise<WorkloadPod[]>;
}

/** Deletes a pod of the workload (the lab: its namespace; a cluster: the Kubernetes API). */
export interface PodDeleter {
  deletePod(pod: WorkloadInstance): Promise<{ deletedAtMs: number; detail: string }>;
}

/** One probe as the prober reports it (times on the prober's clock, ms since the epoch). */
export interface ProbeReport {
  probeId: string;
  /** Client source port the probe was sent from. */
  sport: number;
  startedAtMs: number;
  endedAtMs: number;
  ok: boolean;
  /** HTTP status, null when no answer came. */
  httpCode: string | null;
  /** The prober's error (curl exit code and text), null when ok. */
  error: string | null;
}

/** What the prober or the deleter says happened (pod deleted, replacement ready). */
export interface ReproMark {
  kind: 'deleted' | 'replacement-ready' | 'note';
  atMs: number;
  detail: string;
}

export type { ReturnRoute, RouteTableGap } from './return-routes';

/** An event with the attachment (pod incarnation) whose capture saw it; 0 = the backend capture. */
export interface TaggedEvent {
  epoch: number;
  event: PacketEvent;
}

/** Verdict of one probe: a layer of attribution, or what the prober saw when nothing was captured. */
export type ProbeVerdict = Layer | 'failed-to-connect' | 'not-captured';

/** The pod incarnation that served a probe. */
export interface ServedBy {
  epoch: number;
  name: string;
  ip: string;
  node: string;
}

/**
 * What the collector keeps of one repro (collector/repro.ts; past it REPRO_FULL): `hoptrace repro`
 * sends --count probes (20 by default) and a few marks, so these bound only a client that keeps
 * posting — 10,000 probes is ~3 h at one a second.
 */
export const MAX_REPRO_PROBES = 10_000;
export const MAX_REPRO_MARKS = 1_000;

/** One line of the timeline. */
export interface TimelineRow {
  probeId: string;
  sport: number;
  startedAtMs: number;
  /** Since the first probe. */
  offsetMs: number;
  servedBy: ServedBy | null;
  verdict: ProbeVerdict;
  /** The prober got an HTTP 200. */
  ok: boolean;
  /** Source the backend point saw, null when the request did not reach it. */
  backendSrc: string | null;
  detail: string;
  /**
   * A verdict that rests on a missing packet (not a layer found) while a capture it depends on
   * lost packets: one sentence per such loss (lossesInFlight). Empty otherwise.
   */
  lossesInFlight: string[];
}

/**
 * Packets one capture lost between two reports of its agent (collector clock, ms): the counters
 * of a status rose, or a `lost` message came. The loss happened somewhere in (fromMs, toMs].
 */
export interface LossSpan {
  /** The capture, as the text names it: `backend`, `decap (vpn/wg-0)`. */
  capture: string;
  /** 0: the backend capture; else the attachment (pod incarnation) whose capture it is. */
  epoch: number;
  fromMs: number;
  toMs: number;
  kernelDrops: number;
  queueDrops: number;
  /** Events lost on the way to the collector. */
  lost: number;
  /**
   * Events the collector received and let go, unanalysed, past its memory bound for repros
   * (collector/repro-hold.ts); the span is their capture times.
   */
  unheld?: number;
}

/** Around a probe, for the agents' report delay and the prober's clock against the collector's. */
export const LOSS_SLACK_MS = 1000;

/** The reschedule in a few facts. */
export interface ReproSummary {
  deletedAtMs: number | null;
  deletedPod: ServedBy | null;
  replacement: ServedBy | null;
  probes: number;
  okBefore: number;
  failedAfter: number;
  /** The last probes succeed again after the deletion. */
  recovered: boolean;
  /** From the last good probe before the deletion to the first good one after; null = not back. */
  brokenMs: number | null;
  /** Since the deletion until the end of the run when the path did not come back. */
  brokenForAtLeastMs: number | null;
  why: string;
}

const GOOD: readonly ProbeVerdict[] = [
  'preserved',
  'vpn-pod',
  'cni-masquerade',
  'kube-proxy',
  'proxy',
];

// Loopback and link-local addresses exist in every namespace and name no pod.
function usable(a: string): boolean {
  return (
    isIP(a) !== 0 &&
    !a.startsWith('127.') &&
    !a.startsWith('169.254.') &&
    a !== '::1' &&
    !a.toLowerCase().startsWith('fe80:')
  );
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function ipv4ToInt(ip: string): number | null {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((n) => !Number.isInteger(n) || n < 0 || n > 255))
    return null;
  return parts.reduce((acc, n) => acc * 256 + n, 0);
}

/** True when IPv4 `ip` is inside `cidr` (false for anything else). */
export function inCidr(ip: string, cidr: string): boolean {
  const [net = '', lenText = ''] = cidr.split('/');
  const a = ipv4ToInt(ip);
  const b = ipv4ToInt(net);
  const len = Number(lenText);
  if (a === null || b === null || !Number.isInteger(len) || len < 0 || len > 32) return false;
  const size = 2 ** (32 - len);
  return Math.floor(a / size) === Math.floor(b / size);
}

/** The namespaces of connected agents that match `sel` (sorted by name, then node). */
export function matchWorkload(
  agents: readonly KnownAgent[],
  sel: WorkloadSelector,
): WorkloadInstance[] {
  if (sel.netns === undefined) return [];
  const glob = sel.netns;
  const out: WorkloadInstance[] = [];
  for (const a of agents) {
    if (!a.connected) continue;
    for (const ns of a.hello.namespaces) {
      const name = baseName(ns.path);
      const addresses = ns.addresses.filter(usable);
      const cidr = sel.podCidr;
      const ip = cidr === undefined ? addresses[0] : addresses.find((x) => inCidr(x, cidr));
      if (!globMatches(glob, name) || ip === undefined) continue;
      out.push({ agentId: a.agentId, node: a.node, netns: ns.path, name, ip, addresses });
    }
  }
  return out.sort((x, y) => x.name.localeCompare(y.name) || x.node.localeCompare(y.node));
}

/** The pod deleted through the API: its replacement is a pod that did not exist then. */
export interface DeletedPod {
  uid: string;
  owner: string | null;
  /** Uids of the workload's pods at the deletion (the deleted one included). */
  before: readonly string[];
}

/**
 * True when `p` can be the replacement of `deleted`: a pod that was not there at the deletion
 * (new uid), of the same controller when the deleted pod had one (else any pod the selector
 * matched), Running with an IP and not terminating.
 */
export function isReplacement(deleted: DeletedPod, p: WorkloadPod): boolean {
  return (
    !deleted.before.includes(p.uid) &&
    p.uid !== deleted.uid &&
    (deleted.owner === null || p.owner === deleted.owner) &&
    p.phase === 'Running' &&
    p.ip !== null &&
    !p.terminating
  );
}

/** The replacement of `deleted` among `pods` (first by name), null while there is none. */
export function findReplacement(
  deleted: DeletedPod,
  pods: readonly WorkloadPod[],
): WorkloadPod | null {
  return (
    [...pods].sort((x, y) => x.name.localeCompare(y.name)).find((p) => isReplacement(deleted, p)) ??
    null
  );
}

/**
 * The namespaces of a Kubernetes workload: each Running pod with an IP, found on the agent of its
 * node as the namespace that holds the pod IP. A terminating pod counts only while it is `keepUid`
 * (the attached one: it is followed until its namespace goes); after a deletion (`replacing`) only
 * its replacement can be attached next, not another replica that was already there.
 */
export function matchK8sWorkload(
  agents: readonly KnownAgent[],
  pods: readonly WorkloadPod[],
  o: { keepUid?: string; replacing?: DeletedPod } = {},
): WorkloadInstance[] {
  const out: WorkloadInstance[] = [];
  for (const p of pods) {
    if (p.phase !== 'Running' || p.ip === null || p.node === null) continue;
    const kept = p.uid === o.keepUid;
    if (p.terminating && !kept) continue;
    if (o.replacing !== undefined && !kept && !isReplacement(o.replacing, p)) continue;
    const ip = p.ip;
    for (const a of agents) {
      if (!a.connected || a.node !== p.node) continue;
      const ns = a.hello.namespaces.find((n) => n.addresses.includes(ip));
      if (ns === undefined) continue;
      out.push({
        agentId: a.agentId,
        node: a.node,
        netns: ns.path,
        name: `${p.namespace}/${p.name}`,
        ip,
        addresses: ns.addresses.filter(usable),
        k8s: { namespace: p.namespace, name: p.name, uid: p.uid, owner: p.owner },
      });
      break;
    }
  }
  return out.sort((x, y) => x.name.localeCompare(y.name) || x.node.localeCompare(y.node));
}

/** Identity of an incarnation: a new namespace or a new IP is a new pod. */
export function instanceKey(i: Pick<WorkloadInstance, 'agentId' | 'netns' | 'ip'>): string {
  return `${i.agentId}|${i.netns}|${i.ip}`;
}

/**
 * What to do about the attachment: keep it, detach it (its namespace left the agent's hello), or
 * attach to a matching incarnation that was never attached before.
 */
export function planAttachment(
  current: WorkloadInstance | null,
  candidates: readonly WorkloadInstance[],
  retired: ReadonlySet<string>,
):
  | { kind: 'keep' }
  | { kind: 'detach'; reason: string }
  | { kind: 'attach'; to: WorkloadInstance }
  | { kind: 'wait' } {
  if (current !== null) {
    const k = instanceKey(current);
    if (candidates.some((c) => instanceKey(c) === k)) return { kind: 'keep' };
    return {
      kind: 'detach',
      reason: `${current.name} (${current.ip}) is no longer reported by the agent on ${current.node}`,
    };
  }
  const next = candidates.find((c) => !retired.has(instanceKey(c)));
  return next === undefined ? { kind: 'wait' } : { kind: 'attach', to: next };
}

function tupleOf(
  e: PacketEvent,
): { src: string; dst: string; sport?: number; dport?: number } | null {
  const t = e.inner;
  return t === null || t.proto !== 'tcp' ? null : t;
}

const byTime = (a: TaggedEvent, b: TaggedEvent): number =>
  a.event.tsNs < b.event.tsNs ? -1 : a.event.tsNs > b.event.tsNs ? 1 : 0;

/** Later points are searched this long around the probe's SYN at the first point. */
const BEFORE_NS = 1_000_000_000n;
const AFTER_NS = 5_000_000_000n;

/** Input of analyzeProbe. */
/** A point's events as a probe is judged from them (the collector's: core/repro/event-log.ts). */
export interface ProbePoint {
  name: string;
  events: readonly TaggedEvent[];
  /**
   * The latest capture time of an event the collector let go at this point (past its memory bound
   * for repros), of attachment `epoch` or of any; absent or null: none let go.
   */
  letGoUntilNs?(epoch?: number): bigint | null;
}

export interface ProbeInput {
  probe: ProbeReport;
  client: string;
  /** Points in path order (decap, egress, backend); events of every attachment. */
  points: readonly ProbePoint[];
  /** Which pod each attachment epoch captured. */
  epochs: ReadonlyMap<number, ServedBy>;
  inventory: Inventory;
  startMs: number;
  /** When a decap capture was running (collector clock, ms; `toMs` null = still running). */
  decapCoverage?: readonly { fromMs: number; toMs: number | null }[];
  /** What the captures lost, and when (collector clock). */
  losses?: readonly LossSpan[];
}

/**
 * The losses that may hide what a verdict found missing: spans of the backend capture or of the
 * attachment that served the probe (any attachment when none did) that overlap the probe's
 * flight, widened by LOSS_SLACK_MS. None for a verdict that names a layer (it found its packets)
 * or for `failed to connect` on curl's own "could not connect" (exit 7: certain without a
 * capture).
 */
export function lossesInFlight(
  row: Pick<TimelineRow, 'verdict' | 'servedBy'>,
  probe: Pick<ProbeReport, 'startedAtMs' | 'endedAtMs' | 'error'>,
  losses: readonly LossSpan[],
): string[] {
  if (GOOD.includes(row.verdict)) return [];
  if (row.verdict === 'failed-to-connect' && couldNotConnect(probe)) return [];
  const epoch = row.servedBy?.epoch;
  const hit = losses.filter(
    (l) =>
      (l.epoch === 0 || epoch === undefined || l.epoch === epoch) &&
      l.fromMs <= probe.endedAtMs + LOSS_SLACK_MS &&
      l.toMs >= probe.startedAtMs - LOSS_SLACK_MS,
  );
  if (hit.length <= MAX_LOSSES_IN_FLIGHT) return hit.map(lossLine);
  const shown = hit.slice(0, MAX_LOSSES_IN_FLIGHT - 1);
  return [...shown.map(lossLine), moreLossesLine(hit.slice(shown.length))];
}

/** A probe's sentences about losses at most: the rest are summed in the last one. */
export const MAX_LOSSES_IN_FLIGHT = 10;

function lossLine(l: LossSpan): string {
  return `capture ${l.capture} ${lossPhrase({ confirmed: true, state: '', ...l }) ?? 'lost packets'} between ${clock(l.fromMs)} and ${clock(l.toMs)}`;
}

/** Several spans in one sentence: how many, whose, their summed counts, from first to last. */
function moreLossesLine(rest: readonly LossSpan[]): string {
  const sum = { kernelDrops: 0, queueDrops: 0, lost: 0, unheld: 0 };
  let fromMs = Infinity;
  let toMs = -Infinity;
  for (const l of rest) {
    sum.kernelDrops = addCount(sum.kernelDrops, l.kernelDrops);
    sum.queueDrops = addCount(sum.queueDrops, l.queueDrops);
    sum.lost = addCount(sum.lost, l.lost);
    sum.unheld = addCount(sum.unheld, l.unheld ?? 0);
    fromMs = Math.min(fromMs, l.fromMs);
    toMs = Math.max(toMs, l.toMs);
  }
  const names = [...new Set(rest.map((l) => l.capture))];
  const who =
    names.length === 1
      ? `capture ${names[0] ?? ''}`
      : `captures ${names.slice(0, 3).join(', ')}${names.length > 3 ? ` and ${names.length - 3} more` : ''}`;
  return `${rest.length} more losses: ${who} ${lossPhrase({ confirmed: true, state: '', ...sum }) ?? 'lost packets'} between ${clock(fromMs)} and ${clock(toMs)}`;
}

/**
 * One probe's verdict: its connection at the first point (by source port), followed through; and
 * the losses that may hide what it found missing.
 */
export function analyzeProbe(input: ProbeInput): TimelineRow {
  return analyzeProbeFlows(input).row;
}

/** One packet of a probe's matched connection at a point (the frame the evidence fetches). */
export interface ProbeFlowPacket {
  frame: number;
  /** Nanoseconds since the Unix epoch by the point's clock, as a decimal string. */
  tsNs: string;
  dir: 'request' | 'reply';
  flags: number;
  payloadLength: number;
  tunneled: boolean;
}

/**
 * A probe's matched connection at one capture (a point of one attachment, epoch 0 = the backend
 * capture): the frames, numbered as that capture's events are, that its evidence is made of.
 */
export interface ProbeFlow {
  probeId: string;
  point: string;
  epoch: number;
  node: string | null;
  iface: string | null;
  matchedBy: string[];
  packets: ProbeFlowPacket[];
}

/** analyzeProbe, and the matched connection's packets at each capture that saw it. */
export function analyzeProbeFlows(input: ProbeInput): { row: TimelineRow; flows: ProbeFlow[] } {
  const { row, flows } = judgeProbeFlows(input);
  row.lossesInFlight = lossesInFlight(row, input.probe, input.losses ?? []);
  return { row, flows };
}

/**
 * What a probe's judgement read besides the probe, the client, startMs and its source port's
 * events at the first point: what a cache of it must watch (core/repro/probe-cache.ts).
 */
export interface ProbeReads {
  /**
   * The SYN found at the first point: its time and attachment (epochs, inventory and the later
   * points' events in [loNs, hiNs] were read). Null: none (decapCoverage was read instead).
   */
  syn: { tsNs: bigint; epoch: number; loNs: bigint; hiNs: bigint } | null;
  /** Later points whose earliest event of the SYN's attachment (or the backend's) was read. */
  lateAt: string[];
}

/** analyzeProbeFlows without the losses (lossesInFlight empty), and what it read. */
export function judgeProbeFlows(input: Omit<ProbeInput, 'losses'>): {
  row: TimelineRow;
  flows: ProbeFlow[];
  reads: ProbeReads;
} {
  const { probe } = input;
  const row: TimelineRow = {
    probeId: probe.probeId,
    sport: probe.sport,
    startedAtMs: probe.startedAtMs,
    offsetMs: probe.startedAtMs - input.startMs,
    servedBy: null,
    verdict: 'not-captured',
    ok: probe.ok,
    backendSrc: null,
    detail: '',
    lossesInFlight: [],
  };
  const flows: ProbeFlow[] = [];
  const reads: ProbeReads = { syn: null, lateAt: [] };
  return { row: judgeProbe(input, row, flows, reads), flows, reads };
}

/**
 * A later point's capture had not started when the probe's SYN passed the first point: nothing
 * of its attachment (or the backend's) came before it. `firstNs`: its earliest such event.
 */
export function notCapturingYet(firstNs: bigint | null, synNs: bigint): boolean {
  return firstNs === null || firstNs > synNs;
}

/**
 * Why a later point has no SYN of the probe: `let-go` when the collector let go events of its
 * attachment (or the backend's) from the probe's window on (`loNs`: the window's start) — what it
 * saw there is not all it was sent —, `late` when its capture had not started (notCapturingYet),
 * null for neither.
 */
export function missedWhy(
  p: ProbePoint,
  epoch: number,
  firstNs: bigint | null,
  synNs: bigint,
  loNs: bigint,
): 'let-go' | 'late' | null {
  const a = p.letGoUntilNs?.(epoch) ?? null;
  const b = epoch === 0 ? null : (p.letGoUntilNs?.(0) ?? null);
  if ((a !== null && a >= loNs) || (b !== null && b >= loNs)) return 'let-go';
  return notCapturingYet(firstNs, synNs) ? 'late' : null;
}

/**
 * The first point let go events from around the probe's start on (LOSS_SLACK_MS before it, for
 * the prober's clock against the capture's): its not seeing the probe proves nothing.
 */
export function firstLetGo(first: ProbePoint, probe: Pick<ProbeReport, 'startedAtMs'>): boolean {
  const t = first.letGoUntilNs?.() ?? null;
  return t !== null && t >= BigInt(Math.floor(probe.startedAtMs - LOSS_SLACK_MS)) * 1_000_000n;
}

function judgeProbe(
  input: Omit<ProbeInput, 'losses'>,
  row: TimelineRow,
  flows: ProbeFlow[],
  reads: ProbeReads,
): TimelineRow {
  const { probe, client } = input;
  const [first, ...rest] = input.points;
  if (first === undefined) return { ...row, detail: 'no capture points' };
  const mine = first.events.filter((x) => {
    const t = tupleOf(x.event);
    return (
      t !== null &&
      ((t.src === client && t.sport === probe.sport) ||
        (t.dst === client && t.dport === probe.sport))
    );
  });
  const syn = mine.find((x) => ((x.event.keys.tcpFlags ?? 0) & 0x12) === 0x02);
  if (syn === undefined) {
    // curl's own "could not connect" is certain without a capture; anything else is not, when the
    // collector let go the first point's events of that time.
    if (firstLetGo(first, probe) && (probe.ok || !couldNotConnect(probe)))
      return {
        ...row,
        detail: `${probe.ok ? `the probe got HTTP ${probe.httpCode ?? '?'}` : `the probe failed (${probe.error ?? 'no answer'})`}; ${first.name}'s events of that time were let go by the collector (past its memory bound for repros): not judged`,
      };
    const covered = (input.decapCoverage ?? []).some(
      (c) => c.fromMs <= probe.startedAtMs && (c.toMs === null || c.toMs >= probe.endedAtMs),
    );
    if (!probe.ok && (covered || couldNotConnect(probe) || input.decapCoverage === undefined))
      return {
        ...row,
        verdict: 'failed-to-connect',
        detail: `nothing from ${hostPort(client, probe.sport)} reached ${first.name} (${probe.error ?? 'no answer'})`,
      };
    return {
      ...row,
      detail: `${probe.ok ? `the probe got HTTP ${probe.httpCode ?? '?'}` : `the probe failed (${probe.error ?? 'no answer'})`} and no ${first.name} capture was running: between two pods`,
    };
  }
  row.servedBy = input.epochs.get(syn.epoch) ?? null;
  const lo = syn.event.tsNs - BEFORE_NS;
  const hi = syn.event.tsNs + AFTER_NS;
  reads.syn = { tsNs: syn.event.tsNs, epoch: syn.epoch, loNs: lo, hiNs: hi };
  const window = (evs: readonly TaggedEvent[]): TaggedEvent[] =>
    evs.filter((x) => x.event.tsNs >= lo && x.event.tsNs <= hi).sort(byTime);
  const given = [
    { name: first.name, tagged: [...mine].sort(byTime) },
    ...rest.map((p) => ({ name: p.name, tagged: window(p.events) })),
  ];
  try {
    const r = analyzeEvents({
      points: given.map((p) => ({ name: p.name, events: p.tagged.map((x) => x.event) })),
      inventory: input.inventory,
      selector: { client },
    });
    flows.push(...flowsOf(probe.probeId, given, r.points));
    const v = r.verdict;
    // A capture armed after the SYN passed (a re-attached egress starts a moment after decap) makes
    // a working probe look like no-return: a point that missed the SYN and has nothing earlier than
    // it in this attachment was not capturing yet. (Not asked of a verdict that names a layer.)
    const missed = GOOD.includes(v.layer)
      ? undefined
      : rest
          .filter((p) => r.points.find((x) => x.name === p.name)?.seenSyn !== true)
          .map((p) => {
            reads.lateAt.push(p.name);
            let firstNs: bigint | null = null;
            for (const x of p.events)
              if (
                (x.epoch === syn.epoch || x.epoch === 0) &&
                (firstNs === null || x.event.tsNs < firstNs)
              )
                firstNs = x.event.tsNs;
            return { name: p.name, why: missedWhy(p, syn.epoch, firstNs, syn.event.tsNs, lo) };
          })
          .find((m) => m.why !== null);
    if (missed !== undefined)
      return {
        ...row,
        detail:
          missed.why === 'let-go'
            ? `${missed.name}'s events of that time were let go by the collector (past its memory bound for repros): not judged; analysis said ${v.layer}`
            : `${missed.name} was not capturing yet when the probe's SYN passed ${first.name} (just re-attached); analysis said ${v.layer}`,
      };
    row.verdict = v.layer;
    row.backendSrc = v.observed['backend']?.src ?? null;
    row.detail =
      v.reason ?? (v.rewrittenBetween ? `rewritten ${v.rewrittenBetween.join('→')}` : v.layer);
  } catch (e) {
    row.verdict = 'unknown';
    row.detail = isHoptraceError(e) || e instanceof Error ? e.message : String(e);
  }
  return row;
}

/**
 * The matched connection's packets per capture: each packet of a point's flow goes to the
 * attachment whose event it is (frame numbers count per capture, so a window that spans a
 * re-attachment holds two numberings).
 */
function flowsOf(
  probeId: string,
  given: readonly { name: string; tagged: readonly TaggedEvent[] }[],
  points: readonly PointSummary[],
): ProbeFlow[] {
  const out: ProbeFlow[] = [];
  for (const p of points) {
    const tagged = given.find((g) => g.name === p.name)?.tagged ?? [];
    const epochOf = new Map(tagged.map((x) => [`${x.event.frame}:${x.event.tsNs}`, x.epoch]));
    const byEpoch = new Map<number, ProbeFlow>();
    for (const f of p.flow) {
      const epoch = epochOf.get(`${f.frame}:${f.tsNs}`);
      if (epoch === undefined) continue;
      let flow = byEpoch.get(epoch);
      if (flow === undefined) {
        flow = {
          probeId,
          point: p.name,
          epoch,
          node: p.node,
          iface: p.iface,
          matchedBy: [...p.matchedBy],
          packets: [],
        };
        byEpoch.set(epoch, flow);
        out.push(flow);
      }
      flow.packets.push({
        frame: f.frame,
        tsNs: f.tsNs,
        dir: f.dir,
        flags: f.flags,
        payloadLength: f.payloadLength,
        tunneled: f.tunneled,
      });
    }
  }
  return out;
}

/** curl exit 7: the client could not even connect (no tunnel, no route): certain without a capture. */
function couldNotConnect(probe: Pick<ProbeReport, 'error'>): boolean {
  return probe.error !== null && /exit 7\b/.test(probe.error);
}

/** Is this probe a working path? The prober got its answer (the verdict names the layer). */
export function isGood(r: TimelineRow): boolean {
  return r.ok && (GOOD.includes(r.verdict) || r.verdict === 'not-captured');
}

/** Input of summarizeRepro. */
export interface SummaryInput {
  rows: readonly TimelineRow[];
  marks: readonly ReproMark[];
  /** Attachments in order (epoch 1..n). */
  attachments: readonly { served: ServedBy; addresses: string[]; attachedAtMs: number }[];
  routes: readonly ReturnRoute[];
  /**
   * Nodes whose route table was not read in full (return-routes.ts): a route missing there was
   * not read, so the summary names them instead of concluding from it. Absent: none.
   */
  routesUnread?: readonly RouteTableGap[];
  endMs: number;
}

/** Whether the path came back after the deletion, how long it was broken, and why. */
export function summarizeRepro(input: SummaryInput): ReproSummary {
  const { rows, attachments, routes } = input;
  const deleted = input.marks.find((m) => m.kind === 'deleted') ?? null;
  const at = deleted?.atMs ?? null;
  const before = at === null ? rows : rows.filter((r) => r.startedAtMs < at);
  const after = at === null ? [] : rows.filter((r) => r.startedAtMs >= at);
  const lastGoodBefore = [...before].reverse().find(isGood);
  const firstGoodAfter = after.find(isGood);
  const last = rows.at(-1);
  const recovered = at !== null && last !== undefined && after.includes(last) && isGood(last);
  const deletedPod =
    at === null
      ? null
      : ([...attachments].reverse().find((a) => a.attachedAtMs <= at)?.served ?? null);
  const replacement =
    at === null ? null : (attachments.find((a) => a.attachedAtMs > at)?.served ?? null);
  const brokenFrom = lastGoodBefore?.startedAtMs ?? at;
  const summary: ReproSummary = {
    deletedAtMs: at,
    deletedPod,
    replacement,
    probes: rows.length,
    okBefore: before.filter(isGood).length,
    failedAfter: after.filter((r) => !isGood(r)).length,
    recovered,
    brokenMs:
      recovered && firstGoodAfter !== undefined && brokenFrom !== null
        ? firstGoodAfter.startedAtMs - brokenFrom
        : null,
    brokenForAtLeastMs: !recovered && at !== null ? input.endMs - at : null,
    why: '',
  };
  summary.why = explain(summary, after, attachments, routes, input.routesUnread ?? []);
  return summary;
}

function podText(s: ServedBy | null): string {
  return s === null ? 'an unknown pod' : `${s.name} (${s.ip} on ${s.node})`;
}

function routeText(r: ReturnRoute): string {
  return `${r.dst}${r.via === null ? '' : ` via ${r.via}`}${r.dev === null ? '' : ` dev ${r.dev}`}`;
}

/**
 * The summary's why. A return route read explains it (still pointing at the deleted pod, or at an
 * address the replacement took over); a why that found none, where one could have explained it,
 * names the route tables not read in full: the route may be in the part not read.
 */
function explain(
  s: ReproSummary,
  after: readonly TimelineRow[],
  attachments: SummaryInput['attachments'],
  routes: readonly ReturnRoute[],
  unread: readonly RouteTableGap[],
): string {
  if (s.deletedAtMs === null) return 'no pod was deleted during the run';
  const why = whyFromRoutes(s, after, attachments, routes);
  if (why.unknown === null || unread.length === 0) return why.text;
  return `${why.text}; ${why.unknown} (not all return routes were read): ${routeGapsText(unread)}`;
}

/** The why from the routes read; `unknown`: what a route not read could still have said. */
function whyFromRoutes(
  s: ReproSummary,
  after: readonly TimelineRow[],
  attachments: SummaryInput['attachments'],
  routes: readonly ReturnRoute[],
): { text: string; unknown: string | null } {
  const replacement = attachments.find((a) => a.served.epoch === s.replacement?.epoch);
  const oldAddrs = new Set(
    attachments.filter((a) => a !== replacement).flatMap((a) => a.addresses),
  );
  const newAddrs = new Set(replacement?.addresses ?? []);
  const stale = routes.find((r) => r.via !== null && oldAddrs.has(r.via) && !newAddrs.has(r.via));
  const held = routes.find((r) => r.via !== null && newAddrs.has(r.via));
  const afterGood = after.filter(isGood);
  const layers = [...new Set(afterGood.map((r) => r.verdict))].join(', ');
  if (s.recovered) {
    const back = 'the path came back after the reschedule';
    if (held)
      return {
        text: `${back}: the return route on node ${held.node} (${routeText(held)}) points at an address the replacement ${podText(s.replacement)} took over`,
        unknown: null,
      };
    if (afterGood.some((r) => r.verdict === 'vpn-pod'))
      return {
        text: `${back}: the VPN pod masquerades (vpn-pod): replies return to the replacement's own address ${s.replacement?.ip ?? '?'}, no return route is needed`,
        unknown: null,
      };
    return {
      text: `${back}: probes through ${podText(s.replacement)} work again (${layers})`,
      unknown: 'whether a return route points at an address the replacement took over is not known',
    };
  }
  const counts = new Map<string, number>();
  for (const r of after.filter((x) => !isGood(x)))
    counts.set(r.verdict, (counts.get(r.verdict) ?? 0) + 1);
  const seen = [...counts].map(([k, n]) => `${n} ${k}`).join(', ');
  if (stale) {
    const owner = attachments.find((a) => a.addresses.includes(stale.via ?? ''))?.served ?? null;
    return {
      text: `the path did not come back: the return route on node ${stale.node} (${routeText(stale)}) still points at ${stale.via ?? '?'}, the deleted pod ${owner?.name ?? ''}'s address; the replacement ${podText(s.replacement)} is not on it (probes after the deletion: ${seen})`,
      unknown: null,
    };
  }
  const unknown = 'whether a return route still points at the deleted pod is not known';
  if (s.replacement === null)
    return {
      text: `the path did not come back: no replacement pod appeared in the agents' inventory (probes after the deletion: ${seen})`,
      unknown,
    };
  return {
    text: `the path did not come back through ${podText(s.replacement)} (probes after the deletion: ${seen})`,
    unknown,
  };
}

/**
 * How precise a repro's times are, for every form that shows them: ms, because the probe is timed
 * by its prober and the reschedule by the collector (Date.now); packets keep ns in evidence.pcapng.
 */
export const REPRO_TIMES_NOTE =
  "Times are UTC (ISO 8601) to the millisecond: a probe's is its start on the prober's clock, a deletion's or replacement's the collector's; the packets' own capture times (ns) are in evidence.pcapng.";

const clock = utcMillis;

const VERDICT_TEXT: Record<ProbeVerdict, string> = {
  preserved: 'preserved',
  'vpn-pod': 'rewritten by vpn-pod',
  'cni-masquerade': 'rewritten by cni-masquerade',
  'kube-proxy': 'rewritten by kube-proxy',
  proxy: 'rewritten by proxy',
  'no-return': 'no-return',
  dropped: 'dropped',
  unknown: 'unknown',
  'failed-to-connect': 'failed to connect',
  'not-captured': 'not captured',
};

/** The timeline's column header. */
export const TIMELINE_HEADER = `${'time (UTC, ms)'.padEnd(24)}  offset  probe          served by                      verdict                      client`;

/** One probe's row; `startMs`: the first probe's start (offsets are from it). */
export function timelineRowLine(r: TimelineRow, startMs: number): string {
  return `${clock(r.startedAtMs)}  +${((r.startedAtMs - startMs) / 1000).toFixed(1).padStart(5)}s  ${r.probeId.padEnd(14)} ${(r.servedBy === null ? '-' : `${r.servedBy.name} ${r.servedBy.ip}`).padEnd(30)} ${VERDICT_TEXT[r.verdict].padEnd(28)} ${r.ok ? 'HTTP 200' : 'no answer'}${r.backendSrc === null ? '' : `  backend saw ${r.backendSrc}`}`;
}

/** A deletion, replacement or note, between the probe rows. */
export function markLine(m: ReproMark, startMs: number): string {
  return `${clock(m.atMs)}  +${((m.atMs - startMs) / 1000).toFixed(1).padStart(5)}s  ── ${m.kind}: ${m.detail}`;
}

/** The summary's two lines (after an empty one), none before the repro finished. */
export function summaryLines(summary: ReproSummary | null): string[] {
  if (summary === null) return [];
  return [
    '',
    summary.recovered
      ? `summary: recovered; broken for ${summary.brokenMs ?? '?'} ms (last good probe before the deletion → first good one after)`
      : summary.deletedAtMs === null
        ? 'summary: no deletion happened'
        : `summary: NOT recovered; broken for at least ${summary.brokenForAtLeastMs ?? '?'} ms (until the end of the run)`,
    `why: ${summary.why}`,
  ];
}

/** The per-probe timeline and the summary as text lines. */
export function renderTimeline(
  rows: readonly TimelineRow[],
  marks: readonly ReproMark[],
  summary: ReproSummary | null,
): string[] {
  const start = rows[0]?.startedAtMs ?? marks[0]?.atMs ?? 0;
  const items: { at: number; line: string }[] = rows.map((r) => ({
    at: r.startedAtMs,
    line: timelineRowLine(r, start),
  }));
  for (const m of marks) items.push({ at: m.atMs, line: markLine(m, start) });
  items.sort((a, b) => a.at - b.at);
  return [TIMELINE_HEADER, ...items.map((i) => i.line), ...summaryLines(summary)];
}

/**
 * What the HTTP API serves of captures and agents (`GET /v1/captures/:id`, `GET /v1/agents`):
 * JSON-safe views built from a session's record and the hub's agents. The clients (cli/, lab/)
 * read these shapes through collector/index.ts.
 */
import type { Verdict } from '../core/attribute/attribute';
import { helloMaxCaptures } from '../common/hello-limits';
import type { AgentInfo } from './hub-types';
import type { CaptureSession, PointState, SessionState } from './session';

const iso = (ms: number): string => new Date(ms).toISOString();

/** One point in `GET /v1/captures/:id`. */
export interface PointView {
  name: string;
  agentId: string | null;
  node: string | null;
  target: string;
  /** The namespace the agent captured in, as it reported it (null: not known yet). */
  netns: string | null;
  iface: string;
  state: PointState;
  packets: number;
  events: number;
  /** Of `events`: flow counter events, and the packets they count (absent: none arrived). */
  foldEvents?: number;
  foldedPackets?: number;
  /** Packets the agent sent whole only because its flow table was full (absent: none). */
  foldFullSent?: number;
  kernelDrops: number | null;
  queueDrops: number;
  lost: number;
  error?: { code: string; message: string };
  /** The target came from a stale pod list (reading the pod from the API failed): why. */
  targetNote?: string;
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
  /** How the agent proved who it is: shared-token, node-token, client-cert or service-account. */
  identity: { method: string; subject: string };
  version: string;
  connected: boolean;
  connectedAt: string;
  lastSeen: string;
  nodeAddresses: string[];
  namespaces: { path: string; addresses: string[]; interfaces: string[] }[];
  /** Captures the agent runs at once at most (its hello's; 4 for an agent that does not say). */
  maxCaptures: number;
  /** Capture points it runs for this collector now (live captures and repros). */
  liveCaptures: number;
  /** Messages of a kind this collector does not know (a newer agent's), ignored. */
  unknownMessages: number;
}

export function captureView(s: CaptureSession): CaptureView {
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
        netns: p.netns,
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
      if (p.foldEvents !== undefined) {
        v.foldEvents = p.foldEvents;
        v.foldedPackets = p.foldedPackets ?? 0;
      }
      if (p.foldFullSent !== undefined) v.foldFullSent = p.foldFullSent;
      return v;
    }),
    progress: {
      requestSeen: live !== null || (final && r.verdict?.client != null),
      // A finished capture read back from the data directory (a restart, or one no longer held
      // in memory) has no live analysis: its verdict's layer, as written.
      layer: live?.verdict.layer ?? (final ? (r.verdict?.layer ?? null) : null),
    },
    verdict: final ? r.verdict : null,
    finalReason: r.finalReason,
    reportUrls: final
      ? { markdown: `/v1/captures/${r.id}/report.md`, json: `/v1/captures/${r.id}/report.json` }
      : null,
  };
}

/** One agent as `GET /v1/agents` lists it. */
export function agentView(a: AgentInfo, liveCaptures: number): AgentView {
  return {
    agentId: a.agentId,
    node: a.node,
    identity: a.identity,
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
    maxCaptures: helloMaxCaptures(a.hello),
    liveCaptures,
    unknownMessages: a.unknownMessages,
  };
}

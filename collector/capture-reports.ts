/**
 * What a finished capture leaves in the data directory: verdict.json, report.md, report.json and
 * report-inputs.json (what the reports are rewritten from when late counts or conntrack evidence
 * arrive, also after a restart), and the command that repeats the capture.
 */
import type { AnalysisResult } from '../core/report/analyze';
import { withCaptureHealth, type CaptureHealth } from '../core/report/capture-health';
import { renderReportJson, renderReportMarkdown, type ReportMeta } from '../core/report/report';
import { renderReportHtml } from '../core/report/report-html';
import { findingNotes } from '../core/report/finding-notes';
import { renderSequenceSvg, type LaneLabel } from '../core/report/sequence-svg';
import type {
  CollectorRuntime,
  LiveCaptureMeta,
  ReportInput,
} from '../core/report/report-document';
import { captureCommand, type ReproduceCommand } from '../core/report/reproduce';
import type { Inventory } from '../common/inventory';
import { MANIFEST } from '../common/sha256sums';
import { hoptraceVersion, processRuntime } from '../common/version';
import type { AgentInfo } from './hub-types';
import type { CaptureSession, PointSpec, SessionRecord } from './session';
import type { DoctorSpec } from './doctor-remote';
import type { DoctorResult } from '../core/doctor/checks';
import type { DoctorEvidence } from '../core/report/what-to-change';
import { isHoptraceError } from '../common/errors';
import type { CaptureStore } from './store';

/** A finished capture's analysis and report inputs; capture health is added at each write. */
export interface FinalReport {
  state: string;
  reason: string;
  result: AnalysisResult;
  meta: ReportMeta;
}

/** A FinalReport as report-inputs.json; `null` (read back as none) if it cannot be JSON. */
export function inputsJson(f: FinalReport): string {
  try {
    return JSON.stringify(f) + '\n';
  } catch {
    return 'null\n';
  }
}

/** A FinalReport read back from report-inputs.json; null when the file is missing or not one. */
export function reportInputs(raw: unknown): FinalReport | null {
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

/** Each point's capture as its agent last reported it (the report's capture health). */
export function pointHealth(s: CaptureSession): CaptureHealth[] {
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

/** What a live point's lane is labelled with beyond its name (a PointRecord or a PointView). */
export interface LivePointLabel {
  name: string;
  node: string | null;
  /** The namespace the agent captured in, as it reported it (null: not known yet). */
  netns: string | null;
  iface: string;
}

/** The picture's lane labels of a live capture: point, node, namespace, interface. */
export function liveLanes(points: readonly LivePointLabel[]): LaneLabel[] {
  return points.map((p) => ({
    point: p.name,
    ...(p.node === null ? {} : { node: p.node }),
    ...(p.netns === null ? {} : { namespace: p.netns }),
    iface: p.iface,
  }));
}

/**
 * (Re)writes verdict.json, the bundle's reports and report-inputs.json, and the store its
 * SHA256SUMS after them (which the reports name); throws on I/O errors.
 */
export function writeCaptureReports(store: CaptureStore, s: CaptureSession, f: FinalReport): void {
  const result = withCaptureHealth(f.result, pointHealth(s));
  const lanes = liveLanes(s.record.points);
  // Also for the inputs of a capture an older collector finished: this one writes SHA256SUMS.
  const meta: ReportMeta = { ...f.meta, manifest: MANIFEST };
  const d = meta.doctor;
  const notes = d?.status === 'given' ? findingNotes(result.points, d.result.findings) : [];
  store.writeFinal(s.id, {
    verdict:
      JSON.stringify({ state: f.state, reason: f.reason, verdict: result.verdict }, null, 2) + '\n',
    markdown: renderReportMarkdown(result, meta),
    json: renderReportJson(result, meta),
    html: renderReportHtml(result, meta, { lanes, notes }),
    svg: renderSequenceSvg(result, { lanes, notes }),
    ...(meta.inventoryUsed === undefined
      ? {}
      : { inventory: JSON.stringify(meta.inventoryUsed, null, 2) + '\n' }),
    // The inputs without the capture health, so a collector started again can rewrite the
    // reports when an agent's final counters arrive after the restart.
    inputs: inputsJson(f),
  });
  store.saveSession(s.record);
}

/** The `hoptrace capture` command that repeats this session (`collector`: its URL, if one). */
export function reproduceCommand(
  r: SessionRecord,
  collector: string | null = null,
): ReproduceCommand {
  return captureCommand({
    collector,
    points: r.spec.points,
    client: r.spec.client,
    dst: r.spec.dst,
    dport: r.spec.dport,
    timeoutMs: r.spec.timeoutMs,
    settleMs: r.spec.settleMs,
    stopOnFirstMatch: r.spec.stopOnFirstMatch,
    inventoryGiven: r.spec.inventory !== undefined,
    evidencePayload: r.spec.evidencePayload === true,
    perPacket: r.spec.perPacket === true,
    doctorTunnelRange: r.spec.doctor?.tunnelRange,
  });
}

/**
 * The report's inputs of a live capture: each point's agent (its version as its hello announced
 * it, while the hub remembers the agent), node, target, interface, filter, and the events the
 * collector received from it.
 */
export function liveInputs(r: SessionRecord, agents: readonly AgentInfo[]): ReportInput[] {
  const byId = new Map(agents.map((a) => [a.agentId, a]));
  return r.points.map((p) => {
    const spec = r.spec.points.find((x) => x.name === p.name);
    return {
      name: p.name,
      file: `live ${p.node ?? '?'}:${p.target} ${p.iface} (capture ${r.id})`,
      live: {
        agentId: p.agentId,
        agentVersion: p.agentId === null ? null : (byId.get(p.agentId)?.hello.version ?? null),
        node: p.node,
        target: p.target,
        netns: p.netns,
        iface: p.iface,
        filter: spec?.filter ?? null,
        eventsReceived: p.events,
      },
    };
  });
}

/** The doctor spec of a capture that asked for one: VPN = the first point, backend = the last. */
export function captureDoctorSpec(r: SessionRecord): DoctorSpec | null {
  const d = r.spec.doctor;
  const first = r.spec.points[0];
  const last = r.spec.points.at(-1);
  if (d === undefined || first === undefined || last === undefined) return null;
  const target = (p: PointSpec): string =>
    p.node === undefined ? p.target : `${p.node}/${p.target}`;
  return {
    vpn: target(first),
    backend: target(last),
    tunnelRange: d.tunnelRange,
    ...(r.spec.client === undefined ? {} : { client: r.spec.client }),
    ...(r.spec.dst === undefined ? {} : { dst: r.spec.dst }),
  };
}

/** Where a live report's doctor findings come from, in words. */
export function doctorSource(r: SessionRecord): string {
  const d = captureDoctorSpec(r);
  return d === null
    ? 'doctor through the agents'
    : `doctor's checks through the agents at the capture's end (vpn ${d.vpn}, backend ${d.backend}, tunnel range ${d.tunnelRange})`;
}

/**
 * The report's doctor evidence from a run through the agents: its result, or what could not be
 * read and why (never "ok" when it did not answer).
 */
export async function runCaptureDoctor(
  r: SessionRecord,
  run: (spec: DoctorSpec) => Promise<DoctorResult>,
): Promise<DoctorEvidence | null> {
  const spec = captureDoctorSpec(r);
  if (spec === null) return null;
  const source = doctorSource(r);
  try {
    return { status: 'given', source, result: await run(spec) };
  } catch (e) {
    const code = isHoptraceError(e) ? `${e.code}: ` : '';
    return {
      status: 'unreadable',
      source,
      detail: `the agents did not answer (${code}${e instanceof Error ? e.message : String(e)})`,
    };
  }
}

/** What the capture was asked for and how it ended, for the report. */
export function liveCaptureMeta(
  r: SessionRecord,
  collector: string | null,
  state: string,
  reason: string,
): LiveCaptureMeta {
  const { inventory, ...spec } = r.spec;
  return {
    id: r.id,
    collector,
    state,
    reason,
    request: spec,
    inventoryGiven: inventory ?? null,
  };
}

/** What this collector analyses with: its Node and platform (a live report's runtime line). */
export function collectorRuntime(): CollectorRuntime {
  return { analyzedBy: 'collector', ...processRuntime() };
}

/** A finished live capture's report meta: the same forms as `hoptrace analyze --report-dir`. */
export function liveReportMeta(o: {
  record: SessionRecord;
  agents: readonly AgentInfo[];
  collector: string | null;
  state: string;
  reason: string;
  inventory: Inventory;
  generatedAt: string;
}): ReportMeta {
  const r = o.record;
  return {
    generatedAt: o.generatedAt,
    inputs: liveInputs(r, o.agents),
    selector: { client: r.spec.client, dst: r.spec.dst, dport: r.spec.dport },
    hoptraceVersion: hoptraceVersion(),
    source: 'live',
    inventoryUsed: o.inventory,
    doctor:
      r.spec.doctor === undefined
        ? {
            status: 'not-run',
            detail:
              'doctor was not run for this capture (`hoptrace capture … --doctor-tunnel-range CIDR`, or `hoptrace doctor --collector URL --vpn … --backend … --json`)',
          }
        : {
            status: 'unreadable',
            source: doctorSource(r),
            detail: 'they had not answered when this report was written',
          },
    capture: liveCaptureMeta(r, o.collector, o.state, o.reason),
    reproduce: reproduceCommand(r, o.collector),
    runtime: collectorRuntime(),
  };
}

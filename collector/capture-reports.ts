/**
 * What a finished capture leaves in the data directory: verdict.json, report.md, report.json and
 * report-inputs.json (what the reports are rewritten from when late counts or conntrack evidence
 * arrive, also after a restart), and the command that repeats the capture.
 */
import type { AnalysisResult } from '../core/report/analyze';
import { withCaptureHealth, type CaptureHealth } from '../core/report/capture-health';
import { renderReportJson, renderReportMarkdown, type ReportMeta } from '../core/report/report';
import type { CaptureSession, SessionRecord } from './session';
import type { CaptureStore } from './store';
import { hostPort } from '../common/endpoint';

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

/** (Re)writes verdict.json, report.md, report.json and report-inputs.json; throws on I/O errors. */
export function writeCaptureReports(store: CaptureStore, s: CaptureSession, f: FinalReport): void {
  const result = withCaptureHealth(f.result, pointHealth(s));
  store.writeFinal(s.id, {
    verdict:
      JSON.stringify({ state: f.state, reason: f.reason, verdict: result.verdict }, null, 2) + '\n',
    markdown: renderReportMarkdown(result, f.meta),
    json: renderReportJson(result),
    // The inputs without the capture health, so a collector started again can rewrite the
    // reports when an agent's final counters arrive after the restart.
    inputs: inputsJson(f),
  });
  store.saveSession(s.record);
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
    args.push('--dst', r.spec.dport === undefined ? dst : hostPort(r.spec.dst, r.spec.dport));
  }
  args.push('--timeout', `${r.spec.timeoutMs}ms`);
  return args.join(' ');
}

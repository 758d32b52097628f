/**
 * Rendering an analysis: a short text summary for the terminal, a Markdown report to paste into an
 * incident, and JSON (report-document.ts). Pure: the generation time, the version, file digests and
 * doctor's findings are passed in, nothing is read or written.
 */

import { packetCounts } from './packet-counts';
import type { AnalysisResult, PointSummary } from './analyze';
import type { Layer, Verdict } from '../attribute/attribute';
import { fileDroppedCell, fileFramesCell, type CaptureHealth } from './capture-health';
import type { Endpoint } from '../correlate/correlate';
import { tupleText } from '../../common/endpoint';
import { countText } from '../../common/counters';
import { doctorOf, reportDocument, reproduceOf, type ReportMeta } from './report-document';
import { timingMarkdown, timingTextLines, utcOrEmpty } from './timing-section';
import { whatToChange, type DoctorEvidence } from './what-to-change';
import { whatToChangeMarkdown } from './what-to-change-md';
import { partialTexts } from './identity-text';
import { inputsLead, inputsLines, madeWithLine, type Piece } from './inputs-text';
import { mdCode, mdFence, mdProse, mdText } from './md-escape';

export type { ReportMeta };

/** Each verdict layer in words. */
export const LAYER_WORDS: Record<Layer, string> = {
  preserved: 'client address preserved to the backend',
  'vpn-pod': "source rewritten inside the VPN pod (the pod's own masquerade)",
  'cni-masquerade': "source rewritten by the VPN node's CNI masquerade",
  'kube-proxy': "source rewritten by kube-proxy's Service masquerade on the backend's node",
  proxy: 'a proxy terminated the connection and opened a new one',
  'no-return': 'the request reached the backend, the reply never came back',
  dropped: 'the request never reached the backend',
  unknown: 'cannot tell which layer',
};

/** `10.90.0.42:40000 -> 10.96.0.10:80` */
export function formatEndpoint(e: Endpoint | null | undefined): string {
  if (e === null || e === undefined) return '(not seen)';
  return tupleText(e);
}

function whereText(v: Verdict): string | null {
  const parts: string[] = [];
  if (v.rewrittenBetween !== null)
    parts.push(`between ${v.rewrittenBetween[0]} and ${v.rewrittenBetween[1]}`);
  else if (v.hop !== undefined) parts.push(`between ${v.hop.from} and ${v.hop.to}`);
  if (v.node !== undefined) parts.push(`on node ${v.node}`);
  return parts.length > 0 ? parts.join(' ') : null;
}

function provedBy(v: Verdict): string {
  return v.evidence
    .map((e) => `${e.point}: ${e.matchedBy.length > 0 ? e.matchedBy.join('+') : 'no match'}`)
    .join('; ');
}

/** What was followed, and what that means for the proof (the verdict's request shape). */
export function shapeText(v: AnalysisResult['verdict']): string | null {
  if (v.shape === 'tcp-established')
    return (
      'a request on a TCP connection already open when the capture started: the handshake was not ' +
      'captured, so it was followed by sequence numbers, TSval and IPv4 ID instead of the ISN'
    );
  if (v.shape === 'udp')
    return (
      'a UDP request: followed by its payload fingerprint, length and IPv4 ID, its reply by the ' +
      'reversed tuple'
    );
  if (v.shape === 'icmp-echo')
    return (
      'an ICMP echo request: followed by its sequence number, data and IPv4 ID; the port shown is ' +
      'the echo identifier'
    );
  return null;
}

/**
 * A few lines for the terminal: layer in words, where, before → after, proof, times, hint, and
 * doctor's state when doctor's findings were given (or could not be read).
 */
export function renderVerdictText(result: AnalysisResult, doctor?: DoctorEvidence): string {
  const v = result.verdict;
  const lines = [`verdict: ${v.layer} — ${LAYER_WORDS[v.layer]}`];
  const where = whereText(v);
  if (where !== null) lines.push(`  where:  ${where}`);
  if (v.before !== undefined || v.after !== undefined) {
    lines.push(`  source: ${formatEndpoint(v.before)}  =>  ${formatEndpoint(v.after)}`);
  } else if (v.client !== null) {
    const last = result.points[result.points.length - 1];
    lines.push(
      `  client: ${formatEndpoint(v.client)}${last === undefined ? '' : `; at ${last.name}: ${formatEndpoint(last.observed)}`}`,
    );
  }
  if (v.reason !== undefined) lines.push(`  why:    ${v.reason}`);
  for (const c of result.caveats ?? []) lines.push(`  caution: ${c}`);
  const shape = shapeText(v);
  if (shape !== null) lines.push(`  request: ${shape}`);
  if (v.outer !== undefined) lines.push(`  outer:  ${v.outer.class}: ${v.outer.detail}`);
  lines.push(`  proof:  ${provedBy(v)}`);
  if (v.conntrack !== undefined)
    lines.push(`  conntrack: ${v.conntrack.status}: ${v.conntrack.detail}`);
  for (const s of v.secondary ?? []) lines.push(`  also:   ${s.layer}: ${s.detail}`);
  for (const h of result.identityHeaders?.seen ?? [])
    lines.push(`  header: ${h.kind} ${h.value} at ${h.point} (frame ${h.frame})`);
  if (result.identityHeaders !== undefined)
    for (const x of partialTexts(result.identityHeaders)) lines.push(`  header: ${x}`);
  lines.push(...timingTextLines(result));
  lines.push(`  hint:   ${v.hint}`);
  if (doctor !== undefined) lines.push(`  doctor: ${whatToChange(result, doctor).doctor.text}`);
  return lines.join('\n') + '\n';
}

const yesNo = (b: boolean): string => (b ? 'yes' : 'no');

function pointRow(p: PointSummary): string {
  const counts = packetCounts(p);
  return `| ${[
    mdText(p.name),
    mdText(p.status + (p.proxied ? ' (proxied)' : '')),
    yesNo(p.seenRequest),
    yesNo(p.seenReply),
    mdCode(formatEndpoint(p.observed)),
    utcOrEmpty(p.firstTsNs),
    utcOrEmpty(p.lastTsNs),
    mdText(p.matchedBy.join(', ')),
    mdText(counts),
  ].join(' | ')} |`;
}

/** What each point's capture file recorded about the capture (`hoptrace analyze`). */
function fileHealthSection(health: CaptureHealth[]): string[] {
  const out = ['## Capture health', ''];
  out.push(
    'What each capture file recorded about its own capture: pcapng files written by dumpcap or ' +
      'tshark end with Interface Statistics Blocks (drops by the interface and the OS); classic ' +
      'pcap files (tcpdump -w) record none — tcpdump prints its drops when it stops, and ' +
      '`hoptrace analyze --drops POINT=N` takes that count (shown as "given").',
    '',
  );
  out.push('| point | file | format | frames | dropped |');
  out.push('| --- | --- | --- | --- | --- |');
  for (const h of health) {
    const row = [h.point, h.iface, h.file ?? '?', fileFramesCell(h), fileDroppedCell(h)];
    out.push(`| ${row.map(mdText).join(' | ')} |`);
  }
  out.push('');
  return out;
}

/** What each point's capture delivered and lost: agents' statuses, or capture files. */
function healthSection(health: CaptureHealth[] | undefined): string[] {
  if (health === undefined || health.length === 0) return [];
  if (health.every((h) => h.file !== undefined)) return fileHealthSection(health);
  const out = ['## Capture health', ''];
  out.push(
    "From each agent's latest status (every second while capturing; the report is rewritten " +
      "with a capture's final counters when it stops). Kernel drops `unknown`: the `cap` " +
      'fallback source cannot count them.',
    '',
  );
  out.push(
    '| point | node | interface | state | packets | kernel drops | agent drops | events lost |',
  );
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const h of health) {
    const row = [
      h.point,
      h.node ?? '?',
      h.iface,
      h.state,
      countText(h.packets),
      h.kernelDrops === null ? 'unknown' : countText(h.kernelDrops),
      countText(h.queueDrops),
      countText(h.lost),
    ];
    out.push(`| ${row.map(mdText).join(' | ')} |`);
  }
  out.push('');
  return out;
}

const tupleCell = (t: { src: string; sport: number; dst: string; dport: number }): string =>
  mdCode(formatEndpoint(t));

/** The conntrack entries of the flow (original vs reply tuple), when the agents read them. */
function conntrackSection(v: Verdict): string[] {
  const ct = v.conntrack;
  if (ct === undefined) return [];
  const out = ['', '## Conntrack', '', `**${mdText(ct.status)}**: ${mdProse(ct.detail)}`, ''];
  if (ct.entries.length === 0) return out;
  out.push('| namespace | node | state | original | reply | SNAT | DNAT |');
  out.push('| --- | --- | --- | --- | --- | --- | --- |');
  for (const e of ct.entries) {
    out.push(
      `| ${[
        mdText(e.name),
        mdText(e.node),
        mdText(e.state),
        tupleCell(e.orig),
        tupleCell(e.reply),
        yesNo(e.snat),
        yesNo(e.dnat),
      ].join(' | ')} |`,
    );
  }
  return out;
}

/** A report to paste into an incident: verdict, points table, evidence, hint, how to reproduce. */
export function renderReportMarkdown(result: AnalysisResult, meta: ReportMeta): string {
  const v = result.verdict;
  const out: string[] = [];
  out.push(`# hoptrace: ${v.layer}`, '');
  out.push(`**${LAYER_WORDS[v.layer]}**`, '');
  out.push(`- generated: ${meta.generatedAt}`);
  if (v.client !== null)
    out.push(`- request at the first point: ${mdCode(formatEndpoint(v.client))}`);
  const shape = shapeText(v);
  if (shape !== null) out.push(`- request: ${shape}`);
  if (v.outer !== undefined)
    out.push(`- outer connection (${v.outer.class}): ${mdProse(v.outer.detail)}`);
  const where = whereText(v);
  if (where !== null) out.push(`- where: ${mdProse(where)}`);
  if (v.before !== undefined || v.after !== undefined) {
    out.push(`- source: ${mdCode(formatEndpoint(v.before))} → ${mdCode(formatEndpoint(v.after))}`);
  }
  if (v.reason !== undefined) out.push(`- why: ${mdProse(v.reason)}`);
  for (const c of result.caveats ?? []) out.push(`- **caution**: ${mdProse(c)}`);
  out.push('');
  out.push('## Capture points (in path order)', '');
  out.push(
    "| point | status | request | reply | observed (request direction) | first seen (UTC, the point's clock) | last seen (UTC) | matched by | packets req/reply |",
  );
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const p of result.points) out.push(pointRow(p));
  out.push('');
  out.push(...healthSection(result.captureHealth));
  out.push('## Evidence', '');
  for (const e of v.evidence) {
    out.push(
      `- **${mdText(e.point)}** (${e.matchedBy.length > 0 ? e.matchedBy.join(', ') : 'no match'}): ${mdProse(e.detail)}`,
    );
  }
  out.push(...conntrackSection(v));
  if (v.secondary !== undefined && v.secondary.length > 0) {
    out.push('', '## Also found', '');
    for (const s of v.secondary)
      out.push(`- **${s.layer}**: ${mdProse(s.detail)} — ${mdProse(s.hint)}`);
  }
  out.push('');
  out.push(...packetsSection(meta));
  out.push(...timingMarkdown(result));
  const doctor = doctorOf(meta);
  out.push(
    ...whatToChangeMarkdown(
      whatToChange(result, doctor, meta.inventoryUsed),
      doctor,
      mdProse(v.hint),
    ),
  );
  out.push(...reproduceSection(meta));
  return out.join('\n');
}

/** What the bundle's evidence.pcapng holds (nothing when the report was written without one). */
export function packetsSection(meta: ReportMeta): string[] {
  const e = meta.evidence;
  if (e === undefined) return [];
  const out = ['## Packets (evidence.pcapng)', ''];
  out.push(
    e.file === null
      ? `No evidence.pcapng: ${mdProse(e.note)}`
      : `${mdCode(e.file)}: ${e.packets} packets of the matched connection, ${e.headersOnly ? 'headers only (each frame cut after its innermost transport header; no payload bytes)' : 'with the payload bytes as captured'}. ${mdProse(e.note)}`,
    '',
  );
  if (e.interfaces.length > 0) {
    out.push('| point | interface in the file | packets |', '| --- | --- | --- |');
    for (const i of e.interfaces)
      out.push(`| ${[i.point, i.name, String(i.packets)].map(mdText).join(' | ')} |`);
    out.push('');
  }
  for (const p of e.problems) out.push(`- **${mdText(p.point)}**: ${p.code}: ${mdProse(p.detail)}`);
  if (e.problems.length > 0) out.push('');
  return out;
}

/** The Reproduce section: the command, what it cannot carry, the inputs with their digests. */
function reproduceSection(meta: ReportMeta): string[] {
  const r = reproduceOf(meta);
  const md = (line: Piece[]): string =>
    line.map((p) => ('code' in p ? mdCode(p.code) : mdText(p.text))).join('');
  const out = ['## Reproduce', '', ...mdFence('sh', r.command), ''];
  const made = madeWithLine(meta);
  if (made !== null) out.push(md(made), '');
  for (const n of r.notes) out.push(`- ${mdProse(n)}`);
  if (r.notes.length > 0) out.push('');
  out.push(mdText(inputsLead(meta)), '');
  for (const line of inputsLines(meta)) out.push(`- ${md(line)}`);
  out.push(
    '',
    'Repeat with a fresh connection (not a reused one), then once more while the VPN pod is being ' +
      'rescheduled (delete it), and once from a source that should be denied, to confirm the refusal ' +
      'comes from policy and not from a missing route.',
    '',
  );
  return out;
}

/**
 * report.json (report-document.ts, proto/report.schema.json): the analysis's members beside its
 * evidence, newline-terminated.
 */
export function renderReportJson(result: AnalysisResult, meta: ReportMeta): string {
  return JSON.stringify(reportDocument(result, meta), null, 2) + '\n';
}

/** The command that repeats this analysis (report-document.ts reproduceOf), as one line. */
export function reproduceCommand(meta: ReportMeta): string {
  return reproduceOf(meta).command;
}

// What the HTML report and the sequence picture say in the same words (report-html.ts,
// sequence-svg.ts).
export { provedBy, whereText };

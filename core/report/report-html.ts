/**
 * The report as one self-contained HTML file: what report.md says (verdict in words, where,
 * before → after, why, cautions, the points with UTC times, capture health, evidence, conntrack,
 * what to do, how to reproduce, the inputs), the sequence picture inline, the clocks and the
 * per-hop latency. No script, no fetch (a Content-Security-Policy forbids both), inline CSS that
 * also prints; every text escaped. A repro gets the same treatment (renderReproHtml). Pure: the
 * generation time is passed in.
 */
import { packetCounts } from './packet-counts';
import type { AnalysisResult, CaptureHealth, PointSummary } from './analysis-result';
import {
  REPRO_TIMES_NOTE,
  type ReproMark,
  type ReproSummary,
  type TimelineRow,
} from '../repro/repro-core';
import { esc } from './markup';
import { countText } from '../../common/counters';
import {
  formatEndpoint,
  LAYER_WORDS,
  reproduceCommand,
  shapeText,
  whereText,
  type ReportMeta,
} from './report';
import { renderReproSvg, VERDICT_CODES, type ReproSvgOptions } from './repro-svg';
import { renderSequenceSvg, type SequenceSvgOptions } from './sequence-svg';
import { durationText, utcMicros, utcMillis } from './times';
import { fileDroppedCell, fileFramesCell, lossPhrase } from './capture-health';
import { inputsLead, inputsLines, madeWithLine, type Piece } from './inputs-text';
import { doctorOf, reproduceOf, type ReportMeta as DocMeta } from './report-document';
import { whatToChange, type ChangeStep } from './what-to-change';
import { tunnelRangeText } from './what-to-change-md';

export type { ReportMeta };

/** The sequence picture's options (lane labels, findings), passed through. */
export type ReportHtmlOptions = SequenceSvgOptions;

const CSS = `
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; background: #fff; margin: 0; }
main { max-width: 1240px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #d8d8d8; }
.lead { font-size: 16px; font-weight: 600; margin: 0 0 12px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.facts dt { font-weight: 600; color: #444; }
dl.facts dd { margin: 0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12.5px; }
pre { background: #f5f6f8; padding: 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border: 1px solid #d8d8d8; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; }
td time { white-space: nowrap; }
ul.caveats { padding: 0; margin: 12px 0; }
ul.caveats li { list-style: none; background: #fff4d6; border-left: 4px solid #a35c00; padding: 6px 10px; margin: 4px 0; }
figure { margin: 16px 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: 12px; color: #5a5a5a; }
.verdict-bad { color: #b00020; }
footer { margin-top: 32px; font-size: 12px; color: #5a5a5a; }
@media print {
  main { max-width: none; padding: 0; }
  figure { overflow: visible; break-inside: avoid; }
  table, pre, ul.caveats li { break-inside: avoid; }
  thead { display: table-header-group; }
  h2 { break-after: avoid; }
}
`;

/** The page around a body: no script, nothing fetched (the CSP says so to the browser). */
function page(title: string, body: string[]): string {
  return [
    '<!DOCTYPE html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${esc(title)}</title>`,
    `<style>${CSS}</style>`,
    '</head>',
    '<body>',
    '<main>',
    ...body,
    '</main>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

const code = (s: string): string => `<code>${esc(s)}</code>`;
const yesNo = (b: boolean): string => (b ? 'yes' : 'no');

/** A table; cells are already markup (escape text with esc or code). */
function table(head: string[], rows: string[][], cls?: string): string {
  return [
    `<div class="table-wrap"><table${cls === undefined ? '' : ` class="${esc(cls)}"`}>`,
    `<thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join('')}</tr></thead>`,
    '<tbody>',
    ...rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`),
    '</tbody></table></div>',
  ].join('\n');
}

/** `<time>` in UTC with µs, the nanoseconds in its title. */
function timeCell(tsNs: string | null): string {
  if (tsNs === null) return '';
  const iso = utcMicros(tsNs);
  return `<time datetime="${esc(iso)}" title="${esc(`${tsNs} ns since the epoch`)}">${esc(iso)}</time>`;
}

function facts(items: [string, string | null][]): string {
  const present = items.filter((i): i is [string, string] => i[1] !== null);
  return [
    '<dl class="facts">',
    ...present.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`),
    '</dl>',
  ].join('\n');
}

function pointRow(p: PointSummary): string[] {
  const counts = packetCounts(p);
  return [
    esc(p.name),
    esc(p.status + (p.proxied ? ' (proxied)' : '')),
    esc(p.node ?? ''),
    esc(p.iface ?? ''),
    yesNo(p.seenRequest),
    yesNo(p.seenReply),
    code(formatEndpoint(p.observed)),
    timeCell(p.firstTsNs),
    timeCell(p.lastTsNs),
    esc(p.matchedBy.join(', ')),
    esc(counts),
  ];
}

function clockSection(result: AnalysisResult): string[] {
  const clock = result.clock ?? [];
  const hops = result.hops ?? [];
  if (clock.length === 0 && hops.length === 0) return [];
  const ns = (s: string | null): string => (s === null ? '' : esc(durationText(BigInt(s))));
  const out = ['<h2>Clocks and hops</h2>'];
  if (clock.length > 0) {
    out.push(
      '<p>Each point stamps packets with its own node’s clock; the offset of each clock against the first point’s is bounded by packets seen at both (NTP’s bounds).</p>',
      table(
        ['point', 'node', 'offset', 'bounds', 'how'],
        clock.map((c) => [
          esc(c.point),
          esc(c.node ?? ''),
          c.status === 'reference' ? 'reference' : `${esc(c.status)} ${ns(c.offsetNs)}`,
          c.lowNs === null && c.highNs === null
            ? ''
            : `${ns(c.lowNs) || '−∞'} … ${ns(c.highNs) || '+∞'}`,
          esc(c.detail),
        ]),
      ),
    );
  }
  if (hops.length > 0)
    out.push(
      table(
        ['hop', 'latency', 'how'],
        hops.map((h) => [
          esc(`${h.from} → ${h.to}`),
          h.latencyNs === null ? 'not known' : ns(h.latencyNs),
          esc(h.detail),
        ]),
      ),
    );
  return out;
}

function healthSection(health: readonly CaptureHealth[] | undefined): string[] {
  if (health === undefined || health.length === 0) return [];
  const out = ['<h2>Capture health</h2>'];
  if (health.every((h) => h.file !== undefined)) {
    out.push(
      '<p>What each capture file recorded about its own capture (pcapng Interface Statistics Blocks; classic pcap records no drops — give tcpdump’s count with <code>--drops</code>).</p>',
      table(
        ['point', 'file', 'format', 'frames', 'dropped'],
        health.map((h) => [
          esc(h.point),
          code(h.iface),
          esc(h.file ?? '?'),
          esc(fileFramesCell(h)),
          esc(fileDroppedCell(h)),
        ]),
      ),
    );
    return out;
  }
  out.push(
    '<p>From each agent’s latest status. Kernel drops <em>unknown</em>: the <code>cap</code> fallback source cannot count them.</p>',
    table(
      [
        'point',
        'node',
        'interface',
        'state',
        'packets',
        'kernel drops',
        'agent drops',
        'events lost',
        'loss',
      ],
      health.map((h) => [
        esc(h.point),
        esc(h.node ?? '?'),
        esc(h.iface),
        esc(h.state),
        esc(countText(h.packets)),
        esc(h.kernelDrops === null ? 'unknown' : countText(h.kernelDrops)),
        esc(countText(h.queueDrops)),
        esc(countText(h.lost)),
        esc(lossPhrase(h) ?? 'none'),
      ]),
    ),
  );
  return out;
}

function conntrackSection(result: AnalysisResult): string[] {
  const ct = result.verdict.conntrack;
  if (ct === undefined) return [];
  const out = [
    '<h2>Conntrack</h2>',
    `<p><strong>${esc(ct.status)}</strong>: ${esc(ct.detail)}</p>`,
  ];
  if (ct.entries.length > 0)
    out.push(
      table(
        ['namespace', 'node', 'state', 'original', 'reply', 'SNAT', 'DNAT'],
        ct.entries.map((e) => [
          esc(e.name),
          esc(e.node),
          esc(e.state),
          code(formatEndpoint(e.orig)),
          code(formatEndpoint(e.reply)),
          yesNo(e.snat),
          yesNo(e.dnat),
        ]),
      ),
    );
  return out;
}

/** The analysis as one HTML page, with the sequence picture inline. */
export function renderReportHtml(
  result: AnalysisResult,
  meta: ReportMeta,
  opts: ReportHtmlOptions = {},
): string {
  const v = result.verdict;
  const body: string[] = [];
  body.push(
    '<header>',
    `<h1>hoptrace: ${esc(v.layer)}</h1>`,
    `<p class="lead">${esc(LAYER_WORDS[v.layer])}</p>`,
    '</header>',
  );
  body.push(
    facts([
      ['generated', esc(meta.generatedAt)],
      ['request at the first point', v.client === null ? null : code(formatEndpoint(v.client))],
      ['request', ((s) => (s === null ? null : esc(s)))(shapeText(v))],
      [
        'outer connection',
        v.outer === undefined ? null : esc(`${v.outer.class}: ${v.outer.detail}`),
      ],
      ['where', ((w) => (w === null ? null : esc(w)))(whereText(v))],
      [
        'source',
        v.before === undefined && v.after === undefined
          ? null
          : `${code(formatEndpoint(v.before))} → ${code(formatEndpoint(v.after))}`,
      ],
      ['why', v.reason === undefined ? null : esc(v.reason)],
    ]),
  );
  const caveats = result.caveats ?? [];
  if (caveats.length > 0)
    body.push(
      '<ul class="caveats">',
      ...caveats.map((c) => `<li><strong>caution</strong>: ${esc(c)}</li>`),
      '</ul>',
    );
  body.push(
    '<figure class="sequence">',
    renderSequenceSvg(result, opts),
    '<figcaption>The request’s packets at each capture point, in time order (on the first point’s clock): requests left to right, replies right to left, each with the tuple where it arrives; the field a hop rewrote is highlighted at that hop.</figcaption>',
    '</figure>',
  );
  body.push(
    '<h2>Capture points (in path order)</h2>',
    '<p>Times in UTC by each point’s own clock (see <em>Clocks and hops</em>).</p>',
    table(
      [
        'point',
        'status',
        'node',
        'interface',
        'request',
        'reply',
        'observed (request direction)',
        'first seen (UTC)',
        'last seen (UTC)',
        'matched by',
        'packets req/reply',
      ],
      result.points.map(pointRow),
      'points',
    ),
  );
  body.push(...clockSection(result));
  body.push(...healthSection(result.captureHealth));
  body.push(
    '<h2>Evidence</h2>',
    '<ul class="evidence">',
    ...v.evidence.map(
      (e) =>
        `<li><strong>${esc(e.point)}</strong> (${esc(e.matchedBy.length > 0 ? e.matchedBy.join(', ') : 'no match')}): ${esc(e.detail)}</li>`,
    ),
    '</ul>',
  );
  body.push(...conntrackSection(result));
  if (v.secondary !== undefined && v.secondary.length > 0)
    body.push(
      '<h2>Also found</h2>',
      '<ul>',
      ...v.secondary.map(
        (s) => `<li><strong>${esc(s.layer)}</strong>: ${esc(s.detail)} — ${esc(s.hint)}</li>`,
      ),
      '</ul>',
    );
  body.push(...packetsHtml(meta));
  body.push('<h2>What to do</h2>', `<p class="hint">${esc(v.hint)}</p>`);
  body.push(...whatToChangeHtml(result, meta));
  const notes = reproduceOf(meta).notes;
  const made = madeWithLine(meta);
  const pieces = (line: Piece[]): string =>
    line.map((p) => ('code' in p ? code(p.code) : esc(p.text))).join('');
  body.push(
    '<h2>Reproduce</h2>',
    `<pre class="command"><code>${esc(reproduceCommand(meta))}</code></pre>`,
    ...(made === null ? [] : [`<p>${pieces(made)}</p>`]),
    ...(notes.length === 0
      ? []
      : ['<ul class="notes">', ...notes.map((n) => `<li>${esc(n)}</li>`), '</ul>']),
    `<p>${esc(inputsLead(meta))}</p>`,
    '<ul class="inputs">',
    ...inputsLines(meta).map((line) => `<li>${pieces(line)}</li>`),
    '</ul>',
    '<p>Repeat with a fresh connection (not a reused one), then once more while the VPN pod is being rescheduled (delete it), and once from a source that should be denied, to confirm the refusal comes from policy and not from a missing route.</p>',
  );
  body.push(`<footer>hoptrace report, generated ${esc(meta.generatedAt)}.</footer>`);
  return page(`hoptrace: ${v.layer}`, body);
}

/** evidence.pcapng: what the bundle's packet file holds. */
function packetsHtml(meta: DocMeta): string[] {
  const e = meta.evidence;
  if (e === undefined) return [];
  const out = ['<h2>Packets (evidence.pcapng)</h2>'];
  out.push(
    e.file === null
      ? `<p>No evidence.pcapng: ${esc(e.note)}</p>`
      : `<p>${code(e.file)}: ${e.packets} packets of the matched connection, ${e.headersOnly ? 'headers only (each frame cut after its innermost transport header; no payload bytes)' : 'with the payload bytes as captured'}. ${esc(e.note)}</p>`,
  );
  if (e.interfaces.length > 0)
    out.push(
      table(
        ['point', 'interface in the file', 'packets'],
        e.interfaces.map((i) => [esc(i.point), code(i.name), String(i.packets)]),
        'pcapng',
      ),
    );
  if (e.problems.length > 0)
    out.push(
      '<ul class="problems">',
      ...e.problems.map(
        (p) => `<li><strong>${esc(p.point)}</strong>: ${esc(p.code)}: ${esc(p.detail)}</li>`,
      ),
      '</ul>',
    );
  return out;
}

function stepHtml(s: ChangeStep): string {
  const knobs =
    s.knobs === undefined || s.knobs.length === 0
      ? ''
      : `<ul>${s.knobs.map((k) => `<li>${esc(k.cni)}: ${esc(k.knob)}</li>`).join('')}</ul>`;
  const findings =
    s.findings === undefined || s.findings.length === 0
      ? ''
      : `<ul class="findings">${s.findings.map((f) => `<li>doctor ${esc(f.check)} on ${esc(f.node)} (${esc(f.severity)}): ${esc(f.subject)}: ${esc(f.detail)}</li>`).join('')}</ul>`;
  return `<li>${esc(s.text)} <span class="basis">(${esc(s.basis)})</span>${s.command === undefined ? '' : `<pre><code>${esc(s.command)}</code></pre>`}${knobs}${findings}</li>`;
}

/** "What to change": the field guide's three questions, then the steps for each mode. */
function whatToChangeHtml(result: AnalysisResult, meta: DocMeta): string[] {
  const w = whatToChange(result, doctorOf(meta), meta.inventoryUsed);
  return [
    '<h2>What to change</h2>',
    `<p class="doctor">${esc(w.doctor.text)}</p>`,
    `<p class="range">${esc(tunnelRangeText(w))}.</p>`,
    table(
      ['question', 'answer', 'why'],
      w.questions.map((q) => [esc(q.question), `<strong>${esc(q.answer)}</strong>`, esc(q.detail)]),
      'questions',
    ),
    `<h3>Preserve the client address</h3><p>${esc(w.preserve.applies)}</p><ol>${w.preserve.steps.map(stepHtml).join('')}</ol>`,
    `<h3>Or rewrite it (SNAT) and carry the identity another way</h3><p>${esc(w.snat.applies)}</p><p>${esc(w.snat.runbook)}</p><ol>${w.snat.steps.map(stepHtml).join('')}</ol>`,
  ];
}

/** What a repro page is made of: a repro view's timeline, marks and summary, and its lines. */
export interface ReproHtmlInput {
  rows: readonly TimelineRow[];
  marks: readonly ReproMark[];
  summary: ReproSummary | null;
  endMs?: number | undefined;
  /** ISO 8601 time, passed in. */
  generatedAt: string;
  id?: string | undefined;
  state?: string | undefined;
  finalReason?: string | null | undefined;
  /** What the captures lost during the run (collector/repro-views.ts lossLines), as cautions. */
  cautions?: readonly string[] | undefined;
  /** The hoptrace that wrote the page. */
  hoptraceVersion?: string | undefined;
  /**
   * Plain-text tables after the probes (the bundle's inputs, capture health, evidence): each
   * cell is escaped here. `cls` names the table (`inputs`, `health`, `evidence`).
   */
  sections?: readonly ReproHtmlSection[] | undefined;
}

/** One titled table of text in a repro page. */
export interface ReproHtmlSection {
  title: string;
  cls: string;
  head: string[];
  rows: string[][];
  /** A sentence under the title. */
  note?: string;
}

const msText = (ms: number | null): string | null => (ms === null ? null : `${ms} ms`);

/** A repro as one HTML page: the outcome, the timeline picture, one row per probe. */
export function renderReproHtml(input: ReproHtmlInput, opts: ReproSvgOptions = {}): string {
  const s = input.summary;
  const iso = utcMillis;
  const pod = (p: ReproSummary['deletedPod']): string | null =>
    p === null ? null : esc(`${p.name} (${p.ip} on ${p.node})`);
  const title =
    s === null
      ? `hoptrace repro${input.id === undefined ? '' : ` ${input.id}`}`
      : s.deletedAtMs === null
        ? 'hoptrace repro: no pod was deleted'
        : s.recovered
          ? 'hoptrace repro: recovered'
          : 'hoptrace repro: NOT recovered';
  const body: string[] = ['<header>', `<h1>${esc(title)}</h1>`];
  if (s !== null) body.push(`<p class="lead">${esc(s.why)}</p>`);
  body.push('</header>');
  body.push(
    facts([
      ['generated', esc(input.generatedAt)],
      ['repro', input.id === undefined ? null : esc(input.id)],
      ['state', input.state === undefined ? null : esc(input.state)],
      [
        'ended because',
        input.finalReason === undefined || input.finalReason === null
          ? null
          : esc(input.finalReason),
      ],
      ['pod deleted', s?.deletedAtMs === null || s === null ? null : esc(iso(s.deletedAtMs))],
      ['deleted pod', s === null ? null : pod(s.deletedPod)],
      ['replacement', s === null ? null : pod(s.replacement)],
      [
        'probes',
        s === null
          ? esc(String(input.rows.length))
          : esc(
              `${s.probes} (${s.okBefore} good before the deletion, ${s.failedAfter} failed after)`,
            ),
      ],
      [
        'broken for',
        s === null
          ? null
          : ((t) => (t === null ? null : esc(t)))(
              s.recovered
                ? msText(s.brokenMs)
                : s.brokenForAtLeastMs === null
                  ? null
                  : `at least ${s.brokenForAtLeastMs} ms`,
            ),
      ],
    ]),
  );
  const cautions = input.cautions ?? [];
  if (cautions.length > 0)
    body.push('<ul class="caveats">', ...cautions.map((c) => `<li>${esc(c)}</li>`), '</ul>');
  body.push(
    '<figure class="repro">',
    renderReproSvg(input, opts),
    '<figcaption>Each probe at its start time, one row per pod that served it; the shaded span is the broken window.</figcaption>',
    '</figure>',
    `<p class="note">${esc(REPRO_TIMES_NOTE)}</p>`,
  );
  const start = input.rows[0]?.startedAtMs ?? 0;
  body.push(
    '<h2>Probes</h2>',
    table(
      [
        'time (UTC, ms)',
        'offset',
        'probe',
        'served by',
        'verdict',
        'answer',
        'backend saw',
        'detail',
      ],
      input.rows.map((r) => [
        `<time datetime="${esc(iso(r.startedAtMs))}">${esc(iso(r.startedAtMs))}</time>`,
        esc(`+${((r.startedAtMs - start) / 1000).toFixed(1)} s`),
        code(r.probeId),
        esc(r.servedBy === null ? '—' : `${r.servedBy.name} ${r.servedBy.ip}`),
        `<span class="${r.ok ? 'verdict' : 'verdict verdict-bad'}">${esc(VERDICT_CODES[r.verdict].words)}</span>`,
        esc(r.ok ? 'HTTP 200' : 'no answer'),
        r.backendSrc === null ? '' : code(r.backendSrc),
        esc([r.detail, ...r.lossesInFlight].filter((x) => x !== '').join('; ')),
      ]),
      'probes',
    ),
  );
  if (input.marks.length > 0)
    body.push(
      '<h2>Marks</h2>',
      '<ul class="marks">',
      ...[...input.marks]
        .sort((a, b) => a.atMs - b.atMs)
        .map(
          (m) =>
            `<li><time datetime="${esc(iso(m.atMs))}">${esc(iso(m.atMs))}</time> <strong>${esc(m.kind)}</strong>: ${esc(m.detail)}</li>`,
        ),
      '</ul>',
    );
  for (const sec of input.sections ?? []) {
    body.push(`<h2>${esc(sec.title)}</h2>`);
    if (sec.note !== undefined) body.push(`<p>${esc(sec.note)}</p>`);
    body.push(
      table(
        sec.head,
        sec.rows.map((r) => r.map(esc)),
        sec.cls,
      ),
    );
  }
  body.push(
    `<footer>hoptrace${input.hoptraceVersion === undefined ? '' : ` ${esc(input.hoptraceVersion)}`} repro report, generated ${esc(input.generatedAt)}.</footer>`,
  );
  return page(title, body);
}

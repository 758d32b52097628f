/**
 * The sequence picture of one request: a lane per capture point (point, node, namespace,
 * interface), the connection's packets as arrows between consecutive lanes in time order —
 * requests left to right, replies right to left — each labelled with the tuple at the point it
 * reaches, the field a hop rewrote highlighted there (before → after), where the request or the
 * reply stopped, the per-hop latency, and the conntrack entries and findings next to the hop or
 * point they concern. One standalone SVG string: no script, no external reference, generic font
 * families, every text escaped. Pure.
 *
 * For tests and the web view: each lane is `<g class="lane" data-point>`, each packet crossing a
 * hop `<g class="arrow request|reply" data-from data-to data-hop>`, each highlighted rewrite
 * `<g class="changed" data-hop data-field>`, each stop `<g class="stop" data-point>`.
 */
import { hostPort, tupleText } from '../../common/endpoint';
import type { AnalysisResult, PointSummary } from './analysis-result';
import { attrs, charsIn, clip, el, esc, num, textWidth, wrapText } from './markup';
import { LAYER_WORDS, whereText } from './report';
import {
  COLOR,
  drawCrossing,
  drawLone,
  drawStub,
  FONT,
  labelLength,
  LINE,
  MONO,
  noteBand,
} from './sequence-draw';
import { placeNotes, type DiagramNote } from './sequence-notes';
import { buildRows } from './sequence-rows';
import { buildTraces, selectTraces } from './sequence-traces';
import { durationText, utcMicros, type HopLatency } from './times';

export type { DiagramNote };

/** What a lane is labelled with beyond the point's name, when the caller knows more. */
export interface LaneLabel {
  point: string;
  node?: string | undefined;
  /** The network namespace (or `namespace/pod`) the capture ran in. */
  namespace?: string | undefined;
  iface?: string | undefined;
}

export interface SequenceSvgOptions {
  lanes?: readonly LaneLabel[] | undefined;
  /** Findings (doctor, conntrack remarks) next to the hop or point they concern. */
  notes?: readonly DiagramNote[] | undefined;
  /** At most this many packets are drawn (default 16); the others are counted. */
  maxPackets?: number | undefined;
  /** Prefix of the picture's ids (default `hoptrace-seq`), so two pictures can share a page. */
  idPrefix?: string | undefined;
}

/** Left and right margin of the picture. */
const MARGIN = 12;

function latencyText(h: HopLatency | undefined): string {
  if (h === undefined || h.latencyNs === null) return 'latency not known';
  const mid = durationText(BigInt(h.latencyNs));
  if (h.lowNs === null || h.highNs === null || h.lowNs === h.highNs) return `latency ${mid}`;
  return `latency ${mid} (${durationText(BigInt(h.lowNs))} … ${durationText(BigInt(h.highNs))})`;
}

const STATUS_WORDS: Record<PointSummary['status'], string | null> = {
  matched: null,
  'not-seen': 'request not seen here',
  'no-capture': 'captured nothing',
  ambiguous: 'ambiguous match',
};

/** The label lines of a lane: point, node, namespace, interface (or file), status. */
function laneLines(p: PointSummary, result: AnalysisResult, lanes: readonly LaneLabel[]): string[] {
  const lab = lanes.find((l) => l.point === p.name);
  const health = result.captureHealth?.find((h) => h.point === p.name);
  const node = lab?.node ?? p.node ?? health?.node ?? null;
  const file = health?.file !== undefined ? health.iface : null;
  const iface = lab?.iface ?? p.iface ?? (file === null ? (health?.iface ?? null) : null);
  const lines = [p.name];
  if (node !== null && node !== '') lines.push(`node ${node}`);
  if (lab?.namespace !== undefined && lab.namespace !== '') lines.push(`netns ${lab.namespace}`);
  if (iface !== null && iface !== '') lines.push(`iface ${iface}`);
  else if (file !== null) lines.push(`file ${file}`);
  const status = STATUS_WORDS[p.status];
  if (status !== null) lines.push(status);
  if (p.proxied) lines.push('another connection (proxy)');
  return lines;
}

/** The SVG sequence picture of an analysis. */
export function renderSequenceSvg(result: AnalysisResult, opts: SequenceSvgOptions = {}): string {
  const points = result.points;
  const n = points.length;
  const v = result.verdict;
  const shape = v.shape;
  const id = opts.idPrefix ?? 'hoptrace-seq';
  const names = points.map((p) => p.name);
  const all = buildTraces(result);
  const { shown, omitted } = selectTraces(all, opts.maxPackets ?? 16);

  const rows = buildRows(shown, points);

  // Lane spacing: the widest label or highlight, within bounds.
  let widest = 220;
  for (const r of rows) {
    for (const c of r.crossings) widest = Math.max(widest, labelLength(c.dst.packet, shape));
    for (const st of r.stubs)
      if (st.labelled) widest = Math.max(widest, labelLength(st.at.packet, shape) + 16);
    for (const chs of r.changes.values())
      for (const ch of chs) widest = Math.max(widest, textWidth(ch.text, MONO, 'mono') + 12);
  }
  const S = Math.min(620, Math.ceil(widest + 40));
  const laneX = (i: number): number => MARGIN + S / 2 + i * S;
  const W = Math.ceil(2 * MARGIN + Math.max(1, n) * S);
  const parts: string[] = [];

  // Title lines.
  const t0 = rows[0]?.trace.startNs ?? all[0]?.startNs ?? null;
  const firstName = names[0] ?? '?';
  parts.push(
    el(
      'text',
      { x: 12, y: 20, 'font-size': 13, 'font-weight': 'bold', fill: COLOR.text, class: 'heading' },
      esc(`hoptrace: ${v.layer} — ${LAYER_WORDS[v.layer]}`),
    ),
  );
  const where = whereText(v);
  const sub = [
    where,
    v.before !== undefined && v.after !== undefined
      ? `source ${hostPort(v.before.src, v.before.sport)} → ${hostPort(v.after.src, v.after.sport)}`
      : null,
    t0 === null
      ? 'no packet of the connection was captured'
      : `times from ${utcMicros(t0)} on ${firstName}'s clock`,
  ].filter((x): x is string => x !== null);
  parts.push(
    el(
      'text',
      { x: 12, y: 36, 'font-size': 10, fill: COLOR.muted, class: 'subheading' },
      esc(sub.join(' · ')),
    ),
  );

  // Lane headers.
  const headerTop = 48;
  const laneLabels = points.map((p) => laneLines(p, result, opts.lanes ?? []));
  const headerH = 12 + LINE * Math.max(1, ...laneLabels.map((l) => l.length));
  const rowsTop = headerTop + headerH + 8;
  const firstRowY = rowsTop + 2 * LINE + 16;
  let y = firstRowY;
  const rowY: number[] = [];
  for (const r of rows) {
    rowY.push(y + 18);
    y += r.height;
  }
  if (rows.length === 0) y += 24;
  const rowsBottom = y;

  // The rewrite (or proxy) hop: a band behind the packets, labelled with the layer.
  const hopPair = v.rewrittenBetween ?? (v.hop === undefined ? null : [v.hop.from, v.hop.to]);
  const bandFrom = hopPair === null ? -1 : names.indexOf(hopPair[0]);
  const bandTo = hopPair === null ? -1 : names.indexOf(hopPair[1]);
  if (bandFrom >= 0 && bandTo > bandFrom) {
    const x1 = laneX(bandFrom);
    const x2 = laneX(bandTo);
    parts.push(
      el(
        'g',
        { class: 'rewrite-hop', 'data-hop': `${names[bandFrom] ?? ''}→${names[bandTo] ?? ''}` },
        [
          el('rect', {
            x: num(x1),
            y: rowsTop,
            width: num(x2 - x1),
            height: num(rowsBottom - rowsTop),
            fill: COLOR.band,
          }),
          el(
            'text',
            {
              x: num((x1 + x2) / 2),
              y: rowsTop + 2 * LINE + 2,
              'text-anchor': 'middle',
              'font-size': 10,
              'font-weight': 'bold',
              fill: COLOR.changedText,
            },
            esc(`${v.layer}${v.node === undefined ? '' : ` on ${v.node}`}`),
          ),
        ],
      ),
    );
  }

  // Lanes: header box, label lines, the vertical line.
  const boxW = S - 24;
  const maxChars = charsIn(boxW - 12, FONT);
  for (const [i, p] of points.entries()) {
    const x = laneX(i);
    const lines = laneLabels[i] ?? [p.name];
    const seen =
      p.firstTsNs === null
        ? 'nothing of the connection seen'
        : `first ${utcMicros(p.firstTsNs)}, last ${utcMicros(p.lastTsNs ?? p.firstTsNs)} (this point's clock)`;
    parts.push(
      el('g', { class: 'lane', id: `${id}-lane-${i}`, 'data-point': p.name }, [
        el('title', {}, esc(`${lines.join(', ')}; ${seen}`)),
        el('rect', {
          x: num(x - boxW / 2),
          y: headerTop,
          width: num(boxW),
          height: headerH,
          rx: 4,
          fill: COLOR.header,
          stroke: COLOR.lane,
        }),
        ...lines.map((l, k) =>
          el(
            'text',
            {
              x: num(x),
              y: headerTop + 16 + k * LINE,
              'text-anchor': 'middle',
              'font-size': k === 0 ? 12 : 10,
              'font-weight': k === 0 ? 'bold' : undefined,
              fill: k === 0 ? COLOR.text : COLOR.muted,
            },
            esc(clip(l, maxChars)),
          ),
        ),
        el('line', {
          x1: num(x),
          y1: headerTop + headerH,
          x2: num(x),
          y2: num(rowsBottom),
          stroke: COLOR.lane,
          'stroke-dasharray': '3 3',
        }),
      ]),
    );
  }

  // Per-hop latency, above the packets between the lanes.
  for (let i = 0; i + 1 < n; i++) {
    const h = result.hops?.find((x) => x.from === names[i] && x.to === names[i + 1]);
    parts.push(
      el('g', { class: 'latency', 'data-hop': `${names[i] ?? ''}→${names[i + 1] ?? ''}` }, [
        el('title', {}, esc(h?.detail ?? 'no latency was computed for this hop')),
        el(
          'text',
          {
            x: num(laneX(i) + S / 2),
            y: rowsTop + LINE,
            'text-anchor': 'middle',
            'font-size': 10,
            fill: COLOR.muted,
          },
          esc(latencyText(h)),
        ),
      ]),
    );
  }

  // The packets.
  for (const [k, r] of rows.entries()) {
    const ry = rowY[k] ?? firstRowY;
    if (t0 !== null)
      parts.push(
        el(
          'text',
          {
            x: num(laneX(0) - 10),
            y: num(ry + 3),
            'text-anchor': 'end',
            'font-size': 9,
            'font-family': 'monospace',
            fill: COLOR.muted,
            class: 'time',
          },
          esc(`+${durationText(r.trace.startNs - t0)}`),
        ),
      );
    const below = new Map<number, number>();
    const nextLine = (gap: number): number => {
      const used = below.get(gap) ?? 0;
      below.set(gap, used + 1);
      return ry + 16 + used * LINE;
    };
    for (const c of r.crossings)
      parts.push(drawCrossing(c, r.changes.get(c) ?? [], points, laneX, shape, ry, nextLine));
    for (const st of r.stubs)
      parts.push(drawStub(st, r.stopNotes.get(st) ?? [], points, laneX, S, ry, shape, nextLine));
    if (r.crossings.length === 0 && r.stubs.length === 0)
      parts.push(drawLone(r.trace, laneX, ry, shape, names));
  }

  // Notes next to their hop, then under their lane, then the footer.
  const placed = placeNotes(result, opts.notes ?? []);
  y = rowsBottom + 12;
  y = noteBand(parts, placed, 'hop', n, laneX, S, y, names);
  y = noteBand(parts, placed, 'lane', n, laneX, S, y, names);
  const footer: { text: string; cls: string }[] = [];
  if (omitted > 0)
    footer.push({
      text: `+${omitted} more packet${omitted === 1 ? '' : 's'} of the connection not drawn (pure ACKs and later segments first); the points table counts them all`,
      cls: 'more',
    });
  for (const p of points)
    if (p.flowOmitted > 0)
      footer.push({
        text: `+${p.flowOmitted} more at ${p.name} beyond the first ${p.flow.length} kept`,
        cls: 'more',
      });
  if (!all.some((t) => t.dir === 'reply') && all.length > 0)
    footer.push({ text: 'no reply seen at any point', cls: 'stop-note' });
  for (const pn of placed)
    if ('footer' in pn.at) footer.push({ text: pn.text, cls: `note ${pn.kind}` });
  const maxFooter = charsIn(W - 24, 10);
  for (const f of footer) {
    for (const line of wrapText(f.text, maxFooter)) {
      y += LINE;
      parts.push(
        el(
          'text',
          {
            x: 12,
            y: num(y),
            'font-size': 10,
            fill: f.cls === 'stop-note' ? COLOR.stop : COLOR.muted,
            class: f.cls,
          },
          esc(line),
        ),
      );
    }
  }
  y += LINE + 4;
  parts.push(
    el(
      'text',
      { x: 12, y: num(y), 'font-size': 9, fill: COLOR.muted, class: 'legend' },
      esc(
        'legend: solid → request, dashed ← reply, each labelled with the tuple where it arrives; highlighted: the field that hop rewrote (before → after); ✕ not seen past that point; ○ a point that did not capture it',
      ),
    ),
  );
  const H = Math.ceil(y + 10);

  const title = `hoptrace sequence: ${v.layer} — ${names.join(', ') || 'no points'}`;
  const desc = [
    LAYER_WORDS[v.layer],
    where,
    v.before !== undefined || v.after !== undefined
      ? `source ${v.before === undefined ? '?' : tupleText(v.before)} → ${v.after === undefined ? '?' : tupleText(v.after)}`
      : null,
    `${shown.length} of ${all.length} packets drawn across ${n} point${n === 1 ? '' : 's'}`,
    t0 === null ? null : `first packet at ${utcMicros(t0)}`,
  ]
    .filter((x): x is string => x !== null)
    .join('. ');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg"${attrs({ id, class: 'hoptrace-sequence', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-labelledby': `${id}-title ${id}-desc`, 'font-family': 'sans-serif', 'font-size': FONT })}>` +
    el('title', { id: `${id}-title` }, esc(title)) +
    el('desc', { id: `${id}-desc` }, esc(desc)) +
    el('rect', { x: 0, y: 0, width: W, height: H, fill: '#ffffff' }) +
    parts.join('') +
    '</svg>'
  );
}

/**
 * The repro's timeline as a picture: one row per pod incarnation that served probes (and one for
 * probes no capture saw), each probe a mark at its start time shaped and coloured by its verdict
 * (filled circle: a working path; cross: broken — dropped, no return, could not connect; hollow:
 * cannot tell) with a one-letter code, the broken window shaded, the pod's deletion and its
 * replacement's readiness marked. Plain data in (repro-core's rows, marks and summary); one
 * standalone SVG string out, no script, no external reference. Pure.
 *
 * For tests and the web view: `<g class="probe VERDICT" data-probe data-verdict>`,
 * `<rect class="broken-window">`, `<g class="mark deleted|replacement-ready|note">`.
 */
import type { ProbeVerdict, ReproMark, ReproSummary, TimelineRow } from '../repro/repro-core';
import { isGood } from '../repro/repro-core';
import { attrs, charsIn, clip, el, esc, num, wrapText } from './markup';
import { utcMillis } from './times';

/** What the picture is drawn from: a repro view's `timeline`, `marks` and `summary`. */
export interface ReproSvgInput {
  rows: readonly TimelineRow[];
  marks: readonly ReproMark[];
  summary: ReproSummary | null;
  /** End of the run (ms since the epoch); default: the last probe or mark. */
  endMs?: number | undefined;
}

export interface ReproSvgOptions {
  /** Width of the picture in px (default 960). */
  width?: number | undefined;
  /** Prefix of the picture's ids (default `hoptrace-repro`). */
  idPrefix?: string | undefined;
}

/** One letter per verdict, for the marks, and the words the legend gives it. */
export const VERDICT_CODES: Record<ProbeVerdict, { code: string; words: string }> = {
  preserved: { code: 'P', words: 'preserved' },
  'vpn-pod': { code: 'V', words: 'rewritten by the VPN pod' },
  'cni-masquerade': { code: 'C', words: 'rewritten by CNI masquerade' },
  'kube-proxy': { code: 'K', words: 'rewritten by kube-proxy' },
  proxy: { code: 'X', words: 'through a proxy' },
  'no-return': { code: 'N', words: 'no return' },
  dropped: { code: 'D', words: 'dropped' },
  unknown: { code: '?', words: 'unknown' },
  'failed-to-connect': { code: 'F', words: 'failed to connect' },
  'not-captured': { code: '-', words: 'not captured' },
};

const BROKEN: readonly ProbeVerdict[] = ['no-return', 'dropped', 'failed-to-connect'];
const REWRITTEN: readonly ProbeVerdict[] = ['vpn-pod', 'cni-masquerade', 'kube-proxy', 'proxy'];

const COLOR = {
  preserved: '#2a7a3b',
  rewritten: '#a35c00',
  broken: '#b00020',
  other: '#6b6b6b',
  text: '#1a1a1a',
  muted: '#5a5a5a',
  window: '#fde2e4',
  deleted: '#b00020',
  ready: '#2a7a3b',
  grid: '#d0d0d0',
} as const;

function colorOf(v: ProbeVerdict): string {
  if (v === 'preserved') return COLOR.preserved;
  if (REWRITTEN.includes(v)) return COLOR.rewritten;
  if (BROKEN.includes(v)) return COLOR.broken;
  return COLOR.other;
}

/** The shaded broken window: from the last good probe before the deletion to the first after. */
export interface BrokenWindow {
  fromMs: number;
  toMs: number;
  recovered: boolean;
  text: string;
}

/** The broken window of a run (summarizeRepro's definition), or null when no pod was deleted. */
export function brokenWindow(input: ReproSvgInput, endMs: number): BrokenWindow | null {
  const deletedAt =
    input.summary?.deletedAtMs ?? input.marks.find((m) => m.kind === 'deleted')?.atMs ?? null;
  if (deletedAt === null) return null;
  const before = input.rows.filter((r) => r.startedAtMs < deletedAt);
  const after = input.rows.filter((r) => r.startedAtMs >= deletedAt);
  const from = [...before].reverse().find(isGood)?.startedAtMs ?? deletedAt;
  const last = input.rows.at(-1);
  const recovered =
    input.summary?.recovered ?? (last !== undefined && after.includes(last) && isGood(last));
  const firstGoodAfter = after.find(isGood);
  if (recovered) {
    const to =
      input.summary?.brokenMs !== null && input.summary?.brokenMs !== undefined
        ? from + input.summary.brokenMs
        : (firstGoodAfter?.startedAtMs ?? endMs);
    return { fromMs: from, toMs: to, recovered, text: `broken ${seconds(to - from)}` };
  }
  return {
    fromMs: from,
    toMs: endMs,
    recovered,
    text: `broken for at least ${seconds(endMs - deletedAt)} (not recovered)`,
  };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** A tick step (ms) that gives about `target` ticks over `span` ms. */
function tickStep(span: number, target: number): number {
  const steps = [
    100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000,
  ];
  return steps.find((s) => span / s <= target) ?? 1800000;
}

const utc = utcMillis;

/** Who served a probe, as a row key and label. */
function rowKey(r: TimelineRow): string {
  return r.servedBy === null ? 'none' : `${r.servedBy.epoch}`;
}

/** The repro timeline picture. */
export function renderReproSvg(input: ReproSvgInput, opts: ReproSvgOptions = {}): string {
  const id = opts.idPrefix ?? 'hoptrace-repro';
  const W = Math.max(480, opts.width ?? 960);
  const times = [...input.rows.map((r) => r.startedAtMs), ...input.marks.map((m) => m.atMs)];
  const t0 = times.length === 0 ? 0 : Math.min(...times);
  const endMs = input.endMs ?? (times.length === 0 ? 0 : Math.max(...times));
  const span = Math.max(1000, endMs - t0);
  const LEFT = 190;
  const RIGHT = 24;
  const x = (ms: number): number => LEFT + ((ms - t0) / span) * (W - LEFT - RIGHT);
  const parts: string[] = [];

  // Heading: the outcome, then why.
  const s = input.summary;
  const win = brokenWindow(input, endMs);
  const heading =
    s === null
      ? `hoptrace repro: ${input.rows.length} probes${win === null ? '' : `, ${win.text}`}`
      : s.deletedAtMs === null
        ? `hoptrace repro: no pod was deleted (${s.probes} probes)`
        : s.recovered
          ? `hoptrace repro: recovered; broken for ${s.brokenMs ?? '?'} ms`
          : `hoptrace repro: NOT recovered; broken for at least ${s.brokenForAtLeastMs ?? '?'} ms`;
  parts.push(
    el(
      'text',
      { x: 12, y: 20, 'font-size': 13, 'font-weight': 'bold', fill: COLOR.text, class: 'heading' },
      esc(heading),
    ),
  );
  let y = 22;
  for (const line of s === null ? [] : wrapText(`why: ${s.why}`, charsIn(W - 24, 10))) {
    y += 14;
    parts.push(
      el('text', { x: 12, y, 'font-size': 10, fill: COLOR.muted, class: 'why' }, esc(line)),
    );
  }

  // Rows: one per pod incarnation, in the order they served, then probes nobody captured.
  const keys: { key: string; label: string[] }[] = [];
  for (const r of [...input.rows].sort(
    (a, b) => (a.servedBy?.epoch ?? 1e9) - (b.servedBy?.epoch ?? 1e9),
  )) {
    const k = rowKey(r);
    if (keys.some((x) => x.key === k)) continue;
    keys.push({
      key: k,
      label:
        r.servedBy === null
          ? ['no pod captured it']
          : [r.servedBy.name, `${r.servedBy.ip} on ${r.servedBy.node}`],
    });
  }
  const markTop = y + 34;
  const ROW = 40;
  const plotTop = markTop + 6;
  const plotBottom = plotTop + Math.max(1, keys.length) * ROW;
  const rowY = (k: string): number =>
    plotTop +
    ROW / 2 +
    Math.max(
      0,
      keys.findIndex((x) => x.key === k),
    ) *
      ROW;

  // The broken window behind everything.
  if (win !== null) {
    const x1 = x(win.fromMs);
    const x2 = Math.max(x1 + 2, x(win.toMs));
    parts.push(
      el('g', { class: 'broken', 'data-recovered': String(win.recovered) }, [
        el('title', {}, esc(`${win.text}: ${utc(win.fromMs)} → ${utc(win.toMs)}`)),
        el('rect', {
          class: 'broken-window',
          x: num(x1),
          y: num(plotTop),
          width: num(x2 - x1),
          height: num(plotBottom - plotTop),
          fill: COLOR.window,
        }),
        el(
          'text',
          {
            x: num((x1 + x2) / 2),
            y: num(plotBottom + 30),
            'text-anchor': 'middle',
            'font-size': 10,
            'font-weight': 'bold',
            fill: COLOR.broken,
          },
          esc(win.text),
        ),
      ]),
    );
  }

  // Row labels and guide lines.
  for (const [i, k] of keys.entries()) {
    const ry = plotTop + ROW / 2 + i * ROW;
    parts.push(
      el('g', { class: 'pod-row', 'data-row': k.key }, [
        el('line', { x1: LEFT, y1: num(ry), x2: W - RIGHT, y2: num(ry), stroke: COLOR.grid }),
        ...k.label.map((l, j) =>
          el(
            'text',
            {
              x: LEFT - 10,
              y: num(ry - 2 + j * 12),
              'text-anchor': 'end',
              'font-size': j === 0 ? 11 : 9,
              'font-weight': j === 0 ? 'bold' : undefined,
              fill: j === 0 ? COLOR.text : COLOR.muted,
            },
            esc(clip(l, 30)),
          ),
        ),
      ]),
    );
  }

  // Axis.
  const step = tickStep(span, 10);
  const ticks: string[] = [
    el('line', {
      x1: LEFT,
      y1: num(plotBottom),
      x2: W - RIGHT,
      y2: num(plotBottom),
      stroke: COLOR.muted,
    }),
  ];
  for (let t = 0; t <= span; t += step) {
    const tx = x(t0 + t);
    ticks.push(
      el('line', {
        x1: num(tx),
        y1: num(plotBottom),
        x2: num(tx),
        y2: num(plotBottom + 4),
        stroke: COLOR.muted,
      }),
    );
    ticks.push(
      el(
        'text',
        {
          x: num(tx),
          y: num(plotBottom + 15),
          'text-anchor': 'middle',
          'font-size': 9,
          fill: COLOR.muted,
        },
        esc(`+${(t / 1000).toFixed(step < 1000 ? 1 : 0)} s`),
      ),
    );
  }
  ticks.push(
    el(
      'text',
      {
        x: LEFT - 18,
        y: num(plotBottom + 15),
        'text-anchor': 'end',
        'font-size': 9,
        fill: COLOR.muted,
      },
      esc(`from ${utc(t0)}`),
    ),
  );
  parts.push(el('g', { class: 'axis' }, ticks));

  // Marks: the deletion, the replacement ready, notes; labels staggered so close marks stay legible.
  const sortedMarks = [...input.marks].sort((a, b) => a.atMs - b.atMs);
  let lastLabelX = -Infinity;
  let level = 0;
  for (const m of sortedMarks) {
    const mx = x(m.atMs);
    level = mx - lastLabelX < 120 ? (level + 1) % 2 : 0;
    lastLabelX = mx;
    const color =
      m.kind === 'deleted'
        ? COLOR.deleted
        : m.kind === 'replacement-ready'
          ? COLOR.ready
          : COLOR.muted;
    const words =
      m.kind === 'deleted'
        ? 'pod deleted'
        : m.kind === 'replacement-ready'
          ? 'replacement ready'
          : 'note';
    parts.push(
      el('g', { class: `mark ${m.kind}`, 'data-kind': m.kind }, [
        el('title', {}, esc(`${words} at ${utc(m.atMs)}: ${m.detail}`)),
        el('line', {
          x1: num(mx),
          y1: num(markTop - level * 12 - 10),
          x2: num(mx),
          y2: num(plotBottom),
          stroke: color,
          'stroke-width': 1.5,
          'stroke-dasharray': m.kind === 'note' ? '2 3' : '5 3',
        }),
        el(
          'text',
          {
            x: num(mx + 3),
            y: num(markTop - level * 12 - 2),
            'font-size': 10,
            'font-weight': 'bold',
            fill: color,
          },
          esc(words),
        ),
      ]),
    );
  }

  // Probes.
  const used = new Set<ProbeVerdict>();
  for (const r of input.rows) {
    used.add(r.verdict);
    const px = x(r.startedAtMs);
    const py = rowY(rowKey(r));
    const color = colorOf(r.verdict);
    const good = isGood(r);
    const broken = !good && BROKEN.includes(r.verdict);
    const shape = good
      ? el('circle', { cx: num(px), cy: num(py), r: 5, fill: color })
      : broken
        ? el('path', {
            d: `M${num(px - 5)},${num(py - 5)}L${num(px + 5)},${num(py + 5)}M${num(px - 5)},${num(py + 5)}L${num(px + 5)},${num(py - 5)}`,
            stroke: color,
            'stroke-width': 2.5,
          })
        : el('circle', {
            cx: num(px),
            cy: num(py),
            r: 4.5,
            fill: '#ffffff',
            stroke: color,
            'stroke-width': 1.5,
          });
    const title = [
      `${r.probeId} at ${utc(r.startedAtMs)} (+${seconds(r.offsetMs)})`,
      VERDICT_CODES[r.verdict].words,
      r.ok ? 'HTTP 200' : 'no answer',
      r.servedBy === null
        ? 'no pod captured it'
        : `served by ${r.servedBy.name} (${r.servedBy.ip})`,
      r.backendSrc === null ? null : `backend saw ${r.backendSrc}`,
      r.detail === '' ? null : r.detail,
      ...r.lossesInFlight,
    ].filter((t): t is string => t !== null);
    parts.push(
      el(
        'g',
        {
          class: `probe ${r.verdict}`,
          'data-probe': r.probeId,
          'data-verdict': r.verdict,
          'data-ok': String(r.ok),
        },
        [
          el('title', {}, esc(title.join('; '))),
          shape,
          el(
            'text',
            {
              x: num(px),
              y: num(py + 16),
              'text-anchor': 'middle',
              'font-size': 9,
              'font-weight': 'bold',
              fill: color,
            },
            esc(VERDICT_CODES[r.verdict].code),
          ),
        ],
      ),
    );
  }

  // Legend: only the verdicts present, then the shapes.
  let ly = plotBottom + (win === null ? 34 : 48);
  const legend = [...used].map((v) => `${VERDICT_CODES[v].code} ${VERDICT_CODES[v].words}`);
  const legendText = `${legend.join(' · ')}${legend.length > 0 ? ' — ' : ''}filled: working path; cross: broken; hollow: cannot tell${win === null ? '' : '; shaded: the broken window'}`;
  for (const line of wrapText(legendText, charsIn(W - 24, 10))) {
    parts.push(
      el(
        'text',
        { x: 12, y: num(ly), 'font-size': 10, fill: COLOR.muted, class: 'legend' },
        esc(line),
      ),
    );
    ly += 14;
  }
  const H = Math.ceil(ly + 4);

  const desc = [
    heading.replace(/^hoptrace repro: /, ''),
    s === null ? null : s.why,
    `${input.rows.length} probes from ${utc(t0)}`,
    win === null ? null : `${win.text} from ${utc(win.fromMs)}`,
  ]
    .filter((t): t is string => t !== null)
    .join('. ');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg"${attrs({ id, class: 'hoptrace-repro', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-labelledby': `${id}-title ${id}-desc`, 'font-family': 'sans-serif', 'font-size': 11 })}>` +
    el('title', { id: `${id}-title` }, esc(heading)) +
    el('desc', { id: `${id}-desc` }, esc(desc)) +
    el('rect', { x: 0, y: 0, width: W, height: H, fill: '#ffffff' }) +
    parts.join('') +
    '</svg>'
  );
}

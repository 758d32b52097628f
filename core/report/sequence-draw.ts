/**
 * Drawing the sequence picture's pieces as SVG: a packet crossing a hop (arrow, label with the
 * tuple where it arrives, the highlight of a rewritten field), a stub (from the proxy, to a stop),
 * a packet seen at the only point, and the bands of notes. Presentation attributes only (no
 * stylesheet), so the picture looks the same standalone, inline in a page and printed. Pure.
 */
import { tupleText } from '../../common/endpoint';
import type { PointSummary } from './analysis-result';
import { attrs, charsIn, el, esc, num, textWidth, wrapText } from './markup';
import type { PlacedNote } from './sequence-notes';
import {
  changesOf,
  crossGap,
  fieldText,
  LINE,
  stubGap,
  type Change,
  type Crossing,
  type Stub,
} from './sequence-rows';
import { packetLabel, type Sighting, type Trace } from './sequence-traces';
import { utcMicros } from './times';

export const COLOR = {
  request: '#1f4e9c',
  reply: '#2a6e3a',
  lane: '#8a8a8a',
  text: '#1a1a1a',
  muted: '#5a5a5a',
  changedBg: '#ffe08a',
  changedText: '#6b3500',
  stop: '#b00020',
  band: '#fff4d6',
  header: '#f2f4f7',
} as const;

export const FONT = 11;
export const MONO = 10;
export { LINE };

/** The label of a packet where it arrives: flags and the tuple, changed fields emphasised. */
export function labelParts(
  c: { packet: Sighting['packet']; changed: Change[] },
  shape: string | undefined,
): string {
  const t = c.packet.tuple;
  const part = (f: 'src' | 'dst'): string => {
    const text = esc(fieldText(t, f));
    return c.changed.some((x) => x.field === f)
      ? `<tspan font-weight="bold" fill="${COLOR.changedText}">${text}</tspan>`
      : text;
  };
  return `<tspan font-family="sans-serif" font-weight="bold">${esc(packetLabel(c.packet, shape))}</tspan>  ${part('src')} -&gt; ${part('dst')}`;
}

export const labelLength = (p: Sighting['packet'], shape: string | undefined): number =>
  textWidth(`${packetLabel(p, shape)}  ${tupleText(p.tuple)}`, MONO, 'mono');

function arrowHead(x: number, y: number, dir: 1 | -1, color: string): string {
  return el('polygon', {
    points: `${num(x)},${num(y)} ${num(x - 7 * dir)},${num(y - 3.5)} ${num(x - 7 * dir)},${num(y + 3.5)}`,
    fill: color,
  });
}

function sightingText(s: Sighting, points: readonly PointSummary[]): string {
  return `frame ${s.packet.frame} at ${points[s.point]?.name ?? '?'} ${utcMicros(s.packet.tsNs)}${s.packet.tunneled ? ' (inside a tunnel)' : ''}`;
}

function packetTitle(t: Trace, s: Sighting, shape: string | undefined): string {
  const p = s.packet;
  const seq = p.seq === null ? '' : ` seq ${p.seq}`;
  const ack = p.ack === null ? '' : ` ack ${p.ack}`;
  return `${t.dir} ${packetLabel(p, shape)}${seq}${ack}`;
}

export function drawCrossing(
  c: Crossing,
  changes: Change[],
  points: readonly PointSummary[],
  laneX: (i: number) => number,
  shape: string | undefined,
  y: number,
  nextLine: (gap: number) => number,
): string {
  const dir = c.trace.dir;
  const color = dir === 'request' ? COLOR.request : COLOR.reply;
  const xs = laneX(c.src.point);
  const xd = laneX(c.dst.point);
  const sign = xd > xs ? 1 : -1;
  const from = points[c.src.point]?.name ?? '?';
  const to = points[c.dst.point]?.name ?? '?';
  const gap = crossGap(c);
  const hop = `${points[gap]?.name ?? '?'}→${points[gap + 1]?.name ?? '?'}`;
  const mid = (xs + xd) / 2;
  const inner: string[] = [
    el(
      'title',
      {},
      esc(
        `${packetTitle(c.trace, c.dst, shape)}: ${sightingText(c.src, points)} → ${sightingText(c.dst, points)}${c.missed.length > 0 ? `; not captured at ${c.missed.map((m) => points[m]?.name ?? '?').join(', ')}` : ''}`,
      ),
    ),
    el('line', {
      x1: num(xs + 4 * sign),
      y1: num(y),
      x2: num(xd - 5 * sign),
      y2: num(y),
      stroke: color,
      'stroke-width': 1.5,
      'stroke-dasharray': dir === 'reply' ? '6 3' : undefined,
    }),
    arrowHead(xd - 4 * sign, y, sign, color),
    ...c.missed.map((m) =>
      el('circle', {
        class: 'missed',
        'data-point': points[m]?.name ?? '?',
        cx: num(laneX(m)),
        cy: num(y),
        r: 4,
        fill: '#ffffff',
        stroke: color,
      }),
    ),
    `<text${attrs({ x: num(mid), y: num(y - 7), 'text-anchor': 'middle', 'font-family': 'monospace', 'font-size': MONO, fill: color })}>${labelParts({ packet: c.dst.packet, changed: changes.length > 0 ? changes : changesOf(c.src.packet.tuple, c.dst.packet.tuple) }, shape)}</text>`,
  ];
  const out = [
    el('g', { class: `arrow ${dir}`, 'data-from': from, 'data-to': to, 'data-hop': hop }, inner),
  ];
  for (const ch of changes) {
    const ly = nextLine(gap);
    const w = textWidth(ch.text, MONO, 'mono') + 8;
    out.push(
      el('g', { class: 'changed', 'data-hop': hop, 'data-field': ch.field, 'data-dir': dir }, [
        el('rect', {
          x: num(mid - w / 2),
          y: num(ly - 10),
          width: num(w),
          height: 13,
          rx: 2,
          fill: COLOR.changedBg,
        }),
        el(
          'text',
          {
            x: num(mid),
            y: num(ly),
            'text-anchor': 'middle',
            'font-family': 'monospace',
            'font-size': MONO,
            'font-weight': 'bold',
            fill: COLOR.changedText,
          },
          esc(ch.text),
        ),
      ]),
    );
  }
  return out.join('');
}

export function drawStub(
  st: Stub,
  sentences: string[],
  points: readonly PointSummary[],
  laneX: (i: number) => number,
  S: number,
  y: number,
  shape: string | undefined,
  nextLine: (gap: number) => number,
): string {
  const dir = st.trace.dir;
  const color = dir === 'request' ? COLOR.request : COLOR.reply;
  const x = laneX(st.at.point);
  // The side of the lane the stub lies on: requests come from the left and go on to the right.
  const sign = (dir === 'request') === (st.side === 'out') ? 1 : -1;
  // A labelled stub that ends in a mark reaches past its label, so the mark does not cover it.
  const reach =
    st.labelled && st.side === 'out'
      ? Math.min(S - 24, Math.max(S * 0.38, labelLength(st.at.packet, shape) + 20))
      : S * 0.38;
  const far = x + sign * reach;
  const at = points[st.at.point]?.name ?? '?';
  const why =
    st.side === 'out'
      ? ''
      : st.end === 'proxy'
        ? '; a connection of the proxy'
        : '; not captured before this point';
  const dash =
    dir === 'reply' ? '6 3' : st.side === 'in' && st.end === 'unseen' ? '2 3' : undefined;
  const inner: string[] = [
    el(
      'title',
      {},
      esc(`${packetTitle(st.trace, st.at, shape)}: ${sightingText(st.at, points)}${why}`),
    ),
    el('line', {
      x1: num(far),
      y1: num(y),
      x2: num(x + sign * (st.side === 'in' ? 9 : 4)),
      y2: num(y),
      stroke: color,
      'stroke-width': 1.5,
      'stroke-dasharray': dash,
    }),
  ];
  if (st.side === 'in') inner.push(arrowHead(x + sign * 4, y, sign > 0 ? -1 : 1, color));
  if (st.end === 'proxy') inner.push(diamond(far, y, color));
  if (st.labelled)
    inner.push(
      `<text${attrs({ x: num(x + sign * 8), y: num(y - 7), 'text-anchor': sign > 0 ? 'start' : 'end', 'font-family': 'monospace', 'font-size': MONO, fill: color })}>${labelParts({ packet: st.at.packet, changed: [] }, shape)}</text>`,
    );
  const out = [
    el(
      'g',
      { class: `stub ${dir}`, 'data-point': at, 'data-side': st.side, 'data-end': st.end },
      inner,
    ),
  ];
  if (st.side === 'out' && (st.end === 'stop' || st.end === 'no-capture'))
    out.push(
      el('g', { class: 'stop', 'data-point': at, 'data-dir': dir }, [
        el('title', {}, esc(`${dir} not seen past ${at}`)),
        el('line', {
          x1: num(far - 4),
          y1: num(y - 5),
          x2: num(far + 4),
          y2: num(y + 5),
          stroke: COLOR.stop,
          'stroke-width': 2,
        }),
        el('line', {
          x1: num(far - 4),
          y1: num(y + 5),
          x2: num(far + 4),
          y2: num(y - 5),
          stroke: COLOR.stop,
          'stroke-width': 2,
        }),
      ]),
    );
  const gap = stubGap(st);
  for (const s of sentences) {
    out.push(
      el(
        'text',
        {
          class: st.end === 'proxy' ? 'proxy-note' : 'stop-note',
          'data-point': at,
          x: num(x + sign * 8),
          y: num(nextLine(gap)),
          'text-anchor': sign > 0 ? 'start' : 'end',
          'font-size': 10,
          'font-weight': 'bold',
          fill: st.end === 'proxy' ? COLOR.muted : COLOR.stop,
        },
        esc(s),
      ),
    );
  }
  return out.join('');
}

function diamond(x: number, y: number, color: string): string {
  return el('polygon', {
    class: 'proxy-end',
    points: `${num(x)},${num(y - 5)} ${num(x + 5)},${num(y)} ${num(x)},${num(y + 5)} ${num(x - 5)},${num(y)}`,
    fill: color,
  });
}

/** A packet seen at the only point: a dot on its lane. */
export function drawLone(
  t: Trace,
  laneX: (i: number) => number,
  y: number,
  shape: string | undefined,
  names: readonly string[],
): string {
  const s = t.sightings[0];
  const x = laneX(s.point);
  const color = t.dir === 'request' ? COLOR.request : COLOR.reply;
  return el('g', { class: `seen ${t.dir}`, 'data-point': names[s.point] ?? '?' }, [
    el('circle', { cx: num(x), cy: num(y), r: 4, fill: color }),
    `<text${attrs({ x: num(x + 8), y: num(y - 7), 'font-family': 'monospace', 'font-size': MONO, fill: color })}>${labelParts({ packet: s.packet, changed: [] }, shape)}</text>`,
  ]);
}

/** One band of notes: each note wrapped under its hop (or lane), stacked; returns the next y. */
export function noteBand(
  parts: string[],
  placed: readonly PlacedNote[],
  kind: 'hop' | 'lane',
  n: number,
  laneX: (i: number) => number,
  S: number,
  y0: number,
  names: readonly string[],
): number {
  const width = S - 28;
  const max = charsIn(width, 10);
  let bottom = y0;
  for (let i = 0; i < n; i++) {
    const mine = placed.filter((p) =>
      kind === 'hop' ? 'hop' in p.at && p.at.hop === i : 'lane' in p.at && p.at.lane === i,
    );
    if (mine.length === 0) continue;
    const cx = kind === 'hop' ? laneX(i) + S / 2 : laneX(i);
    let y = y0;
    for (const pn of mine) {
      const lines = wrapText(`• ${pn.text}`, max);
      const texts = lines.map((l) => {
        y += 13;
        return el(
          'text',
          {
            x: num(cx - width / 2),
            y: num(y),
            'font-size': 10,
            fill: pn.kind === 'conntrack' ? COLOR.request : COLOR.text,
          },
          esc(l),
        );
      });
      parts.push(
        el(
          'g',
          {
            class: `note ${pn.kind}`,
            'data-hop': kind === 'hop' ? `${names[i] ?? ''}→${names[i + 1] ?? ''}` : undefined,
            'data-point': kind === 'lane' ? (names[i] ?? '') : undefined,
          },
          texts,
        ),
      );
      y += 3;
    }
    bottom = Math.max(bottom, y);
  }
  return bottom === y0 ? y0 : bottom + 8;
}

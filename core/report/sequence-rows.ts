/**
 * The model of the sequence picture: for each drawn packet (a trace), the hops it crossed between
 * lanes, the stubs where it came from or went to nowhere captured (the proxy, a point that did
 * not capture it, a stop), the fields a hop rewrote, and the sentence that says where it stopped.
 * Pure; sequence-draw.ts turns it into SVG.
 */
import { hostPort } from '../../common/endpoint';
import type { Endpoint } from '../correlate/correlate';
import type { PointSummary } from './analysis-result';
import type { Sighting, Trace } from './sequence-traces';

/** The height of a line of text under an arrow. */
export const LINE = 14;

/** One drawn packet crossing: from the lane it left to the lane it reached. */
export interface Crossing {
  trace: Trace;
  src: Sighting;
  dst: Sighting;
  /** Points in between that did not capture it. */
  missed: number[];
}

export type StubEnd = 'stop' | 'proxy' | 'no-capture' | 'unseen';

/** A packet seen entering a lane from nowhere captured, or leaving one to nowhere captured. */
export interface Stub {
  trace: Trace;
  at: Sighting;
  side: 'in' | 'out';
  end: StubEnd;
  labelled: boolean;
}

export interface Change {
  field: 'src' | 'dst';
  text: string;
}

export interface Row {
  trace: Trace;
  crossings: Crossing[];
  stubs: Stub[];
  /** Highlights per crossing (only the first crossing of a hop, direction and field gets one). */
  changes: Map<Crossing, Change[]>;
  /** The stop sentence under a stub, per stub (only the first stop of a lane and direction). */
  stopNotes: Map<Stub, string[]>;
  height: number;
}

export const fieldText = (e: Endpoint, f: 'src' | 'dst'): string =>
  f === 'src' ? hostPort(e.src, e.sport) : hostPort(e.dst, e.dport);

export function changesOf(a: Endpoint, b: Endpoint): Change[] {
  const out: Change[] = [];
  for (const f of ['src', 'dst'] as const) {
    const before = fieldText(a, f);
    const after = fieldText(b, f);
    if (before !== after) out.push({ field: f, text: `${f} ${before} → ${after}` });
  }
  return out;
}

/** The crossings and stubs of one trace (see the file comment for the directions). */
function shapeTrace(
  trace: Trace,
  points: readonly PointSummary[],
): Omit<Row, 'changes' | 'stopNotes' | 'height'> {
  const s = trace.sightings;
  const crossings: Crossing[] = [];
  for (let k = 0; k + 1 < s.length; k++) {
    const left = s[k];
    const right = s[k + 1];
    if (left === undefined || right === undefined) continue;
    const missed: number[] = [];
    for (let m = left.point + 1; m < right.point; m++) missed.push(m);
    crossings.push(
      trace.dir === 'request'
        ? { trace, src: left, dst: right, missed }
        : { trace, src: right, dst: left, missed },
    );
  }
  const first = s[0];
  const last = s[s.length - 1] ?? first;
  const n = points.length;
  const endAt = (i: number, beside: number): StubEnd => {
    const here = points[i];
    const there = points[beside];
    if (here === undefined || there === undefined) return 'stop';
    if (here.proxied !== there.proxied) return 'proxy';
    return there.status === 'no-capture' ? 'no-capture' : 'stop';
  };
  const startAt = (i: number, beside: number): StubEnd =>
    points[i]?.proxied !== points[beside]?.proxied ? 'proxy' : 'unseen';
  const stubs: Stub[] = [];
  const lone = crossings.length === 0;
  // Where it came from: requests start at the first point, replies at the last.
  if (trace.dir === 'request' && first.point > 0)
    stubs.push({
      trace,
      at: first,
      side: 'in',
      end: startAt(first.point, first.point - 1),
      labelled: true,
    });
  if (trace.dir === 'reply' && last.point < n - 1)
    stubs.push({
      trace,
      at: last,
      side: 'in',
      end: startAt(last.point, last.point + 1),
      labelled: true,
    });
  // Where it went: past the last point it reached, if that is not the end of its way.
  if (trace.dir === 'request' && last.point < n - 1)
    stubs.push({
      trace,
      at: last,
      side: 'out',
      end: endAt(last.point, last.point + 1),
      labelled: lone && first.point === 0,
    });
  if (trace.dir === 'reply' && first.point > 0)
    stubs.push({
      trace,
      at: first,
      side: 'out',
      end: endAt(first.point, first.point - 1),
      labelled: lone && last.point === n - 1,
    });
  return { trace, crossings, stubs };
}

/** The gap a stub occupies: between lanes i and i+1 (index i). */
export function stubGap(st: Stub): number {
  const toRight = (st.trace.dir === 'request') === (st.side === 'out');
  return toRight ? st.at.point : st.at.point - 1;
}

/** The gap of a crossing: the lower lane index of its span. */
export const crossGap = (c: Crossing): number => Math.min(c.src.point, c.dst.point);

function stopSentence(st: Stub, points: readonly PointSummary[]): string | null {
  if (st.side !== 'out') return null;
  const here = points[st.at.point]?.name ?? '?';
  const nextIdx = st.trace.dir === 'request' ? st.at.point + 1 : st.at.point - 1;
  const next = points[nextIdx]?.name ?? '?';
  if (st.end === 'stop')
    return st.trace.dir === 'request'
      ? `request not seen at ${next}`
      : `no reply seen past ${here}`;
  if (st.end === 'no-capture') return `${next} captured nothing`;
  return st.trace.dir === 'request' ? 'to the proxy' : 'to the proxy (its own connection)';
}

/**
 * The rows of the picture, one per drawn packet: its crossings and stubs, the highlights (only
 * the first crossing of a hop, direction and field gets one) and stop sentences (the first stop
 * at a lane, per direction), and the row's height.
 */
export function buildRows(shown: readonly Trace[], points: readonly PointSummary[]): Row[] {
  const highlighted = new Set<string>();
  const stopped = new Set<string>();
  return shown.map((trace) => {
    const shaped = shapeTrace(trace, points);
    const changes = new Map<Crossing, Change[]>();
    for (const c of shaped.crossings) {
      const fresh = changesOf(c.src.packet.tuple, c.dst.packet.tuple).filter((ch) => {
        const k = `${crossGap(c)}|${trace.dir}|${ch.field}`;
        if (highlighted.has(k)) return false;
        highlighted.add(k);
        return true;
      });
      if (fresh.length > 0) changes.set(c, fresh);
    }
    const stopNotes = new Map<Stub, string[]>();
    for (const st of shaped.stubs) {
      const sentence = stopSentence(st, points);
      const k = `${st.at.point}|${trace.dir}|${st.end}`;
      if (sentence === null || stopped.has(k)) continue;
      stopped.add(k);
      stopNotes.set(st, [sentence]);
    }
    const perGap = new Map<number, number>();
    for (const [c, chs] of changes)
      perGap.set(crossGap(c), (perGap.get(crossGap(c)) ?? 0) + chs.length);
    for (const [st, lines] of stopNotes)
      perGap.set(stubGap(st), (perGap.get(stubGap(st)) ?? 0) + lines.length);
    const extra = Math.max(0, ...perGap.values());
    return { ...shaped, changes, stopNotes, height: 30 + extra * LINE };
  });
}

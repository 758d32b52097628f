/**
 * Where a note goes in the sequence picture: next to the hop it concerns (between two lanes),
 * under the point it concerns (a lane), or in the footer. Conntrack entries are placed by their
 * tuples — an entry whose original tuple is what one point saw and whose reply tuple, reversed,
 * is what the next point saw recorded the translation of that hop — else by the namespace role
 * that read them (the VPN pod's own NAT is the hop into the egress point; the nodes' NAT is the
 * hop into the backend), else in the footer. Pure.
 */
import type { ConntrackEntry } from '../../common/wire';
import { entryText } from '../attribute/conntrack-evidence';
import type { Endpoint } from '../correlate/correlate';
import type { AnalysisResult } from './analysis-result';

/** A note for the picture: a doctor finding, a remark; `hop` or `point` say what it concerns. */
export interface DiagramNote {
  /** The point (lane) it concerns. */
  point?: string | undefined;
  /** The hop it concerns, in path order (`from` before `to`). */
  hop?: { from: string; to: string } | undefined;
  text: string;
  /** A class for the note (`finding`, `conntrack`; default `finding`). */
  kind?: string | undefined;
}

/** A note with its place: `hop` i lies between lanes i and i+1; `lane` i under lane i. */
export interface PlacedNote {
  at: { hop: number } | { lane: number } | { footer: true };
  text: string;
  kind: string;
  /** The hop or point as named in the data (for the note's data attributes). */
  hop?: [string, string];
  point?: string;
}

const same = (a: Endpoint | null, b: Endpoint): boolean =>
  a !== null && a.src === b.src && a.sport === b.sport && a.dst === b.dst && a.dport === b.dport;

/** The hop whose translation a conntrack entry recorded, as an index (between i and i+1), or null. */
export function conntrackHop(
  e: ConntrackEntry,
  points: AnalysisResult['points'],
  egressName = 'egress',
): number | null {
  const replyReversed = {
    src: e.reply.dst,
    sport: e.reply.dport,
    dst: e.reply.src,
    dport: e.reply.sport,
  };
  for (let i = 0; i + 1 < points.length; i++) {
    const a = points[i]?.observed ?? null;
    const b = points[i + 1]?.observed ?? null;
    if (a === null || b === null || same(a, b)) continue;
    if (same(a, e.orig) && same(b, replyReversed)) return i;
  }
  if (!e.snat && !e.dnat) return null;
  if (points.length < 2) return null;
  if (e.name === 'vpn') {
    const eg = points.findIndex((p) => p.name === egressName);
    return eg > 0 ? eg - 1 : null;
  }
  if (e.name === 'vpn-node' || e.name === 'backend-node') return points.length - 2;
  return null;
}

/** Every note of the picture with its place: the verdict's conntrack entries, then `notes`. */
export function placeNotes(
  result: Pick<AnalysisResult, 'points' | 'verdict'>,
  notes: readonly DiagramNote[],
): PlacedNote[] {
  const names = result.points.map((p) => p.name);
  const out: PlacedNote[] = [];
  const ct = result.verdict.conntrack;
  if (ct !== undefined) {
    out.push({
      at: { footer: true },
      text: `conntrack ${ct.status}: ${ct.detail}`,
      kind: 'conntrack',
    });
    for (const e of ct.entries) {
      const hop = conntrackHop(e, result.points);
      const text = `conntrack ${entryText(e)}${e.state === '' ? '' : ` (${e.state})`}`;
      const a = hop === null ? undefined : names[hop];
      const b = hop === null ? undefined : names[hop + 1];
      out.push(
        hop === null || a === undefined || b === undefined
          ? { at: { footer: true }, text, kind: 'conntrack' }
          : { at: { hop }, text, kind: 'conntrack', hop: [a, b] },
      );
    }
  }
  for (const n of notes) {
    const kind = n.kind ?? 'finding';
    if (n.hop !== undefined) {
      const i = names.indexOf(n.hop.from);
      if (i >= 0 && names[i + 1] === n.hop.to) {
        out.push({ at: { hop: i }, text: n.text, kind, hop: [n.hop.from, n.hop.to] });
        continue;
      }
      out.push({ at: { footer: true }, text: `${n.hop.from} → ${n.hop.to}: ${n.text}`, kind });
      continue;
    }
    if (n.point !== undefined) {
      const i = names.indexOf(n.point);
      out.push(
        i >= 0
          ? { at: { lane: i }, text: n.text, kind, point: n.point }
          : { at: { footer: true }, text: `${n.point}: ${n.text}`, kind },
      );
      continue;
    }
    out.push({ at: { footer: true }, text: n.text, kind });
  }
  return out;
}

/**
 * Doctor's findings placed on the sequence picture, next to what they concern: a masquerade rule on
 * the VPN pod's node at the hop out of it (where the source changes), a return route or rp_filter on
 * the backend's node at the backend's lane, one on the VPN node at its lane; anything else below
 * the picture. A point's node, when known, decides; else the finding's namespace role (doctor names
 * it `vpn-node (…)`, `backend-node (…)`). Only errors and warnings. Pure.
 */
import type { Finding } from '../doctor/checks';
import type { PointSummary } from './analysis-result';
import type { DiagramNote } from './sequence-svg';

function pointIndex(points: readonly PointSummary[], f: Finding): number | null {
  for (let i = points.length - 1; i >= 0; i--) if (points[i]?.node === f.node) return i;
  const role = f.namespace.split(' ')[0] ?? '';
  const last = points.length - 1;
  if (/backend/.test(role)) return last >= 0 ? last : null;
  if (/vpn/.test(role)) return last >= 1 ? last - 1 : null;
  return null;
}

export function findingNotes(
  points: readonly PointSummary[],
  findings: readonly Finding[],
): DiagramNote[] {
  const notes: DiagramNote[] = [];
  for (const f of findings) {
    if (f.severity !== 'error' && f.severity !== 'warning') continue;
    const text = `doctor ${f.check} on ${f.node} (${f.severity}): ${f.detail}`;
    const i = pointIndex(points, f);
    const here = i === null ? undefined : points[i];
    const next = i === null ? undefined : points[i + 1];
    if (here === undefined) notes.push({ text });
    else if (f.check === 'masquerade' && next !== undefined)
      notes.push({ hop: { from: here.name, to: next.name }, text });
    else notes.push({ point: here.name, text });
  }
  return notes;
}

/**
 * A session.json read back from the data directory, checked field by field before the collector
 * trusts it: a file damaged on disk, half-written by an older version or edited by hand is
 * refused with the reason (and quarantined by the store), never a TypeError at start-up.
 */
import { parseCidr } from '../common/cidr';
import type { PointRecord, SessionState } from './session';

const SESSION_STATES: readonly SessionState[] = [
  'arming',
  'capturing',
  'resolved',
  'timeout',
  'cancelled',
  'failed',
];
const POINT_STATES: readonly PointRecord['state'][] = [
  'pending',
  'arming',
  'capturing',
  'stopped',
  'failed',
];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isTime = (v: unknown): v is number => isCount(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isOptStr = (v: unknown): boolean => v === undefined || typeof v === 'string';
const isNullableStr = (v: unknown): boolean => v === null || typeof v === 'string';

/** Why a point record is not one, or null. */
function pointProblem(p: unknown, i: number): string | null {
  if (!isObj(p)) return `points[${i}] is not an object`;
  const bad = (field: string): string => `points[${i}].${field} is not valid`;
  if (!isStr(p['name'])) return bad('name');
  if (!isNullableStr(p['agentId'])) return bad('agentId');
  if (!isNullableStr(p['node'])) return bad('node');
  if (!isStr(p['target'])) return bad('target');
  if (!isStr(p['iface'])) return bad('iface');
  if (!POINT_STATES.includes(p['state'] as PointRecord['state'])) return bad('state');
  for (const k of ['packets', 'events', 'queueDrops', 'lost']) if (!isCount(p[k])) return bad(k);
  if (p['kernelDrops'] !== null && !isCount(p['kernelDrops'])) return bad('kernelDrops');
  if (typeof p['confirmed'] !== 'boolean') return bad('confirmed');
  if (!isNullableStr(p['netns'])) return bad('netns');
  if (!Array.isArray(p['netnsAddresses']) || !p['netnsAddresses'].every(isStr))
    return bad('netnsAddresses');
  const err = p['error'];
  if (err !== undefined && !(isObj(err) && isStr(err['code']) && isStr(err['message'])))
    return bad('error');
  if (!isOptStr(p['targetNote'])) return bad('targetNote');
  if (p['appliedSeq'] !== undefined && !isCount(p['appliedSeq'])) return bad('appliedSeq');
  if (p['agentLostAtMs'] !== undefined && !isTime(p['agentLostAtMs'])) return bad('agentLostAtMs');
  if (p['unanalysed'] !== undefined && !isCount(p['unanalysed'])) return bad('unanalysed');
  for (const k of ['foldEvents', 'foldedPackets', 'foldFullSent'])
    if (p[k] !== undefined && !isCount(p[k])) return bad(k);
  return null;
}

/** Why a capture spec is not one, or null. */
function specProblem(s: unknown): string | null {
  if (!isObj(s)) return 'spec is not an object';
  const points = s['points'];
  if (!Array.isArray(points) || points.length === 0) return 'spec.points is not a list of points';
  for (const [i, p] of points.entries()) {
    if (!isObj(p) || !isStr(p['name']) || !isStr(p['target']) || !isStr(p['iface']))
      return `spec.points[${i}] is not {name, target, iface}`;
    if (!isOptStr(p['filter']) || !isOptStr(p['node'])) return `spec.points[${i}] is not valid`;
  }
  if (!isOptStr(s['client']) || !isOptStr(s['dst'])) return 'spec.client/dst is not valid';
  if (s['dport'] !== undefined && !isCount(s['dport'])) return 'spec.dport is not valid';
  if (!isCount(s['timeoutMs']) || !isCount(s['settleMs'])) return 'spec timeouts are not valid';
  if (typeof s['stopOnFirstMatch'] !== 'boolean') return 'spec.stopOnFirstMatch is not valid';
  if (s['evidencePayload'] !== undefined && typeof s['evidencePayload'] !== 'boolean')
    return 'spec.evidencePayload is not valid';
  if (s['perPacket'] !== undefined && typeof s['perPacket'] !== 'boolean')
    return 'spec.perPacket is not valid';
  if (s['inventory'] !== undefined && !isObj(s['inventory'])) return 'spec.inventory is not valid';
  const d = s['doctor'];
  if (
    d !== undefined &&
    (!isObj(d) || !isStr(d['tunnelRange']) || parseCidr(d['tunnelRange']) === null)
  )
    return 'spec.doctor is not valid';
  return null;
}

/** Why `raw` (session.json of capture `id`) is not a session record, or null when it is one. */
export function sessionRecordProblem(raw: unknown, id: string): string | null {
  if (!isObj(raw)) return 'not a JSON object';
  if (raw['id'] !== id) return `its id is not ${id}`;
  if (!isTime(raw['createdAtMs']) || !isTime(raw['updatedAtMs'])) return 'its times are not valid';
  if (raw['finishedAtMs'] !== null && !isTime(raw['finishedAtMs']))
    return 'finishedAtMs is not valid';
  if (!SESSION_STATES.includes(raw['state'] as SessionState)) return 'state is not valid';
  const spec = specProblem(raw['spec']);
  if (spec !== null) return spec;
  const points = raw['points'];
  if (!Array.isArray(points)) return 'points is not a list';
  for (const [i, p] of points.entries()) {
    const problem = pointProblem(p, i);
    if (problem !== null) return problem;
  }
  if (raw['verdict'] !== null && !isObj(raw['verdict'])) return 'verdict is not valid';
  if (!isNullableStr(raw['finalReason'])) return 'finalReason is not valid';
  return null;
}

/**
 * What agents.json keeps per agent id (collector/store.ts writes it): the last stored seq and the
 * node the id is bound to. Read record by record: one that is not valid costs that record (named,
 * so the collector logs it), never the file — whose loss would drop every agent's seq and node
 * binding, after which any peer could bind any id to any node again.
 */
import { agentIdProblem, nodeNameProblem } from '../common/agent-names';
import { MAX_SEQ } from '../common/envelope';
import type { CollectorLogger } from './logger';

export interface AgentRecord {
  seq: number;
  /** The node the id was first accepted for ('' in files written before ids were bound). */
  node: string;
  /** When it was last stored (ms): ids unseen for AGENT_RECORD_TTL_MS are dropped at start. */
  seenAt: number;
}

/** agents.json forgets an agent id this long after its last message (its spool is long gone). */
export const AGENT_RECORD_TTL_MS = 7 * 24 * 3600_000;
/**
 * …and keeps at most this many ids (the least recently seen go first). It keeps one id a node (a
 * node's new id drops its earlier ones), so only more nodes than this reach it.
 */
export const AGENT_RECORDS_MAX = 16_384;

const isSeq = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= MAX_SEQ;

/** The record of `id` in agents.json, or why it is not one. */
export function parseAgentRecord(id: string, v: unknown): AgentRecord | string {
  const idBad = agentIdProblem(id);
  if (idBad !== null) return idBad;
  // Files before 0.1.1: a bare number per id.
  if (typeof v === 'number') return isSeq(v) ? { seq: v, node: '', seenAt: 0 } : 'seq is not valid';
  if (typeof v !== 'object' || v === null) return 'not an object';
  const { seq, node, seenAt } = v as Record<string, unknown>;
  if (!isSeq(seq)) return 'seq is not valid';
  if (typeof node !== 'string') return 'node is not a string';
  const nodeBad = node === '' ? null : nodeNameProblem(node);
  if (nodeBad !== null) return nodeBad;
  if (typeof seenAt !== 'number' || !Number.isFinite(seenAt)) return 'seenAt is not valid';
  return { seq, node, seenAt };
}

/**
 * The records of agents.json worth keeping at `nowMs` (the most recently seen first, one a node —
 * a file of an older collector may hold many —, at most AGENT_RECORDS_MAX, none older than the
 * TTL), and the ones dropped as not valid, with why.
 */
export function readAgentRecords(
  file: Record<string, unknown>,
  nowMs: number,
): { kept: [string, AgentRecord][]; invalid: { agentId: string; reason: string }[] } {
  const kept: [string, AgentRecord][] = [];
  const invalid: { agentId: string; reason: string }[] = [];
  for (const [id, v] of Object.entries(file)) {
    const r = parseAgentRecord(id, v);
    if (typeof r === 'string') invalid.push({ agentId: id, reason: r });
    else if (r.seenAt === 0 || nowMs - r.seenAt < AGENT_RECORD_TTL_MS) kept.push([id, r]);
  }
  kept.sort((a, b) => b[1].seenAt - a[1].seenAt);
  const nodes = new Set<string>();
  const newest = kept.filter(([, r]) => {
    if (r.node === '') return true;
    if (nodes.has(r.node)) return false;
    nodes.add(r.node);
    return true;
  });
  return { kept: newest.slice(0, AGENT_RECORDS_MAX), invalid };
}

/** Records named one by one in the log at most; the rest are counted in one line. */
const NAMED_AT_MOST = 20;

/** Logs the records of agents.json dropped at start (STORE_IO), naming each agent id. */
export function logInvalidAgentRecords(
  log: CollectorLogger,
  invalid: readonly { agentId: string; reason: string }[],
): void {
  for (const { agentId, reason } of invalid.slice(0, NAMED_AT_MOST)) {
    const id = agentId.length > 80 ? `${agentId.slice(0, 80)}…` : agentId;
    log.warn(
      { code: 'STORE_IO', agentId: id },
      `agents.json: the record of agent id ${id} is not valid (${reason}); dropped, the other records were loaded`,
    );
  }
  if (invalid.length > NAMED_AT_MOST)
    log.warn(
      { code: 'STORE_IO', count: invalid.length - NAMED_AT_MOST },
      `agents.json: ${invalid.length - NAMED_AT_MOST} more records that are not valid dropped`,
    );
}

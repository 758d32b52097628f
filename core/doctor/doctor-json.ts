/**
 * Doctor's findings read back from the JSON `hoptrace doctor --json` prints (a DoctorResult), for a
 * report that takes them (`hoptrace analyze --doctor FILE`). Pure: the shell reads the file. A
 * value of another shape is refused with the reason, never read as "no findings".
 */
import type { DoctorResult, Finding } from './checks';

const SEVERITIES = new Set(['error', 'warning', 'ok']);
const CHECKS = new Set(['rp-filter', 'return-route', 'masquerade', 'denied-source', 'read']);

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function finding(v: unknown, i: number): Finding | string {
  if (!isRecord(v)) return `findings[${i}] is not an object`;
  for (const k of ['node', 'namespace', 'subject', 'detail', 'fix'])
    if (typeof v[k] !== 'string') return `findings[${i}].${k} is not a string`;
  if (typeof v['severity'] !== 'string' || !SEVERITIES.has(v['severity']))
    return `findings[${i}].severity is not error, warning or ok`;
  if (typeof v['check'] !== 'string' || !CHECKS.has(v['check']))
    return `findings[${i}].check is not one of ${[...CHECKS].join(', ')}`;
  return {
    severity: v['severity'] as Finding['severity'],
    check: v['check'] as Finding['check'],
    node: v['node'] as string,
    namespace: v['namespace'] as string,
    subject: v['subject'] as string,
    detail: v['detail'] as string,
    fix: v['fix'] as string,
  };
}

/** A DoctorResult from parsed JSON, or why it is not one. */
export function parseDoctorJson(v: unknown): { result: DoctorResult } | { error: string } {
  if (!isRecord(v)) return { error: 'the top level is not an object' };
  if (typeof v['tunnelRange'] !== 'string') return { error: 'tunnelRange is not a string' };
  if (typeof v['client'] !== 'string') return { error: 'client is not a string' };
  if (!Array.isArray(v['findings'])) return { error: 'findings is not a list' };
  const findings: Finding[] = [];
  for (const [i, f] of (v['findings'] as unknown[]).entries()) {
    const got = finding(f, i);
    if (typeof got === 'string') return { error: got };
    findings.push(got);
  }
  const count = (s: Finding['severity']): number => findings.filter((f) => f.severity === s).length;
  return {
    result: {
      tunnelRange: v['tunnelRange'],
      client: v['client'],
      findings,
      // Counted again from the findings: the summary is what they say, whatever the file claims.
      summary: { errors: count('error'), warnings: count('warning'), ok: count('ok') },
    },
  };
}

/** The "What to change" section (what-to-change.ts) and doctor's findings as Markdown. */
import type { Finding } from '../doctor/checks';
import type { ChangeQuestion, ChangeStep, DoctorEvidence, WhatToChange } from './what-to-change';
import { mdCode, mdFence, mdLine, mdProse, mdText } from './md-escape';

const ANSWER: Record<ChangeQuestion['answer'], string> = {
  yes: 'yes',
  no: 'no',
  forwarder: 'a forwarder',
  proxy: 'a proxy',
  unknown: 'not known from this capture',
  owner: "only the service's owner can answer",
};

/** A sentence starts with a capital (details are built to be embedded, lower-case). */
const sentence = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

const SEVERITY: Record<Finding['severity'], string> = { error: 'ERROR', warning: 'WARN', ok: 'ok' };

/** One doctor finding as a list item. */
export function findingLine(f: Finding): string {
  // Every field is the doctor file's: set as text or code, never read as Markdown.
  const fix = f.fix === '' ? '' : ` — fix: ${mdCode(f.fix)}`;
  return `**${SEVERITY[f.severity]} ${mdText(f.check)}** on node ${mdText(f.node || '?')} (${mdText(f.namespace || 'no namespace')}): ${mdCode(f.subject)}: ${mdText(f.detail)}${fix}`;
}

function stepLines(n: number, s: ChangeStep): string[] {
  const out = [`${n}. ${mdProse(s.text)}${s.basis === 'guide' ? '' : ` *(from the ${s.basis})*`}`];
  if (s.command !== undefined)
    out.push('', ...mdFence('sh', mdLine(s.command)).map((l) => `   ${l}`), '');
  for (const k of s.knobs ?? []) out.push(`   - ${k.cni}: ${k.knob}`);
  for (const f of s.findings ?? []) out.push(`   - doctor: ${findingLine(f)}`);
  return out;
}

/** The doctor table: every finding doctor gave (they were read), or the plain reason there are none. */
function doctorLines(d: DoctorEvidence, text: string): string[] {
  const out = ['### Doctor', '', `${mdProse(sentence(text))}.`, ''];
  if (d.status !== 'given' || d.result.findings.length === 0) return out;
  out.push('| severity | check | node | namespace | subject | detail | fix |');
  out.push('| --- | --- | --- | --- | --- | --- | --- |');
  for (const f of d.result.findings)
    out.push(
      `| ${[SEVERITY[f.severity], f.check, f.node, f.namespace, f.subject, f.detail, f.fix].map(mdText).join(' | ')} |`,
    );
  out.push('');
  return out;
}

/** Which tunnel range the steps name, and whether it was read or assumed. */
export function tunnelRangeText(w: WhatToChange): string {
  if (w.tunnelRangeSource === 'doctor')
    return `Tunnel range ${w.tunnelRange}: doctor's --tunnel-range`;
  if (!w.tunnelRange.includes('/'))
    return 'Tunnel range: not known (no doctor --tunnel-range, and no client address to take an example from)';
  return `Tunnel range ${w.tunnelRange}: assumed — the client address's ${w.tunnelRange.includes(':') ? '/64' : '/24'}, an example; only the VPN's configuration knows the real range (give it to \`hoptrace doctor --tunnel-range\` and analyze with --doctor)`;
}

/** The section: the three questions in order, preserve mode's steps, SNAT's runbook, doctor. */
export function whatToChangeMarkdown(
  w: WhatToChange,
  doctor: DoctorEvidence,
  hint: string,
): string[] {
  const out = ['## What to change', '', `In short: ${hint}`, '', `${tunnelRangeText(w)}.`, ''];
  out.push(
    "The field guide's three questions, in its order (the first usually settles it; answer them for this workload, not for the cluster):",
    '',
  );
  for (const [i, q] of w.questions.entries()) {
    out.push(
      `### ${i + 1}. ${mdProse(q.question)} — ${ANSWER[q.answer]}`,
      '',
      mdProse(sentence(q.detail)),
      '',
    );
    for (const f of q.findings) out.push(`- doctor: ${findingLine(f)}`);
    if (q.findings.length > 0) out.push('');
  }
  out.push(
    '### Preserve mode: the client address survives every hop',
    '',
    mdProse(w.preserve.applies),
    '',
  );
  for (const [i, s] of w.preserve.steps.entries()) out.push(...stepLines(i + 1, s));
  if (w.preserve.steps.length > 0) out.push('');
  out.push('### SNAT mode: shared attribution, written down', '', mdProse(w.snat.applies), '');
  out.push('For the runbook:', '', `> ${mdProse(w.snat.runbook)}`, '');
  for (const [i, s] of w.snat.steps.entries()) out.push(...stepLines(i + 1, s));
  out.push('');
  out.push(...doctorLines(doctor, w.doctor.text));
  return out;
}

/** RELIABILITY.md from the results of a run (bench/reliability-results.json). */
import type { ReliabilityResults, Row, ScenarioResult } from './types';

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function verdict(r: Row): string {
  if (r.met === null) return '–';
  return r.met ? 'met' : '**not met**';
}

function scenario(s: ScenarioResult): string[] {
  const out = [`## ${s.title}`, ''];
  if (s.skipped !== undefined) return [...out, `Skipped: ${s.skipped}.`, ''];
  if (s.setup !== '') out.push(`${s.setup} (${s.durationS.toFixed(0)} s).`, '');
  if (s.error !== undefined) out.push(`**The scenario failed:** ${s.error}`, '');
  if (s.rows.length > 0) {
    out.push('| measured | figure | target | |', '| --- | --- | --- | --- |');
    for (const r of s.rows)
      out.push(`| ${cell(r.measured)} | ${cell(r.figure)} | ${cell(r.target)} | ${verdict(r)} |`);
    out.push('');
  }
  for (const n of s.notes) out.push(`- ${n}`);
  if (s.notes.length > 0) out.push('');
  return out;
}

function summary(s: ScenarioResult): string {
  if (s.skipped !== undefined) return 'skipped';
  if (s.error !== undefined) return '**failed to run**';
  const judged = s.rows.filter((r) => r.met !== null);
  const missed = judged.filter((r) => r.met === false).length;
  return missed === 0 ? `all ${judged.length} met` : `**${missed} of ${judged.length} not met**`;
}

export function renderReliability(r: ReliabilityResults): string {
  const m = r.machine;
  const lines = [
    '# Reliability: load and fault figures',
    '',
    `Written by \`${r.command}\` (bench/reliability.ts) on ${r.date.slice(0, 10)}, commit ${r.commit}, ` +
      `in ${r.totalS.toFixed(0)} s${r.quick ? ' — **a --quick run: small counts, not the figures of record**' : ''}.`,
    '',
    `Machine: ${m.nproc} × ${m.cpu}, ${m.memGiB} GiB, Linux ${m.kernel}, Node ${m.node}; data directories on ` +
      `${m.dataFs}; load average ${m.loadBefore} before, ${m.loadAfter ?? '?'} after (the cores are shared ` +
      'with other work).',
    '',
    'Rerun (as root: the disk-full and fuzz scenarios mount a small tmpfs): `sudo npm run reliability`; ' +
      '`-- --quick` for the < 60 s smoke run that test/lab/reliability.test.ts runs; ' +
      '`-- --only load,fuzz` for some scenarios; `-- --fuzz-frames N --fuzz-seconds S` for another ' +
      'fuzz size and time cap (1,000,000 frames by default, and a 1,800 s cap that only a collector slower than here reaches); ' +
      '`node dist/bench/reliability.js --render bench/reliability-results.json` re-renders this file.',
    '',
    'How: the real collector (`node dist/cli/main.js collector --listen 127.0.0.1:PORT --data-dir DIR ' +
      '--token-file FILE`) runs as a child process, so SIGKILL is real. Simulated agents ' +
      '(bench/reliability/sim-agent.ts) speak the agent protocol over loopback WebSockets with the ' +
      'shared token: one agent id and node each, hello → helloAck{lastSeq}, seq from 1 up by one, a ' +
      "message kept until acknowledged and resent after a reconnect, the agent spool's overflow policy " +
      '(new batches dropped and counted in Lost). Every event they stream is unique by (node, frame), ' +
      'so reading the data directory back (bench/reliability/readback.ts) counts lost and duplicated ' +
      'events exactly. Nothing leaves loopback; tmpfs mounts are removed at the end.',
    '',
    '| scenario | targets |',
    '| --- | --- |',
    ...r.scenarios.map((s) => `| ${cell(s.title)} | ${summary(s)} |`),
    '',
  ];
  for (const s of r.scenarios) lines.push(...scenario(s));
  return lines.join('\n');
}

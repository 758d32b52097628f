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
  lines.push(...AGENT_BOUNDS);
  return lines.join('\n');
}

/**
 * What an agent takes from its collector, and what it does past each bound: not measured by this
 * run (its agents are simulated), checked by the unit tests named.
 */
const AGENT_BOUNDS = [
  '## The agent against a collector that asks too much',
  '',
  'Not measured by this run (its agents are simulated): bounds of the real agent, each checked by ' +
    "the unit test named, on a fake collector or fake captures. The agent's memory limit is 512 MiB " +
    '(deploy/base/agent.yaml); a capture point costs ~85 MiB (an nsenter and a Node worker ~50 MiB, ' +
    'a 32 MiB ring, a 2 MiB batch) and the agent itself ~60 MiB (BENCHMARKS.md).',
  '',
  '| what the collector sends | bound | past it | test |',
  '| --- | --- | --- | --- |',
  '| captures at once | 4 live (`--max-captures`): ~340 MiB | refused at once, nothing started (`AGENT_BUSY`); the hello says the number, and the collector refuses a capture that needs more of a node before arming it (`API_AGENT_BUSY`; 4 for an agent that does not say) | agent-runtime.test, capture-limit.test |',
  '| finished captures | forgotten once their last status is sent; the last 64 statuses answer a resent command | – (200,000 failed captures were all kept, +246 MiB) | agent-runtime.test |',
  '| doctor and conntrack requests | 2 read at once (≤ 32 MiB of child output each), 8 waiting | answered at once, each namespace unread (`AGENT_BUSY`) | agent-requests.test |',
  '| frames requests | 8 at once (a reply ≤ 4 MiB) | every frame missing (`AGENT_BUSY`) | agent-requests.test |',
  "| one message | 16 MiB, the collector's own bound (ws's default: 100 MiB) | link closed and reported (`WIRE_TOO_LARGE`), reconnected with backoff | link-faults.test |",
  "| a command's fields | names 256, a target 4,096, an interface 64, a filter 16,384 characters; 16 namespaces, 16 routeTo each, 256 tuples | refused whole (`WIRE_MALFORMED`), answered at once when its id can be read: a capture's point fails with the reason, a doctor request or conntrack query is answered refused (`DOCTOR_BAD_REQUEST`: a 400 from `POST /v1/doctor`), a frames request names no frame | envelope.test, link-faults.test, request-refusal.test |",
  "| a body kind the agent does not know | – | ignored, logged once per kind (`WIRE_UNKNOWN_KIND`), counted; the link stays — as the collector does with a newer agent's body kind (counted on its record, acknowledged) | link-faults.test, hub.test |",
  '| an undecodable message | – | ignored, counted, reported as `lastError`; the link stays | link-faults.test |',
  '| a collector that drops every connection after helloAck | backoff reset only after 30 s connected | retried ever more slowly (200 ms doubling to 10 s), `lastError` kept | link-faults.test |',
  "| a capture's deadline | past by the agent's clock, or > 7 days ahead | refused (`CAPTURE_BAD_DEADLINE`); a deadline timer looks at the clock at least hourly | agent-runtime.test |",
  "| a path or PID target | a network namespace file in the agent's scope | `TARGET_OUT_OF_SCOPE`, one message whatever the file | netns-resolve.test |",
  '',
];

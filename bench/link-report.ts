/**
 * The whole-agent rows of BENCHMARKS.md §1 (bench/link.ts): every pair, and per scheme the
 * median against the goal of issue 20 ("whole agent ≤ 2× tcpdump").
 */
import {
  linkFigures,
  linkPairs,
  schemeSummary,
  type LinkResult,
  type LinkScheme,
  type LinkTrial,
} from './link';
import { fmt } from './proc';

/** A goal row (bench/report.ts renders them). */
export interface LinkGoal {
  goal: string;
  result: string;
  met: 'met' | 'missed' | 'not measured';
}

function table(head: string[], rows: string[][]): string {
  const line = (c: string[]): string => `| ${c.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

const SCHEME_NAME: Record<LinkScheme, string> = {
  wss: 'wss (TLS, zero mask)',
  ws: 'ws (cleartext, masked)',
};
const x = (v: number): string => `${fmt(v, 2)}×`;
const kpps = (t: LinkTrial): string => `${fmt(t.offered / t.elapsedS / 1000)} k`;

/** The goal row of one scheme, judged on the median of its lossless pairs. */
export function linkGoal(trials: readonly LinkTrial[], scheme: LinkScheme): LinkGoal {
  const s = schemeSummary(trials, scheme);
  const goal = `Whole agent ≤ 2× tcpdump's CPU per packet, link included — over ${scheme}`;
  if (s.median === null)
    return {
      goal,
      result: `no lossless pair (${s.pairs} pairs run)`,
      met: 'not measured',
    };
  const m = s.median;
  return {
    goal,
    result: `median of ${s.lossless} pairs: worker + agent ${fmt(m.wholeNs)} ns vs tcpdump ${fmt(m.tcpdumpNs)} ns per packet = ${x(m.wholeRatio)} (pairs ${x(s.wholeRange[0])}–${x(s.wholeRange[1])}); worker alone ${x(m.workerRatio)}; collector ${fmt(m.collectorNsPerEvent)} ns per event beside it`,
    met: m.wholeRatio <= 2 ? 'met' : 'missed',
  };
}

/** The markdown of the whole-agent rows; pushes one goal row per scheme measured. */
export function linkSection(r: LinkResult, goals: { push(g: LinkGoal): unknown }): string {
  const pairs = linkPairs(r.trials);
  const rows = pairs.map(([td, ag]) => {
    const f = linkFigures(td, ag);
    return [
      String(ag.round),
      SCHEME_NAME[ag.tool as LinkScheme],
      `${kpps(td)} / ${kpps(ag)}`,
      `${fmt(td.delivered)} / ${fmt(ag.delivered)}`,
      fmt(f.tcpdumpNs),
      fmt(f.workerNs),
      fmt(f.agentNs),
      fmt(f.wholeNs),
      f.lossless ? x(f.wholeRatio) : `lossy (${fmt(ag.offered - ag.delivered)} short), left out`,
      fmt(f.collectorNsPerEvent),
      fmt(ag.agentRssMiB),
    ];
  });
  const schemes = [...new Set(pairs.map(([, a]) => a.tool as LinkScheme))];
  for (const s of schemes) goals.push(linkGoal(r.trials, s));
  const summary = schemes.map((s) => {
    const m = schemeSummary(r.trials, s).median;
    return m === null
      ? `- ${SCHEME_NAME[s]}: no lossless pair.`
      : `- ${SCHEME_NAME[s]}: tcpdump ${fmt(m.tcpdumpNs)}, worker ${fmt(m.workerNs)}, agent process ${fmt(m.agentNs)}, whole agent ${fmt(m.wholeNs)} ns per packet (**${x(m.wholeRatio)}** tcpdump); collector ${fmt(m.collectorNsPerEvent)} ns per event.`;
  });
  return `### The whole agent, its link included (issue 20)

The agent the user runs: \`hoptrace agent\` (dist/cli/main.js, a node token file, retention at
its defaults) connected over its CollectorLink to a \`hoptrace collector\` process on 127.0.0.1,
the capture armed through \`POST /v1/captures\` (a point on vrx in the receiver namespace, and an
idle one on its \`lo\`: a capture has at least two points). Each round runs \`tcpdump -w /dev/null\`
and then the agent, per scheme, at the flood's full speed. **whole agent** = the vrx capture
worker + the idle point's worker + the agent process (frames → Envelopes → spool → WebSocket →
TLS/TCP), all threads, from /proc/PID/task/*/schedstat, per event the collector stored; the
**collector** column is the collector process per event it received, decoded and stored. A pair
counts when both delivered everything offered.${
    r.date === undefined
      ? ''
      : ` Measured ${r.date}, load average ${r.loadBefore ?? '?'} before and ${r.loadAfter ?? '?'} after.`
  }

${
  pairs.length === 0
    ? 'No pairs.'
    : table(
        [
          'round',
          'link',
          'offered (tcpdump / agent)',
          'delivered (tcpdump / collector)',
          'tcpdump ns/packet',
          'worker ns/packet',
          'agent process ns/packet',
          'whole agent ns/packet',
          'whole agent vs tcpdump',
          'collector ns/event',
          'agent RSS MiB',
        ],
        rows,
      )
}

Medians over the lossless pairs:

${summary.join('\n')}

${MASKING_NOTE}`;
}

/** The micro-benchmark behind the wss zero mask (not measured by this run; kept with its rows). */
const MASKING_NOTE = `#### Client frame masking (a micro-benchmark, run by hand)

ws 8 masks every client frame; without its optional native \`bufferutil\` the XOR is a JS loop.
64 KiB buffer, 2000 rounds, Node 20.20, this 2-core machine shared with other tests, 3 runs:

| mask path | ns/byte (3 runs) | median |
| --- | --- | --- |
| ws JS loop (no bufferutil) | 2.34, 3.44, 3.05 | 3.05 |
| bufferutil 4.1.0 (native) | 0.072, 0.077, 0.073 | 0.073 |
| zero key (ws skips XOR) | 0 (no pass over data) | 0 |

Over \`wss:\` the link sends an all-zero key (agent/link/frame-mask.ts); ws 8's Sender
(\`skipMasking\`) and Receiver (\`getData\`) both skip the pass. Over cleartext \`ws:\` the random
key of RFC 6455 §5.3 stays, since it protects intermediaries that read the frames. \`bufferutil\`
is not a dependency (it would cut cleartext masking ~40×; ws loads it when present).
`;

/** The pure parts of the whole-agent benchmark (bench/link.ts, link-procs.ts, link-report.ts). */
import t from 'tap';
import {
  linkFigures,
  linkPairs,
  schemeSummary,
  settleMsPerS,
  type LinkTrial,
} from '../../bench/link';
import { ifaceOfWorker, nodeArgsFrom } from '../../bench/link-procs';
import { linkGoal, linkSection, type LinkGoal } from '../../bench/link-report';

function trial(over: Partial<LinkTrial>): LinkTrial {
  return {
    tool: 'tcpdump',
    round: 1,
    sent: 1000,
    elapsedS: 1,
    offered: 1000,
    vethDrops: 0,
    delivered: 1000,
    workerPackets: null,
    reportedDrops: 0,
    linkLost: 0,
    cpuNs: 100_000,
    idleWorkerNs: null,
    agentNs: null,
    collectorNs: null,
    agentRssMiB: null,
    ...over,
  };
}

const agent = (over: Partial<LinkTrial>): LinkTrial =>
  trial({
    tool: 'wss',
    workerPackets: 1000,
    cpuNs: 200_000,
    idleWorkerNs: 10_000,
    agentNs: 590_000,
    collectorNs: 700_000,
    agentRssMiB: 120,
    ...over,
  });

void t.test('figures per packet: whole agent = every worker + the agent process', (t) => {
  const f = linkFigures(trial({}), agent({}));
  t.equal(f.tcpdumpNs, 100);
  t.equal(f.workerNs, 200);
  t.equal(f.agentNs, 590);
  t.equal(f.wholeNs, 800, '200 + 10 (idle point) + 590');
  t.equal(f.wholeRatio, 8);
  t.equal(f.workerRatio, 2);
  t.equal(f.collectorNsPerEvent, 700);
  t.ok(f.lossless);
  t.notOk(linkFigures(trial({}), agent({ delivered: 999 })).lossless, 'one event short is lossy');
  t.notOk(linkFigures(trial({ delivered: 10 }), agent({})).lossless, 'so is a lossy tcpdump');
  t.ok(Number.isNaN(linkFigures(trial({}), agent({ agentNs: null })).wholeNs), 'unknown stays NaN');
  t.end();
});

void t.test('pairs: each agent trial with the tcpdump trial just before it, same round', (t) => {
  const trials = [
    trial({ round: 1 }),
    agent({ round: 1 }),
    trial({ round: 1, cpuNs: 50_000 }),
    agent({ round: 1, tool: 'ws' }),
    agent({ round: 1, tool: 'ws' }), // no tcpdump before it: not a pair
    trial({ round: 1 }),
    agent({ round: 2 }), // another round's: not a pair
  ];
  const pairs = linkPairs(trials);
  t.equal(pairs.length, 2);
  t.equal(pairs[0]?.[1].tool, 'wss');
  t.equal(pairs[1]?.[0].cpuNs, 50_000);
  t.equal(pairs[1]?.[1].tool, 'ws');
  t.end();
});

void t.test('summary: medians over lossless pairs; the goal row says met or missed', (t) => {
  const trials = [
    trial({ round: 1 }),
    agent({ round: 1 }), // 8×
    trial({ round: 2 }),
    agent({ round: 2, agentNs: 90_000 }), // 3×
    trial({ round: 3 }),
    agent({ round: 3, agentNs: 1_790_000 }), // 20×
    trial({ round: 4 }),
    agent({ round: 4, delivered: 10 }), // lossy, left out
  ];
  const s = schemeSummary(trials, 'wss');
  t.equal(s.pairs, 4);
  t.equal(s.lossless, 3);
  t.equal(s.median?.wholeRatio, 8);
  t.same(s.wholeRange, [3, 20]);
  const g = linkGoal(trials, 'wss');
  t.equal(g.met, 'missed');
  t.match(g.result, /8\.00×/);
  t.match(g.result, /collector 700 ns per event/);
  const good = [trial({}), agent({ agentNs: 0, cpuNs: 150_000, idleWorkerNs: 0 })];
  t.equal(linkGoal(good, 'wss').met, 'met', '1.5× is within 2×');
  t.equal(linkGoal(good, 'ws').met, 'not measured', 'no ws pair');
  const goals: LinkGoal[] = [];
  const md = linkSection({ trials }, goals);
  t.equal(goals.length, 1, 'one goal row per scheme measured');
  t.match(md, /lossy \(990 short\), left out/);
  t.match(md, /\*\*8\.00×\*\* tcpdump/);
  t.end();
});

void t.test('a worker is told by the iface of its JSON argument', (t) => {
  const argv = ['node', '/x/worker.js', JSON.stringify({ spec: { iface: 'vrx' }, where: 'ns' })];
  t.equal(ifaceOfWorker(argv.join('\0')), 'vrx');
  t.equal(ifaceOfWorker(['nsenter', '--net=/run/netns/a', '--', 'node'].join('\0')), null);
  t.equal(ifaceOfWorker('node\0{not json'), null);
  t.same(nodeArgsFrom(' --cpu-prof  --cpu-prof-dir=/tmp/p '), [
    '--cpu-prof',
    '--cpu-prof-dir=/tmp/p',
  ]);
  t.same(nodeArgsFrom(undefined), []);
  t.end();
});

void t.test('the budget search: its trials are no pairs, and give goal 3 its row', (t) => {
  const budget = (over: Partial<LinkTrial>): Partial<LinkTrial> => ({
    round: 7,
    elapsedS: 10,
    budgetPercent: 1,
    throttled: { periods: 100, throttled: 12 },
    settleS: 3,
    ...over,
  });
  // tcpdump idle: 0.1 ms/s; the whole agent: 3–4 ms/s.
  const td = (over: Partial<LinkTrial>): LinkTrial =>
    trial(budget({ settleCpuNs: 300_000, ...over }));
  const ag = (over: Partial<LinkTrial>): LinkTrial =>
    agent(budget({ settleCpuNs: 9_000_000, drained: true, ...over }));
  const trials = [
    trial({ round: 1 }),
    agent({ round: 1 }),
    // tcpdump: lossless at 80 k and 120 k asked, loses at 160 k; the agent at 40 k, 60 k and 80 k.
    td({ askedPps: 80_000, offered: 800_000, delivered: 800_000 }),
    ag({ askedPps: 40_000, offered: 400_000, delivered: 400_000, settleCpuNs: 12_000_000 }),
    td({ askedPps: 160_000, offered: 1_600_000, delivered: 1_500_000 }),
    ag({ askedPps: 80_000, offered: 800_000, delivered: 750_000, drained: false }),
    td({ askedPps: 120_000, offered: 1_200_000, delivered: 1_200_000 }),
    ag({ askedPps: 60_000, offered: 600_000, delivered: 600_000 }),
  ];
  t.equal(linkPairs(trials).length, 1, 'budget trials never pair with the rounds');
  t.equal(settleMsPerS(trials[3] ?? trial({})), 4, '12 ms in 3 s');
  t.ok(Number.isNaN(settleMsPerS(trial({}))), 'no settle: NaN');
  const goals: LinkGoal[] = [];
  const md = linkSection({ trials }, goals);
  t.equal(goals.length, 2, 'the scheme row and the budget row');
  const g = goals.find((x) => /zero-loss rate under the same CPU budget/.test(x.goal));
  t.equal(g?.met, 'missed', '60 k of 120 k is 50 %');
  t.match(g?.result ?? '', /the whole agent over wss .*60 k pps \(first loss when 80 k/);
  t.match(g?.result ?? '', /tcpdump 120 k pps \(first loss when 160 k pps were asked\): 50 %/);
  t.match(
    g?.result ?? '',
    /each trial a 3 s settle once capturing, then a 10 s flood under 1\.0 % of one core, drained/,
    'the protocol, in the goal row',
  );
  // 32 MiB holds 174,762 of the 106-byte frames: 29 % of 600,000, 15 % of 1,200,000.
  t.match(g?.result ?? '', /holds 29 % of the agent's highest lossless flood, 15 % of tcpdump's/);
  t.match(md, /Zero loss under the same CPU budget: the whole agent/);
  t.match(md, /it then \*\*settles 3 s\*\* with nothing sent, outside the budget/, 'the settle');
  t.match(md, /\*\*flooded for 10 s\*\*/, 'the flood, from the trials');
  t.match(md, /32 MiB holds 174,762 of\s+these\s+106-byte frames \(a 192-byte slot each/);
  t.match(
    md,
    /over a\s+10 s flood a capture that sustains R pps takes R \+ 17 k pps\s+without loss/,
  );
  t.match(md, /#### 1\.0 % of one core: 1,000 µs per 100 ms period, 10\.0 ms of CPU a second/);
  t.equal(
    g?.goal,
    "Agent: ≥ 95 % of tcpdump's zero-loss rate under the same CPU budget (1.0 % of one core)",
  );
  t.match(
    md,
    /tcpdump was offered 1,200,000 packets \(120 k pps for 10\.0 s\), of which the ring holds 15 %/,
  );
  t.match(md, /the whole agent was offered 600,000 packets \(60 k pps .*holds 29 %/);
  t.match(md, /tcpdump \*\*0\.1 ms\/s\*\* \(0\.1–0\.1 over 3 trials\)/, "tcpdump's idle cost");
  t.match(
    md,
    /the whole agent \(both workers \+ the agent process\) \*\*3\.0 ms\/s\*\* \(3\.0–4\.0 over 3/,
  );
  t.match(md, /against the\s+budget's 10\.0 ms\/s/);
  t.match(md, /12 of 100/, 'throttled periods shown');
  t.match(md, /no: still growing at 20 s/, 'an undrained trial says so');
  t.match(md, /\| tcpdump \| 80 k \|.*\| – \|\n/, "tcpdump's drain gives no answer: not 'yes'");
  t.match(
    md,
    /\| agent \(wss\) \| 80 k \| 80 k \| 800,000 \| 750,000 \| 50,000 \| 0 \| 3\.0 \|/,
    'the settle CPU column',
  );
  t.notMatch(md, /stand-in|both under 1\.0 % of one core/, "no stand-in's search any more");

  const senderOnly: LinkGoal[] = [];
  linkSection(
    { trials: trials.filter((x) => x.tool !== 'tcpdump' || x.delivered >= x.offered) },
    senderOnly,
  );
  t.equal(
    senderOnly.find((x) => /CPU budget/.test(x.goal))?.met,
    'no loss at any rate offered',
    'a tool that never lost was held back by the sender, not its capture',
  );
  t.end();
});

void t.test('two budgets: a goal row and a part each, in the order of their shares', (t) => {
  const at = (percent: number, tool: 'tcpdump' | 'wss', askedPps: number, lost = 0): LinkTrial =>
    trial({
      tool,
      round: 7,
      elapsedS: 10,
      budgetPercent: percent,
      askedPps,
      offered: askedPps * 10,
      delivered: askedPps * 10 - lost,
      settleS: 3,
      settleCpuNs: tool === 'tcpdump' ? 0 : 12_000_000,
      ...(tool === 'tcpdump' ? {} : { drained: true }),
    });
  const trials = [
    at(5, 'tcpdump', 400_000),
    at(5, 'wss', 520_000),
    at(5, 'tcpdump', 480_000, 9),
    at(5, 'wss', 560_000, 9),
    at(1, 'tcpdump', 90_000),
    at(1, 'wss', 50_000),
    at(1, 'tcpdump', 100_000, 9),
    at(1, 'wss', 55_000, 9),
  ];
  const goals: LinkGoal[] = [];
  const md = linkSection({ trials }, goals);
  const rows = goals.filter((g) => /CPU budget/.test(g.goal));
  t.same(
    rows.map((g) => [g.goal.replace(/.*\(/, '('), g.met]),
    [
      ['(1.0 % of one core)', 'missed'],
      ['(5.0 % of one core)', 'met'],
    ],
    'one row a budget: 50 k of 90 k missed, 520 k of 400 k met',
  );
  t.match(rows[1]?.result ?? '', /520 k pps .*tcpdump 400 k pps .*: 130 %/);
  const one = md.indexOf('#### 1.0 % of one core');
  const five = md.indexOf('#### 5.0 % of one core');
  t.ok(one > 0 && five > one, 'the smaller share first');
  t.match(md, /a\s+share of one core \(bench\/cgroup-cpu\.ts\):\s+1\.0 % and 5\.0 %/);
  t.end();
});

void t.test('a budget search of a run before the settle renders without one', (t) => {
  const old = (over: Partial<LinkTrial>): LinkTrial =>
    trial({ round: 7, elapsedS: 2, budgetPercent: 1, askedPps: 80_000, ...over });
  const md = linkSection(
    {
      trials: [
        old({ offered: 160_000, delivered: 160_000 }),
        old({ tool: 'wss', offered: 160_000, delivered: 100_000 }),
      ],
    },
    [],
  );
  t.match(md, /then, with no settle \(this run measured none\), it is moved into the/);
  t.match(md, /\*\*flooded for 2 s\*\*/);
  t.match(md, /the whole agent lost packets at every rate/);
  t.match(md, /tcpdump not measured; the whole agent .* not measured/, 'no idle cost');
  t.match(md, /\| tcpdump \| 80 k \| 80 k \| 160,000 \| 160,000 \| 0 \| 0 \| – \|/);
  t.end();
});

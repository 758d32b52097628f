/** The pure parts of the whole-agent benchmark (bench/link.ts, link-procs.ts, link-report.ts). */
import t from 'tap';
import { linkFigures, linkPairs, schemeSummary, type LinkTrial } from '../../bench/link';
import { ifaceOfWorker, nodeArgsFrom } from '../../bench/link-procs';
import { hasLinkShare, linkGoal, linkSection, type LinkGoal } from '../../bench/link-report';

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
    elapsedS: 2,
    budgetPercent: 1,
    throttled: { periods: 30, throttled: 12 },
    ...over,
  });
  const trials = [
    trial({ round: 1 }),
    agent({ round: 1 }),
    // tcpdump: lossless at 80 k and 120 k asked, loses at 160 k.
    trial(budget({ askedPps: 80_000, offered: 160_000, delivered: 160_000 })),
    agent(budget({ askedPps: 40_000, offered: 80_000, delivered: 80_000, drained: true })),
    trial(budget({ askedPps: 160_000, offered: 320_000, delivered: 300_000 })),
    agent(budget({ askedPps: 80_000, offered: 160_000, delivered: 150_000, drained: false })),
    trial(budget({ askedPps: 120_000, offered: 240_000, delivered: 240_000 })),
    agent(budget({ askedPps: 60_000, offered: 120_000, delivered: 120_000, drained: true })),
  ];
  t.equal(linkPairs(trials).length, 1, 'budget trials never pair with the rounds');
  t.ok(hasLinkShare({ trials }));
  t.notOk(hasLinkShare({ trials: trials.slice(0, 2) }));
  const goals: LinkGoal[] = [];
  const md = linkSection({ trials }, goals);
  t.equal(goals.length, 2, 'the scheme row and the budget row');
  const g = goals.find((x) => /zero-loss rate under the same CPU budget/.test(x.goal));
  t.equal(g?.met, 'missed', '60 k of 120 k is 50 %');
  t.match(g?.result ?? '', /the whole agent over wss .*60 k pps \(first loss when 80 k/);
  t.match(g?.result ?? '', /tcpdump 120 k pps \(first loss when 160 k pps were asked\): 50 %/);
  t.match(md, /Zero loss under the same CPU budget: the whole agent/);
  t.match(md, /12 of 30/, 'throttled periods shown');
  t.match(md, /no: still growing at 20 s/, 'an undrained trial says so');
  t.match(md, /\| tcpdump \| 80 k \|.*\| – \|\n/, "tcpdump's drain gives no answer: not 'yes'");
  t.match(md, /\| agent \(wss\) \| 80 k \| 80 k \| 160,000 \| 150,000 \| 10,000 \|/);

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

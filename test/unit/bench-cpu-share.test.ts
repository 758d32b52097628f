/**
 * The zero-loss search under a CPU budget (bench/cpu-share.ts) and its report
 * (bench/report-share.ts): the ladder until the first loss, the bisection after it, the limit
 * found, and a goal row that never calls a sender limit a capture result.
 */
import t from 'tap';
import type { CaptureTrial } from '../../bench/capture';
import { nextShareRate, shareLimit, type ShareStep } from '../../bench/cpu-share';
import { shareSection, type ShareGoal } from '../../bench/report-share';

const search = { ladder: [10_000, 20_000, 40_000, 80_000], refine: 2 };
const step = (askedPps: number, lossless: boolean): ShareStep => ({
  askedPps,
  offeredPps: askedPps * 0.99,
  lossless,
});

void t.test('the ladder climbs while nothing is lost, then bisects, then stops', (t) => {
  t.equal(nextShareRate([], search), 10_000);
  t.equal(nextShareRate([step(10_000, true)], search), 20_000);
  const lost = [step(10_000, true), step(20_000, true), step(40_000, false)];
  t.equal(nextShareRate(lost, search), 30_000, 'between the last lossless and the first lossy');
  t.equal(nextShareRate([...lost, step(30_000, true)], search), 35_000);
  t.equal(
    nextShareRate([...lost, step(30_000, true), step(35_000, false)], search),
    null,
    'refine steps used up',
  );
  t.equal(nextShareRate([step(10_000, false)], search), 5000, 'the first step lost: below it');
  const all = search.ladder.map((r) => step(r, true));
  t.equal(nextShareRate(all, search), null, 'no loss anywhere: the ladder ends');
  t.equal(
    nextShareRate([step(10_000, true), step(11_000, false)], { ladder: [], refine: 3 }),
    null,
    'no room left between the two at 1 k pps resolution',
  );
  t.end();
});

void t.test('the limit: the highest offered rate below the first loss', (t) => {
  const l = shareLimit([
    step(10_000, true),
    step(40_000, false),
    step(25_000, true),
    step(30_000, false),
  ]);
  t.equal(l.firstLossyAskedPps, 30_000);
  t.equal(l.losslessPps, 25_000 * 0.99);
  t.same(shareLimit([step(10_000, true)]), { losslessPps: 9900, firstLossyAskedPps: null });
  t.same(shareLimit([step(10_000, false)]), { losslessPps: 0, firstLossyAskedPps: 10_000 });
  t.end();
});

const trial = (tool: 'tcpdump' | 'native', rate: number, loss: number): CaptureTrial => ({
  tool,
  filter: 'none',
  ratePps: rate,
  sent: rate * 2,
  trickleSent: 0,
  elapsedS: 2,
  offered: rate * 2,
  vethDrops: 0,
  delivered: rate * 2 - loss,
  expected: rate * 2,
  loss,
  reportedDrops: loss,
  queueDrops: 0,
  cpuNs: rate * 2 * 100,
  parentCpuNs: tool === 'native' ? rate * 2 * 300 : null,
  bufferBytes: 32 * 1024 * 1024,
  budgetPercent: 2,
  throttled: { periods: 20, throttled: 20 },
});

void t.test('report: limits of both tools, the goal judged only when both were limited', (t) => {
  const goals: ShareGoal[] = [];
  const add = (into: ShareGoal[]) => (g: ShareGoal) => into.push(g);
  const md = shareSection(
    [
      trial('tcpdump', 80_000, 0),
      trial('native', 20_000, 0),
      trial('tcpdump', 160_000, 500),
      trial('native', 40_000, 900),
    ],
    add(goals),
  );
  t.match(md, /both under 2\.0 % of one core/);
  t.match(md, /20 of 20/, 'throttled periods shown');
  t.equal(goals.length, 1);
  t.equal(goals[0]?.met, 'missed', '20 k of 80 k is 25 %');
  t.match(goals[0]?.result ?? '', /25 %/);

  const sender: ShareGoal[] = [];
  shareSection([trial('tcpdump', 80_000, 0), trial('native', 40_000, 900)], add(sender));
  t.equal(sender[0]?.met, 'no loss at any rate offered', 'tcpdump never lost: no capture result');
  t.match(sender[0]?.result ?? '', /the sender's limit, not the capture's/);

  const withLink = shareSection([trial('tcpdump', 80_000, 0), trial('native', 40_000, 900)], null);
  t.match(withLink, /the goal row is the whole agent's/, 'the stand-in gives no goal row then');

  const none: ShareGoal[] = [];
  const unbudgeted = trial('tcpdump', 1, 0);
  delete unbudgeted.budgetPercent;
  t.equal(shareSection([unbudgeted], add(none)), '');
  t.equal(none.length, 0, 'no budget trials, no goal row');
  t.end();
});

/**
 * The zero-loss search under a CPU budget (bench/cpu-share.ts) and its goal row
 * (bench/report-share.ts): the ladder until the first loss, the bisection after it, the limit
 * found, what the ring holds, and a goal row that never calls a sender limit a capture result.
 * The whole agent's section is tested in bench-link.test.ts.
 */
import t from 'tap';
import { nextShareRate, ringFrames, shareLimit, type ShareStep } from '../../bench/cpu-share';
import { shareGoal } from '../../bench/report-share';

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

void t.test('the ring: a 192-byte TPACKET_V3 slot for each 106-byte frame', (t) => {
  t.equal(ringFrames(106), Math.floor((32 * 1024 * 1024) / 192), '~175 k frames in 32 MiB');
  t.equal(ringFrames(106, 192 * 10), 10);
  t.equal(ringFrames(1514, 1600 * 4), 4, 'a full-size frame: 82 + 1514 bytes, 8-aligned');
  t.end();
});

void t.test('goal row: judged only when both tools were held back by their capture', (t) => {
  const limited = (losslessPps: number): ShareStep[] => [
    step(losslessPps, true),
    step(losslessPps * 2, false),
  ];
  const met = shareGoal(limited(100_000), limited(96_000), 'the agent');
  t.equal(met.met, 'met', '96 % of tcpdump');
  t.match(met.result, /the agent 95 k pps \(first loss when 192 k pps were asked\)/);
  t.match(met.result, /: 96 %$/);
  t.equal(shareGoal(limited(100_000), limited(50_000), 'the agent').met, 'missed');
  const sender = shareGoal(limited(100_000), [step(80_000, true)], 'the agent');
  t.equal(sender.met, 'no loss at any rate offered', 'the agent never lost: no capture result');
  t.match(sender.result, /the sender's limit, not the capture's/);
  t.equal(
    shareGoal([step(10_000, false)], limited(50_000), 'the agent').met,
    'not measured',
    'tcpdump lost at every rate: no ratio',
  );
  t.end();
});

/** agent/ticker.ts: callbacks of one period share one timer and one tick; the last to leave stops it. */
import t from 'tap';
import { joinTicker, tickerCounts } from '../../agent/ticker';
import { eventually } from './eventually';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

void t.test('callbacks of one period run in the same tick, from one timer', async (t) => {
  const seen: string[] = [];
  let ticks = 0;
  const leaveA = joinTicker(20, () => {
    ticks++;
    seen.push(`a${ticks}`);
  });
  const leaveB = joinTicker(20, () => {
    // Runs right after a in the same tick: b always sees a's count of this tick.
    seen.push(`b${ticks}`);
  });
  const other = joinTicker(35, () => undefined);
  t.same(
    tickerCounts(),
    new Map([
      [20, 2],
      [35, 1],
    ]),
    'one timer per period',
  );
  // A late interval fires once and does not catch up: wait for the ticks, bounded.
  await eventually(() => ticks >= 3, 5000);
  t.ok(ticks >= 3, `ticked ${ticks} times`);
  for (let i = 0; i < seen.length - 1; i += 2) {
    t.equal(seen[i]?.slice(1), seen[i + 1]?.slice(1), `tick ${seen[i] ?? ''}: b ran in it`);
  }
  leaveA();
  leaveA(); // idempotent
  t.same(tickerCounts().get(20), 1, 'b still joined');
  const n = seen.length;
  await eventually(() => seen.length > n, 5000);
  t.ok(seen.length > n && seen.slice(n).every((s) => s.startsWith('b')), 'a left, b goes on');
  leaveB();
  other();
  t.same(tickerCounts(), new Map(), 'the last to leave stops its timer');
  const m = seen.length;
  await sleep(60);
  t.equal(seen.length, m, 'nothing runs after everyone left');
});

void t.test("a callback joined out of phase still runs in the first one's tick", async (t) => {
  // Between two timer callbacks Node runs the microtask queue, so a flag that A sets and a
  // microtask clears is still set in B only when B runs in the same callback as A.
  let flag = false;
  let together = 0;
  let apart = 0;
  const leaveA = joinTicker(40, () => {
    flag = true;
    queueMicrotask(() => {
      flag = false;
    });
  });
  await sleep(20); // half a period: a timer of B's own would fire 20 ms after A's
  const leaveB = joinTicker(40, () => {
    if (flag) together++;
    else apart++;
  });
  await eventually(() => together + apart >= 3, 5000);
  leaveA();
  leaveB();
  t.ok(together >= 3, `B ran in A's tick ${together} times`);
  t.equal(apart, 0, 'never in a tick of its own');
});

void t.test(
  'a callback may leave during its own tick; the same function joins twice',
  async (t) => {
    let runs = 0;
    const leave = joinTicker(15, () => {
      runs++;
      leave();
    });
    const fn = (): void => {
      runs += 10;
    };
    const l1 = joinTicker(15, fn);
    const l2 = joinTicker(15, fn);
    await sleep(50);
    t.equal(runs % 10, 1, 'the self-leaving callback ran once');
    t.ok(runs >= 21, 'the twice-joined function runs twice a tick');
    l1();
    t.equal(tickerCounts().get(15), 1, 'leaving one join leaves the other');
    l2();
    t.equal(tickerCounts().size, 0);
  },
);

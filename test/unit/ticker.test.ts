/**
 * agent/ticker.ts: callbacks of one period share one timer and one tick; the last to leave stops it;
 * a nudge runs a tick due soon in the caller's wake-up and restarts its period.
 */
import t from 'tap';
import { joinTicker, nudgeTickers, tickerCounts } from '../../agent/ticker';
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

void t.test('a nudge runs the ticks that ran half a period ago or more, and restarts them', (t) => {
  const PERIOD = 60_000;
  let ticks = 0;
  const leave = joinTicker(PERIOD, () => {
    ticks++;
  });
  const now = (): number => performance.now();
  t.equal(nudgeTickers(now()), 0, 'just armed: ran (was armed) less than half a period ago');
  t.equal(nudgeTickers(now() + 29_000), 0, '29 s after: still less than half a period');
  t.equal(ticks, 0);
  t.equal(nudgeTickers(now() + 31_000), 1, 'half a period after: run now, whatever its phase');
  t.equal(ticks, 1, 'in this call');
  t.equal(nudgeTickers(now() + 29_000), 0, 'restarted: not again within half a period');
  t.equal(nudgeTickers(now() + 31_000), 1, 'and again after');
  t.equal(ticks, 2);
  leave();
  t.equal(nudgeTickers(now() + 10 * PERIOD), 0, 'no ticker: nothing to run');
  t.end();
});

void t.test(
  "a callback that throws in a nudged tick surfaces outside the nudger's call",
  async (t) => {
    let ran = 0;
    const leaveA = joinTicker(60_000, () => {
      throw new Error('tick failed');
    });
    const leaveB = joinTicker(60_000, () => {
      ran++;
    });
    const seen = new Promise<unknown>((resolve) => {
      process.once('uncaughtException', resolve);
    });
    t.doesNotThrow(() => nudgeTickers(performance.now() + 31_000), 'the caller is not thrown at');
    t.equal(ran, 1, 'the other callback of the tick ran');
    t.match(String(await seen), /tick failed/, 'the error surfaces as uncaught, as from a timer');
    leaveA();
    leaveB();
  },
);

void t.test(
  'a ticker whose last callback left in an earlier tick of the same nudge stays stopped',
  (t) => {
    let leaveSlow: () => void = () => undefined;
    const leaveFast = joinTicker(50_000, () => {
      leaveSlow();
    });
    leaveSlow = joinTicker(60_000, () => {
      t.fail('left before its tick');
    });
    t.equal(nudgeTickers(performance.now() + 45_000), 1, 'only the first ran');
    t.same(tickerCounts(), new Map([[50_000, 1]]), 'the other is stopped, not armed again');
    leaveFast();
    t.same(tickerCounts(), new Map());
    t.end();
  },
);

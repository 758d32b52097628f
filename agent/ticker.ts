/**
 * Shared periodic timers: every callback joined at the same period runs in one timer tick, not
 * in a wake-up of its own. On the machines measured a wake-up of a Node process costs ~150–200 µs
 * of CPU before any work (a bare `setInterval` at 50 ms: ~4 ms/s), so an agent capturing at two
 * points paid for ~28 wake-ups a second — each point's namespace check 4×/s, each point's status
 * report once a second and its ack — ~5 ms/s that tcpdump does not pay (BENCHMARKS.md, "What
 * limits the whole agent at this budget"). The timers are unref'd: they never keep the process up.
 */

type Tick = () => void;

interface Ticker {
  periodMs: number;
  timer: NodeJS.Timeout | undefined;
  /** When the tick last ran, or was armed first (performance.now() ms). */
  ranAt: number;
  callbacks: Set<Tick>;
}

const tickers = new Map<number, Ticker>();

/**
 * Runs every callback of the tick (a copy: one may leave or join meanwhile), re-armed to be due
 * `nextInMs` from now.
 */
function runTick(t: Ticker, nextInMs = t.periodMs): void {
  t.ranAt = performance.now();
  arm(t, nextInMs);
  let first: unknown;
  let threw = false;
  for (const cb of [...t.callbacks]) {
    try {
      cb();
    } catch (e) {
      if (!threw) first = e;
      threw = true;
    }
  }
  if (threw) throw first;
}

function arm(t: Ticker, inMs = t.periodMs): void {
  if (t.timer !== undefined) clearTimeout(t.timer);
  t.timer = setTimeout(() => {
    t.timer = undefined;
    runTick(t);
  }, inMs);
  t.timer.unref();
}

/**
 * Runs `fn` every `periodMs` in the tick shared by every callback of that period; returns the
 * function that leaves it (idempotent). The first callback of a period starts its timer, the last
 * one to leave stops it. A callback that throws does not keep the others of the tick from running.
 */
export function joinTicker(periodMs: number, fn: Tick): () => void {
  let t = tickers.get(periodMs);
  if (t === undefined) {
    t = { periodMs, timer: undefined, ranAt: performance.now(), callbacks: new Set() };
    arm(t);
    tickers.set(periodMs, t);
  }
  const mine = t;
  // A fresh wrapper: the same function joined twice leaves twice.
  const entry: Tick = () => {
    fn();
  };
  mine.callbacks.add(entry);
  return () => {
    if (!mine.callbacks.delete(entry)) return;
    if (mine.callbacks.size === 0 && tickers.get(periodMs) === mine) {
      if (mine.timer !== undefined) clearTimeout(mine.timer);
      mine.timer = undefined;
      tickers.delete(periodMs);
    }
  };
}

/**
 * A wake-up the process pays anyway (a worker's frame arrived): every tick that last ran half a
 * period ago or more runs now, in it, and its timer is set a quarter period later than a period
 * from now, so the next wake-up of the same kind (a worker sends a frame about once a second under
 * traffic) comes first and runs it again: the status tick then rides on the worker's frames,
 * whatever their phase, instead of waking the process between them — on this VM a Node process
 * woken after a second asleep costs ~1 ms of CPU before any work (BENCHMARKS.md, "What limits the
 * whole agent at these budgets"). A tick thus runs every half to one and a quarter periods while
 * nudged, and every period when not. Returns how many ran. `now` (performance.now() ms) is for
 * tests.
 */
export function nudgeTickers(now = performance.now()): number {
  let ran = 0;
  for (const t of [...tickers.values()]) {
    // Stopped by a callback of a tick run before it in this loop: never armed again.
    if (tickers.get(t.periodMs) !== t) continue;
    if (now - t.ranAt < t.periodMs / 2) continue;
    ran++;
    try {
      runTick(t, t.periodMs * 1.25);
    } catch (e) {
      // Surfaces as a timer's tick would, not in the caller's I/O handler.
      setImmediate(() => {
        throw e;
      });
    }
  }
  return ran;
}

/** Periods with a running timer, and how many callbacks each (tests). */
export function tickerCounts(): Map<number, number> {
  return new Map([...tickers].map(([p, t]) => [p, t.callbacks.size]));
}

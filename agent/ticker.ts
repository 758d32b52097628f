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
  timer: NodeJS.Timeout;
  callbacks: Set<Tick>;
}

const tickers = new Map<number, Ticker>();

/**
 * Runs `fn` every `periodMs` in the tick shared by every callback of that period; returns the
 * function that leaves it (idempotent). The first callback of a period starts its timer, the last
 * one to leave stops it. A callback that throws does not keep the others of the tick from running.
 */
export function joinTicker(periodMs: number, fn: Tick): () => void {
  let t = tickers.get(periodMs);
  if (t === undefined) {
    const callbacks = new Set<Tick>();
    const timer = setInterval(() => {
      let first: unknown;
      let threw = false;
      // A copy: a callback may leave (or another join) during the tick.
      for (const cb of [...callbacks]) {
        try {
          cb();
        } catch (e) {
          if (!threw) first = e;
          threw = true;
        }
      }
      if (threw) throw first;
    }, periodMs);
    timer.unref();
    t = { timer, callbacks };
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
      clearInterval(mine.timer);
      tickers.delete(periodMs);
    }
  };
}

/** Periods with a running timer, and how many callbacks each (tests). */
export function tickerCounts(): Map<number, number> {
  return new Map([...tickers].map(([p, t]) => [p, t.callbacks.size]));
}

/** Reconnect delays: exponential with jitter so a fleet of agents does not reconnect in step. */

export interface BackoffOptions {
  minMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { minMs: 200, maxMs: 10_000 };

/**
 * Delay before reconnect attempt `attempt` (0-based): min·2^attempt capped at max, then a random
 * point in its upper half ("equal jitter": never shorter than half the step, never synchronised).
 */
export function backoffDelay(
  attempt: number,
  opts: BackoffOptions = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const step = Math.min(opts.maxMs, opts.minMs * 2 ** Math.min(attempt, 30));
  return Math.round(step / 2 + (random() * step) / 2);
}

/** Waiting in the reliability scenarios: for a condition (bounded), or for a while. */

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves once `pred` holds, checked every `everyMs`; rejects naming `what` after `timeoutMs`.
 * Every wait of a scenario is bounded, so a collector that hangs fails the scenario, never the run.
 */
export async function waitUntil(
  pred: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not reached after ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

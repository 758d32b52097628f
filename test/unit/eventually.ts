/**
 * Waits until `cond()` holds, checking every `stepMs`, for at most `ms`; returns whether it held.
 * For tests that wait on something a loaded machine can delay (a timer, a child process, a file
 * write): a fixed sleep before an assertion flakes when the process is descheduled for longer
 * than the sleep. Assert on the returned value (or on the state after it) so a condition that
 * never holds still fails, only later.
 */
export async function eventually(cond: () => boolean, ms = 5000, stepMs = 20): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (cond()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

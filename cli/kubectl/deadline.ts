/**
 * A promise raced against a timer: what `late()` gives (or throws) once `ms` have passed first,
 * the timer cleared either way. The timer does not stop the work behind `p`: `late` is where the
 * caller aborts it (an AbortController, a killed exec plugin) so nothing outlives the deadline.
 */
export async function byDeadline<T, L>(p: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const lateP = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  }).then(late);
  try {
    return await Promise.race([p, lateP]);
  } finally {
    clearTimeout(timer);
  }
}

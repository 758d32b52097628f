/**
 * Counters a peer adds to (events lost, drops): they stay exact integers. A peer may report any
 * count, 2^64 − 1 included; sums saturate at Number.MAX_SAFE_INTEGER instead of becoming
 * floating-point values that no longer count anything.
 */

/** `a + b`, each taken as a non-negative integer, saturating at 2^53 − 1. */
export function addCount(a: number, b: number): number {
  const clean = (n: number): number =>
    Number.isFinite(n) && n > 0 ? Math.min(Math.trunc(n), Number.MAX_SAFE_INTEGER) : 0;
  return Math.min(clean(a) + clean(b), Number.MAX_SAFE_INTEGER);
}

/**
 * Counters a peer adds to (events lost, drops): they stay exact integers. A peer may report any
 * count, 2^64 − 1 included; sums saturate at Number.MAX_SAFE_INTEGER instead of becoming
 * floating-point values that no longer count anything.
 */

/**
 * A 64-bit count read as two 32-bit halves (a pcapng isb_ifdrop), exact up to 2^53 − 1 and
 * saturated there: `hi * 2^32 + lo` is exact only while hi < 2^21.
 */
export function u64Count(hi: number, lo: number): number {
  return hi < 0x200000 ? hi * 2 ** 32 + lo : Number.MAX_SAFE_INTEGER;
}

/**
 * A count for people: saturated, it stands for any count from 2^53 − 1 up, so it is written
 * `≥ 9007199254740991`, never as an exact number it may not be.
 */
export function countText(n: number): string {
  return n >= Number.MAX_SAFE_INTEGER ? `≥ ${Number.MAX_SAFE_INTEGER}` : String(n);
}

/** `a + b`, each taken as a non-negative integer, saturating at 2^53 − 1. */
export function addCount(a: number, b: number): number {
  const clean = (n: number): number =>
    Number.isFinite(n) && n > 0 ? Math.min(Math.trunc(n), Number.MAX_SAFE_INTEGER) : 0;
  return Math.min(clean(a) + clean(b), Number.MAX_SAFE_INTEGER);
}

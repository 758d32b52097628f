/**
 * Times and durations as people read them: UTC ISO-8601 with the date and `Z`, never a local
 * time. Pure. A time a date cannot show (a damaged capture's, beyond ±8.64e15 ms of 1970) is
 * printed as the nanoseconds it is, never thrown on or wrapped.
 */

/** The largest |ms| a JavaScript Date holds (±100,000,000 days of 1970). */
const DATE_LIMIT_MS = 8_640_000_000_000_000n;

/**
 * `2026-12-02T04:39:48.123456Z` from nanoseconds since the Unix epoch (decimal string or bigint);
 * years past 9999 as ISO-8601's expanded form (`+054578-04-04T09:53:12.000000Z`).
 */
export function utcMicros(tsNs: bigint | string): string {
  const ns = typeof tsNs === 'bigint' ? tsNs : BigInt(tsNs);
  const us = ns / 1000n;
  const msBig = us / 1000n;
  if (msBig > DATE_LIMIT_MS || msBig < -DATE_LIMIT_MS) return `${ns} ns since 1970 (no date)`;
  const micro = Number(((us % 1000000n) + 1000000n) % 1000000n);
  const base = new Date(Number(msBig)).toISOString(); // …THH:MM:SS.mmmZ
  return `${base.slice(0, -5)}.${String(micro).padStart(6, '0')}Z`;
}

/** A signed nanosecond duration for people: `+1.234 ms`, `−12 µs`, `3.500 s`. */
export function durationText(ns: bigint): string {
  const sign = ns < 0n ? '−' : '';
  const a = ns < 0n ? -ns : ns;
  if (a < 1000n) return `${sign}${a} ns`;
  if (a < 1000000n) return `${sign}${(Number(a) / 1e3).toFixed(a < 10000n ? 3 : 1)} µs`;
  if (a < 1000000000n) return `${sign}${(Number(a) / 1e6).toFixed(3)} ms`;
  return `${sign}${(Number(a) / 1e9).toFixed(3)} s`;
}

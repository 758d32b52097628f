/** A deterministic generator for tests (xorshift32): `rand(n)` is in [0, n), the same every run. */
export function xorshift32(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n: number): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

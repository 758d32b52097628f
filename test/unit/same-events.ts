/**
 * Comparing a fast event source with the JS reader + reference decoder, for the summary tests:
 * events as JSON lines (bigints as `123n`), the error message, and optionally the statistics.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type tap from 'tap';
import type { PacketEvent } from '../../common/event';
import { xorshift32 } from './xorshift';

export interface Outcome {
  events: string[];
  error: string | null;
  /** What the file recorded about its capture (JSON), where the test compares it. */
  stats?: string | null;
}

export const json = (ev: PacketEvent): string =>
  JSON.stringify(ev, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));

type Asserts = Pick<typeof tap, 'equal' | 'fail'>;

/** The same error, the same events in the same order, and the same statistics when compared. */
export function same(t: Asserts, got: Outcome, want: Outcome, label: string): void {
  t.equal(got.error, want.error, `${label}: same error`);
  t.equal(got.events.length, want.events.length, `${label}: same number of events`);
  const bad = got.events.findIndex((e, i) => e !== want.events[i]);
  if (bad >= 0)
    t.fail(`${label}: event ${bad + 1} differs`, {
      found: got.events[bad],
      wanted: want.events[bad],
    });
  if (want.error === null && want.stats !== undefined)
    t.equal(got.stats, want.stats, `${label}: same statistics`);
}

/**
 * `count` damaged copies of a capture file, the same every run (xorshift32 from a fixed seed): one to
 * four changes each after the first `keep` bytes — a byte anywhere, a u32 set to a boundary value —
 * and one in five cut short.
 */
export function damagedCopies(good: Buffer, count: number, keep: number): Buffer[] {
  const rand = xorshift32(0x9e3779b9);
  const out: Buffer[] = [];
  for (let k = 0; k < count; k++) {
    const bytes = Buffer.from(good);
    for (let c = 1 + rand(4); c > 0; c--) {
      const at = keep + rand(bytes.length - keep - 4);
      if (rand(3) === 0) bytes[at] = rand(256);
      else bytes.writeUInt32LE([0, 1, 3, 28, 32, 0xffffffff, 1 << 26][rand(7)] ?? 0, at & ~3);
    }
    out.push(rand(5) === 0 ? bytes.subarray(0, keep + rand(bytes.length - keep)) : bytes);
  }
  return out;
}

/**
 * damagedCopies of `good` written to `dir` as damaged-K.EXT: the fast source (`fast`, at the
 * default chunk and at 100 bytes) must give the reference's events and errors for each, and the
 * damage must reach at least three outcomes (read, and two kinds of error).
 */
export function sameUnderDamage(
  t: Asserts & Pick<typeof tap, 'ok' | 'comment'>,
  o: {
    dir: string;
    good: Buffer;
    keep: number;
    ext: string;
    reference: (path: string) => Outcome;
    fast: (path: string, chunkSize?: number) => Outcome | null;
  },
): void {
  const outcomes = new Map<string, number>();
  for (const [k, file] of damagedCopies(o.good, 120, o.keep).entries()) {
    const path = join(o.dir, `damaged-${k}.${o.ext}`);
    writeFileSync(path, file);
    const want = o.reference(path);
    const kind = want.error === null ? 'read' : (/^[A-Z_]+/.exec(want.error)?.[0] ?? 'other');
    outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    for (const chunk of [undefined, 100]) {
      const got = o.fast(path, chunk);
      if (got === null) t.fail(`damaged ${k}: not taken by the fast path`);
      else same(t, got, want, `damaged ${k} (${chunk ?? 'default'})`);
    }
  }
  t.comment(JSON.stringify(Object.fromEntries(outcomes)));
  t.ok(outcomes.size >= 3, 'the damage reaches several outcomes (read, and kinds of error)');
}

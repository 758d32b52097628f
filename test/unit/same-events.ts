/**
 * Comparing a fast event source with the JS reader + reference decoder, for the summary tests:
 * events as JSON lines (bigints as `123n`), the error message, and optionally the statistics.
 */
import type t from 'tap';
import type { PacketEvent } from '../../common/event';

export interface Outcome {
  events: string[];
  error: string | null;
  /** What the file recorded about its capture (JSON), where the test compares it. */
  stats?: string | null;
}

export const json = (ev: PacketEvent): string =>
  JSON.stringify(ev, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));

type Asserts = Pick<typeof t, 'equal' | 'fail'>;

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

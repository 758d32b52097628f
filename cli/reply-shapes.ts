/**
 * Shapes of what a peer answered, checked before the CLI reads it: each shape names only the
 * members a command reads, and says where the first one that does not fit is (`points[2].name is
 * not a string`) — never a TypeError later. The reply kinds themselves are in collector-replies.ts.
 */

/** Why `v`, found at `at`, does not fit; null when it does. */
export type Shape = (v: unknown, at: string) => string | null;

/** A kind of reply: what it is in words, and `read`, which gives it typed or says why it is not one. */
export interface Reply<T> {
  what: string;
  read(v: unknown): { value: T } | { why: string };
}

/** The top of a reply, as messages name it. */
const TOP = 'the reply';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A value that `ok` accepts, described as `what` when it is not. */
export function kind(what: string, ok: (v: unknown) => boolean): Shape {
  return (v, at) => (ok(v) ? null : `${at} is ${v === undefined ? 'missing' : `not ${what}`}`);
}

export const str = kind('a string', (v) => typeof v === 'string');
export const bool = kind('true or false', (v) => typeof v === 'boolean');
export const num = kind('a number', (v) => typeof v === 'number' && Number.isFinite(v));
export const count = kind(
  'a count',
  (v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0,
);
/** Milliseconds since 1970 that a Date can hold (±8.64e15, ECMA-262 §21.4.1.1). */
export const epochMs = kind(
  'a time in ms since 1970',
  (v) => typeof v === 'number' && Number.isFinite(v) && Math.abs(v) <= 8.64e15,
);
/** Nanoseconds as the analysis writes them: decimal digits (a duration, or an offset). */
export const nsDigits = kind(
  'nanoseconds in decimal digits',
  (v) => typeof v === 'string' && /^-?\d{1,24}$/.test(v),
);
/** Nanoseconds since 1970 in decimal digits, within what a Date can show (±8.64e21). */
export const nsTime = kind(
  'a time in ns since 1970 (decimal digits)',
  (v) =>
    typeof v === 'string' &&
    /^-?\d{1,22}$/.test(v) &&
    BigInt(v) <= 8_640_000_000_000_000_000_000n &&
    BigInt(v) >= -8_640_000_000_000_000_000_000n,
);

export function oneOf(values: readonly string[]): Shape {
  return kind(`one of ${values.join(', ')}`, (v) => typeof v === 'string' && values.includes(v));
}

export function matching(re: RegExp, what: string): Shape {
  return kind(what, (v) => typeof v === 'string' && re.test(v));
}

export function orNull(s: Shape): Shape {
  return (v, at) => (v === null ? null : s(v, at));
}

export function optional(s: Shape): Shape {
  return (v, at) => (v === undefined ? null : s(v, at));
}

export function listOf(s: Shape): Shape {
  return (v, at) => {
    if (!Array.isArray(v)) return `${at} is ${v === undefined ? 'missing' : 'not a list'}`;
    for (const [i, x] of (v as unknown[]).entries()) {
      const why = s(x, `${at}[${i}]`);
      if (why !== null) return why;
    }
    return null;
  };
}

/** An object with these members (others are not looked at). */
export function record(members: Readonly<Record<string, Shape>>): Shape {
  return (v, at) => {
    if (!isRecord(v)) return `${at} is ${v === undefined ? 'missing' : 'not an object'}`;
    for (const [k, s] of Object.entries(members)) {
      const why = s(Object.hasOwn(v, k) ? v[k] : undefined, at === TOP ? k : `${at}.${k}`);
      if (why !== null) return why;
    }
    return null;
  };
}

/** `shape` and then `also` (a check across members), as a reply kind read as T. */
export function shaped<T>(what: string, shape: Shape, also?: (v: T) => string | null): Reply<T> {
  return {
    what,
    read(v) {
      const why = shape(v, TOP) ?? also?.(v as T) ?? null;
      return why === null ? { value: v as T } : { why };
    },
  };
}

/** `reply`, and of this id: an answer about another capture or repro is not this one's. */
export function ofId<T extends { id: string }>(reply: Reply<T>, id: string): Reply<T> {
  return {
    what: `${reply.what} of ${id}`,
    read(v) {
      const r = reply.read(v);
      return 'why' in r || r.value.id === id ? r : { why: `its id is ${r.value.id}` };
    },
  };
}

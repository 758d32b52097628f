/**
 * `*`/`?` globs matched without a RegExp. A glob turned into `^.*.…$` makes V8 backtrack
 * exponentially: `*?*?*?*?*?*?*?*!` (16 characters) against a 40-character namespace name held
 * the event loop ~2 s, 18 characters 7 s. Here each `*` is retried from one remembered place, so
 * the cost is at most glob length × name length.
 */

const STAR = 0x2a; // '*'
const ANY = 0x3f; // '?'

/**
 * True when `glob` matches the whole of `name`: `*` any run of characters (none too), `?` exactly
 * one (a UTF-16 code unit, as the RegExp's `.` was), every other character itself.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  // The last `*` seen, and where in `name` its run ends so far: a mismatch after it lets that
  // star take one more character instead of trying every split again.
  let star = -1;
  let starEnd = 0;
  while (n < name.length) {
    const c = g < glob.length ? glob.charCodeAt(g) : -1;
    if (c === STAR) {
      star = g++;
      starEnd = n;
    } else if (c !== -1 && (c === ANY || c === name.charCodeAt(n))) {
      g++;
      n++;
    } else if (star !== -1) {
      g = star + 1;
      n = ++starEnd;
    } else return false;
  }
  while (g < glob.length && glob.charCodeAt(g) === STAR) g++;
  return g === glob.length;
}

/**
 * Free text from a peer the collector does not trust (an API client, an agent) is kept to a bound
 * and cut where the cut says so, instead of being refused: the text explains something, and its
 * start is what explains it.
 */

/** Free text (a probe's error, a mark's detail, an agent's message or reason) beyond this is cut. */
export const MAX_TEXT_CHARS = 2000;

/** `v` kept to `max` characters: a longer one ends `… (cut: N characters)`, N its whole length. */
export function cutText(v: string, max: number = MAX_TEXT_CHARS): string {
  if (v.length <= max) return v;
  return `${v.slice(0, max)}… (cut: ${v.length} characters)`;
}

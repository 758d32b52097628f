/**
 * Text that report.md takes from outside (file names, node and pod names of an inventory,
 * interface names from a capture file, doctor's findings, a packet's header value) set in
 * Markdown so that it reads back as exactly that text: it cannot end a code span or a table
 * cell, start a new list item or render as HTML. CommonMark 0.31 and GitHub's tables. Pure.
 */

/** Shown for a line break inside a name: a break would end the list item or the table row. */
const NEWLINE = '\u2424';

const oneLine = (s: string): string => s.replace(/\r\n|\r|\n/g, NEWLINE);

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };

/**
 * Plain text, in a paragraph, a list item or a table cell. `<` and `&` are entities (raw HTML and
 * character references, CommonMark §6.6/§2.5); `|` is escaped (a cell ends at an unescaped one,
 * GFM §4.10), and so are the backslash (else `\|` in a name escaped the escape), the backtick
 * (a code span) and the brackets (a link). `*` and `_` are left as they are: they can only
 * emphasise, and names such as rp_filter would fill with backslashes.
 */
export function mdText(s: string): string {
  return oneLine(s)
    .replace(/[&<>]/g, (c) => ENTITIES[c] ?? c)
    .replace(/[\\`|[\]]/g, (c) => `\\${c}`);
}

/** The longest run of backticks in `s`. */
function longestTicks(s: string): number {
  let most = 0;
  for (const m of s.matchAll(/`+/g)) most = Math.max(most, m[0].length);
  return most;
}

/**
 * A code span showing `s` literally (not in a table cell: GFM splits a cell at a `|` even inside
 * a code span). Its fence is one backtick longer than the longest run inside (CommonMark §6.1),
 * padded with a space where `s` starts or ends with a backtick, or with a space on both sides
 * (one is stripped from each side of the content).
 */
export function mdCode(s: string): string {
  const body = oneLine(s);
  const fence = '`'.repeat(longestTicks(body) + 1);
  const pad =
    body.startsWith('`') ||
    body.endsWith('`') ||
    (body.startsWith(' ') && body.endsWith(' ') && body.trim() !== '')
      ? ' '
      : '';
  return `${fence}${pad}${body}${pad}${fence}`;
}

/**
 * A fenced code block holding `body` (several lines allowed): the fence is longer than any run of
 * backticks in it, so no line of the body can close it (CommonMark §4.5).
 */
export function mdFence(info: string, body: string): string[] {
  const fence = '`'.repeat(Math.max(3, longestTicks(body) + 1));
  return [`${fence}${info}`, body, fence];
}

/**
 * A sentence of hoptrace's own (it may hold code spans on purpose: "`hoptrace repro`") into which
 * names were put: its code spans are found as CommonMark finds them (a run of N backticks up to
 * the next run of exactly N) and kept; the text between them is escaped as mdText, an unmatched
 * run included. A name's `<`, `&` or `|` then either lands in a code span, where it is literal,
 * or is escaped; a name's backtick can at worst move where a span ends. One line.
 */
export function mdProse(s: string): string {
  const line = oneLine(s);
  let out = '';
  let at = 0;
  const runs = [...line.matchAll(/`+/g)];
  for (let i = 0; i < runs.length; i++) {
    const open = runs[i];
    if (open?.index === undefined || open.index < at) continue;
    const close = runs.slice(i + 1).find((r) => r[0].length === open[0].length);
    if (close?.index === undefined) continue;
    out +=
      mdText(line.slice(at, open.index)) + line.slice(open.index, close.index + close[0].length);
    at = close.index + close[0].length;
  }
  return out + mdText(line.slice(at));
}

/** A line of a code block (a command): kept on one line, nothing else to escape in a block. */
export const mdLine = oneLine;

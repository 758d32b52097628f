/**
 * The few pieces of markup the SVG pictures and the HTML report share: escaping (one function for
 * XML and HTML, text and attribute values alike), attribute lists, and text measured without a
 * font (the pictures must lay out the same everywhere, so widths are estimated per character).
 * Pure.
 */

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/**
 * Text safe as XML/HTML character data and as a quoted attribute value. Characters XML 1.0 does
 * not allow at all (C0 controls but tab, CR, LF; lone surrogates; U+FFFE/U+FFFF) become U+FFFD,
 * so a hostile name in a capture can neither inject markup nor make the document malformed.
 */
export function esc(s: string): string {
  return s
    .replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c)
    .replace(
      /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
      '\ufffd',
    );
}

/** ` a="1" b="x"`: attributes in the given order, values escaped, undefined ones left out. */
export function attrs(a: Record<string, string | number | undefined>): string {
  let out = '';
  for (const [k, v] of Object.entries(a)) {
    if (v === undefined) continue;
    out += ` ${k}="${esc(typeof v === 'number' ? num(v) : v)}"`;
  }
  return out;
}

/** A coordinate with at most one decimal (stable output, short files). */
export function num(n: number): string {
  const r = Math.round(n * 10) / 10;
  return Object.is(r, -0) ? '0' : String(r);
}

/** An element: `<name a="…">children</name>`, or self-closed when it has no children. */
export function el(
  name: string,
  a: Record<string, string | number | undefined>,
  children: string | readonly string[] = '',
): string {
  const body = typeof children === 'string' ? children : children.join('');
  return body === '' ? `<${name}${attrs(a)}/>` : `<${name}${attrs(a)}>${body}</${name}>`;
}

/** Average advance of a character, in em: monospace is 0.6 in every common font; sans ~0.55. */
const EM = { mono: 0.6, sans: 0.56 } as const;

/** The estimated width of `s` at `size` px (code points, not UTF-16 units). */
export function textWidth(s: string, size: number, font: keyof typeof EM = 'sans'): number {
  return Array.from(s).length * size * EM[font];
}

/** How many characters fit in `width` px at `size` px. */
export function charsIn(width: number, size: number, font: keyof typeof EM = 'sans'): number {
  return Math.max(8, Math.floor(width / (size * EM[font])));
}

/** `s` cut into lines of at most `max` characters, at spaces where it can (long words are split). */
export function wrapText(s: string, max: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of s.split(/\s+/).filter((w) => w !== '')) {
    let w = word;
    while (Array.from(w).length > max) {
      if (line !== '') {
        lines.push(line);
        line = '';
      }
      const cps = Array.from(w);
      lines.push(cps.slice(0, max).join(''));
      w = cps.slice(max).join('');
    }
    if (w === '') continue;
    if (line === '') line = w;
    else if (Array.from(line).length + 1 + Array.from(w).length <= max) line += ` ${w}`;
    else {
      lines.push(line);
      line = w;
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** `s` cut to `max` characters (code points) with an ellipsis. */
export function clip(s: string, max: number): string {
  const cps = Array.from(s);
  return cps.length <= max ? s : `${cps.slice(0, Math.max(1, max - 1)).join('')}…`;
}

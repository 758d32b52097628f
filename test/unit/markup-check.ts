/**
 * A small well-formedness check for the markup the report renders (no XML parser among the
 * dependencies): every tag is `<name attr="value" …>` with double-quoted attributes, tags nest
 * and close in order (HTML void elements excepted), no raw `<` or `>` in text or attribute
 * values, every `&` starts a known entity, no attribute twice on one element.
 */

const VOID = new Set([
  'area',
  'base',
  'br',
  'col',
  'embed',
  'hr',
  'img',
  'input',
  'link',
  'meta',
  'source',
  'track',
  'wbr',
]);
const ENTITY = /^&(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);$/;
const TAG = /^<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"]*")*)\s*(\/?)>$/;

/** Problems found in `doc` (empty when it is well-formed); `html` allows a doctype and void elements. */
export function markupErrors(doc: string, html = false): string[] {
  const errors: string[] = [];
  const stack: string[] = [];
  const text = (s: string, at: number): void => {
    if (/[<>]/.test(s)) errors.push(`raw < or > at ${at}: ${s.slice(0, 60)}`);
    for (const m of s.matchAll(/&[^;&\s]*;?/g))
      if (!ENTITY.test(m[0])) errors.push(`bad entity ${m[0]} at ${at}`);
  };
  let i = 0;
  while (i < doc.length) {
    const lt = doc.indexOf('<', i);
    if (lt < 0) {
      text(doc.slice(i), i);
      break;
    }
    text(doc.slice(i, lt), i);
    if (doc.startsWith('<!--', lt)) {
      const end = doc.indexOf('-->', lt);
      if (end < 0) return [...errors, `unclosed comment at ${lt}`];
      i = end + 3;
      continue;
    }
    const gt = doc.indexOf('>', lt);
    if (gt < 0) return [...errors, `unclosed tag at ${lt}`];
    const tag = doc.slice(lt, gt + 1);
    i = gt + 1;
    if (/^<!DOCTYPE html>$/i.test(tag)) {
      if (!html || lt !== 0) errors.push(`doctype at ${lt}`);
      continue;
    }
    const m = TAG.exec(tag);
    if (m === null) {
      errors.push(`malformed tag at ${lt}: ${tag.slice(0, 80)}`);
      continue;
    }
    const [, close = '', name = '', attrText = '', self = ''] = m;
    const seen = new Set<string>();
    for (const a of attrText.matchAll(/([\w:-]+)="([^"]*)"/g)) {
      const key = a[1] ?? '';
      if (seen.has(key)) errors.push(`attribute ${key} twice at ${lt}`);
      seen.add(key);
      text(a[2] ?? '', lt);
    }
    if (close !== '') {
      const top = stack.pop();
      if (top !== name) errors.push(`</${name}> closes <${top ?? 'nothing'}> at ${lt}`);
    } else if (self === '' && !(html && VOID.has(name.toLowerCase()))) stack.push(name);
  }
  if (stack.length > 0) errors.push(`not closed: ${stack.join(' > ')}`);
  return errors;
}

/** How many times `needle` occurs in `hay`. */
export const count = (hay: string, needle: string): number => hay.split(needle).length - 1;

/** The values of attribute `attr` on the elements whose opening tag contains `marker`. */
export function attrOf(doc: string, marker: string, attr: string): string[] {
  const out: string[] = [];
  for (const m of doc.matchAll(/<[^>]+>/g)) {
    const tag = m[0];
    if (!tag.includes(marker)) continue;
    const v = new RegExp(`\\s${attr}="([^"]*)"`).exec(tag);
    if (v !== null) out.push(v[1] ?? '');
  }
  return out;
}

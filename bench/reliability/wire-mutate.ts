/**
 * Structure-aware damage to protobuf bytes, without a schema: the wire format (varint, fixed64,
 * length-delimited, fixed32; protobuf's encoding guide) is read into a tree — a length-delimited
 * field whose bytes read whole as fields is taken for a message —, one thing in it is changed,
 * and the tree is written back. Bytes that do not read as protobuf are returned unchanged (the
 * byte-level mutator then has them).
 */

interface Field {
  tag: number;
  wire: number;
  /** The value's bytes (a varint's bytes, 8 or 4 fixed bytes, a length-delimited body). */
  raw: Uint8Array;
  /** A length-delimited body that reads whole as fields. */
  sub?: Field[];
}

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

function readVarint(b: Uint8Array, at: number): [bigint, number] | null {
  let v = 0n;
  for (let i = 0; i < 10; i++) {
    const c = b[at + i];
    if (c === undefined) return null;
    v |= BigInt(c & 0x7f) << BigInt(7 * i);
    if (c < 0x80) return [v, at + i + 1];
  }
  return null;
}

function writeVarint(v: bigint): number[] {
  const out: number[] = [];
  let x = BigInt.asUintN(64, v);
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

/** The fields of `b`, or null when it is not whole protobuf. */
function parse(b: Uint8Array, depth: number): Field[] | null {
  const out: Field[] = [];
  let at = 0;
  while (at < b.length) {
    const key = readVarint(b, at);
    if (key === null) return null;
    const tag = Number(key[0] >> 3n);
    const wire = Number(key[0] & 7n);
    at = key[1];
    if (tag === 0) return null;
    let end: number;
    if (wire === VARINT) {
      const v = readVarint(b, at);
      if (v === null) return null;
      end = v[1];
    } else if (wire === FIXED64) end = at + 8;
    else if (wire === FIXED32) end = at + 4;
    else if (wire === LEN) {
      const len = readVarint(b, at);
      if (len === null) return null;
      at = len[1];
      end = at + Number(len[0]);
    } else return null;
    if (end > b.length) return null;
    const raw = b.subarray(at, end);
    const f: Field = { tag, wire, raw };
    if (wire === LEN && depth < 6 && raw.length > 0) {
      const sub = parse(raw, depth + 1);
      if (sub !== null) f.sub = sub;
    }
    out.push(f);
    at = end;
  }
  return out;
}

/** Appends a varint to `out` at `at`; returns the new end. */
function putVarint(out: Uint8Array, at: number, v: bigint | number): number {
  let x = typeof v === 'bigint' ? BigInt.asUintN(64, v) : v;
  if (typeof x === 'number') {
    while (x >= 0x80) {
      out[at++] = (x % 0x80) | 0x80;
      x = Math.floor(x / 0x80);
    }
    out[at++] = x;
    return at;
  }
  for (const c of writeVarint(x)) out[at++] = c;
  return at;
}

/** The encoded size of the fields (each length-delimited body computed once, into `bodies`). */
function sizeOf(fields: readonly Field[], bodies: Map<Field, Uint8Array>): number {
  let n = 0;
  for (const f of fields) {
    let raw = f.raw;
    if (f.sub !== undefined) {
      raw = serialize(f.sub);
      bodies.set(f, raw);
    }
    n += 10 + (f.wire === LEN ? 10 : 0) + raw.length;
  }
  return n;
}

function serialize(fields: readonly Field[]): Uint8Array {
  const bodies = new Map<Field, Uint8Array>();
  const out = new Uint8Array(sizeOf(fields, bodies));
  let at = 0;
  for (const f of fields) {
    at = putVarint(out, at, f.tag * 8 + f.wire);
    const raw = bodies.get(f) ?? f.raw;
    if (f.wire === LEN) at = putVarint(out, at, raw.length);
    out.set(raw, at);
    at += raw.length;
  }
  return out.subarray(0, at);
}

/** Every field of the tree with the list that holds it. */
function nodes(
  fields: Field[],
  out: { list: Field[]; i: number }[] = [],
): { list: Field[]; i: number }[] {
  fields.forEach((f, i) => {
    out.push({ list: fields, i });
    if (f.sub !== undefined) nodes(f.sub, out);
  });
  return out;
}

const EDGES = [
  0n,
  1n,
  127n,
  128n,
  2n ** 31n - 1n,
  2n ** 31n,
  2n ** 32n - 1n,
  2n ** 32n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 63n,
  2n ** 64n - 1n,
];

/** A new value for a field of its wire type. */
function newValue(rand: () => number, f: Field): Field {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  if (f.wire === VARINT) {
    const v = rand() < 0.7 ? pick(EDGES) : BigInt(Math.floor(rand() * 2 ** 32));
    return { tag: f.tag, wire: f.wire, raw: Uint8Array.from(writeVarint(v)) };
  }
  if (f.wire === FIXED64 || f.wire === FIXED32) {
    const n = f.wire === FIXED64 ? 8 : 4;
    const fill = pick([0x00, 0xff, -1]);
    const raw = Uint8Array.from({ length: n }, () => (fill < 0 ? Math.floor(rand() * 256) : fill));
    return { tag: f.tag, wire: f.wire, raw };
  }
  const text = (s: string): Uint8Array => new TextEncoder().encode(s);
  const raw = pick([
    () => new Uint8Array(0),
    () => text('a'.repeat(5000)),
    () => Uint8Array.from([0xff, 0xfe, 0xc3, 0x28, 0x00]),
    () => Uint8Array.from({ length: 1 + Math.floor(rand() * 64) }, () => Math.floor(rand() * 256)),
    () => text('../../etc/passwd'),
    () => text('c-zzzzzzzzzzzzzzzz-00000000'),
  ])();
  return { tag: f.tag, wire: f.wire, raw };
}

/** `bytes` with one thing changed in its protobuf structure (unchanged when it is not protobuf). */
export function mutateFields(rand: () => number, bytes: Uint8Array): Uint8Array {
  const tree = parse(bytes, 0);
  if (tree === null || tree.length === 0) return bytes;
  const all = nodes(tree);
  const at = all[Math.floor(rand() * all.length)]!;
  const f = at.list[at.i]!;
  switch (Math.floor(rand() * 6)) {
    case 0:
    case 1:
      if (f.sub !== undefined && rand() < 0.5)
        at.list.splice(at.i, 1, { ...f, sub: [...f.sub, ...f.sub] });
      else at.list[at.i] = newValue(rand, f);
      break;
    case 2:
      at.list.splice(at.i, 1);
      break;
    case 3:
      at.list.splice(at.i, 0, f);
      break;
    case 4:
      at.list[at.i] = { ...f, tag: 1 + Math.floor(rand() * 40) };
      break;
    default: {
      const wire = [VARINT, LEN, FIXED32, FIXED64][Math.floor(rand() * 4)] ?? VARINT;
      at.list.splice(
        at.i,
        0,
        newValue(rand, { tag: 90 + Math.floor(rand() * 10), wire, raw: new Uint8Array(0) }),
      );
    }
  }
  return serialize(tree);
}

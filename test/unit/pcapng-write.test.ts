/**
 * core/report/pcapng.ts, the evidence writer, without tshark: the bytes of a small file against
 * the same blocks built independently (pcapng-writer.ts, the tests' own pcapng builder), the block
 * layout of a larger one walked block by block (lengths twice and multiples of 4, zero padding,
 * options ended), and the file read back by offline/pcap-file.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { writePcapng, type PcapngInput } from '../../core/report/pcapng';
import { openCaptureFile } from '../../offline/pcap-file';
import { END, block, idb, option, pad4, shb, u32 } from './pcapng-writer';

const dir = mkdtempSync(join(tmpdir(), 'ht-pcapng-write-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const TS = 1_700_000_000_123_456_789n;

void t.test('a one-packet file is byte for byte the blocks the spec describes', (t) => {
  const data = Buffer.from([1, 2, 3, 4, 5]);
  const got = writePcapng({
    userAppl: 'hoptrace test',
    interfaces: [{ linktype: 1, snaplen: 262144, name: 'eth0' }],
    packets: [{ interfaceId: 0, tsNs: TS, data, originalLength: 60, comment: 'hi' }],
  });
  const le = true;
  const epb = block(
    6,
    Buffer.concat([
      u32(0, le),
      u32(Number(TS >> 32n), le),
      u32(Number(TS & 0xffffffffn), le),
      u32(5, le),
      u32(60, le),
      pad4(data),
      option(1, Buffer.from('hi'), le),
      END(le),
    ]),
    le,
  );
  const want = Buffer.concat([shb(le), idb(le, 1, 'eth0', 9), epb]);
  t.equal(got.toString('hex'), want.toString('hex'));
  t.end();
});

type Asserts = Pick<typeof t, 'equal' | 'ok'>;

interface Block {
  type: number;
  at: number;
  body: Buffer;
}

/** Walks the blocks, checking each one's two lengths; fails the test on a bad one. */
function blocks(t: Asserts, b: Buffer): Block[] {
  const out: Block[] = [];
  let at = 0;
  while (at < b.length) {
    const type = b.readUInt32LE(at);
    const len = b.readUInt32LE(at + 4);
    t.equal(len % 4, 0, `block at ${at}: total length ${len} is a multiple of 4`);
    t.ok(at + len <= b.length, `block at ${at} fits in the file`);
    t.equal(b.readUInt32LE(at + len - 4), len, `block at ${at}: the trailer repeats the length`);
    out.push({ type, at, body: b.subarray(at + 8, at + len - 4) });
    at += len;
  }
  t.equal(at, b.length, 'the blocks end where the file ends');
  return out;
}

/** The options from `from` in `body`: code → values; checks padding and the end marker. */
function options(t: Asserts, body: Buffer, from: number): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let o = from;
  let ended = false;
  while (o < body.length) {
    const code = body.readUInt16LE(o);
    const len = body.readUInt16LE(o + 2);
    if (code === 0) {
      t.equal(len, 0, 'opt_endofopt has length 0');
      t.equal(o + 4, body.length, 'opt_endofopt is the last option');
      ended = true;
      break;
    }
    const value = body.subarray(o + 4, o + 4 + len);
    const padded = (len + 3) & ~3;
    t.ok(
      body.subarray(o + 4 + len, o + 4 + padded).every((x) => x === 0),
      `option ${code}: zero padding`,
    );
    out.set(code, [...(out.get(code) ?? []), value]);
    o += 4 + padded;
  }
  t.ok(ended || o === body.length, 'options end with opt_endofopt (or there are none)');
  if (out.size > 0) t.ok(ended, 'a list of options ends with opt_endofopt');
  return out;
}

const INPUT: PcapngInput = {
  userAppl: 'hoptrace 9.9.9',
  comment: 'a section comment',
  interfaces: [
    { linktype: 1, snaplen: 262144, name: 'decap@file/a.pcap', description: 'point one' },
    { linktype: 101, snaplen: 0, name: 'egress@file/b.pcapng' },
    { linktype: 276, snaplen: 96, name: 'backend@file/c.pcap', fcsLength: 4 },
  ],
  packets: Array.from({ length: 9 }, (_, i) => ({
    interfaceId: i % 3,
    tsNs: TS + BigInt(i) * 1000n,
    data: Buffer.alloc(i, 0xa0 + i),
    originalLength: 100 + i,
    ...(i % 2 === 0 ? { comment: `packet ${i}${'é'.repeat(i)}` } : {}),
  })),
};

void t.test('block layout: SHB, IDBs, EPBs with padding and options', (t) => {
  const b = writePcapng(INPUT);
  const bs = blocks(t, b);
  t.same(
    bs.map((x) => x.type),
    [0x0a0d0d0a, 1, 1, 1, ...INPUT.packets.map(() => 6)],
    'one SHB, one IDB per interface, one EPB per packet, in order',
  );
  const [s, ...rest] = bs;
  if (s === undefined) return t.end();
  t.equal(s.body.readUInt32LE(0), 0x1a2b3c4d, 'byte-order magic');
  t.equal(s.body.readUInt16LE(4), 1, 'major version 1');
  t.equal(s.body.readUInt16LE(6), 0, 'minor version 0');
  t.equal(s.body.readBigInt64LE(8), -1n, 'section length not given (-1)');
  const so = options(t, s.body, 16);
  t.equal(so.get(4)?.[0]?.toString(), 'hoptrace 9.9.9', 'shb_userappl');
  t.equal(so.get(1)?.[0]?.toString(), 'a section comment', 'opt_comment');
  const idbs = rest.slice(0, 3);
  for (const [i, x] of idbs.entries()) {
    const want = INPUT.interfaces[i];
    if (want === undefined) continue;
    t.equal(x.body.readUInt16LE(0), want.linktype, `IDB ${i}: link type`);
    t.equal(x.body.readUInt16LE(2), 0, `IDB ${i}: reserved`);
    t.equal(x.body.readUInt32LE(4), want.snaplen, `IDB ${i}: snaplen`);
    const o = options(t, x.body, 8);
    t.equal(o.get(2)?.[0]?.toString(), want.name, `IDB ${i}: if_name`);
    t.equal(o.get(3)?.[0]?.toString(), want.description, `IDB ${i}: if_description`);
    t.same([...(o.get(9)?.[0] ?? [])], [9], `IDB ${i}: if_tsresol 9 (nanoseconds)`);
    t.same(
      o.get(13)?.[0] === undefined ? undefined : [...(o.get(13)?.[0] ?? [])],
      want.fcsLength === undefined ? undefined : [want.fcsLength],
      `IDB ${i}: if_fcslen only when given`,
    );
  }
  for (const [i, x] of rest.slice(3).entries()) {
    const want = INPUT.packets[i];
    if (want === undefined) continue;
    const ts = (BigInt(x.body.readUInt32LE(4)) << 32n) | BigInt(x.body.readUInt32LE(8));
    t.equal(x.body.readUInt32LE(0), want.interfaceId, `EPB ${i}: interface id`);
    t.equal(ts, want.tsNs, `EPB ${i}: 64-bit timestamp, high word first`);
    t.equal(x.body.readUInt32LE(12), want.data.length, `EPB ${i}: captured length`);
    t.equal(x.body.readUInt32LE(16), want.originalLength, `EPB ${i}: original length`);
    const padded = (want.data.length + 3) & ~3;
    t.same([...x.body.subarray(20, 20 + want.data.length)], [...want.data], `EPB ${i}: data`);
    t.ok(
      x.body.subarray(20 + want.data.length, 20 + padded).every((v) => v === 0),
      `EPB ${i}: data padded with zeros to 32 bits`,
    );
    const o = options(t, x.body, 20 + padded);
    t.equal(o.get(1)?.[0]?.toString('utf8'), want.comment, `EPB ${i}: opt_comment`);
  }
  t.end();
});

void t.test('hoptrace reads the file back: interfaces, times, lengths, bytes', (t) => {
  const path = join(dir, 'layout.pcapng');
  writeFileSync(path, writePcapng(INPUT));
  const r = openCaptureFile(path);
  const frames = [...r.frames()].map((f) => ({ ...f, data: Buffer.from(f.data) }));
  t.equal(frames.length, INPUT.packets.length);
  for (const [i, f] of frames.entries()) {
    const want = INPUT.packets[i];
    const iface = INPUT.interfaces[want?.interfaceId ?? -1];
    if (want === undefined || iface === undefined) continue;
    t.match(f, {
      index: i + 1,
      linktype: iface.linktype,
      ifaceName: iface.name,
      tsNs: want.tsNs,
      caplen: want.data.length,
      wireLength: want.originalLength,
      snaplen: iface.snaplen,
    });
    t.same([...f.data], [...want.data]);
  }
  t.end();
});

void t.test('an option above 65535 bytes is cut at a whole UTF-8 character', (t) => {
  const long = 'é'.repeat(40000); // 80000 bytes
  const b = writePcapng({
    userAppl: 'x',
    interfaces: [{ linktype: 1, snaplen: 0, name: long }],
    packets: [],
  });
  const idbBlock = blocks(t, b)[1];
  const name = idbBlock === undefined ? undefined : options(t, idbBlock.body, 8).get(2)?.[0];
  t.equal(name?.length, 65534, 'cut to the last whole character below 65535 bytes');
  t.equal(name?.toString('utf8'), 'é'.repeat(32767));
  t.end();
});

void t.test('a packet on an interface that is not described is a bug: RangeError', (t) => {
  t.throws(
    () =>
      writePcapng({
        userAppl: 'x',
        interfaces: [],
        packets: [{ interfaceId: 0, tsNs: 0n, data: Buffer.alloc(1), originalLength: 1 }],
      }),
    RangeError,
  );
  t.end();
});

void t.test('a negative timestamp is written as 0', (t) => {
  const b = writePcapng({
    userAppl: 'x',
    interfaces: [{ linktype: 1, snaplen: 0, name: 'i' }],
    packets: [{ interfaceId: 0, tsNs: -5n, data: Buffer.alloc(0), originalLength: 0 }],
  });
  const e = blocks(t, b)[2];
  t.equal(e?.body.readUInt32LE(4), 0);
  t.equal(e?.body.readUInt32LE(8), 0);
  t.end();
});

/**
 * pcap / pcapng readers on small synthetic files written into a temp dir: both magics and byte
 * orders, pcapng interfaces with different link types and if_tsresol, records crossing the read
 * buffer's chunk boundary, the refusals (each with its FILE_* code), and the drop counts pcapng
 * Interface Statistics Blocks carry.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import {
  openCaptureFile,
  type CaptureFrame,
  type OpenCaptureOptions,
} from '../../offline/pcap-file';
import { PCAPS } from './corpus';
import { block, END, epb, idb, isb, option, shb, spb, u16, u32, u64 } from './pcapng-writer';

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-pcap-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
let fileNo = 0;

function write(bytes: Buffer): string {
  const p = join(dir, `f${++fileNo}`);
  writeFileSync(p, bytes);
  return p;
}

/** Frames copied out of the reader (its views are only valid until the next iteration). */
function readAll(
  path: string,
  opts?: OpenCaptureOptions,
): (Omit<CaptureFrame, 'data'> & { hex: string })[] {
  const out: (Omit<CaptureFrame, 'data'> & { hex: string })[] = [];
  for (const f of openCaptureFile(path, opts).frames()) {
    const { data, ...rest } = f;
    out.push({ ...rest, hex: Buffer.from(data).toString('hex') });
  }
  return out;
}

/** Reads every frame (the statistics blocks are usually last). */
function drain(r: { frames: () => Iterable<unknown> }): number {
  let n = 0;
  for (const f of r.frames()) if (f !== undefined) n++;
  return n;
}

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return isHoptraceError(e) ? e.code : `non-hoptrace error: ${String(e)}`;
  }
  return 'no error';
}

interface Rec {
  sec: number;
  frac: number;
  data: Buffer;
  wire?: number;
}

function pcap(
  opts: { le: boolean; nanos: boolean; linktype?: number; snaplen?: number; major?: number },
  recs: Rec[],
): Buffer {
  const { le } = opts;
  const magic = opts.nanos ? 0xa1b23c4d : 0xa1b2c3d4;
  const parts = [
    u32(magic, le),
    u16(opts.major ?? 2, le),
    u16(4, le),
    u32(0, le),
    u32(0, le),
    u32(opts.snaplen ?? 65535, le),
    u32(opts.linktype ?? 1, le),
  ];
  for (const r of recs) {
    parts.push(
      u32(r.sec, le),
      u32(r.frac, le),
      u32(r.data.length, le),
      u32(r.wire ?? r.data.length, le),
      r.data,
    );
  }
  return Buffer.concat(parts);
}

const DATA_A = Buffer.from('00112233445566778899aabbccddeeff0001', 'hex');
const DATA_B = Buffer.alloc(100, 0xab);

for (const le of [true, false]) {
  for (const nanos of [false, true]) {
    void t.test(`pcap ${nanos ? 'ns' : 'µs'} magic, ${le ? 'little' : 'big'}-endian`, (t) => {
      const p = write(
        pcap({ le, nanos }, [
          { sec: 1700000000, frac: 123456, data: DATA_A, wire: 60 },
          { sec: 1700000001, frac: 999, data: DATA_B },
        ]),
      );
      const r = openCaptureFile(p);
      t.equal(r.format, 'pcap');
      r.close();
      const frames = readAll(p);
      t.equal(frames.length, 2);
      const unit = nanos ? 1n : 1000n;
      t.match(frames[0], {
        index: 1,
        linktype: 1,
        caplen: 18,
        wireLength: 60,
        hex: DATA_A.toString('hex'),
      });
      t.equal(frames[0]?.tsNs, 1700000000n * 1_000_000_000n + 123456n * unit);
      t.match(frames[1], { index: 2, caplen: 100, wireLength: 100, hex: DATA_B.toString('hex') });
      t.equal(frames[1]?.tsNs, 1700000001n * 1_000_000_000n + 999n * unit);
      t.end();
    });
  }
}

void t.test('records spanning the chunk boundary read the same as with a big buffer', (t) => {
  const recs: Rec[] = [];
  for (let i = 0; i < 50; i++)
    recs.push({ sec: i, frac: i, data: Buffer.alloc(30 + ((i * 37) % 200), i) });
  const p = write(pcap({ le: true, nanos: false }, recs));
  const big = readAll(p);
  t.equal(big.length, 50);
  for (const chunkSize of [64, 100, 129, 1000])
    t.same(readAll(p, { chunkSize }), big, `chunk ${chunkSize}`);
  t.end();
});

void t.test('skipUntil: the frames before are read past, checked, not yielded', (t) => {
  const recs: Rec[] = [];
  for (let i = 0; i < 60; i++)
    recs.push({ sec: 1700000000 + i, frac: i, data: Buffer.alloc(20 + ((i * 53) % 300), i) });
  const pcapFile = write(pcap({ le: false, nanos: true }, recs));
  // pcapng: a second interface described after frame 20, with its own link type and name.
  const blocks = [shb(true), idb(true, 1, 'eth0', null)];
  recs.forEach((r, i) => {
    if (i === 20) blocks.push(idb(true, 101, 'tun0', 9));
    blocks.push(epb(true, i >= 20 && i % 2 === 0 ? 1 : 0, BigInt(r.sec) * 1_000_000n, r.data));
  });
  const ngFile = write(Buffer.concat(blocks));
  for (const file of [pcapFile, ngFile]) {
    const all = readAll(file);
    for (const chunkSize of [64, 1 << 20]) {
      // Before the first frame: from frame 37 on, as read from the start, numbered as in the file.
      const r = openCaptureFile(file, { chunkSize });
      r.skipUntil(37);
      const got: (Omit<CaptureFrame, 'data'> & { hex: string })[] = [];
      for (const { data, ...rest } of r.frames())
        got.push({ ...rest, hex: Buffer.from(data).toString('hex') }); // views are reused
      t.same(
        got,
        all.slice(36),
        `${r.format}, ${chunkSize}-byte reads: frames 37.. as from the start`,
      );
      t.equal(r.stats().frames, 60, 'the frames read past are counted as read');
      // In the middle of a read: after frame 5, on to frame 50.
      const m = openCaptureFile(file, { chunkSize });
      const it = m.frames();
      for (let k = 0; k < 5; k++) it.next();
      m.skipUntil(50);
      const next = it.next().value;
      t.equal(next?.index, 50, 'the next frame yielded is the one asked for');
      t.equal(
        next === undefined ? '' : Buffer.from(next.data).toString('hex'),
        all[49]?.hex,
        'with its bytes',
      );
      m.close();
    }
  }
  // A malformed record or a cut before the frame asked for still fails the read.
  const bad = pcap({ le: true, nanos: false }, recs.slice(0, 10));
  bad.writeUInt32LE(
    1 << 30,
    24 + 16 * 3 + recs.slice(0, 3).reduce((a, r) => a + r.data.length, 0) + 8,
  );
  const badFile = write(bad);
  t.equal(
    codeOf(() => {
      const r = openCaptureFile(badFile);
      r.skipUntil(9);
      drain(r);
    }),
    'FILE_BAD_RECORD',
    'a record claiming 1 GiB before the frame asked for is refused',
  );
  const cut = write(pcap({ le: true, nanos: false }, recs.slice(0, 10)).subarray(0, 500));
  t.equal(
    codeOf(() => {
      const r = openCaptureFile(cut);
      r.skipUntil(9);
      drain(r);
    }),
    'FILE_TRUNCATED',
    'a file cut before the frame asked for says so',
  );
  t.end();
});

void t.test('pcap refusals and edge cases', (t) => {
  t.equal(
    readAll(write(pcap({ le: true, nanos: false }, []))).length,
    0,
    'header only: zero frames',
  );
  t.equal(
    codeOf(() => openCaptureFile(join(dir, 'missing.pcap'))),
    'FILE_NOT_FOUND',
  );
  t.equal(
    codeOf(() => openCaptureFile(write(Buffer.alloc(0)))),
    'FILE_TOO_SHORT',
  );
  t.equal(
    codeOf(() => openCaptureFile(write(Buffer.from('d4c3b2a10200', 'hex')))),
    'FILE_TOO_SHORT',
  );
  t.equal(
    codeOf(() => openCaptureFile(write(Buffer.from('hello, this is not a capture file')))),
    'FILE_BAD_MAGIC',
  );
  t.equal(
    codeOf(() => openCaptureFile(write(pcap({ le: true, nanos: false, major: 1 }, [])))),
    'FILE_BAD_VERSION',
  );
  t.equal(
    codeOf(() =>
      openCaptureFile(write(pcap({ le: true, nanos: false, linktype: 0x00300001 }, []))),
    ),
    'FILE_BAD_LINKTYPE_FIELD',
  );
  // FCS bits (F = bit 26, FCS length in bits 28-31) are allowed; decodeFrame masks them.
  const fcs = readAll(
    write(
      pcap({ le: true, nanos: false, linktype: 0x24000001 }, [{ sec: 0, frac: 0, data: DATA_A }]),
    ),
  );
  t.equal(fcs[0]?.linktype, 0x24000001);
  // A record claiming more than any snaplen allows is refused, not allocated.
  const huge = pcap({ le: true, nanos: false }, [{ sec: 0, frac: 0, data: DATA_A }]);
  huge.writeUInt32LE(0x7fffffff, 24 + 8);
  t.equal(
    codeOf(() => readAll(write(huge))),
    'FILE_BAD_RECORD',
  );
  // Cut inside the second record: the first frame is delivered, then FILE_TRUNCATED.
  const whole = pcap({ le: true, nanos: false }, [
    { sec: 0, frac: 0, data: DATA_A },
    { sec: 0, frac: 0, data: DATA_B },
  ]);
  for (const cut of [24 + 16 + 18 + 5, whole.length - 1]) {
    const seen: number[] = [];
    const code = codeOf(() => {
      for (const f of openCaptureFile(write(whole.subarray(0, cut))).frames()) seen.push(f.index);
    });
    t.equal(code, 'FILE_TRUNCATED', `cut at ${cut}`);
    t.same(seen, [1]);
  }
  t.end();
});

for (const le of [true, false]) {
  void t.test(
    `pcapng ${le ? 'little' : 'big'}-endian: two IDBs, if_name, if_tsresol, EPB, SPB, skipped blocks`,
    (t) => {
      const file = Buffer.concat([
        shb(le),
        idb(le, 1, 'eth0', 9), // ns
        idb(le, 101, 'tun0', 0x80 | 10), // 2^-10 s
        block(0x00000bad, Buffer.from('custom block, skipped'.padEnd(24)), le),
        epb(le, 1, 3n * 1024n + 512n, DATA_A, 40),
        epb(le, 0, 1_700_000_000_123_456_789n, DATA_B),
        spb(le, DATA_A),
        block(5, Buffer.alloc(16), le), // interface statistics without counters
      ]);
      const p = write(file);
      const r = openCaptureFile(p);
      t.equal(r.format, 'pcapng');
      r.close();
      const frames = readAll(p);
      t.equal(frames.length, 3);
      t.match(frames[0], {
        index: 1,
        linktype: 101,
        ifaceName: 'tun0',
        caplen: 18,
        wireLength: 40,
        hex: DATA_A.toString('hex'),
      });
      t.equal(frames[0]?.tsNs, 3_500_000_000n, '2^-10 resolution: 3.5 s');
      t.match(frames[1], { index: 2, linktype: 1, ifaceName: 'eth0', caplen: 100 });
      t.equal(frames[1]?.tsNs, 1_700_000_000_123_456_789n);
      t.match(frames[2], {
        index: 3,
        linktype: 1,
        ifaceName: 'eth0',
        caplen: 18,
        hex: DATA_A.toString('hex'),
      });
      for (const chunkSize of [64, 77])
        t.same(readAll(p, { chunkSize }), frames, `chunk ${chunkSize}`);
      t.end();
    },
  );
}

void t.test('pcapng default resolution is microseconds; header-only file has zero frames', (t) => {
  const p = write(Buffer.concat([shb(true), idb(true, 1, null, null), epb(true, 0, 5n, DATA_A)]));
  t.equal(readAll(p)[0]?.tsNs, 5000n);
  t.equal(readAll(write(shb(true))).length, 0);
  t.end();
});

for (const le of [true, false]) {
  void t.test(
    `pcapng ${le ? 'little' : 'big'}-endian: drops from Interface Statistics Blocks`,
    (t) => {
      const file = Buffer.concat([
        shb(le),
        idb(le, 1, 'eth0', null),
        idb(le, 1, 'eth1', null),
        epb(le, 0, 1n, DATA_A),
        isb(le, 0, { ifrecv: 10n, ifdrop: 5n }), // superseded by interface 0's next block
        epb(le, 1, 2n, DATA_A),
        isb(le, 1, { ifrecv: 3n }), // counts, but no drops
        isb(le, 0, { ifrecv: 20n, ifdrop: 7n, osdrop: 2n ** 32n + 3n }), // both kinds, high word set
        // A new section numbers its interfaces afresh: its interface 0 is another interface.
        shb(le),
        idb(le, 1, 'eth2', null),
        epb(le, 0, 3n, DATA_A),
        isb(le, 0, { ifdrop: 4n }),
      ]);
      const p = write(file);
      const r = openCaptureFile(p);
      t.same(
        r.stats(),
        { frames: 0, statsBlocks: 0, dropped: null, span: null },
        'nothing read yet: no frame, no span',
      );
      const it = r.frames();
      it.next();
      t.same(
        r.stats(),
        {
          frames: 1,
          statsBlocks: 0,
          dropped: null,
          span: { earliestNs: 1000n, latestNs: 1000n },
        },
        'after the first frame: its time',
      );
      for (let x = it.next(); x.done !== true; x = it.next());
      // eth1 carried a packet but its block counts no drops: the file's drops are not known
      // (they were 7 + 2^32 + 3 + 4, as if eth1 had lost none), only what the others recorded.
      t.same(r.stats(), {
        frames: 3,
        statsBlocks: 4,
        dropped: null,
        span: { earliestNs: 1000n, latestNs: 3000n },
        dropsPartial: {
          recorded: 7 + 2 ** 32 + 3 + 4,
          unrecorded: ['interface 1 (eth1)'],
          count: 1,
        },
      });
      for (const chunkSize of [64, 77]) {
        const c = openCaptureFile(p, { chunkSize });
        drain(c);
        t.same(c.stats(), r.stats(), `chunk ${chunkSize}`);
      }
      t.end();
    },
  );
}

void t.test('pcapng: statistics blocks without drop counts, and sloppy ones, are no error', (t) => {
  const counted = (parts: Buffer[]): ReturnType<ReturnType<typeof openCaptureFile>['stats']> => {
    const r = openCaptureFile(
      write(Buffer.concat([shb(true), idb(true, 1, null, null), ...parts])),
    );
    drain(r);
    const counts = r.stats();
    delete counts.span; // the drop counts only
    return counts;
  };
  t.same(counted([epb(true, 0, 1n, DATA_A)]), { frames: 1, statsBlocks: 0, dropped: null });
  t.same(counted([isb(true, 0, { ifrecv: 9n })]), { frames: 0, statsBlocks: 1, dropped: null });
  t.same(counted([isb(true, 0, { ifdrop: 0n })]), { frames: 0, statsBlocks: 1, dropped: 0 });
  // libpcap skips statistics blocks: a file tcpdump opens is not refused for one.
  const short = block(5, Buffer.alloc(8), true); // no room for its timestamp
  t.same(counted([short, epb(true, 0, 1n, DATA_A)]), {
    frames: 1,
    statsBlocks: 0,
    dropped: null,
  });
  const wrongLength = block(
    5,
    Buffer.concat([u32(0, true), u32(0, true), u32(0, true), option(5, u32(9, true), true)]),
    true,
  ); // isb_ifdrop of 4 bytes, not 8: skipped
  t.same(counted([wrongLength]), { frames: 0, statsBlocks: 1, dropped: null });
  const overrun = block(
    5,
    Buffer.concat([
      u32(0, true),
      u32(0, true),
      u32(0, true),
      option(5, u64(6n, true), true),
      u16(7, true),
      u16(200, true), // isb_osdrop claiming 200 bytes: past the block, the walk stops there
      END(true),
    ]),
    true,
  );
  t.same(counted([overrun, epb(true, 0, 1n, DATA_A)]), { frames: 1, statsBlocks: 1, dropped: 6 });
  t.same(counted([spb(true, DATA_A)]).frames, 1, 'simple packet blocks count as frames');
  t.end();
});

void t.test('a real dumpcap capture: the drops dumpcap printed are the ones read', (t) => {
  // test/unit/data/README.md: dumpcap printed "Packets received/dropped on interface 'vrx':
  // 12/43968" when it stopped.
  const r = openCaptureFile(
    join(__dirname, '..', '..', '..', 'test', 'unit', 'data', 'dumpcap-drops.pcapng'),
  );
  drain(r);
  t.same(r.stats(), {
    frames: 12,
    statsBlocks: 1,
    dropped: 43968,
    span: { earliestNs: 1796043838700274666n, latestNs: 1796043840084286832n },
  });
  t.end();
});

void t.test('classic pcap records no drop counts', (t) => {
  const r = openCaptureFile(
    write(pcap({ le: true, nanos: false }, [{ sec: 1, frac: 2, data: DATA_A }])),
  );
  drain(r);
  t.same(r.stats(), {
    frames: 1,
    statsBlocks: 0,
    dropped: null,
    span: { earliestNs: 1_000_002_000n, latestNs: 1_000_002_000n },
  });
  t.end();
});

void t.test('pcapng refusals', (t) => {
  const le = true;
  // Trailer length differs from the header's.
  const badTrailer = Buffer.concat([shb(le), idb(le, 1, null, null)]);
  badTrailer.writeUInt32LE(999, badTrailer.length - 4);
  t.equal(
    codeOf(() => readAll(write(badTrailer))),
    'FILE_BAD_BLOCK',
  );
  // An option longer than its block.
  const longOpt = idb(le, 1, 'eth0', null);
  longOpt.writeUInt16LE(0x3030, 16 + 2);
  t.equal(
    codeOf(() => readAll(write(Buffer.concat([shb(le), longOpt])))),
    'FILE_BAD_BLOCK',
  );
  // A packet on an interface that was never described.
  t.equal(
    codeOf(() => readAll(write(Buffer.concat([shb(le), epb(le, 3, 0n, DATA_A)])))),
    'FILE_BAD_BLOCK',
  );
  // Block length not a multiple of 4.
  const odd = Buffer.concat([shb(le), idb(le, 1, null, null)]);
  odd.writeUInt32LE(21, shb(le).length + 4);
  t.equal(
    codeOf(() => readAll(write(odd))),
    'FILE_BAD_BLOCK',
  );
  // Unknown byte-order magic.
  const bom = shb(le);
  bom.writeUInt32LE(0x11223344, 8);
  t.equal(
    codeOf(() => openCaptureFile(write(bom))),
    'FILE_BAD_BLOCK',
  );
  // File cut inside a block.
  const whole = Buffer.concat([shb(le), idb(le, 1, null, null), epb(le, 0, 0n, DATA_B)]);
  t.equal(
    codeOf(() => readAll(write(whole.subarray(0, whole.length - 10)))),
    'FILE_TRUNCATED',
  );
  t.end();
});

// Standard input read as a capture (`-`) is not closed after: closed, the next open() is given
// fd 0, and libuv aborts the process when it closes a handle on fd 0-2. A first version closed it
// (`uv__close: Assertion fd > STDERR_FILENO` crashed a unit test run once).
void t.test('`-`: standard input is read, and left open', (t) => {
  const script = [
    `const { openCaptureFile } = require(${JSON.stringify(join(__dirname, '..', '..', 'offline', 'pcap-file.js'))});`,
    "const { openSync } = require('node:fs');",
    "const r = openCaptureFile('-');",
    'let n = 0; for (const f of r.frames()) n += f.caplen > 0 ? 1 : 0;',
    'r.close();',
    "process.stdout.write(`${n} ${openSync('/dev/null', 'r')}`);",
  ].join('\n');
  const r = spawnSync(process.execPath, ['-e', script], {
    input: readFileSync(join(PCAPS, 'zeek_http-get.pcap')),
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.equal(r.status, 0, r.stderr);
  const [frames, fd] = r.stdout.split(' ').map(Number);
  t.equal(frames, 14, 'every frame read from standard input');
  t.ok((fd ?? 0) > 2, `the next file opened is not given fd 0-2 (got ${String(fd)})`);
  t.end();
});

void t.test('the span of the frames: untimed packets and skipped frames never make one up', (t) => {
  const at = (parts: Buffer[]): string =>
    write(Buffer.concat([shb(true), idb(true, 1, null, null), ...parts]));
  // A Simple Packet Block has no time: it is not 1970 (a first version put 0 in the span).
  const spbOnly = openCaptureFile(at([spb(true, DATA_A)]));
  drain(spbOnly);
  t.equal(spbOnly.stats().span, null, 'only untimed packets: no span');
  const mixed = openCaptureFile(at([spb(true, DATA_A), epb(true, 0, 7n, DATA_A)]));
  drain(mixed);
  t.same(mixed.stats().span, { earliestNs: 7000n, latestNs: 7000n }, 'the timed packets only');
  // Frames read past (skipUntil) are not in the span, so there is none to claim.
  const skipping = openCaptureFile(at([epb(true, 0, 1n, DATA_A), epb(true, 0, 2n, DATA_A)]));
  skipping.skipUntil(2);
  skipping.skipUntil(0);
  drain(skipping);
  t.equal(skipping.stats().span, undefined, 'skipped once: no span, even after');
  t.end();
});

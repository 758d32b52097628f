/**
 * A length a capture file claims never becomes an allocation (hardening issue): a pcap record
 * claiming ~4 GiB under a header snaplen of 0xffffffff, one above libpcap's 262144 under a raised
 * snaplen, a pcapng block claiming ~4 GiB or 15 MiB the file does not hold, and an Enhanced Packet
 * Block claiming ~4 GiB captured bytes — through every path that reads files: the JS reader, the
 * native fast path (summary-file.ts), `analyzeFiles` on both paths, the file capture sources
 * (FileSource, PcapParserSource) and the `decode` / `analyze` commands. Each gives its coded
 * error (code, file, record and offset) after the frames before it — analyze analyses those
 * frames and names the damage in the capture health and a caution — and no Buffer above a few
 * MiB is allocated on the way (every Buffer allocation is watched, and arrayBuffers measured).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError, type HoptraceError } from '../../common/errors';
import { FileSource } from '../../agent/capture/file-source';
import { PcapParserSource } from '../../agent/capture/pcap-parser-source';
import type { CaptureSource } from '../../agent/capture/source';
import { analyzeFiles } from '../../offline/analyze-files';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { openCaptureFile } from '../../offline/pcap-file';
import { openSummaryPcap } from '../../offline/summary-file';
import { loadNativeAddon } from '../../native/loader';
import { block, epb, idb, shb, u32 } from './pcapng-writer';
import { PCAPS } from './corpus';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');
const good = join(PCAPS, 'zeek_http-get.pcap');
const dir = mkdtempSync(join(tmpdir(), 'ht-file-bounds-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The largest allocation a read may make: the fast path's 2 MiB chunk, with room to spare. */
const MAX_ALLOCATION = 4 << 20;

/** Every Buffer allocation while `fn` runs: the largest size asked for, and the arrayBuffers rise. */
async function watchAllocations(fn: () => Promise<void> | void): Promise<{
  largest: number;
  arrayBuffers: number;
}> {
  const statics = Buffer as unknown as Record<string, (size: number, ...rest: unknown[]) => Buffer>;
  const names = ['alloc', 'allocUnsafe', 'allocUnsafeSlow'];
  const saved = new Map(names.map((n) => [n, statics[n]]));
  let largest = 0;
  let peak = 0;
  const before = process.memoryUsage().arrayBuffers;
  const sample = (): void => {
    peak = Math.max(peak, process.memoryUsage().arrayBuffers - before);
  };
  for (const [n, real] of saved) {
    if (real === undefined) continue;
    statics[n] = (size: number, ...rest: unknown[]): Buffer => {
      largest = Math.max(largest, size);
      const b = real.call(Buffer, size, ...rest);
      sample();
      return b;
    };
  }
  try {
    await fn();
    sample();
  } finally {
    for (const [n, real] of saved) if (real !== undefined) statics[n] = real;
  }
  return { largest, arrayBuffers: peak };
}

// ---- files ----------------------------------------------------------------------------------

/** A 60-byte Ethernet frame (zeros): what the good first record holds. */
const FRAME = Buffer.alloc(60);

/** A little-endian µs pcap: header with `snaplen`, then records (caplen as claimed, `bytes` held). */
function pcap(snaplen: number, records: { caplen: number; bytes: Buffer }[]): Buffer {
  const h = Buffer.alloc(24);
  h.writeUInt32LE(0xa1b2c3d4, 0);
  h.writeUInt16LE(2, 4);
  h.writeUInt16LE(4, 6);
  h.writeUInt32LE(snaplen >>> 0, 16);
  h.writeUInt32LE(1, 20);
  const parts: Buffer[] = [h];
  for (const r of records) {
    const rh = Buffer.alloc(16);
    rh.writeUInt32LE(1_700_000_000, 0);
    rh.writeUInt32LE(r.caplen >>> 0, 8);
    rh.writeUInt32LE(r.caplen >>> 0, 12);
    parts.push(rh, r.bytes);
  }
  return Buffer.concat(parts);
}

/** An Enhanced Packet Block header with its fields as given, the rest of the block absent. */
function epbHead(totalLength: number, caplen: number): Buffer {
  return Buffer.concat([6, totalLength, 0, 0, 0, caplen, 60].map((v) => u32(v, true)));
}

const le = true;
const ngStart = Buffer.concat([shb(le), idb(le, 1, null, 9), epb(le, 0, 1n, FRAME)]);
/** Offset of the second packet block (the first is good). */
const ngAt = ngStart.length;

interface Case {
  name: string;
  bytes: Buffer;
  format: 'pcap' | 'pcapng';
  code: string;
  /** The error's detail, after `CODE: path: `. */
  detail: RegExp;
}

const CASES: Case[] = [
  {
    name: 'caplen 0xffffff00 under snaplen 0xffffffff',
    format: 'pcap',
    bytes: pcap(0xffffffff, [
      { caplen: 60, bytes: FRAME },
      { caplen: 0xffffff00, bytes: Buffer.alloc(100, 0x41) },
    ]),
    code: 'FILE_BAD_RECORD',
    detail:
      /^record 2 at offset 100 claims 4294967040 captured bytes, above libpcap's maximum of 262144 \(the header's snaplen is 4294967295\)$/,
  },
  {
    name: 'caplen 0x7fffff00 under snaplen 0xffffffff, 3 MiB of data after it',
    format: 'pcap',
    bytes: pcap(0xffffffff, [
      { caplen: 60, bytes: FRAME },
      { caplen: 0x7fffff00, bytes: Buffer.alloc(3 << 20, 0x41) },
    ]),
    code: 'FILE_BAD_RECORD',
    detail: /^record 2 at offset 100 claims 2147483392 captured bytes, above libpcap's maximum/,
  },
  {
    // libpcap refuses it too: the header's snaplen does not raise max_snaplen_for_dlt.
    name: 'caplen 300000 under a snaplen of 1 MiB',
    format: 'pcap',
    bytes: pcap(1 << 20, [
      { caplen: 60, bytes: FRAME },
      { caplen: 300000, bytes: Buffer.alloc(300000, 0x41) },
    ]),
    code: 'FILE_BAD_RECORD',
    detail:
      /^record 2 at offset 100 claims 300000 captured bytes, above libpcap's maximum of 262144 \(the header's snaplen is 1048576\)$/,
  },
  {
    // Not a capture cut short inside its last record: the bytes after it would hold a whole record
    // of the header's snaplen (a damaged length the review found read as "the file ends here").
    name: 'caplen 262144 under a snaplen of 65535, 70,000 bytes after it',
    format: 'pcap',
    bytes: pcap(65535, [
      { caplen: 60, bytes: FRAME },
      { caplen: 262144, bytes: Buffer.alloc(70_000, 0x41) },
    ]),
    code: 'FILE_BAD_RECORD',
    detail:
      /^record 2 at offset 100 claims 262144 captured bytes, more than the header's snaplen of 65535, and the 70000 bytes after it would hold a whole record of that snaplen: its length is damaged, not the capture cut short$/,
  },
  {
    name: 'an EPB whose block length claims 0xfffffff0',
    format: 'pcapng',
    bytes: Buffer.concat([ngStart, epbHead(0xfffffff0, 60), FRAME]),
    code: 'FILE_BAD_BLOCK',
    detail: new RegExp(
      `^block length 4294967280 is above libpcap's maximum of 16777216 \\(block at offset ${ngAt}\\)$`,
    ),
  },
  {
    name: 'an EPB whose block length claims 15 MiB the file does not hold',
    format: 'pcapng',
    bytes: Buffer.concat([ngStart, epbHead(15 << 20, 60), FRAME]),
    code: 'FILE_TRUNCATED',
    detail: new RegExp(`^block at offset ${ngAt} needs 15728640 bytes, the file has 88$`),
  },
  {
    name: 'an unknown block claiming 15 MiB the file does not hold',
    format: 'pcapng',
    bytes: Buffer.concat([ngStart, u32(0x0bad, le), u32(15 << 20, le), Buffer.alloc(100)]),
    code: 'FILE_TRUNCATED',
    detail: new RegExp(`^block at offset ${ngAt} needs 15728640 bytes, the file has 108$`),
  },
  {
    name: 'an EPB claiming 0xffffff00 captured bytes',
    format: 'pcapng',
    bytes: Buffer.concat([ngStart, block(6, epbHead(0, 0xffffff00).subarray(8), le)]),
    code: 'FILE_BAD_BLOCK',
    detail: new RegExp(
      `^packet 2 claims 4294967040 captured bytes, above libpcap's maximum of 262144 \\(block at offset ${ngAt}\\)$`,
    ),
  },
];

let n = 0;
const files = CASES.map((c) => {
  const path = join(dir, `${++n}.${c.format}`);
  writeFileSync(path, c.bytes);
  return { ...c, path };
});

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'match' | 'fail'>;

/** The error is the case's: a HoptraceError with its code, the file as where, its detail. */
function isTheError(t: Asserts, c: (typeof files)[number], e: unknown, label: string): void {
  if (!isHoptraceError(e)) {
    t.fail(`${label}: not a HoptraceError: ${String(e)}`);
    return;
  }
  t.equal(e.code, c.code, `${label}: ${e.message}`);
  t.equal(e.where, c.path, `${label}: names the file`);
  t.match(e.detail, c.detail, `${label}: says what and where in the file`);
  t.ok(e.hint !== undefined && e.hint.length > 0, `${label}: gives a hint`);
}

function bounded(t: Asserts, m: { largest: number; arrayBuffers: number }, label: string): void {
  t.ok(m.largest <= MAX_ALLOCATION, `${label}: largest Buffer ${m.largest} bytes`);
  t.ok(m.arrayBuffers <= 4 * MAX_ALLOCATION, `${label}: arrayBuffers rose ${m.arrayBuffers} bytes`);
}

// ---- readers --------------------------------------------------------------------------------

for (const c of files) {
  void t.test(`${c.name}: the readers refuse it without allocating it`, async (t) => {
    let frames = 0;
    let err: unknown = null;
    const js = await watchAllocations(() => {
      try {
        const it = openCaptureFile(c.path).frames();
        while (it.next().done !== true) frames++;
      } catch (e) {
        err = e;
      }
    });
    isTheError(t, c, err, 'JS reader');
    t.equal(frames, 1, 'JS reader: the good frame first');
    bounded(t, js, 'JS reader');

    frames = 0;
    err = null;
    const fast = await watchAllocations(() => {
      try {
        const r = openSummaryPcap(c.path);
        if (r === null) throw new Error('the fast path did not open the file');
        for (let b = r.next(); b !== null; b = r.next()) frames += b.count;
      } catch (e) {
        err = e;
      }
    });
    isTheError(t, c, err, 'fast path');
    t.equal(frames, 1, 'fast path: the good frame first');
    bounded(t, fast, 'fast path');

    for (const fastPath of [true, false]) {
      const label = `analyzeFiles (${fastPath ? 'fast' : 'JS'} path)`;
      err = null;
      let result: AnalysisResult | null = null;
      const m = await watchAllocations(() => {
        try {
          result = analyzeFiles(
            {
              points: [
                { name: 'decap', file: good },
                { name: 'backend', file: c.path },
              ],
              inventory: { nodes: {}, pods: {} },
              selector: { client: '141.142.228.5' },
            },
            { fast: fastPath },
          );
        } catch (e) {
          err = e;
        }
      });
      // Analysed up to the cut or the damage, after the good frame (analyze-cut.test.ts): the
      // capture health says where reading stopped and why.
      t.equal(err, null, `${label}: analysed up to where reading stopped`);
      const h = (result as AnalysisResult | null)?.captureHealth?.[1];
      t.equal(h?.packets, 1, `${label}: the good frame`);
      if (c.code === 'FILE_TRUNCATED') t.ok(h?.truncated !== undefined, `${label}: cut`);
      else t.match(h?.damaged, { code: c.code, detail: c.detail }, `${label}: damaged`);
      bounded(t, m, label);
    }
  });
}

// ---- capture sources ------------------------------------------------------------------------

/** Runs a file source to its end: the events delivered and the error it ended (or failed) with. */
async function replay(src: CaptureSource): Promise<{ events: number; err: unknown }> {
  let events = 0;
  return new Promise((resolve) => {
    src
      .start(
        (batch) => {
          events += batch.length;
        },
        (err: HoptraceError | null) => {
          resolve({ events, err });
        },
      )
      .catch((e: unknown) => {
        resolve({ events, err: e });
      });
  });
}

const spec = { point: 'backend', node: 'n1', iface: 'file' };
for (const c of files) {
  const sources: [string, () => CaptureSource][] = [
    ['FileSource', () => new FileSource(c.path, spec)],
  ];
  // pcap-parser reads classic pcap only (pcapng is FILE_BAD_MAGIC, capture-contract.test.ts).
  if (c.format === 'pcap')
    sources.push(['PcapParserSource', () => new PcapParserSource(c.path, spec)]);
  for (const [name, make] of sources) {
    void t.test(`${c.name}: ${name} ends with the error, after the good frame`, async (t) => {
      let out: { events: number; err: unknown } = { events: 0, err: null };
      const m = await watchAllocations(async () => {
        out = await replay(make());
      });
      isTheError(t, c, out.err, name);
      t.equal(out.events, 1, `${name}: the good frame first`);
      bounded(t, m, name);
    });
  }
}

void t.test(
  'PcapParserSource: a file cut inside its last record ends with FILE_TRUNCATED',
  async (t) => {
    const whole = pcap(65535, [
      { caplen: 60, bytes: FRAME },
      { caplen: 60, bytes: FRAME },
    ]);
    const cases = [
      { cut: whole.length - 7, detail: /^record 2 at offset 100 needs 60 bytes, the file has 53$/ },
      { cut: 100 + 9, detail: /^record 2 header cut after 9 bytes at offset 100$/ },
    ];
    for (const { cut, detail } of cases) {
      const path = join(dir, `cut-${cut}.pcap`);
      writeFileSync(path, whole.subarray(0, cut));
      const viaParser = await replay(new PcapParserSource(path, spec));
      const viaReader = await replay(new FileSource(path, spec));
      t.equal(viaParser.events, 1, 'the frame before the cut');
      t.ok(isHoptraceError(viaParser.err), String(viaParser.err));
      t.equal((viaParser.err as HoptraceError).code, 'FILE_TRUNCATED');
      t.match((viaParser.err as HoptraceError).detail, detail);
      t.equal(
        (viaParser.err as HoptraceError).message,
        (viaReader.err as HoptraceError).message,
        'the words of the default reader',
      );
    }
    const short = join(dir, 'short.pcap');
    writeFileSync(short, whole.subarray(0, 10));
    const r = await replay(new PcapParserSource(short, spec));
    t.equal((r.err as HoptraceError).code, 'FILE_TOO_SHORT', 'a file shorter than its header');
  },
);

// ---- the commands ---------------------------------------------------------------------------

function hoptrace(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

for (const c of files.filter((f) => f.code !== 'FILE_TRUNCATED')) {
  void t.test(`${c.name}: decode exits 1 with the coded error; analyze says it`, (t) => {
    const want = `${c.code}: ${c.path}: `;
    const detail = new RegExp(c.detail.source.replace(/^\^/, '').replace(/\$$/, ''));
    const decode = hoptrace('decode', c.path);
    t.equal(decode.code, 1, 'decode exits 1');
    t.ok(decode.stderr.includes(want), decode.stderr);
    t.match(decode.stderr.split(want)[1] ?? '', detail, 'decode: what and where');
    t.equal(decode.stdout.split('\n').filter((l) => l !== '').length, 1, 'decode: the good frame');
    // analyze uses the frame before the damage (a verdict: exit 0 or 3) and says where it stopped.
    const analyze = hoptrace('analyze', '--point', `decap=${good}`, '--point', `backend=${c.path}`);
    t.ok(analyze.code === 0 || analyze.code === 3, `analyze gives a verdict: ${analyze.stderr}`);
    const caution = `caution: backend: ${c.path} is damaged at byte `;
    t.ok(analyze.stdout.includes(caution), analyze.stdout);
    t.match(analyze.stdout.split(caution)[1] ?? '', `(${c.code}: `, 'analyze: the code');
    t.match(analyze.stdout.split(`(${c.code}: `)[1] ?? '', detail, 'analyze: what and where');
    t.notMatch(analyze.stderr + decode.stderr, /FILE_NOT_FOUND|out of range|\n\s+at /, 'no stack');
    t.end();
  });
}

/**
 * Retention's headers-only cut (issue 16: frames are retained headers only unless the capture
 * asked for the payload): the C cut the capture callback makes (summary.c's walk, headers.c for
 * SLOW frames, through the addon's headersEnd) against the reference decoder's payloadOffset —
 * equal on every frame the fast path takes, never past the payload the reference sees on any
 * frame of the corpus, their header prefixes and mutated copies — and the TypeScript writer
 * (`cap`, file replay) cutting a TCP request at its payload without `payload`, keeping it whole
 * with it. Fails (never skips) without the addon.
 */
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PcapRetentionWriter } from '../../agent/capture/retention';
import { framePayloadSpan, payloadOffset } from '../../core/decode/frame';
import { SUMMARY_BYTES, SUMMARY_LAYOUT, summaryPortTable } from '../../core/decode/summary';
import { loadNativeAddon } from '../../native/loader';
import { openCaptureFile } from '../../offline/pcap-file';
import { PCAPS } from './corpus';
import { xorshift32 } from './xorshift';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}
const addon = load.addon;
const ports = summaryPortTable();

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const ETH_V4 = '020000000002 020000000001 0800';
const ETH_V6 = '020000000002 020000000001 86dd';
const V4_SRC_DST = '0a5a002a 0af40205';
const V6_SRC_DST = `fd00${'0'.repeat(26)}01 fd00${'0'.repeat(26)}02`;
const HTTP = Buffer.from(
  'GET /account HTTP/1.1\r\nHost: web\r\nAuthorization: Bearer s3cr3t\r\nCookie: session=abc\r\n\r\n',
);

/** IPv4 header of a `proto` datagram carrying `len` bytes after it. */
function ipv4(proto: number, len: number): string {
  const total = (20 + len).toString(16).padStart(4, '0');
  return `4500 ${total} 1234 4000 40 ${proto.toString(16).padStart(2, '0')} 0000 ${V4_SRC_DST}`;
}
function ipv6(next: number, len: number): string {
  return `60000000 ${len.toString(16).padStart(4, '0')} ${next.toString(16).padStart(2, '0')} 40 ${V6_SRC_DST}`;
}
/** TCP header with the timestamp option (32 bytes), PSH|ACK. */
const TCP_TS = 'd4c3 1f90 00000001 00000002 8018 01f5 0000 0000 0101080a 00000010 00000020';

/** Frames whose cut is known, each with where its payload starts (structure comment first). */
const CASES: { name: string; bytes: Buffer; cut: number }[] = [
  {
    name: 'Ethernet[IPv4[TCP+ts[HTTP request]]] (FAST)',
    bytes: Buffer.concat([hex(ETH_V4 + ipv4(6, 32 + HTTP.length) + TCP_TS), HTTP]),
    cut: 14 + 20 + 32,
  },
  {
    name: 'Ethernet[IPv6[hop-by-hop[TCP+ts[HTTP request]]]] (SLOW: extension header)',
    bytes: Buffer.concat([
      hex(ETH_V6 + ipv6(0, 8 + 32 + HTTP.length) + '0600 0104 00000000' + TCP_TS),
      HTTP,
    ]),
    cut: 14 + 40 + 8 + 32,
  },
  {
    name: 'Ethernet[IPv4[GRE[IPv4[TCP+ts[HTTP request]]]]] (SLOW: GRE)',
    bytes: Buffer.concat([
      hex(
        ETH_V4 +
          ipv4(47, 4 + 20 + 32 + HTTP.length) +
          '0000 0800' +
          ipv4(6, 32 + HTTP.length) +
          TCP_TS,
      ),
      HTTP,
    ]),
    cut: 14 + 20 + 4 + 20 + 32,
  },
  {
    name: 'Ethernet[IPv4[ICMP echo[data]]] (SLOW: ICMP)',
    bytes: Buffer.concat([
      hex(ETH_V4 + ipv4(1, 8 + 32) + '0800 0000 0001 0002'),
      HTTP.subarray(0, 32),
    ]),
    cut: 14 + 20 + 8,
  },
  {
    name: 'Ethernet[IPv4 later fragment[data]] (SLOW: no transport header)',
    bytes: Buffer.concat([
      hex(
        ETH_V4 +
          `4500 ${(20 + 40).toString(16).padStart(4, '0')} 1234 0005 40 06 0000 ${V4_SRC_DST}`,
      ),
      HTTP.subarray(0, 40),
    ]),
    cut: 14 + 20,
  },
  {
    name: 'Ethernet[ARP] (no IP: kept to the snaplen)',
    bytes: hex(
      'ffffffffffff 020000000001 0806 0001 0800 06 04 0001 020000000001 0a000001 000000000000 0a000002',
    ),
    cut: 42,
  },
];

void t.test('known frames: the C cut is where the payload starts, as the reference says', (t) => {
  for (const c of CASES) {
    t.equal(addon.headersEnd(1, c.bytes, ports), c.cut, `C: ${c.name}`);
    const ref = payloadOffset(1, c.bytes);
    t.equal(ref ?? c.bytes.length, c.cut, `reference: ${c.name}`);
  }
  t.end();
});

/** 1 when the fast path takes the frame (its summary record's status). */
function isFast(linktype: number, data: Uint8Array): boolean {
  const src = Buffer.alloc(16 + ((data.length + 7) & ~7));
  src.writeUInt32LE(data.length, 0);
  src.writeUInt32LE(data.length, 4);
  src.set(data, 16);
  const out = Buffer.alloc(SUMMARY_BYTES);
  addon.summarize(src, 0, src.length, SUMMARY_LAYOUT.batch, linktype, 262144, ports, out);
  return out[0] === 1;
}

interface Tally {
  frames: number;
  fast: number;
  /** SLOW frames cut before the reference's payload start (fewer header bytes kept). */
  shorter: number;
  bad: number;
}

function check(
  test: Pick<typeof t, 'fail'>,
  label: string,
  lt: number,
  data: Uint8Array,
  n: Tally,
): void {
  const b = Buffer.from(data.buffer, data.byteOffset, data.length);
  const cut = addon.headersEnd(lt, b, ports);
  const ref = payloadOffset(lt, data);
  const span = framePayloadSpan(lt, data);
  const fast = isFast(lt, data);
  n.frames++;
  if (fast) n.fast++;
  // Never past the captured bytes, never a byte the reference calls payload, and a FAST frame
  // exactly at payloadOffset.
  const why =
    cut > data.length
      ? 'cut past the captured bytes'
      : span !== null && cut > span.start
        ? 'cut keeps payload bytes'
        : fast && cut !== (ref ?? data.length)
          ? 'FAST frame cut elsewhere than payloadOffset'
          : null;
  if (why !== null) {
    n.bad++;
    if (n.bad <= 10) test.fail(`${label}: ${why}`, { cut, ref, span, fast });
  } else if (!fast && ref !== null && cut < ref) n.shorter++;
}

function corpus(): { file: string; linktype: number; data: Uint8Array }[] {
  const out: { file: string; linktype: number; data: Uint8Array }[] = [];
  for (const file of readdirSync(PCAPS).sort()) {
    if (!/\.(pcap|pcapng)$/.test(file) || file.startsWith('libpcap_')) continue;
    try {
      for (const f of openCaptureFile(join(PCAPS, file)).frames())
        out.push({ file, linktype: f.linktype, data: Uint8Array.from(f.data) });
    } catch {
      // Files the reader refuses are the reader's tests' business.
    }
  }
  return out;
}

void t.test('the corpus, its header prefixes and mutated copies: never past the payload', (t) => {
  const frames = corpus();
  const n: Tally = { frames: 0, fast: 0, shorter: 0, bad: 0 };
  const rand = xorshift32(16);
  for (const [i, f] of frames.entries()) {
    check(t, `${f.file} #${i}`, f.linktype, f.data, n);
    // Every prefix up to 128 bytes (cut inside each header), for a sample of frames.
    if (i % 7 === 0)
      for (let k = 0; k < Math.min(f.data.length, 128); k++)
        check(t, `${f.file} #${i} [0,${k})`, f.linktype, f.data.subarray(0, k), n);
    for (let m = 0; m < 3; m++) {
      const c = Uint8Array.from(f.data);
      for (let j = 0; j < 3 && c.length > 0; j++) c[rand(Math.min(c.length, 96))] = rand(256);
      check(t, `${f.file} #${i} mutated`, f.linktype, c, n);
    }
  }
  for (const c of CASES)
    for (let k = 0; k <= c.bytes.length; k++)
      check(t, `${c.name} [0,${k})`, 1, c.bytes.subarray(0, k), n);
  t.comment(
    `${n.frames} frames, ${n.fast} FAST (cut exactly at payloadOffset); ${n.shorter} SLOW ones cut before it (fewer header bytes, never payload)`,
  );
  t.ok(n.frames > 1000, 'the corpus was read');
  t.equal(n.bad, 0, 'no frame keeps a payload byte; every FAST frame is cut at payloadOffset');
  t.end();
});

void t.test('the TypeScript writer: headers only by default, whole with payload', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-retention-cut-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const tcp = CASES[0];
  const arp = CASES[CASES.length - 1];
  if (tcp === undefined || arp === undefined) throw new Error('no cases');
  const keep = (payload: boolean): { wireLength: number; data: Buffer }[] => {
    const path = join(dir, `${String(payload)}.pcap`);
    const fd = openSync(path, 'w+');
    const w = new PcapRetentionWriter({ fd, snaplen: 256, maxBytes: 1 << 20, payload }, 1);
    w.add(1n, tcp.bytes.length, tcp.bytes);
    // A caller that decoded the frame already gives its payloadOffset.
    w.add(2n, tcp.bytes.length, tcp.bytes, payloadOffset(1, tcp.bytes));
    w.add(3n, arp.bytes.length, arp.bytes);
    w.close();
    closeSync(fd);
    return [...openCaptureFile(path).frames()].map((f) => ({
      wireLength: f.wireLength,
      data: Buffer.from(f.data),
    }));
  };
  const headers = keep(false);
  for (const f of headers.slice(0, 2)) {
    t.equal(f.data.length, 66, 'cut after the TCP header (14 + 20 + 32)');
    t.equal(f.wireLength, tcp.bytes.length, 'orig_len is the wire length: the cut shows');
    t.same(f.data, tcp.bytes.subarray(0, 66));
    t.notOk(f.data.includes(Buffer.from('Authorization')), 'no request header kept');
  }
  t.equal(headers[2]?.data.length, arp.bytes.length, 'a frame without IP is kept to the snaplen');
  const whole = keep(true);
  for (const f of whole.slice(0, 2)) t.same(f.data, tcp.bytes, 'payload: the whole frame');
  t.end();
});

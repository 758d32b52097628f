/**
 * The identity-header scan over a request head that spans several TCP segments
 * (core/report/request-segments.ts joins them, core/report/identity-scan.ts reads the join): a
 * header in the second segment, a PROXY line alone in the first, a header line split across two,
 * a retransmission and an overlapping resend, a missing segment, a cut frame mid-chain, the
 * segment and byte bounds, sequence numbers wrapping at 2^32 — over the agents' retained frames,
 * and over a capture file read again. What was not read is said unread ("continued"), in words.
 *
 * Each frame: Ethernet[IPv4[TCP[payload]]], 54 bytes of headers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { AnalysisResult, FlowPacketSummary } from '../../core/report/analysis-result';
import { liveIdentityHeaders } from '../../core/report/identity-scan';
import type { RetainedFrames } from '../../core/report/live-evidence';
import { whatToChange } from '../../core/report/what-to-change';
import { renderVerdictText, renderReportMarkdown } from '../../core/report/report';
import { renderReportHtml } from '../../core/report/report-html';
import { scanIdentityHeaders } from '../../offline/identity-scan';
import { tcp, writePcap, type Pkt } from './frames';
import { SCENARIOS } from './fixtures-scenarios';

const base = SCENARIOS.preserved();
const CLIENT = { src: '10.90.0.42', sport: 40000, dst: '10.244.2.5', dport: 8080 };
const HEAD = 'GET /hoptrace-probe-abc HTTP/1.1\r\nHost: web\r\n';
const XFF = 'X-Forwarded-For: 10.90.0.42\r\n';
const ISN = 1_000_000;
const T0 = 1700000000002250000n;

/** One packet of the backend's flow: a request data segment unless `dir` says reply. */
interface Seg {
  seq: number;
  payload: string | Buffer;
  /** Bytes the agent retained of the frame (default all). */
  caplen?: number;
  dir?: 'request' | 'reply';
  /** Not retained by the agent (asked for, but missing). */
  missing?: boolean;
}

const text = (p: string | Buffer): string => (typeof p === 'string' ? p : p.toString('latin1'));

function pkt(s: Seg): Pkt {
  const reply = s.dir === 'reply';
  return tcp(0n, {
    src: reply ? CLIENT.dst : CLIENT.src,
    dst: reply ? CLIENT.src : CLIENT.dst,
    sport: reply ? CLIENT.dport : CLIENT.sport,
    dport: reply ? CLIENT.sport : CLIENT.dport,
    seq: s.seq,
    flags: 0x18,
    payload: text(s.payload),
  });
}

/** An analysis whose one point, backend, saw `segs` as frames 1… in this order. */
function resultOf(segs: Seg[], flowOmitted = 0): AnalysisResult {
  const backend = base.points.find((p) => p.name === 'backend');
  if (backend === undefined) throw new Error('no backend point in the fixture');
  const flow: FlowPacketSummary[] = segs.map((s, i) => ({
    frame: i + 1,
    tsNs: String(T0 + BigInt(i)),
    dir: s.dir ?? 'request',
    tuple:
      s.dir === 'reply'
        ? { src: CLIENT.dst, sport: CLIENT.dport, dst: CLIENT.src, dport: CLIENT.sport }
        : CLIENT,
    flags: 0x18,
    seq: s.seq,
    ack: 1,
    payloadLength: text(s.payload).length,
    tunneled: false,
  }));
  return { ...base, points: [{ ...backend, flow, flowOmitted }] };
}

/** The backend's retained frames for `segs`, cut at each one's `caplen`. */
function retainedOf(segs: Seg[]): Map<string, RetainedFrames> {
  const frames: RetainedFrames['frames'][number][] = [];
  const missing: RetainedFrames['missing'][number][] = [];
  segs.forEach((s, i) => {
    if (s.missing === true) {
      missing.push({ frame: i + 1, reason: 'RETENTION_FULL' });
      return;
    }
    const data = pkt(s).data;
    frames.push({
      frame: i + 1,
      tsNs: T0 + BigInt(i),
      origLen: data.length,
      bytes: data.subarray(0, s.caplen ?? data.length),
    });
  });
  return new Map([['backend', { point: 'backend', linktype: 1, snaplen: 256, frames, missing }]]);
}

/** Segments carrying `parts` back to back from sequence number `isn`. */
function inOrder(parts: (string | Buffer)[], isn = ISN): Seg[] {
  let seq = isn;
  return parts.map((payload) => {
    const s = { seq: seq >>> 0, payload };
    seq = (seq + text(payload).length) % 2 ** 32;
    return s;
  });
}

const scanOf = (segs: Seg[], flowOmitted = 0): ReturnType<typeof liveIdentityHeaders> =>
  liveIdentityHeaders(resultOf(segs, flowOmitted), retainedOf(segs), true);

void t.test('X-Forwarded-For in the second segment: found, named by that frame', (t) => {
  const scan = scanOf(inOrder([HEAD, `${XFF}\r\n`]));
  t.same(scan.scanned, ['backend']);
  t.same(scan.seen, [{ point: 'backend', frame: 2, kind: 'x-forwarded-for', value: '10.90.0.42' }]);
  t.same(scan.cut, []);
  t.same(scan.continued, [], 'the head ended in the second segment');
  // A head that ended in the first segment: the second is not read (its bytes are a body).
  const body = scanOf(inOrder([`${HEAD}\r\n`, `${XFF}\r\n`]));
  t.same(body.seen, [], 'a body is not a header');
  t.same(body.continued, []);
  t.end();
});

void t.test('a PROXY header alone in the first segment, the HTTP request in the second', (t) => {
  const v1 = scanOf(
    inOrder(['PROXY TCP4 192.0.2.1 10.244.2.5 56324 8080\r\n', `${HEAD}${XFF}\r\n`]),
  );
  t.same(v1.seen, [
    { point: 'backend', frame: 1, kind: 'proxy-v1', value: 'TCP4 192.0.2.1 10.244.2.5 56324 8080' },
    { point: 'backend', frame: 2, kind: 'x-forwarded-for', value: '10.90.0.42' },
  ]);
  t.same(v1.continued, []);
  // Signature, version 2 / PROXY, TCP over IPv4: 192.0.2.1:56324 -> 10.244.2.5:8080.
  const v2 = Buffer.from([
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c,
    192, 0, 2, 1, 10, 244, 2, 5, 0xdc, 0x04, 0x1f, 0x90,
  ]);
  const scan = scanOf(inOrder([v2, `${HEAD}X-Real-IP: 203.0.113.7\r\n\r\n`]));
  t.same(scan.seen, [
    {
      point: 'backend',
      frame: 1,
      kind: 'proxy-v2',
      value: 'TCP4 192.0.2.1:56324 -> 10.244.2.5:8080',
    },
    { point: 'backend', frame: 2, kind: 'x-real-ip', value: '203.0.113.7' },
  ]);
  // The v2 header itself split after its signature: joined, its addresses read.
  const split = scanOf(inOrder([v2.subarray(0, 14), v2.subarray(14), `${HEAD}\r\n`]));
  t.same(split.seen, [
    {
      point: 'backend',
      frame: 1,
      kind: 'proxy-v2',
      value: 'TCP4 192.0.2.1:56324 -> 10.244.2.5:8080',
    },
  ]);
  t.same(split.continued, []);
  t.end();
});

void t.test(
  'a header line split across two segments: whole, named by the frame it starts in',
  (t) => {
    const name = scanOf(inOrder([`${HEAD}X-Forwar`, `ded-For: 10.90.0.42\r\n\r\n`]));
    t.same(name.seen, [
      { point: 'backend', frame: 1, kind: 'x-forwarded-for', value: '10.90.0.42' },
    ]);
    const value = scanOf(inOrder([`${HEAD}X-Forwarded-For: 10.9`, `0.0.42\r\n\r\n`]));
    t.same(value.seen, [
      { point: 'backend', frame: 1, kind: 'x-forwarded-for', value: '10.90.0.42' },
    ]);
    const crlf = scanOf(inOrder([`${HEAD}${XFF}\r`, `\n`]));
    t.same(crlf.continued, [], 'the empty line split between CR and LF still ends the head');
    t.end();
  },
);

void t.test(
  'retransmissions and duplicates are skipped, an overlapping resend gives only its new bytes',
  (t) => {
    const [a, b] = inOrder([HEAD, `${XFF}\r\n`]);
    if (a === undefined || b === undefined) throw new Error('two segments');
    const ack = { seq: 1, payload: 'HTTP/1.1 100 Continue\r\n\r\n', dir: 'reply' as const };
    const scan = scanOf([a, ack, a, { ...a, payload: HEAD.slice(0, 10) }, b, b]);
    t.same(scan.seen, [
      { point: 'backend', frame: 5, kind: 'x-forwarded-for', value: '10.90.0.42' },
    ]);
    t.same(scan.continued, []);
    // A resend repacketized: it starts 10 bytes into the first segment and carries the rest.
    const whole = `${HEAD}${XFF}\r\n`;
    const overlap = scanOf([
      { seq: ISN, payload: whole.slice(0, HEAD.length) },
      { seq: ISN + 10, payload: whole.slice(10) },
    ]);
    t.same(overlap.seen, [
      { point: 'backend', frame: 2, kind: 'x-forwarded-for', value: '10.90.0.42' },
    ]);
    t.same(overlap.continued, []);
    t.end();
  },
);

void t.test(
  'a missing segment: the scan stops at the gap and says it could not read past it',
  (t) => {
    const [a, b, c] = inOrder([HEAD, 'User-Agent: probe\r\n', `${XFF}\r\n`]);
    if (a === undefined || b === undefined || c === undefined) throw new Error('three segments');
    const scan = scanOf([a, c]);
    t.same(scan.scanned, ['backend'], 'scanned as far as it goes');
    t.same(scan.seen, [], 'the header after the gap is not read');
    t.match(scan.continued, [
      {
        point: 'backend',
        frame: 1,
        segments: 1,
        payloadBytes: HEAD.length,
        why: `the next segment (seq ${b.seq}) was not captured here before frame 2 (seq ${c.seq}): missing or out of order, so the bytes after it cannot be placed`,
      },
    ]);
    // Out of order: the later segment arrives first; the scan does not reorder, and says so.
    t.match(scanOf([a, c, b]).continued, [{ frame: 1, why: /missing or out of order/ }]);
    // A frame the agent could not give, later in the chain.
    t.match(scanOf([a, { ...b, missing: true }, c]).continued, [
      {
        frame: 1,
        segments: 1,
        why: /frame 2, the next segment, could not be read: .*RETENTION_FULL/,
      },
    ]);
    // The head goes on, and nothing more was captured (or kept by the analysis).
    t.match(scanOf([a]).continued, [
      { frame: 1, why: 'no further data segment of the request was captured here' },
    ]);
    t.match(scanOf([a], 3).continued, [{ why: /keeps only the connection's first 1 packets/ }]);

    const r = { ...resultOf([a, c]), identityHeaders: scan };
    const words = `at backend the request's headers continued past the ${HEAD.length} payload bytes of its first data segment read`;
    const detail = whatToChange(r).questions[0]?.detail ?? '';
    t.match(detail, words, 'What to change says it');
    t.notMatch(detail, /request's headers at [^;]*backend/, 'backend is not said to carry none');
    t.match(renderVerdictText(r), `header: ${words}`, 'the text report says it');
    const meta = { generatedAt: '1970-01-01T00:00:00Z', inputs: [] };
    t.match(renderReportMarkdown(r, meta), words, 'the Markdown report says it');
    t.match(renderReportHtml(r, meta), words.replace(/'/g, '&#39;'), 'the HTML page says it');
    t.end();
  },
);

void t.test('a cut frame in the middle of the chain: the scan stops there, bytes summed', (t) => {
  const pad = `User-Agent: ${'x'.repeat(250)}\r\n`; // its frame is 54 + 264 bytes, above 256
  const segs = inOrder([HEAD, pad, `${XFF}\r\n`]);
  const second = segs[1];
  if (second === undefined) throw new Error('three segments');
  second.caplen = 256;
  const scan = scanOf(segs);
  t.same(scan.seen, [], 'the header after the cut is not read');
  t.same(scan.continued, [], 'the cut says it, once');
  t.same(scan.cut, [
    {
      point: 'backend',
      frame: 2,
      payloadBytes: HEAD.length + 256 - 54,
      payloadLength: HEAD.length + pad.length,
      segments: 2,
      why: "the agent retained at most 256 bytes a frame (the capture's snaplen)",
    },
  ]);
  const detail = whatToChange({ ...resultOf(segs), identityHeaders: scan }).questions[0]?.detail;
  t.match(
    detail,
    `at backend only the first ${HEAD.length + 202} of the request's ${HEAD.length + pad.length} payload bytes in its first 2 data segments were looked at`,
  );
  t.end();
});

void t.test('the bounds: at most 16 segments and 64 KiB of a request head', (t) => {
  const lines = Array.from({ length: 16 }, (_, i) => `X-Pad-${i}: ${'p'.repeat(20)}\r\n`);
  const many = scanOf(inOrder([HEAD, ...lines.slice(1), `${XFF}\r\n`]));
  t.same(many.seen, [], 'the 17th segment is not read');
  t.match(many.continued, [{ frame: 16, segments: 16, why: 'the scan reads at most 16 segments' }]);
  const atBound = scanOf(inOrder([HEAD, ...lines.slice(2), `${XFF}\r\n`]));
  t.match(atBound.seen, [{ frame: 16, kind: 'x-forwarded-for' }], 'the 16th is');

  const big = `X-Big: ${'b'.repeat(40000)}\r\n`;
  const bytes = scanOf(inOrder([`${HEAD}${big}`, big, `${XFF}\r\n`]));
  t.same(bytes.seen, []);
  t.match(bytes.continued, [
    {
      frame: 2,
      segments: 2,
      payloadBytes: 65536,
      why: 'the scan reads at most 65536 bytes of a request head',
    },
  ]);
  t.end();
});

void t.test('sequence numbers wrapping at 2^32 inside the head', (t) => {
  const isn = 2 ** 32 - 10; // the first segment's bytes run past 2^32
  const segs = inOrder([HEAD, 'User-Agent: probe\r\n', `${XFF}\r\n`], isn);
  t.ok((segs[1]?.seq ?? 0) < isn, 'the second segment starts after the wrap');
  const scan = scanOf(segs);
  t.same(scan.seen, [{ point: 'backend', frame: 3, kind: 'x-forwarded-for', value: '10.90.0.42' }]);
  t.same(scan.continued, []);
  // The first segment retransmitted after the wrap: behind, skipped.
  const [a, b, c] = segs;
  if (a === undefined || b === undefined || c === undefined) throw new Error('three segments');
  t.match(scanOf([a, b, a, c]).seen, [{ frame: 4, kind: 'x-forwarded-for' }]);
  t.end();
});

void t.test('offline: the segments read again from the file, one pass', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-idseg-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const reply = { seq: 1, payload: 'x', dir: 'reply' as const };
  const [a, b] = inOrder(['PROXY TCP4 192.0.2.1 10.244.2.5 56324 8080\r\n', `${HEAD}${XFF}\r\n`]);
  if (a === undefined || b === undefined) throw new Error('two segments');
  const segs = [a, reply, b];
  const file = writePcap(join(dir, 'backend.pcap'), segs.map(pkt));
  const scan = scanIdentityHeaders([{ name: 'backend', file }], resultOf(segs));
  t.same(scan.seen, [
    { point: 'backend', frame: 1, kind: 'proxy-v1', value: 'TCP4 192.0.2.1 10.244.2.5 56324 8080' },
    { point: 'backend', frame: 3, kind: 'x-forwarded-for', value: '10.90.0.42' },
  ]);
  t.same(scan.continued, []);
  // The analysis names a frame the file does not have: said, not guessed.
  const short = writePcap(join(dir, 'short.pcap'), [a].map(pkt));
  t.match(scanIdentityHeaders([{ name: 'backend', file: short }], resultOf(segs)).continued, [
    { frame: 1, why: /frame 3, the next segment, could not be read: the file has no frame 3/ },
  ]);
  t.end();
});

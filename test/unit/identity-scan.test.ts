/**
 * The identity-header scan both routes share (core/report/identity-scan.ts): over a live
 * capture's retained frames (liveIdentityHeaders) — headers only (the capture did not ask for the
 * payload: nothing read, and said so), a whole frame and one cut by the snaplen, a header present
 * or absent, PROXY protocol v2, a frame the agent could not give, a point never fetched — and
 * over a capture file read again (offline/identity-scan.ts) with a snaplen that cut the request.
 * A cut frame is said cut with the bytes looked at, never "no header"; "What to change" repeats
 * it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { FlowPacketSummary } from '../../core/report/analysis-result';
import { liveIdentityHeaders, requestDataPacket } from '../../core/report/identity-scan';
import type { RetainedFrames } from '../../core/report/live-evidence';
import { whatToChange } from '../../core/report/what-to-change';
import { scanIdentityHeaders } from '../../offline/identity-scan';
import { tcp, writePcap } from './frames';
import { SCENARIOS } from './fixtures-scenarios';

const result = SCENARIOS.preserved();
const NAMES = ['decap', 'egress', 'backend'];

function packetAt(point: string): FlowPacketSummary {
  const p = requestDataPacket(result, point);
  if (p === null) throw new Error(`no request data segment at ${point}`);
  return p;
}

/** Ethernet[IPv4[TCP[payload]]]: the request data segment at a point, 54 bytes of headers. */
function frameBytes(payload: string | Buffer): Buffer {
  const seg = {
    src: '10.90.0.42',
    dst: '10.244.2.5',
    sport: 40000,
    dport: 8080,
    seq: 1,
    flags: 0x18,
    payload: typeof payload === 'string' ? payload : payload.toString('latin1'),
  };
  return tcp(0n, seg).data;
}

/** One point's retained frames: the request data frame, cut at `snaplen`. */
function retained(point: string, payload: string | Buffer, snaplen = 256): RetainedFrames {
  const p = packetAt(point);
  const data = frameBytes(payload);
  return {
    point,
    linktype: 1,
    snaplen,
    frames: [
      {
        frame: p.frame,
        tsNs: BigInt(p.tsNs),
        origLen: data.length,
        bytes: data.subarray(0, snaplen),
      },
    ],
    missing: [],
  };
}

const HEAD = 'GET /hoptrace-probe-abc HTTP/1.1\r\nHost: web\r\n';
const LONG = `User-Agent: ${'x'.repeat(240)}\r\n`;

void t.test('whole frames: a header added on the path, and none at the others', (t) => {
  const frames = new Map([
    ['decap', retained('decap', `${HEAD}\r\n`)],
    ['egress', retained('egress', `${HEAD}\r\n`)],
    ['backend', retained('backend', `${HEAD}X-Forwarded-For: 10.90.0.42\r\n\r\n`)],
  ]);
  const scan = liveIdentityHeaders(result, frames, true);
  t.same(scan.scanned, NAMES);
  t.same(scan.notScanned, []);
  t.same(scan.cut, [], 'every payload whole');
  t.same(scan.seen, [
    {
      point: 'backend',
      frame: packetAt('backend').frame,
      kind: 'x-forwarded-for',
      value: '10.90.0.42',
    },
  ]);
  const detail = whatToChange({ ...result, identityHeaders: scan }).questions[0]?.detail ?? '';
  t.match(detail, /x-forwarded-for `10\.90\.0\.42` at backend .*not at the first point/);
  t.end();
});

void t.test('headers only (no evidencePayload): nothing read, and said plainly', (t) => {
  const xff = `${HEAD}X-Forwarded-For: 10.90.0.42\r\n\r\n`;
  // What the agents retain without the payload: each frame up to its TCP header (54 bytes).
  const frames = new Map(NAMES.map((n) => [n, retained(n, xff, 54)]));
  const scan = liveIdentityHeaders(result, frames, false);
  t.equal(scan.headersOnly, true);
  t.same(scan.scanned, [], 'no request head read');
  t.same(scan.seen, []);
  t.same(scan.cut, []);
  t.match(
    scan.notScanned,
    NAMES.map((point) => ({ point, why: /headers only, no payload bytes .*--evidence-payload/ })),
  );
  // Even bytes that hold a payload (an older agent's 256 B) are not read unasked.
  const older = new Map(NAMES.map((n) => [n, retained(n, xff)]));
  t.same(liveIdentityHeaders(result, older, false).seen, [], 'payload not asked for: not read');
  const detail = whatToChange({ ...result, identityHeaders: scan }).questions[0]?.detail ?? '';
  t.match(
    detail,
    /whether the request carries X-Forwarded-For, Forwarded, X-Real-IP or a PROXY protocol line was not looked for: the payload was not retained .*--evidence-payload — evidencePayload: true in POST \/v1\/captures/,
  );
  t.notMatch(detail, /no X-Forwarded-For/, 'never "no identity header"');
  t.notMatch(detail, /not read at/, 'said once, not per point');
  t.end();
});

void t.test('cut by the snaplen: the header past it is not seen and not denied', (t) => {
  const xff = `${HEAD}${LONG}X-Forwarded-For: 10.90.0.42\r\n\r\n`;
  const frames = new Map([
    ['decap', retained('decap', `${HEAD}\r\n`)],
    ['egress', retained('egress', `${HEAD}\r\n`)],
    ['backend', retained('backend', xff)],
  ]);
  const scan = liveIdentityHeaders(result, frames, true);
  t.same(scan.scanned, NAMES, 'the cut frame was scanned, as far as it goes');
  t.same(scan.seen, [], 'the header lies past the cut');
  t.same(scan.cut, [
    {
      point: 'backend',
      frame: packetAt('backend').frame,
      payloadBytes: 256 - 54,
      payloadLength: xff.length,
      why: "the agent retained at most 256 bytes a frame (the capture's snaplen)",
    },
  ]);
  const detail = whatToChange({ ...result, identityHeaders: scan }).questions[0]?.detail ?? '';
  t.match(
    detail,
    /no X-Forwarded-For, Forwarded, X-Real-IP or PROXY protocol header in the request's headers at decap, egress; at backend only the first 202 of the request's \d+ payload bytes were looked at \(the agent retained at most 256 bytes a frame \(the capture's snaplen\)\): a header past them could not be seen/,
  );
  t.notMatch(
    detail,
    /segment at [^;]*backend/,
    'backend is not among the points said to have none',
  );

  // The same request whole: the header is there.
  const whole = new Map(frames);
  whole.set('backend', retained('backend', xff, 65535));
  const full = liveIdentityHeaders(result, whole, true);
  t.same(full.cut, []);
  t.match(full.seen, [{ point: 'backend', kind: 'x-forwarded-for', value: '10.90.0.42' }]);

  // Cut at 100 bytes: said, with that cause.
  const short = new Map(frames);
  short.set('backend', retained('backend', xff, 100));
  t.match(liveIdentityHeaders(result, short, true).cut, [
    {
      point: 'backend',
      payloadBytes: 46,
      why: /at most 100 bytes a frame \(the capture's snaplen\)/,
    },
  ]);

  // Cut inside the headers: scanned, 0 payload bytes looked at.
  const headersOnly = new Map(frames);
  headersOnly.set('backend', retained('backend', xff, 54));
  t.match(liveIdentityHeaders(result, headersOnly, true).cut, [
    { point: 'backend', payloadBytes: 0 },
  ]);
  const insideIp = new Map(frames);
  insideIp.set('backend', retained('backend', xff, 30));
  t.match(
    liveIdentityHeaders(result, insideIp, true).cut,
    [{ point: 'backend', payloadBytes: 0, why: /at most 30 bytes a frame/ }],
    'cut inside the IP header: still said cut, not "no payload"',
  );
  t.end();
});

void t.test('PROXY protocol v2 and X-Real-IP at the start of a retained payload', (t) => {
  // Signature, version 2 / PROXY, TCP over IPv4: 192.0.2.1:56324 -> 10.244.2.5:8080.
  const v2 = Buffer.from([
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 0x0c,
    192, 0, 2, 1, 10, 244, 2, 5, 0xdc, 0x04, 0x1f, 0x90,
  ]);
  const frames = new Map([
    ['decap', retained('decap', `${HEAD}X-Real-IP: 203.0.113.7\r\n\r\n`)],
    ['egress', retained('egress', `${HEAD}\r\n`)],
    ['backend', retained('backend', Buffer.concat([v2, Buffer.from(`${HEAD}\r\n`)]))],
  ]);
  const scan = liveIdentityHeaders(result, frames, true);
  t.match(scan.seen, [
    { point: 'decap', kind: 'x-real-ip', value: '203.0.113.7' },
    { point: 'backend', kind: 'proxy-v2', value: 'TCP4 192.0.2.1:56324 -> 10.244.2.5:8080' },
  ]);
  const detail = whatToChange({ ...result, identityHeaders: scan }).questions[0]?.detail ?? '';
  t.match(detail, /already there at decap, so the client sent it/);
  t.end();
});

void t.test('frames the agent could not give, or never fetched: not scanned, with why', (t) => {
  const decap = retained('decap', `${HEAD}\r\n`);
  const egress: RetainedFrames = {
    point: 'egress',
    linktype: 1,
    snaplen: 256,
    frames: [],
    missing: [{ frame: packetAt('egress').frame, reason: 'RETENTION_FULL' }],
  };
  const wrong = retained('backend', `${HEAD}X-Forwarded-For: 1.2.3.4\r\n\r\n`);
  const mismatched: RetainedFrames = {
    ...wrong,
    frames: wrong.frames.map((f) => ({ ...f, tsNs: f.tsNs + 1n })),
  };
  const scan = liveIdentityHeaders(
    result,
    new Map([
      ['decap', decap],
      ['egress', egress],
      ['backend', mismatched],
    ]),
    true,
  );
  t.same(scan.scanned, ['decap']);
  t.match(scan.notScanned, [
    { point: 'egress', why: /could not give frame \d+ \(RETENTION_FULL\)/ },
    { point: 'backend', why: /not the frame analysed \(FRAMES_MISMATCH\)/ },
  ]);
  t.same(scan.seen, [], 'the mismatched bytes are not read');
  const none = liveIdentityHeaders(
    result,
    new Map([['decap', decap]]),
    true,
    new Map([['egress', 'its stored frames cannot be read (STORE_IO)']]),
  );
  t.match(none.notScanned, [
    { point: 'egress', why: 'its stored frames cannot be read (STORE_IO)' },
    { point: 'backend', why: /was not fetched from its agent/ },
  ]);
  const detail = whatToChange({ ...result, identityHeaders: none }).questions[0]?.detail ?? '';
  t.match(detail, /at decap; not read at egress: its stored frames cannot be read/);
  t.match(detail, /not read at backend: frame \d+ was not fetched/);
  t.end();
});

void t.test('offline: a file whose snaplen cut the request says how far it was read', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-idscan-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const p = packetAt('backend');
  const xff = `${HEAD}${LONG}X-Forwarded-For: 10.90.0.42\r\n\r\n`;
  // Frames before it are filler: only the request's frame number is read again.
  const filler = Array.from({ length: p.frame - 1 }, () =>
    tcp(0n, { src: '1.1.1.1', dst: '2.2.2.2', sport: 1, dport: 2, seq: 1, flags: 0x02 }),
  );
  const cut = writePcap(join(dir, 'cut.pcap'), [
    ...filler,
    tcp(
      0n,
      {
        src: '10.90.0.42',
        dst: '10.244.2.5',
        sport: 40000,
        dport: 8080,
        seq: 1,
        flags: 0x18,
        payload: xff,
      },
      96,
    ),
  ]);
  const scan = scanIdentityHeaders(
    [
      { name: 'decap', file: '-' },
      { name: 'backend', file: cut },
    ],
    result,
  );
  t.match(scan.notScanned, [
    {
      point: 'decap',
      why: /^standard input \(-\) was read once, by the analysis, and cannot be read again/,
    },
    { point: 'egress', why: 'no capture file was given for this point' },
  ]);
  t.same(scan.seen, []);
  t.match(scan.cut, [
    {
      point: 'backend',
      payloadBytes: 96 - 54,
      payloadLength: xff.length,
      why: /the file holds 96 of the frame's \d+ bytes \(the capture's snaplen\)/,
    },
  ]);
  t.end();
});

/**
 * Per-flow counters (issue 20, native/pcap-batch/src/fold.c through the addon's Folder, which runs
 * summary_quick + fold_quick, else summary_one + fold_packet, per frame exactly as the capture
 * callback does; fold_quick decides as fold_packet would): which packets are
 * sent whole, that every other packet is counted exactly once into its flow's counter, that the
 * table is bounded and a full table degrades to sending (never to silence), and what the rest of
 * the system does with a counter — the wire round trip, correlation ignoring it, the report
 * counting it for the matched connection only. Fails (never skips) without the addon.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parseCaptureRequest } from '../../collector/capture-request';
import { decodePacketEvent, encodePacketEvent } from '../../common/codec';
import { decodeEventsEnvelope, encodeEventsEnvelope } from '../../common/events-wire';
import type { PacketEvent } from '../../common/event';
import { flowView } from '../../core/correlate/match-point';
import { analyzeEvents } from '../../core/report/analyze';
import { packetCounts } from '../../core/report/packet-counts';
import { captureCommand } from '../../core/report/reproduce';
import {
  FOLD,
  SUMMARY_BYTES,
  SUMMARY_LAYOUT,
  summaryEvent,
  summaryPortTable,
} from '../../core/decode/summary';
import { loadNativeAddon, type PcapFolder } from '../../native/loader';
import { openCaptureFile, type CaptureFrame } from '../../offline/pcap-file';
import { PCAPS } from './corpus';
import { xorshift32 } from './xorshift';
import {
  ACK,
  ADDR,
  CLIENT,
  DIRECT,
  FIN,
  INVENTORY,
  MS,
  T0,
  exchange,
  pt,
  rev,
} from './fixtures-events';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}
const addon = load.addon;
const ports = summaryPortTable();
const CTX = { point: 'p', node: 'n', iface: 'eth0' };

const ip4 = (s: string): number[] => s.split('.').map(Number);

/** An Ethernet/IPv4 frame carrying a UDP datagram (proto 17) or a TCP segment (6). */
function frame(
  proto: 6 | 17,
  src: string,
  sport: number,
  dst: string,
  dport: number,
  payload: string | Buffer = 'x'.repeat(20),
  flags = ACK,
): Buffer {
  const p = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const th = proto === 6 ? 20 : 8;
  const b = Buffer.alloc(14 + 20 + th + p.length);
  b.writeUInt16BE(0x0800, 12);
  b[14] = 0x45;
  b.writeUInt16BE(20 + th + p.length, 16);
  b[22] = 64;
  b[23] = proto;
  Buffer.from(ip4(src)).copy(b, 26);
  Buffer.from(ip4(dst)).copy(b, 30);
  b.writeUInt16BE(sport, 34);
  b.writeUInt16BE(dport, 36);
  if (proto === 17) b.writeUInt16BE(8 + p.length, 38);
  else {
    b.writeUInt32BE(1000, 38);
    b[46] = 0x50;
    b[47] = flags;
    b.writeUInt16BE(65535, 48);
  }
  p.copy(b, 14 + 20 + th);
  return b;
}

const big = (_: string, v: unknown): unknown => (typeof v === 'bigint' ? v.toString() : v);

/** summarize's record of one frame (batch layout: caplen, wire length, ts, data padded to 8). */
function summarizeOne(data: Buffer, wireLength: number, tsNs: bigint, linktype: number): Buffer {
  const src = Buffer.alloc(16 + ((data.length + 7) & ~7));
  src.writeUInt32LE(data.length, 0);
  src.writeUInt32LE(wireLength, 4);
  src.writeBigUInt64LE(tsNs, 8);
  data.copy(src, 16);
  const out = Buffer.alloc(SUMMARY_BYTES);
  addon.summarize(src, 0, src.length, SUMMARY_LAYOUT.batch, linktype, 0xffffffff, ports, out);
  return out;
}

/** Pushes frames in order (frame numbers from 1, 1 ms apart from `t0`); what each became. */
class Feed {
  n = 0;
  sent = 0;
  counted = 0;
  readonly sentFrames: number[] = [];
  constructor(
    readonly f: PcapFolder,
    public ts = T0,
  ) {}
  push(b: Buffer, gapNs = MS): boolean {
    this.n++;
    this.ts += gapNs;
    const r = this.f.push(b, b.length, this.ts, 1, ports, this.n);
    if (r === null) this.counted++;
    else {
      this.sent++;
      this.sentFrames.push(this.n);
    }
    return r !== null;
  }
}

function counters(f: PcapFolder): PacketEvent[] {
  const recs = f.flush();
  const out: PacketEvent[] = [];
  for (let i = 0; i < recs.length / SUMMARY_BYTES; i++) {
    t.equal(recs[i * SUMMARY_BYTES], FOLD, 'a counter record');
    out.push(summaryEvent(recs, i, Buffer.alloc(0), 1, 0, CTX));
  }
  return out;
}

void t.test('a flow: its first packets each way are sent, the rest counted exactly', (t) => {
  const f = new addon.Folder(32, 4096);
  const feed = new Feed(f);
  const bytes = { a: 0, b: 0 };
  for (let i = 1; i <= 100; i++) {
    const b =
      i % 2 === 1
        ? frame(17, '10.0.0.1', 1000, '10.0.0.2', 2000)
        : frame(17, '10.0.0.2', 2000, '10.0.0.1', 1000, 'y'.repeat(30));
    const sent = feed.push(b);
    if (!sent) bytes[i % 2 === 1 ? 'a' : 'b'] += b.length;
  }
  t.equal(feed.sent, 64, '32 each way');
  t.same(
    feed.sentFrames,
    Array.from({ length: 64 }, (_, i) => i + 1),
    'the first ones',
  );
  // Of the 36 counted, each direction's first goes the whole way (its record starts the counter).
  t.same(f.stats(), { folded: 36, flows: 1, fullSent: 0, quick: 34 });
  const c = counters(f);
  t.equal(c.length, 2, 'one counter per direction');
  const [a, b] = c[0]?.inner?.src === '10.0.0.1' ? [c[0], c[1]] : [c[1], c[0]];
  t.same(a?.fold, { packets: 18, bytes: bytes.a, lastTsNs: T0 + 99n * MS, lastFrame: 99 });
  t.same(b?.fold, { packets: 18, bytes: bytes.b, lastTsNs: T0 + 100n * MS, lastFrame: 100 });
  t.equal(a?.frame, 65, 'the first counted frame');
  t.equal(a?.tsNs, T0 + 65n * MS);
  t.same(a?.inner, {
    proto: 'udp',
    ipProto: 17,
    src: '10.0.0.1',
    dst: '10.0.0.2',
    sport: 1000,
    dport: 2000,
  });
  t.same(a?.keys, { payloadLength: 0 }, 'a counter has no packet keys');
  t.equal(f.flush().length, 0, 'flushed once');
  t.end();
});

void t.test('packets that may start or end an exchange are sent and reopen the flow', (t) => {
  const cases: [string, Buffer][] = [
    ['FIN', frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, '', FIN | ACK)],
    ['SYN', frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, '', 0x02)],
    ['RST', frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, '', 0x04)],
    ['an HTTP request line', frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, 'GET /x HTTP/1.1\r\n')],
    ['HTTP/2 preface', frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, 'PRI * HTTP/2.0\r\n')],
    [
      'a TLS ClientHello',
      frame(6, '10.0.0.1', 1000, '10.0.0.2', 443, Buffer.from('160301020001fc0303', 'hex')),
    ],
    ['a probe marker', frame(17, '10.0.0.1', 1000, '10.0.0.2', 80, 'hoptrace-probe-abc123 x')],
  ];
  for (const [what, b] of cases) {
    const f = new addon.Folder(4, 4096);
    const feed = new Feed(f);
    // The reply direction's budget runs out too: a significant packet reopens both.
    const like = (i: number): Buffer =>
      i % 2 === 0
        ? frame(b[23] === 6 ? 6 : 17, '10.0.0.1', 1000, '10.0.0.2', b.readUInt16BE(36), 'data')
        : frame(b[23] === 6 ? 6 : 17, '10.0.0.2', b.readUInt16BE(36), '10.0.0.1', 1000, 'data');
    for (let i = 0; i < 12; i++) feed.push(like(i));
    t.equal(feed.sent, 8, `${what}: 4 each way first`);
    t.ok(feed.push(b), `${what}: sent`);
    for (let i = 0; i < 12; i++) feed.push(like(i));
    t.equal(feed.sent, 17, `${what}: 4 each way again after it`);
    t.equal(f.stats().folded, 8);
  }
  // Lower-case, too short or too long a token, no space: data, counted.
  const f = new addon.Folder(1, 4096);
  const feed = new Feed(f);
  feed.push(frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, 'data'));
  for (const p of ['get / HTTP/1.1', 'GE /', 'ABCDEFGH /', 'GET/', 'hoptrace-probe- x'])
    t.notOk(feed.push(frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, p)), `"${p}": counted`);
  t.end();
});

/** Ethernet/IPv4/UDP(sport → 4789)/VXLAN(VNI 42) around `inner` (an Ethernet frame). */
function vxlan(src: string, sport: number, dst: string, inner: Buffer): Buffer {
  return frame(
    17,
    src,
    sport,
    dst,
    4789,
    Buffer.concat([Buffer.from('0800000000002a00', 'hex'), inner]),
  );
}

void t.test(
  'a tunnelled flow is one flow both ways (the outer ports differ per direction)',
  (t) => {
    const f = new addon.Folder(1, 4096);
    const feed = new Feed(f);
    const fwd = (p = 'data', flags = ACK): Buffer =>
      vxlan(
        '192.168.0.1',
        51000,
        '192.168.0.2',
        frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, p, flags),
      );
    const back = (): Buffer =>
      vxlan(
        '192.168.0.2',
        62000,
        '192.168.0.1',
        frame(6, '10.0.0.2', 80, '10.0.0.1', 1000, 'data'),
      );
    t.ok(feed.push(fwd()), 'first forward: sent');
    t.ok(feed.push(back()), 'first reply: sent');
    t.notOk(feed.push(fwd()), 'forward: counted');
    t.notOk(feed.push(back()), 'reply: counted');
    t.ok(feed.push(fwd('', FIN | ACK)), 'a FIN: sent');
    t.ok(feed.push(back()), 'and it reopened the reply direction');
    t.equal(f.stats().flows, 1, 'one slot for both directions');
    const recs = f.flush();
    t.equal(recs.length / SUMMARY_BYTES, 2, 'a counter each way');
    const c = summaryEvent(recs, 0, Buffer.alloc(0), 1, 0, CTX);
    t.equal(c.tunnels[0]?.kind, 'vxlan', 'the counter keeps the tunnel');
    t.equal(c.tunnels[0]?.id, 42);
    t.end();
  },
);

void t.test(
  'a quiet spell of 200 ms reopens a flow (the next request on a kept connection)',
  (t) => {
    const f = new addon.Folder(2, 4096);
    const feed = new Feed(f);
    const b = frame(17, '10.0.0.1', 1000, '10.0.0.2', 2000);
    for (let i = 0; i < 5; i++) feed.push(b);
    t.equal(feed.sent, 2);
    t.notOk(feed.push(b, 199n * MS), '199 ms: still counted');
    t.ok(feed.push(b, 200n * MS), '200 ms: sent');
    t.ok(feed.push(b), 'and the next');
    t.notOk(feed.push(b), 'then counted again');
    t.end();
  },
);

void t.test('the table is bounded: a full one sends whole, an idle slot is taken again', (t) => {
  const f = new addon.Folder(1, 16);
  const feed = new Feed(f);
  for (let p = 0; p < 16; p++) feed.push(frame(17, '10.0.0.1', 1000 + p, '10.0.0.2', 2000));
  t.equal(f.stats().flows, 16, 'every slot in use');
  // A 17th flow finds no slot: each of its packets is sent and counted as such.
  for (let i = 0; i < 5; i++)
    t.ok(feed.push(frame(17, '10.0.0.1', 5000, '10.0.0.2', 2000)), 'sent whole');
  t.equal(f.stats().fullSent, 5);
  // The known flows still fold.
  t.notOk(feed.push(frame(17, '10.0.0.1', 1000, '10.0.0.2', 2000)), 'a known flow: counted');
  // 10 s later every slot is idle; those holding counts are kept until flushed.
  t.ok(feed.push(frame(17, '10.0.0.1', 6000, '10.0.0.2', 2000), 10_001n * MS), 'new flow: sent');
  t.equal(f.stats().fullSent, 5, 'it found an idle slot');
  t.equal(f.stats().flows, 16, 'still bounded');
  t.end();
});

/** Every capture of the corpus with its frames; files the reader refuses are its tests' business. */
function* corpusFiles(): Generator<[string, CaptureFrame[]]> {
  for (const file of readdirSync(PCAPS).sort()) {
    if (!/\.(pcap|pcapng)$/.test(file)) continue;
    let frames: CaptureFrame[];
    try {
      frames = [...openCaptureFile(join(PCAPS, file)).frames()];
    } catch {
      continue;
    }
    yield [file, frames];
  }
}

void t.test('every frame of the corpus: SLOW frames never folded, each packet once', (t) => {
  let files = 0;
  let total = 0;
  let counted = 0;
  let slowFolded = 0;
  let differs = 0;
  for (const [file, frames] of corpusFiles()) {
    files++;
    const f = new addon.Folder(2, 64);
    let n = 0;
    for (const fr of frames) {
      const data = Buffer.from(fr.data);
      n++;
      const r = f.push(data, fr.wireLength, fr.tsNs, fr.linktype, ports, n);
      // Sent: the record summarize writes (the hashes were written after the decision): the
      // same event, the same hashes. (Bytes past an address's family or a marker's length are
      // not written by either, so they are not compared.)
      if (r !== null && r[0] === 1) {
        const want = summarizeOne(data, fr.wireLength, fr.tsNs, fr.linktype);
        const ev = (b: Buffer): PacketEvent =>
          summaryEvent(b, 0, Buffer.alloc(0), fr.linktype, n, CTX);
        const same =
          r.subarray(80, 88).equals(want.subarray(80, 88)) &&
          JSON.stringify(ev(r), big) === JSON.stringify(ev(want), big);
        if (!same && differs++ < 5)
          t.fail(`${file} #${n}: the sent record differs from summarize's`);
      }
      if (r === null) {
        counted++;
        // Counted: the record summary_one made must have been FAST.
        const probe = new addon.Folder(1, 16).push(
          data,
          fr.wireLength,
          fr.tsNs,
          fr.linktype,
          ports,
          1,
        );
        if (probe === null || probe[0] !== 1) slowFolded++;
      }
    }
    total += n;
    const folded = counters(f).reduce((s, e) => s + (e.fold?.packets ?? 0), 0);
    t.equal(folded, f.stats().folded, `${file}: the counters hold every counted packet`);
  }
  t.ok(files > 40, `${files} files`);
  t.ok(counted > 0 && counted < total, `${counted} of ${total} frames counted`);
  t.equal(slowFolded, 0, 'no SLOW frame counted');
  t.equal(differs, 0, "every sent record is summarize's");
  t.end();
});

type Asserts = Pick<typeof t, 'equal' | 'same' | 'ok' | 'fail'>;

/** The fields of a record that either path writes (not the bytes past an address's family). */
function recordView(r: Buffer, lt: number): string {
  if (r[0] !== 1 && r[0] !== FOLD) return `slow ${r.subarray(8, 28).toString('hex')}`;
  const ev = summaryEvent(r, 0, Buffer.alloc(0), lt, 0, CTX);
  return `${r[0]} ${r.subarray(80, 88).toString('hex')} ${JSON.stringify(ev, big)}`;
}

function sameBothWays(
  t: Asserts,
  what: string,
  frames: { data: Buffer; wire: number; ts: bigint; lt: number }[],
  first: number,
  slots: number,
): number {
  const quick = new addon.Folder(first, slots, true);
  const whole = new addon.Folder(first, slots, false);
  let differs = 0;
  frames.forEach((fr, i) => {
    const a = quick.push(fr.data, fr.wire, fr.ts, fr.lt, ports, i + 1);
    const b = whole.push(fr.data, fr.wire, fr.ts, fr.lt, ports, i + 1);
    const same =
      a === null ? b === null : b !== null && recordView(a, fr.lt) === recordView(b, fr.lt);
    if (!same && differs++ < 5)
      t.fail(`${what} #${i + 1}: ${a === null ? 'counted' : 'sent'} with fold_quick, not without`);
  });
  const view = (recs: Buffer): string[] =>
    Array.from({ length: recs.length / SUMMARY_BYTES }, (_, i) =>
      recordView(recs.subarray(i * SUMMARY_BYTES, (i + 1) * SUMMARY_BYTES), 1),
    );
  t.same(view(quick.flush()), view(whole.flush()), `${what}: the same counter records`);
  const { quick: q, ...sa } = quick.stats();
  const { quick: none, ...sb } = whole.stats();
  t.same(sa, sb, `${what}: the same counts`);
  t.equal(none, 0, `${what}: without it, nothing counted quickly`);
  t.equal(differs, 0, `${what}: every frame decided the same`);
  return q;
}

void t.test(
  'fold_quick decides every frame as fold_packet does (corpus, flows, mutations)',
  (t) => {
    // Synthetic flows of every shape fold_quick takes and of the neighbours it must leave alone.
    const rand = xorshift32(20);
    const synth: Buffer[] = [];
    const payloads = [
      'data',
      '',
      'GET / HTTP/1.1\r\n',
      'x'.repeat(40) + 'hoptrace-probe-ab12 ',
      'hoptrace-probe-',
      'hoptrace-probe-!',
      'PRI * HTTP/2.0',
      'x'.repeat(600),
    ];
    for (let i = 0; i < 4000; i++) {
      const proto = rand(2) === 0 ? 6 : 17;
      const flow = rand(12);
      const fwd = rand(2) === 0;
      const a = ['10.0.0.1', 1000 + flow] as const;
      const b = ['10.0.0.2', flow === 11 ? 4789 : 80] as const;
      const p = rand(5) === 0 ? payloads[rand(payloads.length)]! : 'data';
      const flags = [ACK, ACK, ACK, ACK, 0x02, FIN | ACK, 0x04, 0x18][rand(8)]!;
      const f = fwd
        ? frame(proto, a[0], a[1], b[0], b[1], p, flags)
        : frame(proto, b[0], b[1], a[0], a[1], p, flags);
      // Now and then a header the quick parse must refuse or read as parse() does.
      switch (rand(16)) {
        case 0:
          f[14] = 0x46;
          break; // IPv4 options
        case 1:
          f.writeUInt16BE(0x2001, 20);
          break; // a later fragment
        case 2:
          f.writeUInt16BE(0x2000, 20);
          break; // a first fragment
        case 3:
          f.writeUInt16BE(0, 16);
          break; // TSO: total length 0
        case 4:
          f.writeUInt16BE(0x8100, 12);
          break; // a VLAN tag where IPv4 was
        case 5:
          f[46] = 0x40;
          break; // TCP data offset 16 (or a UDP length byte)
        case 6:
          f.writeUInt16BE(f.length - 14 + 20, 16);
          break; // total length past the frame
        case 7:
          f.writeUInt16BE(30, 16);
          break; // a short datagram inside padding
        default:
          break;
      }
      synth.push(f);
    }
    const ts = (i: number): bigint => T0 + BigInt(i) * MS * (i % 97 === 0 ? 250n : 1n);
    const flows = synth.map((data, i) => ({ data, wire: data.length, ts: ts(i), lt: 1 }));
    t.ok(sameBothWays(t, 'synthetic', flows, 3, 4096) > 500, 'fold_quick counted many');
    t.ok(sameBothWays(t, 'synthetic, small table', flows, 2, 16) > 0, 'and with a full table');
    // Caplen cut anywhere, and header bytes flipped: every prefix and mutation decided the same.
    const cut = flows.map((f, i) => {
      const n = rand(3) === 0 ? rand(f.data.length) : f.data.length;
      const data = Buffer.from(f.data.subarray(0, n));
      if (i % 4 === 0 && n > 0) {
        const at = rand(Math.min(n, 80));
        data[at] = (data[at] ?? 0) ^ (1 << rand(8));
      }
      return { ...f, data };
    });
    sameBothWays(t, 'cut and flipped', cut, 3, 4096);
    // The corpus, each file twice in a row (so its flows fold), other link types included.
    let files = 0;
    let quick = 0;
    for (const [file, frames] of corpusFiles()) {
      files++;
      const twice = [...frames, ...frames].map((fr) => ({
        data: Buffer.from(fr.data),
        wire: fr.wireLength,
        ts: fr.tsNs,
        lt: fr.linktype,
      }));
      quick += sameBothWays(t, file, twice, 1, 64);
    }
    t.ok(files > 40, `${files} files`);
    t.ok(quick > 0, `${quick} corpus frames counted by fold_quick`);
    t.end();
  },
);

void t.test('a counter event: on the wire both ways, never a packet to correlation', (t) => {
  const f = new addon.Folder(1, 16);
  const feed = new Feed(f);
  for (let i = 0; i < 5; i++) feed.push(frame(6, '10.0.0.1', 1000, '10.0.0.2', 80, 'data'));
  const [c] = counters(f);
  if (c === undefined) throw new Error('no counter');
  t.same(c.fold, { packets: 4, bytes: 4 * 58, lastTsNs: T0 + 5n * MS, lastFrame: 5 });
  t.same(decodePacketEvent(encodePacketEvent(c)), c, 'protobufjs');
  const env = decodeEventsEnvelope(
    encodeEventsEnvelope(7, { captureId: 'c', point: 'p', events: [c] }),
  );
  t.same(env?.kind === 'events' ? env.events.events : null, [c], 'the hand-written codec');
  t.equal(flowView(c), null, 'flowView ignores it');
  t.end();
});

void t.test(
  'analysis: the verdict does not change, the matched connection counts its counters',
  (t) => {
    const backendEp = { ...DIRECT, src: ADDR.vpnNodeUplink, sport: 61000 };
    const counter = (
      point: string,
      ep: typeof DIRECT,
      packets: number,
      at: bigint,
    ): PacketEvent => ({
      ...exchange(point, ep)[0]!,
      tsNs: T0 + at,
      frame: 100,
      keys: { payloadLength: 0 },
      fold: { packets, bytes: packets * 100, lastTsNs: T0 + at + 10n * MS, lastFrame: 200 },
    });
    const points = (withCounters: boolean) => [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', exchange('egress', DIRECT, { at: 1n })),
      pt('backend', [
        ...exchange('backend', backendEp, { at: 2n }),
        ...(withCounters
          ? [
              counter('backend', backendEp, 40, 5n * MS),
              counter('backend', rev(backendEp), 900, 5n * MS),
              // Another connection's counter, and this one's long after the window: not its.
              counter('backend', { ...backendEp, sport: 61001 }, 7, 5n * MS),
              counter('backend', backendEp, 5, 60_000n * MS),
            ]
          : []),
      ]),
    ];
    const plain = analyzeEvents({
      points: points(false),
      inventory: INVENTORY,
      selector: { client: CLIENT },
    });
    const folded = analyzeEvents({
      points: points(true),
      inventory: INVENTORY,
      selector: { client: CLIENT },
    });
    t.equal(folded.verdict.layer, plain.verdict.layer, 'same verdict');
    t.equal(folded.verdict.layer, 'cni-masquerade');
    const b = folded.points[2];
    t.same(b?.folded, {
      requestPackets: 40,
      replyPackets: 900,
      lastTsNs: (T0 + 15n * MS).toString(),
    });
    t.equal(b?.packets, plain.points[2]?.packets, 'packets counts only events');
    t.equal(folded.points[0]?.folded, undefined, 'no counters: no field');
    t.match(packetCounts(b!), /\(\+40\/\+900 counted per flow, not sent\)$/);
    t.end();
  },
);

void t.test('perPacket: the API field, its validation and the Reproduce command', (t) => {
  const base = {
    points: [
      { name: 'a', target: '10.0.0.1', iface: 'eth0' },
      { name: 'b', target: '10.0.0.2', iface: 'eth0' },
    ],
  };
  t.equal(parseCaptureRequest({ ...base, perPacket: true }).perPacket, true);
  t.equal(parseCaptureRequest({ ...base, perPacket: false }).perPacket, undefined);
  t.throws(() => parseCaptureRequest({ ...base, perPacket: 'yes' }), /perPacket/);
  const cmd = captureCommand({
    collector: null,
    points: base.points,
    timeoutMs: 1000,
    settleMs: 0,
    stopOnFirstMatch: true,
    inventoryGiven: false,
    perPacket: true,
  });
  t.ok(cmd.argv.includes('--per-packet'));
  t.end();
});

/**
 * The summarizer's gate (offline/summary-gate.ts, summary.c gate_emit): frames a pass cannot use
 * get no summary record but are counted. On generated captures, as classic pcap and pcapng:
 *   - a window gives records to exactly the frames with |ts - centre| <= span (both edges in, one
 *     nanosecond beyond out), with their frame numbers, and the useful frames it leaves out plus
 *     the useful records are the ungated count;
 *   - proto and ports narrow it; SYN mode keeps every SYN and stops after one that may become the
 *     best (and after a SLOW frame);
 *   - `hoptrace analyze` gives the same result with and without gates (verdict, points, the
 *     captured-event counts), and the same as the JS reference, on three distinct bench point
 *     files and on hand-made captures with frames at the window's edges, out-of-order SYNs, UDP,
 *     a non-TCP/UDP protocol and SLOW (ICMP) frames outside the window.
 * Fails (never skips) without the addon.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_CLIENT, BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { R, SUMMARY_BYTES } from '../../core/decode/summary';
import { BLOCK_RECORDS, frameAt, openSummaryPcap } from '../../offline/summary-file';
import { GATE_PROTO, SummaryGate } from '../../offline/summary-gate';
import { openCaptureFile } from '../../offline/pcap-file';
import type { TimeSpan } from '../../common/time-span';
import { analyzeFiles, type PointFile, type RequestSelector } from '../../cli/analyze';
import { epb, idb, shb } from './pcapng-writer';
import { eth, icmpEcho, ipv4, tcp, udp, vxlan, writePcap, type Pkt } from './frames';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-summary-window-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const S = 1_000_000_000n;
const W = 10n * S; // DEFAULT_WINDOW_NS
const T0 = 1_700_000_000n * S;

function writePcapng(path: string, pkts: Pkt[]): string {
  const parts = [shb(true), idb(true, 1, null, 9)];
  for (const p of pkts) parts.push(epb(true, 0, p.ts, p.data));
  writeFileSync(path, Buffer.concat(parts));
  return path;
}

/** A frame of a protocol the summarizer takes as a leaf (OSPF): FAST, but not a useful event. */
const leaf = (ts: bigint): Pkt => ({
  ts,
  data: eth(0x0800, ipv4(89, '10.1.1.1', '224.0.0.5', Buffer.alloc(24))),
});

/** Each record a gated read gives: frame number, ts, inner transport; and the counts. */
interface Read {
  records: { frame: number; ts: bigint; fast: boolean; transport: number }[];
  frames: number;
  skipped: number;
  /** The earliest and latest time of every frame walked, as the reader's stats give them. */
  span: TimeSpan | null | undefined;
}

function read(path: string, gate: SummaryGate | undefined): Read {
  const reader = openSummaryPcap(path, { gate });
  if (reader === null) throw new Error('no fast path');
  const out: Read = { records: [], frames: 0, skipped: 0, span: undefined };
  for (let b = reader.next(); b !== null; b = reader.next()) {
    out.skipped += b.skipped;
    for (let i = 0; i < b.count; i++) {
      const o = i * SUMMARY_BYTES;
      out.records.push({
        frame: frameAt(b, i),
        ts: b.recs.readBigUInt64LE(o + R.tsLo),
        fast: b.recs[o] === 1,
        transport: b.recs[o + R.innerTransport] ?? 0,
      });
    }
  }
  out.frames = reader.stats().frames;
  out.span = reader.stats().span;
  reader.close();
  return out;
}

/** Useful as the scans count them: a FAST record of TCP or UDP (SLOW ones are decoded in JS). */
const usefulFast = (r: Read): number =>
  r.records.filter((x) => x.fast && (x.transport === 0 || x.transport === 1)).length;

void t.test('a window: exactly the frames within it, with their frame numbers', (t) => {
  const centre = T0 + 50n * S;
  const pkts: Pkt[] = [];
  const at = (d: bigint): bigint => centre + d;
  // Around each edge: one ns outside, the edge, one ns inside; TCP, UDP, leaf and SLOW (ICMP).
  for (const d of [-W - 1n, -W, -W + 1n, -S, 0n, S, W - 1n, W, W + 1n, 2n * W, -2n * W]) {
    pkts.push(
      tcp(at(d), { src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, seq: 1, flags: 16 }),
    );
    pkts.push(
      udp(at(d), {
        src: '10.0.0.1',
        dst: '10.0.0.2',
        sport: 5,
        dport: 6,
        payload: Buffer.from('x'),
      }),
    );
    pkts.push(leaf(at(d)));
    pkts.push(
      icmpEcho(at(d), {
        src: '10.0.0.1',
        dst: '10.0.0.2',
        type: 8,
        id: 1,
        seq: 1,
        data: Buffer.alloc(8),
      }),
    );
  }
  const inside = (ts: bigint): boolean => (ts > centre ? ts - centre : centre - ts) <= W;
  for (const [fmt, path] of [
    ['pcap', writePcap(join(dir, 'edges.pcap'), pkts)],
    ['pcapng', writePcapng(join(dir, 'edges.pcapng'), pkts)],
  ] as const) {
    const all = read(path, undefined);
    t.equal(all.records.length, pkts.length, `${fmt}: ungated, a record per frame`);
    const gated = read(path, new SummaryGate(BLOCK_RECORDS, false).window(centre, W));
    t.equal(gated.frames, pkts.length, `${fmt}: every frame walked`);
    const want = all.records.filter((r) => !r.fast || inside(r.ts));
    t.same(gated.records, want, `${fmt}: records of the window's FAST frames and every SLOW one`);
    t.equal(gated.skipped + usefulFast(gated), usefulFast(all), `${fmt}: useful frames counted`);
    // Frames outside: the TCP and UDP ones are useful, the leaf one is not.
    t.equal(gated.skipped, 2 * 4, `${fmt}: 4 offsets outside, TCP + UDP each`);
    const tcpOnly = read(
      path,
      new SummaryGate(BLOCK_RECORDS, false).window(centre, W).proto(GATE_PROTO.tcp),
    );
    t.same(
      tcpOnly.records,
      want.filter((r) => !r.fast || r.transport === 0),
      `${fmt}: proto narrows to TCP`,
    );
    const ports = read(path, new SummaryGate(BLOCK_RECORDS, false).ports([5 | (6 << 16)]));
    t.same(
      ports.records,
      all.records.filter((r) => !r.fast || r.transport === 1),
      `${fmt}: ports narrow to the UDP flow`,
    );
    const none = read(path, new SummaryGate(BLOCK_RECORDS, false).ports([]));
    t.same(
      none.records,
      all.records.filter((r) => !r.fast),
      `${fmt}: no ports, only SLOW frames`,
    );
    // The span of every frame walked, records or not, out of time order as the frames are: the
    // same gated, ungated and through the JS reader (the coverage a verdict of "not seen" needs).
    const span = { earliestNs: centre - 2n * W, latestNs: centre + 2n * W };
    t.same(all.span, span, `${fmt}: ungated, the earliest and latest frame`);
    t.same(gated.span, span, `${fmt}: gated, the frames left out counted in`);
    t.same(none.span, span, `${fmt}: a gate that keeps no FAST frame, the same`);
    const js = openCaptureFile(path);
    let walked = 0;
    for (const f of js.frames()) walked += f.caplen > 0 ? 1 : 0;
    t.equal(walked, pkts.length);
    t.same(js.stats().span, span, `${fmt}: the JS reader's`);
  }
  t.end();
});

void t.test(
  'outside the window, every prefix of the common shapes counts as parse() counts it',
  (t) => {
    const seg = { src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2, seq: 1, flags: 0x18 };
    const shapes: Pkt[] = [
      // Ethernet[IPv4[TCP[payload]]], with TCP options, Ethernet[IPv4[UDP]]
      tcp(T0, { ...seg, payload: 'GET / HTTP/1.1\r\n\r\n' }),
      tcp(T0, { ...seg, options: [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0] }),
      udp(T0, { src: '10.0.0.1', dst: '10.0.0.2', sport: 5, dport: 6, payload: Buffer.alloc(9) }),
      // Ethernet[IPv4[UDP 4789[VXLAN[Ethernet[IPv4[TCP]]]]]] and [...[IPv4[UDP]]]; VXLAN in VXLAN
      vxlan(T0, '192.168.0.1', 40000, '192.168.0.2', 7, tcp(T0, { ...seg, payload: 'x' })),
      vxlan(
        T0,
        '192.168.0.1',
        40000,
        '192.168.0.2',
        7,
        udp(T0, { ...seg, payload: Buffer.alloc(3) }),
      ),
      vxlan(
        T0,
        '192.168.0.1',
        1,
        '192.168.0.2',
        7,
        vxlan(T0, '10.1.0.1', 2, '10.1.0.2', 8, tcp(T0, seg)),
      ),
      // IPv4 with options; a later fragment; an IPv4 total length shorter than the frame
      {
        ts: T0,
        data: eth(
          0x0800,
          Buffer.concat([
            Buffer.from([0x46]),
            ipv4(6, '10.0.0.1', '10.0.0.2', Buffer.alloc(24)).subarray(1),
          ]),
        ),
      },
      {
        ts: T0,
        data: (() => {
          const d = tcp(T0, seg).data;
          d.writeUInt16BE(0x0001, 20);
          return d;
        })(),
      },
      {
        ts: T0,
        data: (() => {
          const d = tcp(T0, seg).data;
          d.writeUInt16BE(30, 16);
          return d;
        })(),
      },
    ];
    const pkts: Pkt[] = [];
    for (const p of shapes)
      for (let caplen = 0; caplen <= p.data.length; caplen++) pkts.push({ ...p, caplen });
    const path = writePcap(join(dir, 'prefixes.pcap'), pkts);
    const all = read(path, undefined);
    for (const gate of [
      new SummaryGate(BLOCK_RECORDS, false).window(T0 + W, 1n),
      new SummaryGate(BLOCK_RECORDS, false).window(T0 + W, 1n).proto(GATE_PROTO.tcp),
      // Pass 1's gate with a best SYN elsewhere (no SYN among these frames).
      new SummaryGate(BLOCK_RECORDS, true).proto(GATE_PROTO.tcp).ports([]).syn(T0),
    ]) {
      const gated = read(path, gate);
      t.same(
        gated.records,
        all.records.filter((r) => !r.fast),
        'only the SLOW frames get records',
      );
      t.equal(gated.skipped, usefulFast(all), 'and the useful FAST ones are counted');
    }
    t.end();
  },
);

void t.test('SYN mode: every SYN kept, the run stops after one that may become the best', (t) => {
  const syn = (ts: bigint, sport: number): Pkt =>
    tcp(ts, { src: '10.0.0.1', dst: '10.0.0.2', sport, dport: 80, seq: 1, flags: 0x02 });
  const ack = (ts: bigint, sport: number): Pkt =>
    tcp(ts, { src: '10.0.0.1', dst: '10.0.0.2', sport, dport: 80, seq: 2, flags: 0x10 });
  const pkts = [ack(T0, 1), syn(T0 + 5n, 2), ack(T0 + 6n, 2), syn(T0 + 1n, 3), ack(T0 + 7n, 3)];
  const path = writePcap(join(dir, 'syns.pcap'), pkts);
  const frames = (gate: SummaryGate): number[][] => {
    const reader = openSummaryPcap(path, { gate });
    if (reader === null) throw new Error('no fast path');
    const blocks: number[][] = [];
    for (let b = reader.next(); b !== null; b = reader.next())
      blocks.push(Array.from({ length: b.count }, (_, i) => frameAt(b, i)));
    reader.close();
    return blocks;
  };
  const base = (): SummaryGate =>
    new SummaryGate(BLOCK_RECORDS, true).proto(GATE_PROTO.tcp).ports([]);
  // No best: the call stops after each SYN; the ACKs get no record.
  t.same(frames(base().syn(null)), [[2], [4], []], 'a SYN ends each call');
  // With a best at T0 + 3: the SYN at T0 + 5 cannot be earlier (no stop), the one at T0 + 1 can.
  const gate = base().syn(T0 + 3n);
  t.same(frames(gate), [[2, 4], []], 'only a SYN earlier than the best ends a call');
  // The ACKs left out are marked in the seen map, in SelectScan's slots.
  const slot = (a: number, c: number): number =>
    Math.imul(a < c ? (a << 16) | c : (c << 16) | a, 0x9e3779b1) >>> 12;
  const seen = gate.seen ?? new Uint32Array(0);
  for (const sport of [1, 2, 3]) {
    const k = slot(sport, 80);
    t.ok(((seen[k >>> 5] ?? 0) & (1 << (k & 31))) !== 0, `ports ${sport}→80 seen`);
  }
  t.end();
});

const EMPTY = { nodes: {}, pods: {} };
type Asserts = Pick<typeof t, 'equal'>;

function run(
  points: PointFile[],
  selector: RequestSelector,
  opts: { fast: boolean; gate: boolean },
): string {
  try {
    return JSON.stringify(analyzeFiles({ points, inventory: EMPTY, selector }, opts));
  } catch (e: unknown) {
    return `error: ${e instanceof Error ? e.message : String(e)}`;
  }
}

/** Gated and ungated agree; returns the outcome. */
function same(t: Asserts, label: string, points: PointFile[], sel: RequestSelector): string {
  const gated = run(points, sel, { fast: true, gate: true });
  t.equal(gated, run(points, sel, { fast: true, gate: false }), `${label}: gated = ungated`);
  return gated;
}

const names = ['decap', 'egress', 'backend'] as const;

void t.test('analyze: three distinct bench point files, pcap and pcapng', (t) => {
  for (const fmt of ['pcap', 'pcapng'] as const) {
    const points = names.map((name) => {
      const file = join(dir, `bench-${name}.${fmt}`);
      writeBenchPcap(file, 30_000, 'bench0001', fmt, BENCH_POINTS[name]);
      return { name, file };
    });
    const out = same(t, `bench ${fmt}`, points, { client: BENCH_CLIENT });
    t.match(out, /"layer":"preserved"/, `${fmt}: the request followed to the backend`);
    const counts = (JSON.parse(out) as { points: { capturedEvents: number }[] }).points.map(
      (p) => p.capturedEvents,
    );
    t.same(counts, [30_000, 30_000, 30_000], `${fmt}: every frame counted at every point`);
    if (fmt === 'pcap')
      t.equal(
        out,
        run(points, { client: BENCH_CLIENT }, { fast: false, gate: false }),
        'JS reference',
      );
    same(t, `bench ${fmt}, no selector`, points, {});
  }
  t.end();
});

void t.test('analyze: the window edges, out-of-order SYNs, UDP, leaf and SLOW frames', (t) => {
  const c = { src: '10.90.0.42', dst: '10.96.0.10', sport: 40000, dport: 80 };
  const s = { src: c.dst, dst: c.src, sport: c.dport, dport: c.sport };
  const req = 'GET /hoptrace-probe-abc123 HTTP/1.1\r\n\r\n';
  const start = T0 + 30n * S;
  const conn = (t0: bigint, sport: number, isn: number): Pkt[] => [
    tcp(t0, { ...c, sport, seq: isn, flags: 0x02 }),
    tcp(t0 + 1000n, { ...s, dport: sport, seq: 9, ack: isn + 1, flags: 0x12 }),
    tcp(t0 + 2000n, { ...c, sport, seq: isn + 1, ack: 10, flags: 0x18, payload: req }),
  ];
  const edges = (at: (d: bigint) => bigint, sport: number): Pkt[] =>
    [-2n * W, -W - 1n, -W, 0n, W, W + 1n, 2n * W].flatMap((d) => [
      tcp(at(d), { ...c, sport, seq: 1000 + Number(d % 1000n), ack: 10, flags: 0x10 }),
      udp(at(d), { ...c, sport, payload: Buffer.from('udp') }),
      leaf(at(d)),
      icmpEcho(at(d), { src: c.src, dst: c.dst, type: 8, id: 7, seq: 1, data: Buffer.alloc(4) }),
    ]);
  // The request's SYN comes after a later one in the file (capture order is not time order), and
  // its ports see traffic outside the window on both sides.
  const decap = [
    ...conn(start + 5n * S, 40001, 500),
    ...edges((d) => start + d, 40000),
    ...conn(start, 40000, 100),
    ...edges((d) => start + d + 1n, 40000),
  ];
  const later = (off: bigint): Pkt[] => [
    ...edges((d) => start + off + d, 40000),
    ...conn(start + off, 40000, 100),
    ...edges((d) => start + off + d, 50000),
  ];
  for (const fmt of ['pcap', 'pcapng'] as const) {
    const write = (name: string, pkts: Pkt[]): string => {
      const f = join(dir, `${name}.${fmt}`);
      return fmt === 'pcap' ? writePcap(f, pkts) : writePcapng(f, pkts);
    };
    const points = [
      { name: 'decap', file: write('e-decap', decap) },
      { name: 'egress', file: write('e-egress', later(20_000n)) },
      { name: 'backend', file: write('e-backend', later(W)) },
    ];
    for (const sel of [{ client: c.src }, {}, { dport: 80 }]) {
      const out = same(t, `edges ${fmt} ${JSON.stringify(sel)}`, points, sel);
      // The flow at the first point reaches both edges; the later points are matched.
      t.match(out, `"layer":"preserved"`, `edges ${fmt}: verdict`);
      t.match(out, `"firstTsNs":"${start - W}","lastTsNs":"${start + W}"`, `edges ${fmt}: ±W in`);
      t.match(out, /"name":"backend","status":"matched"/, `edges ${fmt}: backend matched`);
      t.equal(
        out,
        run(points, sel, { fast: false, gate: false }),
        `edges ${fmt} ${JSON.stringify(sel)}: JS reference`,
      );
    }
  }
  t.end();
});

/**
 * The gate's quiet test (summary.h SUMMARY_GATE_QUIET, offline/summary-gate.ts quietKeys/quietOn):
 * at a later point, the data segments LaterScan's loop would pass over get no record.
 *   - Gate level: a data segment without keys whose bucket is empty is left out (and counted); one
 *     with a seq, ack, payload-hash or request-line key, a probe marker, a bucket the selection
 *     holds (hot) or one a record of the same run took (a pure ACK before it) gets its record, as
 *     do segments without payload; the run stops after a SLOW frame; off, every window frame gets
 *     one; more than 1024 keys refuse the test.
 *   - The quick path (summary.c quiet_quick: the test on a frame's bytes before any record) leaves
 *     out exactly the frames the test on records does (onRecordsOnly), record for record, on
 *     seeded captures of plain and VXLAN-carried TCP with request lines, probe markers and bare
 *     marker prefixes, payloads cut by the snap length, TCP options, empty segments, and keys and
 *     hot buckets drawn from the capture itself.
 *   - The pass: FilePointStream's later pass gives the same events and count gated (quiet) as
 *     ungated (every record through LaterScan's own loop), on seeded captures of thousands of busy connections
 *     (bucket collisions), pure ACKs, SLOW frames, and a proxy's connection related by its first
 *     data segment whose later segments carry no key (kept through the hot map only).
 * Fails (never skips) without the addon.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadNativeAddon } from '../../native/loader';
import { R, SUMMARY_BYTES } from '../../core/decode/summary';
import { BLOCK_RECORDS, frameAt, openSummaryPcap } from '../../offline/summary-file';
import { GATE_PROTO, MAX_QUIET_KEYS, SummaryGate } from '../../offline/summary-gate';
import { FilePointStream } from '../../offline/point-stream';
import type { LaterPass } from '../../core/report/analyze';
import { icmpEcho, tcp, vxlan, writePcap, type Pkt } from './frames';
import { xorshift32 } from './xorshift';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'hoptrace-summary-quiet-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const S = 1_000_000_000n;
const W = 10n * S;
const T0 = 1_700_000_000n * S;
const REQ = 'GET /orders HTTP/1.1\r\nHost: shop\r\n\r\n';

interface Rec {
  frame: number;
  /** A SLOW record (the reference decoder's): only its frame is meaningful. */
  slow: boolean;
  flow: number;
  payloadHash: number;
  lineHash: number;
}

/** Every record a read gives (frame, flow hash, hashes), the blocks, and the counts. */
function read(path: string, gate: SummaryGate | undefined, onBlock?: (g: SummaryGate) => void) {
  const reader = openSummaryPcap(path, { gate });
  if (reader === null) throw new Error('no fast path');
  const records: Rec[] = [];
  const blockEnds: number[] = [];
  let skipped = 0;
  for (let b = reader.next(); b !== null; b = reader.next()) {
    skipped += b.skipped;
    for (let i = 0; i < b.count; i++) {
      const o = i * SUMMARY_BYTES;
      records.push({
        frame: frameAt(b, i),
        slow: b.recs[o] !== 1,
        flow: b.recs.readUInt32LE(o + R.flowHash),
        payloadHash: b.recs.readUInt32LE(o + R.payloadHash),
        lineHash: b.recs.readUInt32LE(o + R.requestLineHash),
      });
    }
    blockEnds.push(records.length);
    if (gate !== undefined) onBlock?.(gate);
  }
  reader.close();
  return { records, skipped, blockEnds };
}

const c = (sport: number) => ({ src: '10.90.0.42', dst: '10.96.0.10', sport, dport: 80 });

void t.test('gate: which data segments are left out', (t) => {
  const at = (k: number): bigint => T0 + BigInt(k) * 1000n;
  const pkts: Pkt[] = [
    /* 1 */ tcp(at(1), { ...c(1001), seq: 5000, ack: 1, flags: 0x18, payload: 'quiet' }),
    /* 2 */ tcp(at(2), { ...c(1002), seq: 6000, ack: 1, flags: 0x10 }),
    /* 3 */ tcp(at(3), { ...c(1002), seq: 6000, ack: 1, flags: 0x18, payload: 'after ack' }),
    /* 4 */ tcp(at(4), { ...c(1003), seq: 777, ack: 1, flags: 0x18, payload: 'seq key' }),
    /* 5 */ tcp(at(5), { ...c(1004), seq: 1, ack: 888, flags: 0x18, payload: 'ack key' }),
    /* 6 */ tcp(at(6), { ...c(1005), seq: 1, ack: 1, flags: 0x18, payload: REQ }),
    /* 7 */ tcp(at(7), {
      ...c(1006),
      seq: 1,
      ack: 1,
      flags: 0x18,
      payload: 'x hoptrace-probe-abc1 y',
    }),
    /* 8 */ tcp(at(8), { ...c(1007), seq: 1, ack: 1, flags: 0x18, payload: 'hot bucket' }),
    /* 9 */ icmpEcho(at(9), {
      src: '10.90.0.42',
      dst: '10.96.0.10',
      type: 8,
      id: 1,
      seq: 1,
      data: Buffer.alloc(8),
    }),
    /* 10 */ tcp(at(10), { ...c(1001), seq: 5005, ack: 1, flags: 0x18, payload: 'quiet again' }),
    /* 11 */ tcp(at(11), { ...c(1008), seq: 1, ack: 1, flags: 0x18, payload: 'quiet too' }),
    /* 12 */ tcp(at(11) + 2n * W, { ...c(1009), seq: 1, ack: 1, flags: 0x18, payload: 'outside' }),
  ];
  const path = writePcap(join(dir, 'gate.pcap'), pkts);
  const all = read(path, undefined).records;
  t.equal(all.length, pkts.length, 'ungated: a record per frame');
  const bucket = (frame: number): number => (all[frame - 1]?.flow ?? 0) & 0x3fff;
  const req = all[5];
  if (req === undefined) throw new Error('no request record');
  const gate = (): SummaryGate =>
    new SummaryGate(BLOCK_RECORDS, false, true).window(T0, W).proto(GATE_PROTO.tcp);

  const g = gate();
  t.ok(g.quietKeys([777], [888], [req.payloadHash]), 'keys taken');
  const hot = g.hot;
  if (hot === null) throw new Error('no hot map');
  hot[bucket(8)] = 1;
  g.quietOn(true);
  const q = read(path, g);
  const frames = q.records.map((r) => r.frame);
  t.same(frames, [2, 3, 4, 5, 6, 7, 8, 9], 'left out: the quiet segments and the one outside');
  t.equal(q.skipped, 4, 'frames 1, 10, 11 and 12 counted as useful frames left out');
  t.equal(q.blockEnds[0], 8, 'the run stopped after the SLOW frame');

  // The request-line hash alone is a key too.
  const byLine = gate();
  byLine.quietKeys([], [], [req.lineHash]);
  byLine.quietOn(true);
  t.ok(
    read(path, byLine).records.some((r) => r.frame === 6),
    'a request-line hash key keeps its segment',
  );

  const off = gate();
  off.quietKeys([777], [888], [req.payloadHash]);
  const o = read(path, off);
  t.same(
    o.records.map((r) => r.frame),
    Array.from({ length: 11 }, (_, i) => i + 1),
    'quiet off: every frame of the window',
  );

  const tooMany = gate();
  t.notOk(
    tooMany.quietKeys(
      Array.from({ length: MAX_QUIET_KEYS + 1 }, (_, i) => i),
      [],
      [],
    ),
    'more than 1024 keys: refused',
  );
  tooMany.quietOn(true);
  t.equal(read(path, tooMany).records.length, 11, 'and the test stays off');
  t.end();
});

/** One seeded capture of what the quick path must tell apart, plain and in VXLAN. */
function quickCapture(seed: number, n: number): string {
  const rand = xorshift32(seed);
  const payloads = [
    'data',
    REQ,
    'GET /x HTTP/1.0\r\n',
    'POST /orders HTTP/1.1',
    'x hoptrace-probe-abc1 y',
    'hoptrace-probe-',
    'hoptrace-probe-!',
    'a'.repeat(700) + 'hoptrace-probe-zz',
    'b'.repeat(200),
    '',
  ];
  const pkts: Pkt[] = [];
  for (let k = 0; k < n; k++) {
    const f = rand(2000);
    const seg = {
      src: `10.1.${f >> 8}.${f & 0xff}`,
      dst: '10.244.2.7',
      sport: 20000 + f,
      dport: 8080,
      seq: rand(64),
      ack: rand(64),
      flags: rand(4) === 0 ? 0x10 : 0x18,
      payload: payloads[rand(payloads.length)] ?? '',
      ...(rand(5) === 0 ? { options: [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2] } : {}),
    };
    const ts = T0 + BigInt(k) * 1000n;
    const inner = tcp(ts, seg);
    const frame =
      rand(3) === 0 ? vxlan(ts, '192.168.0.1', 40000 + f, '192.168.0.2', 7, inner) : inner;
    // Now and then cut by the snap length: inside the payload, inside the headers.
    const cut = rand(6);
    pkts.push(cut === 0 ? { ...frame, caplen: frame.data.length - 1 - rand(40) } : frame);
  }
  return writePcap(join(dir, `quick-${seed}.pcap`), pkts);
}

void t.test('the quick path leaves out what the test on records does', (t) => {
  for (const seed of [3, 5, 9, 17]) {
    const path = quickCapture(seed, 4000);
    const all = read(path, undefined).records;
    const rand = xorshift32(seed * 31);
    const pick = (xs: number[]): number[] =>
      Array.from({ length: 3 }, () => xs[rand(xs.length)] ?? 0);
    const hashes = all.flatMap((r) => [r.payloadHash, r.lineHash]).filter((h) => h !== 0);
    const hot = new Set(all.filter(() => rand(8) === 0).map((r) => r.flow & 0x3fff));
    const keys = [[0, 3, ...pick([5, 6, 7])], [1, ...pick([4, 5])], pick(hashes)] as const;
    const gate = (reference: boolean): SummaryGate => {
      const g = new SummaryGate(BLOCK_RECORDS, false, true).window(T0, W).proto(GATE_PROTO.tcp);
      g.quietKeys(...keys);
      for (const b of hot) if (g.hot !== null) g.hot[b] = 1;
      g.quietOn(true);
      return reference ? g.onRecordsOnly() : g;
    };
    // A SLOW record holds only the frame's place: the rest of its bytes are a former record's.
    const fastOnly = (r: ReturnType<typeof read>) => ({
      ...r,
      records: r.records.map((x) => (x.slow ? { frame: x.frame } : x)),
    });
    const quick = fastOnly(read(path, gate(false)));
    const reference = fastOnly(read(path, gate(true)));
    t.ok(reference.records.length < all.length, `seed ${seed}: the test left frames out`);
    t.ok(reference.records.length > 0, `seed ${seed}: and gave records`);
    t.same(quick.records, reference.records, `seed ${seed}: the same records`);
    t.equal(quick.skipped, reference.skipped, `seed ${seed}: the same frames counted`);
    t.same(quick.blockEnds, reference.blockEnds, `seed ${seed}: the same blocks`);
  }
  t.end();
});

/**
 * A later point's capture: `flows` busy connections (data, pure ACKs), a SLOW frame now and then,
 * and a proxy's new connection (other tuple, other seqs) whose first data segment is the request
 * and whose later ones carry no key; returns the file and the plan a first point would give.
 */
function laterCapture(name: string, seed: number, flows: number, n: number) {
  const rand = xorshift32(seed);
  const r = (): number => rand(2 ** 32);
  const start = T0 + 5n * S;
  const pkts: Pkt[] = [];
  const proxy = { src: '10.244.1.5', dst: '10.244.2.7', sport: 33333, dport: 8080 };
  const back = { src: proxy.dst, dst: proxy.src, sport: proxy.dport, dport: proxy.sport };
  const proxyAt = new Map<number, Pkt>();
  const k0 = Math.floor(n / 4);
  proxyAt.set(k0, tcp(start, { ...proxy, seq: 40000, flags: 0x02 }));
  proxyAt.set(k0 + 5, tcp(start, { ...back, seq: 9000, ack: 40001, flags: 0x12 }));
  proxyAt.set(k0 + 9, tcp(start, { ...proxy, seq: 40001, ack: 9001, flags: 0x10 }));
  proxyAt.set(k0 + 50, tcp(start, { ...proxy, seq: 40001, ack: 9001, flags: 0x18, payload: REQ }));
  for (let j = 1; j <= 6; j++)
    proxyAt.set(
      k0 + 50 + 97 * j,
      tcp(start, {
        ...proxy,
        seq: 40001 + REQ.length * j,
        ack: 9001,
        flags: 0x18,
        payload: `part ${j}`,
      }),
    );
  proxyAt.set(
    k0 + 900,
    tcp(start, {
      ...back,
      seq: 9001,
      ack: 40001 + REQ.length,
      flags: 0x18,
      payload: 'HTTP/1.1 200 OK\r\n\r\n',
    }),
  );
  for (let k = 0; k < n; k++) {
    const ts = start - W - S + (BigInt(k) * (2n * W + 2n * S)) / BigInt(n);
    const p = proxyAt.get(k);
    if (p !== undefined) pkts.push({ ...p, ts: start + BigInt(k - k0) * 1000n });
    const f = r() % flows;
    const seg = {
      src: `10.1.${(f >> 8) & 0xff}.${f & 0xff}`,
      dst: '10.244.2.7',
      sport: 20000 + (f % 20000),
      dport: 8080,
    };
    const kind = r() % 16;
    if (kind === 0)
      pkts.push(
        icmpEcho(ts, {
          src: seg.src,
          dst: seg.dst,
          type: 8,
          id: f & 0xffff,
          seq: k & 0xffff,
          data: Buffer.alloc(4),
        }),
      );
    else if (kind < 5) pkts.push(tcp(ts, { ...seg, seq: r(), ack: r(), flags: 0x10 }));
    else pkts.push(tcp(ts, { ...seg, seq: r(), ack: r(), flags: 0x18, payload: `data ${k}` }));
  }
  const file = writePcap(join(dir, `${name}.pcap`), pkts);
  // What the first point's request gives: its ISN, client seqs and what replies acknowledge.
  const isn = 100;
  const plan: LaterPass = {
    kind: 'later',
    shape: 'tcp-syn',
    proto: 'tcp',
    startTsNs: start,
    windowNs: W,
    isn,
    synAckAck: isn + 1,
    clientSeqs: new Set([isn, isn + 1]),
    acked: new Set([isn + 1, isn + 1 + REQ.length]),
    data: null,
  };
  return { file, plan };
}

void t.test('the later pass: quiet-gated = ungated (the reference for gates)', (t) => {
  const first = readReq();
  for (const [name, seed, flows, n] of [
    ['busy', 7, 3000, 60_000],
    ['few-flows', 11, 40, 20_000],
    ['collisions', 13, 30_000, 60_000],
  ] as const) {
    const { file, plan: base } = laterCapture(name, seed, flows, n);
    const plan: LaterPass = { ...base, data: first };
    const events = (fast: boolean, gated: boolean) => {
      const s = new FilePointStream('backend', file, fast, undefined, gated);
      const ev = [...s.events(plan)];
      const text = JSON.stringify(ev, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
      return { ev: JSON.parse(text) as unknown, text, count: s.capturedEvents(), n: ev.length };
    };
    const quiet = events(true, true);
    const ungated = events(true, false);
    t.same(quiet.ev, ungated.ev, `${name}: the same events gated and ungated`);
    t.equal(quiet.count, ungated.count, `${name}: the same count`);
    // The proxy's connection: SYN, SYN-ACK, ACK, the request, its six keyless parts, the reply.
    t.ok(quiet.n >= 11, `${name}: the proxy's connection kept whole (${quiet.n} events)`);
    t.match(quiet.text, /"sport":33333/, `${name}: the proxy's tuple`);
  }
  t.end();
});

/** The request's data identity as a first point would give it (its hashes from the summarizer). */
function readReq(): LaterPass['data'] {
  const path = writePcap(join(dir, 'req.pcap'), [
    tcp(T0, { ...c(40123), seq: 101, ack: 1, flags: 0x18, payload: REQ }),
  ]);
  const rec = read(path, undefined).records[0];
  if (rec === undefined) throw new Error('no record');
  return {
    seq: 101,
    payloadLength: REQ.length,
    probeMarker: null,
    payloadHash: rec.payloadHash,
    requestLineHash: rec.lineHash,
    dnsId: null,
    dnsQuestion: null,
    frame: 1,
  };
}

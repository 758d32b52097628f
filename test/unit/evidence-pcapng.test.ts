/**
 * evidence.pcapng (offline/evidence.ts) read back by tshark: an analysis of three synthetic point
 * files — decap a pcapng with two interfaces (the flow on tun0, raw IP; noise on eth0), egress and
 * backend classic pcap (Ethernet), the backend's clock 5 ms ahead, noise everywhere — written as
 * evidence and checked field by field: one interface per point with its name and link type, one
 * packet per flow entry with its comment (point, frame, direction, keys, captured time, offset),
 * the tuples the analysis recorded, time order on the reference clock, and headers only (captured
 * length below the original, no payload bytes) unless `payload: true`. A file changed after the
 * analysis leaves its point out with EVIDENCE_FILE_CHANGED. Fails (never skips) without tshark.
 */
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import t from 'tap';
import { analyzeFiles, type PointFile } from '../../offline/analyze-files';
import { buildEvidencePcapng, type Evidence } from '../../offline/evidence';
import type { AnalysisResult, FlowPacketSummary } from '../../core/report/analysis-result';
import { toReferenceClock, utcMicros } from '../../core/report/times';
import { ipv4, tcp, tcpHeader, writePcap, type Pkt, type Seg } from './frames';
import { epb, idb, shb } from './pcapng-writer';
import { tsharkRead, type TsharkRead } from './tshark';

const dir = mkdtempSync(join(tmpdir(), 'ht-evidence-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

const T0 = 1_700_000_000_000_000_000n;
const US = 1000n;
const SKEW = 5000n * US;
const REQUEST = 'GET /hoptrace-probe-abc123 HTTP/1.1\r\nHost: svc\r\n\r\n';
const REPLY = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';

interface Ends {
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

const AT_DECAP: Ends = { src: '10.90.0.42', sport: 40123, dst: '10.96.0.10', dport: 80 };
const AT_EGRESS: Ends = { ...AT_DECAP, src: '10.244.1.10' };
const AT_BACKEND: Ends = { ...AT_EGRESS, dst: '10.244.2.20', dport: 8080 };

/** RFC 7323 timestamps (NOP, NOP, kind 8) with TSval `v`. */
const tsOpt = (v: number): number[] => [1, 1, 8, 10, 0, 0, v >> 8, v & 255, 0, 0, 0, 0];
/** MSS 1460 and timestamps. */
const synOpt = (v: number): number[] => [2, 4, 5, 180, ...tsOpt(v)];

/**
 * The connection as captured on `e`: the true times (µs after T0) of each packet at this point,
 * shifted by the point's clock. Six packets: SYN, SYN-ACK, ACK, request, reply, ACK.
 */
function connection(e: Ends, at: number[], clock: bigint): Seg[] & { ts: bigint[] } {
  const c = { src: e.src, dst: e.dst, sport: e.sport, dport: e.dport };
  const s = { src: e.dst, dst: e.src, sport: e.dport, dport: e.sport };
  const isn = 1_000_000;
  const sisn = 7_000_000;
  const segs: Seg[] = [
    { ...c, seq: isn, flags: 0x02, options: synOpt(1), ipId: 100 },
    { ...s, seq: sisn, ack: isn + 1, flags: 0x12, options: synOpt(2), ipId: 0 },
    { ...c, seq: isn + 1, ack: sisn + 1, flags: 0x10, options: tsOpt(3), ipId: 101 },
    {
      ...c,
      seq: isn + 1,
      ack: sisn + 1,
      flags: 0x18,
      options: tsOpt(4),
      payload: REQUEST,
      ipId: 102,
    },
    {
      ...s,
      seq: sisn + 1,
      ack: isn + 1 + REQUEST.length,
      flags: 0x18,
      options: tsOpt(5),
      payload: REPLY,
      ipId: 900,
    },
    {
      ...c,
      seq: isn + 1 + REQUEST.length,
      ack: sisn + 1 + REPLY.length,
      flags: 0x10,
      options: tsOpt(6),
      ipId: 103,
    },
  ];
  return Object.assign(segs, { ts: at.map((u) => T0 + BigInt(u) * US + clock) });
}

/** Other connections at a point, interleaved, so the flow's frame numbers are not 1..6. */
function noise(n: number): Pkt[] {
  const out: Pkt[] = [];
  for (let i = 0; i < n; i++) {
    const seg: Seg = {
      src: '10.244.7.1',
      dst: '10.244.8.1',
      sport: 20000 + i,
      dport: 443,
      seq: 5000 + i,
      flags: 0x18,
      payload: `noise ${i}`,
      ipId: 3000 + i,
    };
    out.push(tcp(T0 - 1000n * US + BigInt(i) * 250n * US, seg));
  }
  return out;
}

const byTime = (a: { ts: bigint }, b: { ts: bigint }): number =>
  a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0;

let run = 0;
/** The three point files (a fresh set each call). */
function writeFiles(): PointFile[] {
  run++;
  // True times in µs after T0 (see the file comment): SYN, SYN-ACK, ACK, request, reply, ACK.
  const decap = connection(AT_DECAP, [0, 500, 600, 700, 1200, 1300], 0n);
  const egress = connection(AT_EGRESS, [20, 480, 620, 720, 1180, 1320], 0n);
  const backend = connection(AT_BACKEND, [200, 300, 800, 900, 1000, 1500], SKEW);

  // decap: pcapng, eth0 (interface 0, Ethernet noise) and tun0 (interface 1, raw IP: the flow).
  const le = true;
  const blocks = [
    ...noise(8).map((p) => ({ ts: p.ts, b: epb(le, 0, p.ts, p.data) })),
    ...decap.map((s, i) => {
      const ts = decap.ts[i] ?? 0n;
      return { ts, b: epb(le, 1, ts, ipv4(6, s.src, s.dst, tcpHeader(s), s.ipId)) };
    }),
  ].sort(byTime);
  const decapFile = join(dir, `${run}-decap.pcapng`);
  writeFileSync(
    decapFile,
    Buffer.concat([
      shb(le),
      idb(le, 1, 'eth0', 9),
      idb(le, 101, 'tun0', 9),
      ...blocks.map((x) => x.b),
    ]),
  );
  const pcap = (name: string, segs: Seg[] & { ts: bigint[] }): string =>
    writePcap(
      join(dir, `${run}-${name}.pcap`),
      [...noise(10), ...segs.map((s, i) => tcp(segs.ts[i] ?? 0n, s))].sort(byTime),
    );
  return [
    { name: 'decap', file: decapFile },
    { name: 'egress', file: pcap('egress', egress) },
    { name: 'backend', file: pcap('backend', backend) },
  ];
}

/** The analysis (the native fast path where the addon loads: its frame numbers are the reader's). */
function analyze(points: PointFile[], fast = true): AnalysisResult {
  return analyzeFiles(
    {
      points,
      inventory: { nodes: {}, pods: {} },
      selector: { client: AT_DECAP.src, dst: AT_DECAP.dst },
    },
    { fast },
  );
}

interface Row {
  number: number;
  ifaceId: number;
  ifaceName: string;
  encap: number;
  timeNs: bigint;
  capLen: number;
  len: number;
  src: string;
  sport: number;
  dst: string;
  dport: number;
  ipHdr: number;
  tcpHdr: number;
  tcpLen: number;
  payload: string;
  comment: string;
}

const FIELDS = [
  'frame.number',
  'frame.interface_id',
  'frame.interface_name',
  'frame.encap_type',
  'frame.time_epoch',
  'frame.cap_len',
  'frame.len',
  'ip.src',
  'tcp.srcport',
  'ip.dst',
  'tcp.dstport',
  'ip.hdr_len',
  'tcp.hdr_len',
  'tcp.len',
  'tcp.payload',
  'frame.comment',
];

/** `1700000000.000200000` → ns. */
function epochNs(s: string): bigint {
  const [sec = '0', frac = ''] = s.split('.');
  return BigInt(sec) * 1_000_000_000n + BigInt(frac.padEnd(9, '0').slice(0, 9));
}

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'fail' | 'same' | 'match' | 'notOk'>;

/** tshark's fields for every packet of `file`; fails the test (never skips) without tshark. */
function tshark(t: Asserts, file: string): Row[] {
  let read: TsharkRead;
  try {
    read = tsharkRead(file, FIELDS, ['-E', 'occurrence=f']);
  } catch (e) {
    t.fail(e instanceof Error ? e.message : String(e));
    return [];
  }
  t.notOk(
    /damaged|corrupt|appears to have been cut/i.test(read.stderr),
    `tshark finds no damage in ${basename(file)}`,
  );
  return read.rows.map((v) => {
    const s = (i: number): string => v[i] ?? '';
    const n = (i: number): number => Number(s(i));
    return {
      number: n(0),
      ifaceId: n(1),
      ifaceName: s(2),
      encap: n(3),
      timeNs: epochNs(s(4)),
      capLen: n(5),
      len: n(6),
      src: s(7),
      sport: n(8),
      dst: s(9),
      dport: n(10),
      ipHdr: n(11),
      tcpHdr: n(12),
      tcpLen: n(13),
      payload: s(14),
      comment: s(15),
    };
  });
}

/** Writes the evidence and reads it back. */
function readBack(t: Asserts, ev: Evidence, name: string): Row[] {
  const file = join(dir, name);
  writeFileSync(file, ev.bytes);
  return tshark(t, file);
}

const COMMENT =
  /^(decap|egress|backend) frame (\d+): (request|reply) ([A-Z,]+)(?: len (\d+))?; matched by ([a-z,-]+); captured (\S+Z), offset applied (.+)$/;

/** The flow entry a comment names. */
function entryOf(
  r: AnalysisResult,
  row: Row,
): { point: string; entry: FlowPacketSummary; m: RegExpExecArray } | null {
  const m = COMMENT.exec(row.comment);
  if (m === null) return null;
  const point = r.points.find((p) => p.name === m[1]);
  const entry = point?.flow.find((f) => f.frame === Number(m[2]));
  return point === undefined || entry === undefined ? null : { point: point.name, entry, m };
}

/** WTAP encapsulations tshark reports for the link types here (wiretap/wtap.h). */
const WTAP = { ethernet: 1, rawIP: 7 };
/** Link-layer bytes before IPv4 at each point. */
const LINK = { decap: 0, egress: 14, backend: 14 } as Record<string, number>;

void t.test('headers only: interfaces, packets, comments, tuples, reference-clock order', (t) => {
  const points = writeFiles();
  const r = analyze(points);
  t.same(
    r.points.map((p) => [p.name, p.status, p.flow.length]),
    [
      ['decap', 'matched', 6],
      ['egress', 'matched', 6],
      ['backend', 'matched', 6],
    ],
    'the analysis matched the connection at every point',
  );
  t.same(
    analyze(points, false).points.map((p) => p.flow),
    r.points.map((p) => p.flow),
    'the JS reader and decoder give the same flows (frame numbers, times)',
  );
  const backendClock = r.clock?.find((o) => o.point === 'backend');
  t.match(backendClock, { status: 'bounded', offsetNs: String(SKEW) }, "backend's clock: +5 ms");
  const ev = buildEvidencePcapng({ points, result: r, version: '0.1.0' });
  t.equal(ev.headersOnly, true);
  t.same(ev.problems, []);
  t.equal(ev.packets, 18);
  const names = points.map((p) => `${p.name}@file/${basename(p.file)}`);
  t.same(
    ev.interfaces.map((i) => [i.id, i.point, i.name, i.linktype, i.snaplen, i.packets]),
    [
      [0, 'decap', names[0], 101, 262144, 6],
      [1, 'egress', names[1], 1, 262144, 6],
      [2, 'backend', names[2], 1, 262144, 6],
    ],
  );
  t.match(
    ev.interfaces[0]?.description,
    /^hoptrace point decap \(1 of 3\), read from \/.*-decap\.pcapng, its interface tun0; the node is not known/,
  );
  t.match(
    ev.note,
    /^evidence\.pcapng holds 18 packets of the matched connection from 3 of 3 points \(decap 6, egress 6, backend 6\)\. Headers only/,
  );
  t.match(ev.note, /backend offset applied −5\.000 ms \(θ against decap, bounded\)/);

  const rows = readBack(t, ev, 'headers.pcapng');
  t.equal(rows.length, 18, 'tshark reads 18 packets');
  t.same(
    [...new Set(rows.map((x) => `${x.ifaceId} ${x.ifaceName} ${x.encap}`))].sort(),
    [
      `0 ${names[0]} ${WTAP.rawIP}`,
      `1 ${names[1]} ${WTAP.ethernet}`,
      `2 ${names[2]} ${WTAP.ethernet}`,
    ],
    'one interface per point, named point@file/<file>, with its link type (raw IP, Ethernet)',
  );
  t.equal(
    rows[0]?.comment,
    `decap frame ${r.points[0]?.flow[0]?.frame}: request SYN; matched by selector; captured 2023-11-14T22:13:20.000000000Z, offset applied 0 (the reference clock)`,
  );
  const order: string[] = [];
  let last = 0n;
  for (const row of rows) {
    const e = entryOf(r, row);
    if (e === null) {
      t.fail(`frame ${row.number}: comment not understood: ${row.comment}`);
      continue;
    }
    const { point, entry, m } = e;
    order.push(`${point}:${entry.frame}`);
    const p = r.points.find((x) => x.name === point);
    t.equal(
      row.ifaceName,
      `${point}@file/${basename(points.find((x) => x.name === point)?.file ?? '')}`,
    );
    t.equal(m[3], entry.dir, `${row.comment}: direction`);
    const keys = entry.dir === 'request' ? p?.matchedBy : p?.replyMatchedBy;
    t.equal(m[6], keys?.join(','), `${row.comment}: the point's keys`);
    t.equal(m[5] === undefined ? 0 : Number(m[5]), entry.payloadLength);
    t.equal(m[7]?.slice(0, 26), utcMicros(entry.tsNs).slice(0, 26), 'the captured time');
    t.same(
      { src: row.src, sport: row.sport, dst: row.dst, dport: row.dport },
      entry.tuple,
      `${row.comment}: the analysed tuple`,
    );
    const offset = r.clock?.find((o) => o.point === point);
    t.equal(row.timeNs, toReferenceClock(BigInt(entry.tsNs), offset), 'on the reference clock');
    t.ok(row.timeNs >= last, `frame ${row.number}: in time order`);
    last = row.timeNs;
    // Headers only: the frame ends with its TCP header, the original length is kept.
    t.equal(row.capLen, (LINK[point] ?? 0) + row.ipHdr + row.tcpHdr, 'cut after the TCP header');
    t.equal(row.len, row.capLen + entry.payloadLength, 'the original length');
    t.equal(row.tcpLen, entry.payloadLength);
    t.equal(row.payload, '', 'no payload byte');
    if (entry.payloadLength > 0) t.ok(row.capLen < row.len, 'captured length below the original');
  }
  // The true order of events (see writeFiles): backend's packets among the others, not after them.
  const f = (name: string, i: number): string =>
    `${name}:${r.points.find((p) => p.name === name)?.flow[i]?.frame}`;
  t.same(
    order,
    [
      f('decap', 0),
      f('egress', 0),
      f('backend', 0),
      f('backend', 1),
      f('egress', 1),
      f('decap', 1),
      f('decap', 2),
      f('egress', 2),
      f('decap', 3),
      f('egress', 3),
      f('backend', 2),
      f('backend', 3),
      f('backend', 4),
      f('egress', 4),
      f('decap', 4),
      f('decap', 5),
      f('egress', 5),
      f('backend', 5),
    ],
    'merged in the order the packets travelled',
  );
  const backendReply = rows.find(
    (x) => x.comment.startsWith('backend') && x.comment.includes('reply SYN,ACK'),
  );
  t.match(
    backendReply?.comment,
    /; matched by [a-z,-]*syn-ack[a-z,-]*; captured 2023-11-14T22:13:20\.005300000Z, offset applied −5\.000 ms \(θ against decap, bounded\)$/,
  );
  t.end();
});

void t.test('payload: true keeps every captured byte', (t) => {
  const points = writeFiles();
  const r = analyze(points);
  const ev = buildEvidencePcapng({ points, result: r, version: '0.1.0', payload: true });
  t.equal(ev.headersOnly, false);
  t.match(ev.note, /Frames as captured \(payload kept\)/);
  const rows = readBack(t, ev, 'payload.pcapng');
  t.equal(rows.length, 18);
  for (const row of rows) {
    t.equal(row.capLen, row.len, `frame ${row.number}: whole`);
    if (row.tcpLen > 0) t.ok(row.payload.length > 0, `frame ${row.number}: payload bytes`);
  }
  const request = Buffer.from(REQUEST).toString('hex');
  t.equal(
    rows.filter((x) => x.payload.replace(/:/g, '') === request).length,
    3,
    'the request bytes, once per point',
  );
  t.end();
});

void t.test('a file changed after the analysis leaves its point out, named', (t) => {
  const points = writeFiles();
  const r = analyze(points);
  const [decap, egress, backend] = points;
  if (decap === undefined || egress === undefined || backend === undefined) return t.end();

  // egress: one flow frame's source port rewritten in place (same length, same frame number).
  const bytes = readFileSync(egress.file);
  const port = Buffer.from([40123 >> 8, 40123 & 255]);
  const at = bytes.indexOf(Buffer.concat([Buffer.from([10, 244, 1, 10, 10, 96, 0, 10]), port]));
  t.ok(at > 0, 'found the request tuple in the egress file');
  bytes.writeUInt16BE(40124, at + 8);
  writeFileSync(egress.file, bytes);
  let ev = buildEvidencePcapng({ points, result: r, version: '0.1.0' });
  t.match(ev.problems, [
    { point: 'egress', code: 'EVIDENCE_FILE_CHANGED', detail: /tuple .*40124.*analysed .*40123/ },
  ]);
  t.same(
    ev.interfaces.map((i) => i.point),
    ['decap', 'backend'],
    'egress has no interface',
  );
  t.match(ev.note, /egress is left out: EVIDENCE_FILE_CHANGED: frame \d+: tuple/);
  let rows = readBack(t, ev, 'changed.pcapng');
  t.equal(rows.length, 12, "decap's and backend's packets only");
  t.notOk(
    rows.some((x) => x.comment.startsWith('egress')),
    'no egress packet',
  );

  // backend: cut short before its last flow frame; decap: gone.
  const bk = readFileSync(backend.file);
  writeFileSync(backend.file, bk.subarray(0, bk.length - 30));
  unlinkSync(decap.file);
  ev = buildEvidencePcapng({ points, result: r, version: '0.1.0' });
  t.match(ev.problems, [
    { point: 'decap', code: 'FILE_NOT_FOUND' },
    { point: 'egress', code: 'EVIDENCE_FILE_CHANGED' },
    {
      point: 'backend',
      code: 'EVIDENCE_FILE_CHANGED',
      detail: /no longer holds frame \d+ \(it now ends inside a record/,
    },
  ]);
  t.equal(ev.packets, 0);
  rows = readBack(t, ev, 'empty.pcapng');
  t.equal(rows.length, 0, 'a valid file with no packets');
  t.end();
});

void t.test(
  'a point whose flow came over two interfaces of its file gets one IDB for each',
  (t) => {
    const points = writeFiles();
    const decap = points[0];
    if (decap === undefined) return t.end();
    // The same decap file with a second raw-IP interface, tun1, carrying the flow from its reply on.
    const segs = connection(AT_DECAP, [0, 500, 600, 700, 1200, 1300], 0n);
    const le = true;
    const frames = segs.map((s, i) =>
      epb(le, i === 0 ? 0 : 1, segs.ts[i] ?? 0n, ipv4(6, s.src, s.dst, tcpHeader(s), s.ipId)),
    );
    writeFileSync(
      decap.file,
      Buffer.concat([shb(le), idb(le, 101, 'tun0', 9), idb(le, 101, 'tun1', 9), ...frames]),
    );
    const r = analyze(points);
    t.equal(r.points[0]?.flow.length, 6);
    const ev = buildEvidencePcapng({ points, result: r, version: '0.1.0' });
    const base = `decap@file/${basename(decap.file)}`;
    t.same(
      ev.interfaces.map((i) => [i.name, i.packets]),
      [
        [`${base}#tun0`, 1],
        [`${base}#tun1`, 5],
        [`egress@file/${basename(points[1]?.file ?? '')}`, 6],
        [`backend@file/${basename(points[2]?.file ?? '')}`, 6],
      ],
    );
    const rows = readBack(t, ev, 'two-ifaces.pcapng');
    t.same(
      rows.filter((x) => x.comment.startsWith('decap')).map((x) => x.ifaceName),
      [`${base}#tun0`, ...Array<string>(5).fill(`${base}#tun1`)],
      'tshark names each decap packet by its interface',
    );
    t.end();
  },
);

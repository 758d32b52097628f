/**
 * `hoptrace analyze` on the native fast path (cli/analyze.ts FilePointStream: summary records,
 * a record-level prefilter, events built only for what a pass can keep) against the JS path
 * (every frame through the JS reader + reference decoder): the same AnalysisResult — or the same
 * error — on the corpus, the lab's captures when present, the benchmark file, and hand-made files
 * for the prefilter's edge cases: a proxy's new connection buffered until its data segment, the
 * window's edges, frames the fast path leaves to the reference decoder (SLOW), a record on the
 * request's ports before its SYN, out-of-order SYNs, the pending buffers' bounds and two
 * connections whose flow hashes collide. Fails (never skips) without the addon.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { writeBenchPcap, BENCH_CLIENT } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { R, SUMMARY_BYTES } from '../../core/decode/summary';
import { openSummaryPcap } from '../../offline/summary-file';
import { analyzeFiles, type PointFile, type RequestSelector } from '../../cli/analyze';
import type { Inventory } from '../../common/inventory';
import { readInventoryFile } from '../../common/inventory-file';
import { renderReportMarkdown, renderVerdictText } from '../../core/report/report';
import { epb, idb, isb, shb } from './pcapng-writer';
import { PCAPS } from './corpus';
import { eth, ipv4, tcp, tcpHeader, writePcap, type Pkt, type Seg } from './frames';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const pcaps = PCAPS;
const labOut = join(__dirname, '..', '..', '..', 'lab-out');
const EMPTY: Inventory = { nodes: {}, pods: {} };

/** The result (or error) of analyze on one path, as comparable text. */
function run(points: PointFile[], selector: RequestSelector, fast: boolean, inv = EMPTY): string {
  try {
    return JSON.stringify(analyzeFiles({ points, inventory: inv, selector }, { fast }));
  } catch (e: unknown) {
    return `error: ${e instanceof Error ? e.message : String(e)}`;
  }
}

type Asserts = Pick<typeof t, 'equal' | 'ok' | 'fail' | 'not'>;

/** Both paths agree; returns the (shared) outcome. */
function agree(
  t: Asserts,
  label: string,
  points: PointFile[],
  selector: RequestSelector,
  inv = EMPTY,
): string {
  const want = run(points, selector, false, inv);
  const got = run(points, selector, true, inv);
  t.equal(got, want, `${label} ${JSON.stringify(selector)}`);
  // The same frames as pcapng files: the same verdict and points on the fast path (what the files
  // recorded about their capture differs by format, so captureHealth and caveats are left out).
  const twins = points.map((p) => ({ ...p, file: pcapngTwin(p.file) }));
  if (twins.every((p) => p.file !== null)) {
    const ng = run(twins as PointFile[], selector, true, inv);
    t.equal(
      withoutHealth(ng),
      withoutHealth(want),
      `${label} as pcapng ${JSON.stringify(selector)}`,
    );
  }
  return want;
}

/** The analysis without what depends on the file format (or an error as it is). */
function withoutHealth(out: string): string {
  if (out.startsWith('error')) return out.replaceAll('.pcapng', '.pcap');
  const r = JSON.parse(out) as Record<string, unknown>;
  delete r.captureHealth;
  delete r.caveats;
  return JSON.stringify(r);
}

/** Frames of the files this test wrote, to write them again as pcapng. */
const written = new Map<string, { pkts: Pkt[]; micro: boolean }>();

/** A pcapng file (ns resolution, no interface name) with the frames of a pcap this test wrote. */
function pcapngTwin(path: string): string | null {
  const w = written.get(path);
  if (w === undefined) return null;
  const le = true;
  const parts = [shb(le), idb(le, 1, null, 9)];
  for (const p of w.pkts) {
    const caplen = Math.min(p.caplen ?? p.data.length, p.data.length);
    const ts = w.micro ? (p.ts / 1000n) * 1000n : p.ts;
    parts.push(epb(le, 0, ts, p.data.subarray(0, caplen), p.data.length));
  }
  const twin = path.replace(/\.pcap$/, '.twin.pcapng');
  writeFileSync(twin, Buffer.concat(parts));
  return twin;
}

const at = (files: string[]): PointFile[] =>
  files.map((file, i) => ({ name: ['decap', 'egress', 'backend', 'p4'][i] ?? `p${i}`, file }));

// ---- frames -------------------------------------------------------------------------------

/** A segment of an unrelated connection (10.244.9.9:1 → 10.244.2.20:2): ACK-only unless given. */
const unrelated = (ts: bigint, seq: number, more: Partial<Seg> = {}): Pkt =>
  tcp(ts, { src: '10.244.9.9', dst: '10.244.2.20', sport: 1, dport: 2, seq, flags: 0x10, ...more });

/** ICMP port unreachable from `from`, quoting the first 28 bytes of a segment's IP packet. */
function icmpError(ts: bigint, from: string, s: Seg): Pkt {
  const quoted = ipv4(6, s.src, s.dst, tcpHeader(s)).subarray(0, 28);
  const icmp = Buffer.concat([Buffer.from([3, 3, 0, 0, 0, 0, 0, 0]), quoted]);
  return { ts, data: eth(0x0800, ipv4(1, from, s.src, icmp)) };
}

/** TCP over IPv6 behind a hop-by-hop options header (left to the reference decoder). */
function tcp6hbh(ts: bigint, s: Seg & { src6: string; dst6: string }): Pkt {
  const body = tcpHeader(s);
  const hbh = Buffer.from([6, 0, 1, 4, 0, 0, 0, 0]);
  const h = Buffer.alloc(40);
  h[0] = 0x60;
  h.writeUInt16BE(hbh.length + body.length, 4);
  h[6] = 0; // hop-by-hop
  h[7] = 64;
  const a6 = (s6: string): Buffer => {
    const b = Buffer.alloc(16);
    s6.split(':').forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
    return b;
  };
  a6(s.src6).copy(h, 8);
  a6(s.dst6).copy(h, 24);
  return { ts, data: eth(0x86dd, Buffer.concat([h, hbh, body])) };
}

/** The same frames as a little-endian pcapng file (ns resolution), ending with `stats` when given. */
function writePcapng(path: string, pkts: Pkt[], stats: Parameters<typeof isb>[2] | null): string {
  const parts = [shb(true), idb(true, 1, 'eth0', 9)];
  for (const p of pkts) parts.push(epb(true, 0, p.ts, p.data.subarray(0, p.caplen), p.data.length));
  if (stats !== null) parts.push(isb(true, 0, stats));
  writeFileSync(path, Buffer.concat(parts));
  return path;
}

// ---- the request, as seen at each point ---------------------------------------------------

const T0 = 1_700_000_000_000_000_000n;
const US = 1000n;
const MS = 1_000_000n;
const S = 1_000_000_000n;
const W = 10n * S; // DEFAULT_WINDOW_NS
const CLIENT = '10.90.0.42';
const SERVICE = '10.96.0.10';
const REQUEST = 'GET /hoptrace-probe-abc123 HTTP/1.1\r\nHost: svc\r\n\r\n';
const PLAIN = 'GET /index.html HTTP/1.1\r\nHost: svc\r\n\r\n';
const REWRITTEN =
  'GET /api/v1/hoptrace-probe-abc123 HTTP/1.1\r\nHost: svc\r\nX-Forwarded-For: 10.90.0.42\r\n\r\n';
const REPLY = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
const ISN = 0x1000;
const SISN = 0x7000;
const TS_OPT = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0];
const MSS_TS_OPTS = [2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7];

interface Ends {
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

/** One connection's exchange: SYN, SYN-ACK, ACK, request, ACK, reply, FINs. */
function exchange(
  e: Ends,
  t0: bigint,
  isn = ISN,
  sisn = SISN,
  payload = REQUEST,
  opts: { synOptions?: number[]; synCaplen?: number } = {},
): Pkt[] {
  const c = { src: e.src, dst: e.dst, sport: e.sport, dport: e.dport };
  const s = { src: e.dst, dst: e.src, sport: e.dport, dport: e.sport };
  const q = payload.length;
  const r = REPLY.length;
  const syn: Seg = { ...c, seq: isn, flags: 0x02 };
  if (opts.synOptions !== undefined) syn.options = opts.synOptions;
  return [
    tcp(t0, syn, opts.synCaplen),
    tcp(t0 + 100n * US, { ...s, seq: sisn, ack: isn + 1, flags: 0x12 }),
    tcp(t0 + 200n * US, { ...c, seq: isn + 1, ack: sisn + 1, flags: 0x10 }),
    tcp(t0 + 300n * US, { ...c, seq: isn + 1, ack: sisn + 1, flags: 0x18, payload }),
    tcp(t0 + 400n * US, { ...s, seq: sisn + 1, ack: isn + 1 + q, flags: 0x10 }),
    tcp(t0 + 500n * US, { ...s, seq: sisn + 1, ack: isn + 1 + q, flags: 0x18, payload: REPLY }),
    tcp(t0 + 600n * US, { ...c, seq: isn + 1 + q, ack: sisn + 1 + r, flags: 0x11 }),
    tcp(t0 + 700n * US, { ...s, seq: sisn + 1 + r, ack: isn + 2 + q, flags: 0x11 }),
  ];
}

/** Background connections: handshakes, pure ACKs and unrelated data. */
function noise(n: number, t0: bigint, step: bigint, base = 20000): Pkt[] {
  const out: Pkt[] = [];
  for (let i = 0; i < n; i++) {
    const e = { src: '10.244.7.1', sport: base + i, dst: '10.244.8.1', dport: 443 };
    out.push(...exchange(e, t0 + BigInt(i) * step, 5000 + i * 7919, 90000 + i, `noise ${i}`));
  }
  return out;
}

const byTime = (pkts: Pkt[]): Pkt[] =>
  [...pkts].sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0));

const REQ_ENDS: Ends = { src: CLIENT, sport: 40123, dst: SERVICE, dport: 80 };
const NAT_ENDS: Ends = { src: '10.244.1.10', sport: 33000, dst: '10.244.2.20', dport: 8080 };
const PROXY_ENDS: Ends = { src: '10.244.3.7', sport: 51000, dst: '10.244.2.20', dport: 8080 };

// ---- tests --------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'ht-analyze-fast-'));
// HT_KEEP=1 keeps the hand-made files for a look with `hoptrace decode`.
if (process.env.HT_KEEP === undefined) {
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
} else t.comment(`files kept in ${dir}`);
const file = (name: string, pkts: Pkt[], micro = false): string => {
  const path = writePcap(join(dir, `${name}.pcap`), pkts, micro);
  written.set(path, { pkts, micro });
  return path;
};

void t.test(
  'the fast path is taken for classic pcap (so the comparisons compare something)',
  (t) => {
    const f = file('one', exchange(REQ_ENDS, T0));
    const r = openSummaryPcap(f);
    t.not(r, null, 'classic pcap opens on the fast path');
    r?.close();
    t.end();
  },
);

/** The proxy's side: its own new connection, buffered until its data segment carries `payload`. */
function proxied(payload: string): Pkt[] {
  const p = { src: PROXY_ENDS.src, dst: PROXY_ENDS.dst, sport: PROXY_ENDS.sport, dport: 8080 };
  const back = { src: p.dst, dst: p.src, sport: 8080, dport: p.sport };
  return [
    ...noise(30, T0 - 4n * S, 83n * MS, 22000),
    // Unrelated connections: pure ACKs buffered, then cleared by a data segment, then again.
    ...Array.from({ length: 20 }, (_, i) =>
      tcp(T0 + 900n * US + BigInt(i) * US, {
        src: '10.244.9.9',
        dst: '10.244.2.20',
        sport: 30000,
        dport: 8080,
        seq: 1,
        ack: 1,
        flags: i === 10 ? 0x18 : 0x10,
        payload: i === 10 ? 'other' : '',
      }),
    ),
    // The proxy's connection: SYN, SYN-ACK, more than PENDING_PER_CONNECTION pure ACKs, then data.
    tcp(T0 + 1n * MS, { ...p, seq: 99, flags: 0x02 }),
    tcp(T0 + 1n * MS + 50n * US, { ...back, seq: 500, ack: 100, flags: 0x12 }),
    ...Array.from({ length: 20 }, (_, i) =>
      tcp(T0 + 1n * MS + 100n * US + BigInt(i) * US, { ...p, seq: 100, ack: 501, flags: 0x10 }),
    ),
    tcp(T0 + 3n * MS, { ...p, seq: 100, ack: 501, flags: 0x18, payload }),
    tcp(T0 + 3n * MS + 100n * US, { ...back, seq: 501, ack: 100 + payload.length, flags: 0x10 }),
    tcp(T0 + 3n * MS + 200n * US, { ...back, seq: 501, ack: 100, flags: 0x18, payload: REPLY }),
  ];
}

void t.test('proxy: a new connection buffered until its data segment decides', (t) => {
  // The proxy forwards the request as is (every payload key), without a probe marker (hashes
  // only), or with its request line rewritten (the probe marker only).
  const variants = [
    { name: 'as is', request: REQUEST, forwarded: REQUEST },
    { name: 'no marker', request: PLAIN, forwarded: PLAIN },
    { name: 'marker only', request: REQUEST, forwarded: REWRITTEN },
  ];
  for (const v of variants) {
    const tag = v.name.replace(/\W+/g, '-');
    const decapPkts = byTime([
      ...noise(30, T0 - 2n * S, 97n * MS),
      ...exchange(REQ_ENDS, T0, ISN, SISN, v.request),
    ]);
    const egressPkts = byTime([
      ...exchange(NAT_ENDS, T0 + 50n * US, ISN, SISN, v.request),
      ...noise(30, T0 - 3n * S, 89n * MS, 21000),
    ]);
    const backendPkts = byTime(proxied(v.forwarded));
    const points = at([
      file(`proxy-${tag}-decap`, decapPkts),
      file(`proxy-${tag}-egress`, egressPkts),
      file(`proxy-${tag}-backend`, backendPkts),
    ]);
    for (const sel of [{}, { client: CLIENT }, { client: '10.1.2.3' }, { dst: SERVICE, dport: 80 }])
      agree(t, `proxy ${v.name}`, points, sel);
    // The request is followed to the proxy's connection, with its buffered start.
    t.match(
      run(points, { client: CLIENT }, false),
      /"name":"backend","status":"matched","packets":19,"requestPackets":16/,
      `proxy ${v.name}: the proxied connection is matched with its start`,
    );
    // The same, written with microsecond timestamps.
    const us = at([
      file(`proxy-${tag}-decap-us`, decapPkts, true),
      file(`proxy-${tag}-egress-us`, egressPkts, true),
      file(`proxy-${tag}-backend-us`, backendPkts, true),
    ]);
    agree(t, `proxy ${v.name} (µs)`, us, { client: CLIENT });
  }
  t.end();
});

void t.test('capture health: what each file recorded about its capture, and the cautions', (t) => {
  // The request reaches the VPN pod's egress but not the backend, whose capture saw only noise.
  const decapPkts = byTime([...noise(10, T0 - 2n * S, 97n * MS), ...exchange(REQ_ENDS, T0)]);
  const egressPkts = exchange(NAT_ENDS, T0 + 50n * US);
  const backendPkts = byTime(noise(12, T0 - 1n * S, 91n * MS, 23000));
  const decap = file('health-decap', decapPkts);
  const egress = file('health-egress', egressPkts);
  const backends = {
    pcap: file('health-backend', backendPkts),
    dropped: writePcapng(join(dir, 'health-dropped.pcapng'), backendPkts, {
      ifrecv: 200n,
      ifdrop: 30n,
      osdrop: 7n,
    }),
    none: writePcapng(join(dir, 'health-none.pcapng'), backendPkts, { ifrecv: 96n, ifdrop: 0n }),
    silent: writePcapng(join(dir, 'health-silent.pcapng'), backendPkts, null),
  };
  const analyze = (backend: string, fast: boolean): ReturnType<typeof analyzeFiles> =>
    analyzeFiles(
      { points: at([decap, egress, backend]), inventory: EMPTY, selector: { client: CLIENT } },
      { fast },
    );
  const caution = {
    pcap: /^backend did not see the request, and its capture is a classic pcap file, which records no drop counts .*: the request may be among them/,
    dropped:
      /^backend did not see the request, and its capture recorded 37 packets dropped: the request may be among them/,
    none: null,
    silent:
      /^backend did not see the request, and its capture records no drop counts \(no Interface Statistics Block/,
  };
  for (const [kind, backend] of Object.entries(backends) as [keyof typeof backends, string][]) {
    agree(t, `health ${kind}`, at([decap, egress, backend]), { client: CLIENT });
    const r = analyze(backend, true);
    t.equal(r.verdict.layer, 'dropped', `${kind}: the backend did not see the request`);
    t.same(
      r.captureHealth?.map((h) => [h.point, h.iface, h.file, h.packets, h.kernelDrops]),
      [
        ['decap', decap, 'pcap', decapPkts.length, null],
        ['egress', egress, 'pcap', egressPkts.length, null],
        [
          'backend',
          backend,
          kind === 'pcap' ? 'pcap' : 'pcapng',
          backendPkts.length,
          { pcap: null, dropped: 37, none: 0, silent: null }[kind],
        ],
      ],
      `${kind}: each file's frames and recorded drops`,
    );
    // Only the point that missed the request is cautioned about: decap and egress saw it.
    const want = caution[kind];
    if (want === null) t.same(r.caveats, [], `${kind}: no drops recorded, no caution`);
    else {
      t.equal(r.caveats?.length, 1, `${kind}: one caution`);
      t.match(r.caveats?.[0], want, `${kind}: the caution says why`);
      t.match(renderVerdictText(r), `  caution: ${r.caveats?.[0] ?? ''}`);
    }
    const md = renderReportMarkdown(r, { generatedAt: 'now', inputs: [] });
    t.match(md, '| point | file | format | frames | dropped |', `${kind}: Markdown table`);
    t.match(
      md,
      `| backend | ${backend} | ${kind === 'pcap' ? 'pcap' : 'pcapng'} | ${backendPkts.length} | ${
        { pcap: 'not recorded', dropped: '37', none: '0', silent: 'not recorded' }[kind]
      } |`,
    );
  }
  // --drops: the count tcpdump printed, for a file that records none; a file's own count wins.
  const given = (backend: string, n: number, fast = true): ReturnType<typeof analyzeFiles> =>
    analyzeFiles(
      {
        points: at([decap, egress, backend]),
        inventory: EMPTY,
        selector: { client: CLIENT },
        drops: new Map([['backend', n]]),
      },
      { fast },
    );
  for (const fast of [true, false]) {
    const none = given(backends.pcap, 0, fast);
    t.same(none.caveats, [], 'tcpdump printed 0 dropped: no caution for the classic pcap file');
    t.match(none.captureHealth?.[2], { point: 'backend', kernelDrops: 0, dropsGiven: true });
    t.notOk('dropsGiven' in (none.captureHealth?.[0] ?? {}), 'only for the point given');
    t.match(
      renderReportMarkdown(none, { generatedAt: 'now', inputs: [] }),
      `| backend | ${backends.pcap} | pcap | ${backendPkts.length} | 0 (given) |`,
    );
    const some = given(backends.pcap, 5, fast);
    t.same(some.caveats, [
      'backend did not see the request, and its capture dropped 5 packets (--drops): the ' +
        'request may be among them; capture again before concluding it never got there',
    ]);
    const own = given(backends.dropped, 5, fast);
    t.match(own.captureHealth?.[2], { kernelDrops: 37 });
    t.notOk('dropsGiven' in (own.captureHealth?.[2] ?? {}), "the file's own count wins");
    t.match(own.caveats, [
      /recorded 37 packets dropped/,
      `backend: --drops 5 not used: ${backends.dropped} records its own count (37 dropped)`,
    ]);
  }
  // A request seen everywhere gives no caution, even from files that record no drops.
  const seen = analyze(file('health-backend-seen', exchange(NAT_ENDS, T0 + 90n * US)), true);
  t.equal(seen.verdict.layer, 'vpn-pod');
  t.same(seen.caveats, []);
  t.end();
});

void t.test('later points that see one direction only', (t) => {
  // The request in two segments at the first point: the second one's seq is a client seq.
  const cont = (e: Ends): Pkt =>
    tcp(T0 + 310n * US, {
      ...e,
      seq: ISN + 1 + REQUEST.length,
      ack: SISN + 1,
      flags: 0x18,
      payload: 'X-More: 1\r\n\r\n',
    });
  const decap = file('oneway-decap', [...exchange(REQ_ENDS, T0), cont(REQ_ENDS)]);
  const nat = exchange(NAT_ENDS, T0 + 50n * US);
  const fromClient = (p: Pkt): boolean => p.data.readUInt16BE(14 + 20) === NAT_ENDS.sport;
  // Unrelated TCP first, so that what the request's packets are kept for is their own keys.
  const other = unrelated(T0, 1);
  const cases: { name: string; pkts: Pkt[] }[] = [
    { name: 'only the SYN (dropped after)', pkts: [other, ...nat.slice(0, 1)] },
    { name: 'SYN and ACK, no data', pkts: [other, ...nat.filter(fromClient).slice(0, 2)] },
    { name: 'client direction only', pkts: nat.filter(fromClient) },
    { name: 'reply direction only', pkts: nat.filter((p) => !fromClient(p)) },
    { name: 'SYN-ACK only', pkts: [other, ...nat.slice(1, 2)] },
    // Data segments whose only key is their seq (a request's second segment) or their ack.
    { name: 'second request segment only', pkts: [other, cont(NAT_ENDS)] },
    { name: 'reply data only', pkts: [other, nat[5]!] },
  ];
  for (const c of cases) {
    const out = agree(
      t,
      c.name,
      at([decap, file(`oneway-${c.name.replace(/\W+/g, '-')}`, c.pkts)]),
      {
        client: CLIENT,
      },
    );
    // A reply's data alone is kept (its ack is the request's) but proves nothing.
    if (c.name !== 'reply data only')
      t.match(out, /"name":"egress","status":"matched"/, `${c.name}: matched`);
  }
  t.end();
});

void t.test('a proxied data segment alone, matched by one payload key', (t) => {
  const long = `GET /${'a'.repeat(70)}`;
  const variants = [
    // [request at the first point, what the proxy forwards]: probe marker only, request line only,
    // first 64 bytes only (a request line longer than that, changed after byte 64).
    ['marker', REQUEST, REWRITTEN],
    ['request line', PLAIN, 'GET /index.html HTTP/1.1\r\nHost: other-svc\r\nVia: proxy\r\n\r\n'],
    ['first bytes', `${long}1 HTTP/1.1\r\n\r\n`, `${long}2 HTTP/1.1\r\n\r\n`],
  ] as const;
  const other = unrelated(T0, 1);
  for (const [name, request, forwarded] of variants) {
    const decap = file(
      `alone-${name.replace(/\W+/g, '-')}-decap`,
      exchange(REQ_ENDS, T0, ISN, SISN, request),
    );
    const backend = file(`alone-${name.replace(/\W+/g, '-')}-backend`, [
      other,
      tcp(T0 + 3n * MS, { ...PROXY_ENDS, seq: 100, ack: 501, flags: 0x18, payload: forwarded }),
    ]);
    const out = agree(t, `alone: ${name}`, at([decap, backend]), { client: CLIENT });
    t.match(out, /"name":"egress","status":"matched"/, `alone: ${name}: matched`);
  }
  t.end();
});

void t.test('window edges: exactly ±window is in, one nanosecond more is out', (t) => {
  const retransmit = (e: Ends, ts: bigint): Pkt =>
    tcp(ts, { ...e, seq: ISN + 1, ack: SISN + 1, flags: 0x18, payload: REQUEST });
  for (const [name, edge] of [
    ['+W', W],
    ['+W+1', W + 1n],
    ['-W', -W],
    ['-W-1', -W - 1n],
  ] as const) {
    const decap = file(`edge${name}-decap`, [
      ...exchange(REQ_ENDS, T0),
      retransmit(REQ_ENDS, T0 + edge),
    ]);
    const egress = file(`edge${name}-egress`, [
      ...exchange(NAT_ENDS, T0 + 50n * US),
      retransmit(NAT_ENDS, T0 + edge),
    ]);
    // Only an unrelated segment at the edge: "TCP seen within the window" hinges on it.
    const backend = file(`edge${name}-backend`, [
      unrelated(T0 + edge, 1),
      unrelated(T0 + edge + (edge > 0n ? 5n * S : -5n * S), 9),
    ]);
    agree(t, `edge ${name}`, at([decap, egress, backend]), { client: CLIENT });
  }
  // A later point whose only TCP in the window is unrelated data: it alone says "TCP was seen".
  const dataOnly = file('data-only-backend', [
    unrelated(T0 - 20n * S, 1, { flags: 0x18, payload: 'old' }),
    unrelated(T0 + 2n * S, 4, { flags: 0x18, payload: 'x' }),
    tcp(T0 + 3n * S, {
      src: '10.244.9.8',
      dst: '10.244.2.20',
      sport: 1,
      dport: 2,
      seq: 5,
      flags: 0x18,
      payload: 'y',
    }),
  ]);
  const out = agree(
    t,
    'unrelated data only',
    at([file('data-only-decap', exchange(REQ_ENDS, T0)), dataOnly]),
    {},
  );
  t.match(out, /"status":"not-seen"/);
  t.end();
});

void t.test('SLOW frames among them: truncated, ICMP, IPv6 extension header, TSO', (t) => {
  const p = { src: PROXY_ENDS.src, dst: PROXY_ENDS.dst, sport: PROXY_ENDS.sport, dport: 8080 };
  const back = { src: p.dst, dst: p.src, sport: 8080, dport: p.sport };
  const decapPkts = [
    ...exchange(REQ_ENDS, T0),
    // A data segment of the request cut inside its TCP options (decoded by the reference).
    tcp(
      T0 + 350n * US,
      { ...REQ_ENDS, seq: ISN + 1, ack: SISN + 1, flags: 0x18, options: TS_OPT, payload: REQUEST },
      14 + 20 + 24,
    ),
    icmpError(T0 + 360n * US, '10.0.0.1', { ...REQ_ENDS, seq: ISN + 1, flags: 0x18 }),
    tcp6hbh(T0 + 370n * US, {
      ...REQ_ENDS,
      src6: 'fd00:0:0:0:0:0:0:1',
      dst6: 'fd00:0:0:0:0:0:0:2',
      seq: 5,
      flags: 0x02,
    }),
  ];
  const egressPkts = [
    // The SYN-ACK cut inside its options: the first trigger of this connection is a SLOW event.
    tcp(
      T0 + 150n * US,
      {
        src: NAT_ENDS.dst,
        dst: NAT_ENDS.src,
        sport: NAT_ENDS.dport,
        dport: NAT_ENDS.sport,
        seq: SISN,
        ack: ISN + 1,
        flags: 0x12,
        options: MSS_TS_OPTS,
      },
      14 + 20 + 26,
    ),
    ...exchange(NAT_ENDS, T0 + 200n * US).slice(2),
    tcp(T0 + 900n * US, { ...NAT_ENDS, seq: ISN + 1, ack: SISN + 1, flags: 0x10, tso: true }),
  ];
  // The proxy's handshake: its SYN and a pure ACK cut short, so the reference decodes them.
  const handshake = [
    tcp(T0 + 1n * MS, { ...p, seq: 99, flags: 0x02, options: MSS_TS_OPTS }, 14 + 20 + 25),
    tcp(T0 + 1n * MS + 50n * US, { ...back, seq: 500, ack: 100, flags: 0x12 }),
    tcp(
      T0 + 1n * MS + 100n * US,
      { ...p, seq: 100, ack: 501, flags: 0x10, options: TS_OPT },
      14 + 20 + 22,
    ),
  ];
  const backendPkts = [
    icmpError(T0 + 500n * US, '10.244.2.20', { ...p, seq: 1, flags: 0x02 }),
    // The handshake's SYN and pure ACK decoded by the reference, buffered with FAST ACKs.
    ...handshake,
    tcp(T0 + 1n * MS + 150n * US, { ...p, seq: 100, ack: 501, flags: 0x10 }),
    tcp(T0 + 3n * MS, { ...p, seq: 100, ack: 501, flags: 0x18, payload: REQUEST }),
    // Related afterwards: a TSO frame and a truncated one.
    tcp(T0 + 4n * MS, {
      ...back,
      seq: 501,
      ack: 100 + REQUEST.length,
      flags: 0x18,
      payload: REPLY,
      tso: true,
    }),
    tcp(
      T0 + 5n * MS,
      { ...p, seq: 100 + REQUEST.length, ack: 501, flags: 0x11, options: TS_OPT },
      14 + 20 + 21,
    ),
  ];
  for (const sel of [{}, { client: CLIENT }]) {
    const out = agree(
      t,
      'slow',
      at([
        file('slow-decap', decapPkts),
        file('slow-egress', egressPkts),
        file('slow-backend', backendPkts),
      ]),
      sel,
    );
    t.notMatch(out, /^error/);
  }
  // A buffer opened by a SYN decoded by the reference, then a FAST data segment of the same
  // connection without the request's keys (a PROXY protocol line): it must clear the buffer.
  const preamble = [
    ...handshake,
    tcp(T0 + 2n * MS, {
      ...p,
      seq: 100,
      ack: 501,
      flags: 0x18,
      payload: 'PROXY TCP4 10.90.0.42 10.96.0.10 40123 80\r\n',
    }),
    tcp(T0 + 2n * MS + 50n * US, { ...p, seq: 143, ack: 501, flags: 0x10 }),
    tcp(T0 + 3n * MS, { ...p, seq: 143, ack: 501, flags: 0x18, payload: REQUEST }),
  ];
  const pre = agree(
    t,
    'slow buffered, then cleared',
    at([file('pre-decap', exchange(REQ_ENDS, T0)), file('pre-backend', preamble)]),
    { client: CLIENT },
  );
  t.match(pre, /"name":"egress","status":"matched","packets":2,/, 'the cleared buffer is not kept');
  // The request's SYN itself left to the reference decoder.
  const slowSyn = exchange(REQ_ENDS, T0, ISN, SISN, REQUEST, {
    synOptions: MSS_TS_OPTS,
    synCaplen: 14 + 20 + 25,
  });
  agree(
    t,
    'slow SYN',
    at([
      file('slowsyn-decap', slowSyn),
      file('slowsyn-egress', egressPkts),
      file('slowsyn-backend', backendPkts),
    ]),
    {},
  );
  t.end();
});

void t.test('first point: records on the request ports before its SYN, out-of-order SYNs', (t) => {
  const egress = file('order-egress', exchange(NAT_ENDS, T0 + 50n * US));
  const cases: { name: string; pkts: Pkt[] }[] = [
    {
      // Same tuple, before the SYN and within the window (an old connection's RST): kept by pass 2.
      name: 'same tuple before the SYN',
      pkts: [tcp(T0 - 2n * S, { ...REQ_ENDS, seq: 77, flags: 0x04 }), ...exchange(REQ_ENDS, T0)],
    },
    {
      name: 'same ports, other hosts, before the SYN',
      pkts: [
        tcp(T0 - 1n * S, { ...REQ_ENDS, src: '10.9.9.9', seq: 77, flags: 0x10 }),
        ...exchange(REQ_ENDS, T0),
      ],
    },
    {
      // A later SYN in the file with an earlier time wins; one of its packets precedes it.
      name: 'out-of-order SYNs',
      pkts: [
        ...exchange({ ...REQ_ENDS, sport: 40200 }, T0 + 1n * S, 0x3000),
        tcp(T0 + 100n * US, { ...REQ_ENDS, seq: ISN + 1, ack: SISN + 1, flags: 0x10 }),
        ...exchange(REQ_ENDS, T0),
      ],
    },
    {
      name: 'out-of-order SYNs, nothing before',
      pkts: [
        ...exchange({ ...REQ_ENDS, sport: 40200 }, T0 + 1n * S, 0x3000),
        ...exchange(REQ_ENDS, T0),
      ],
    },
    {
      name: 'retransmitted SYN and a reused tuple later',
      pkts: [
        ...exchange(REQ_ENDS, T0),
        tcp(T0 + 1n * S, { ...REQ_ENDS, seq: ISN, flags: 0x02 }),
        ...exchange(REQ_ENDS, T0 + 5n * S, 0x9000),
      ],
    },
  ];
  for (const c of cases) {
    for (const sel of [{}, { client: CLIENT }, { client: '10.9.9.9' }]) {
      agree(t, c.name, at([file(`order-${c.name.replace(/\W+/g, '-')}`, c.pkts), egress]), sel);
    }
  }
  t.end();
});

void t.test('pending buffers past PENDING_TOTAL: the oldest connections are dropped alike', (t) => {
  const p = { src: PROXY_ENDS.src, dst: PROXY_ENDS.dst, sport: PROXY_ENDS.sport, dport: 8080 };
  const pkts: Pkt[] = [tcp(T0 + 1n * MS, { ...p, seq: 99, flags: 0x02 })];
  for (let i = 0; i < 66_000; i++) {
    pkts.push(
      tcp(T0 + 2n * MS + BigInt(i) * US, {
        src: `10.245.${(i >> 8) & 255}.${i & 255}`,
        dst: '10.244.2.20',
        sport: 1024 + (i % 50000),
        dport: 8080,
        seq: 1_000_000 + i,
        flags: 0x02,
      }),
    );
  }
  pkts.push(tcp(T0 + 500n * MS, { ...p, seq: 100, ack: 501, flags: 0x18, payload: REQUEST }));
  const out = agree(
    t,
    'pending total',
    at([file('evict-decap', exchange(REQ_ENDS, T0)), file('evict-backend', pkts)]),
    {},
  );
  t.notMatch(out, /^error/);
  t.end();
});

void t.test('two connections with colliding flow hashes stay apart', (t) => {
  // Find two connections to the backend whose (30-bit) flow hashes collide, with the addon itself.
  const tuples: Ends[] = [];
  for (let i = 0; i < 120_000; i++) {
    tuples.push({
      src: `10.${246 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
      sport: 1024 + ((i * 7) % 60000),
      dst: '10.244.2.20',
      dport: 8080,
    });
  }
  const probe = file(
    'hash-probe',
    tuples.map((e, i) => tcp(T0 + BigInt(i), { ...e, seq: 1, flags: 0x02 })),
  );
  const reader = openSummaryPcap(probe);
  const seen = new Map<number, number>();
  let pair: [Ends, Ends] | null = null;
  for (let b = reader?.next() ?? null; b !== null && pair === null; b = reader?.next() ?? null) {
    for (let i = 0; i < b.count; i++) {
      const h = b.recs.readUInt32LE(i * SUMMARY_BYTES + R.flowHash) & 0x3fffffff;
      const other = seen.get(h);
      const idx = b.firstFrame - 1 + i;
      if (other !== undefined) {
        pair = [tuples[other]!, tuples[idx]!];
        break;
      }
      seen.set(h, idx);
    }
  }
  reader?.close();
  if (pair === null) {
    t.fail('no flow hash collision among 120000 connections (expected a few)');
    t.end();
    return;
  }
  const [a, b] = pair;
  const rev = (e: Ends): Ends => ({ src: e.dst, sport: e.dport, dst: e.src, dport: e.sport });
  const backend = [
    // A (the proxy's connection) buffered; B's data segment must not clear A's buffer.
    tcp(T0 + 1n * MS, { ...a, seq: 99, flags: 0x02 }),
    tcp(T0 + 1n * MS + 10n * US, { ...rev(a), seq: 500, ack: 100, flags: 0x12 }),
    tcp(T0 + 1n * MS + 20n * US, { ...b, seq: 7, flags: 0x02 }),
    tcp(T0 + 1n * MS + 30n * US, { ...b, seq: 8, ack: 1, flags: 0x18, payload: 'unrelated' }),
    tcp(T0 + 1n * MS + 40n * US, { ...b, seq: 17, ack: 1, flags: 0x10 }),
    tcp(T0 + 2n * MS, { ...a, seq: 100, ack: 501, flags: 0x18, payload: REQUEST }),
    tcp(T0 + 2n * MS + 10n * US, { ...b, seq: 17, ack: 1, flags: 0x10 }),
    tcp(T0 + 2n * MS + 20n * US, { ...rev(a), seq: 501, ack: 100 + REQUEST.length, flags: 0x10 }),
  ];
  const out = agree(
    t,
    'hash collision',
    at([file('hash-decap', exchange(REQ_ENDS, T0)), file('hash-backend', backend)]),
    {},
  );
  t.match(out, /"name":"egress","status":"matched"/, 'the buffered connection is matched');
  t.end();
});

void t.test('the benchmark file (20000 frames) at three points', (t) => {
  const f = join(dir, 'bench.pcap');
  writeBenchPcap(f, 20_000, 'bench0001');
  const out = agree(t, 'bench', at([f, f, f]), { client: BENCH_CLIENT });
  t.match(out, /"layer":"preserved"/);
  agree(t, 'bench', at([f, f, f]), {});
  t.end();
});

void t.test('corpus captures, alone and in pairs, on both paths', (t) => {
  const files = readdirSync(pcaps)
    .filter((f) => /\.(pcap|pcapng)$/.test(f))
    .sort()
    .map((f) => join(pcaps, f));
  let verdicts = 0;
  for (const f of files) {
    for (const sel of [{}, { client: '141.142.228.5' }]) {
      if (!agree(t, f, at([f, f, f]), sel).startsWith('error')) verdicts++;
    }
  }
  // Pairs: a file's request looked for in another file (mostly not seen, sometimes matched).
  for (let i = 0; i + 1 < files.length; i += 3)
    agree(t, 'pair', at([files[i]!, files[i + 1]!]), {});
  t.ok(verdicts > 10, `${verdicts} corpus analyses reach a verdict`);
  t.end();
});

void t.test('the lab captures, when a lab run left them', (t) => {
  if (!existsSync(labOut)) {
    t.comment(`${labOut} is absent: nothing to compare`);
    t.end();
    return;
  }
  let n = 0;
  for (const sc of readdirSync(labOut).sort()) {
    const d = join(labOut, sc);
    const names = ['decap', 'egress', 'backend'];
    if (!names.every((p) => existsSync(join(d, `${p}.pcap`)))) continue;
    let inv = EMPTY;
    try {
      if (existsSync(join(d, 'inventory.json'))) inv = readInventoryFile(join(d, 'inventory.json'));
    } catch {
      inv = EMPTY;
    }
    const points = names.map((name) => ({ name, file: join(d, `${name}.pcap`) }));
    for (const sel of [{}, { client: CLIENT }]) agree(t, `lab ${sc}`, points, sel, inv);
    n++;
  }
  t.comment(`${n} lab scenarios compared`);
  t.end();
});

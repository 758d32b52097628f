/**
 * Fixtures for the request-shape tests (request-shapes.test.ts, outer.test.ts): the lab-like
 * addresses and inventory, exchanges on an open connection, DNS queries and answers, background
 * traffic, and `analyze`, which writes three point files and runs analyze on both paths (the
 * native fast path and the JS reader), which must agree. Fails (never skips) without the addon.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { analyzeFiles, type PointFile, type RequestSelector } from '../../cli/analyze';
import type { Inventory } from '../../common/inventory';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { loadNativeAddon } from '../../native/loader';
import { tcp, udp, writePcap, type Pkt, type Seg } from './frames';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'ht-shapes-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

export const T0 = 1_700_000_000_000_000_000n;
export const US = 1000n;
export const MS = 1_000_000n;
export const CLIENT = '10.90.0.42';
export const CLIENT2 = '10.90.0.43';
export const SERVICE = '10.96.0.10';
export const VPN_POD = '10.244.1.10';
export const VPN_NODE = '192.168.50.1';
export const BE_BRIDGE = '10.244.2.1';
export const BACKEND = '10.244.2.20';
export const BACKEND2 = '10.244.2.21';
export const FORWARDER = '10.244.2.30';

export const INV: Inventory = {
  nodes: { 'vpn-node': [VPN_NODE, '10.244.1.1'], 'backend-node': ['192.168.50.2', BE_BRIDGE] },
  pods: {
    vpn: { ip: VPN_POD, node: 'vpn-node', role: 'vpn' },
    backend: { ip: BACKEND, node: 'backend-node', role: 'backend' },
    backend2: { ip: BACKEND2, node: 'backend-node', role: 'backend' },
    forwarder: { ip: FORWARDER, node: 'backend-node', role: 'proxy' },
  },
};

export interface Ends {
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

export const REQUEST = 'GET /hoptrace-probe-abc123 HTTP/1.1\r\nHost: svc\r\n\r\n';
export const REPLY = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
/** RFC 7323 timestamp option (NOP, NOP, kind 8) with TSval `v`. */
export const tsOpt = (v: number): number[] => [
  1,
  1,
  8,
  10,
  v >>> 24,
  (v >>> 16) & 255,
  (v >>> 8) & 255,
  v & 255,
  0,
  0,
  0,
  9,
];

export interface Exchange {
  /** Client and server sequence numbers at the first byte of the request and reply. */
  seq: number;
  sseq: number;
  payload?: string;
  ipId: number;
  tsVal: number;
  /** Which packets this point captured (default all): request, server ACK, reply, client ACK. */
  only?: ('req' | 'sack' | 'reply' | 'cack')[];
}

/** A request and its reply on an open connection (no SYN): as captured on `e` at `t0`. */
export function established(e: Ends, t0: bigint, x: Exchange): Pkt[] {
  const c = { src: e.src, dst: e.dst, sport: e.sport, dport: e.dport };
  const s = { src: e.dst, dst: e.src, sport: e.dport, dport: e.sport };
  const q = (x.payload ?? REQUEST).length;
  const r = REPLY.length;
  const req: Seg = {
    ...c,
    seq: x.seq,
    ack: x.sseq,
    flags: 0x18,
    payload: x.payload ?? REQUEST,
    options: tsOpt(x.tsVal),
    ipId: x.ipId,
  };
  const parts: [string, Pkt][] = [
    ['req', tcp(t0, req)],
    ['sack', tcp(t0 + 100n * US, { ...s, seq: x.sseq, ack: x.seq + q, flags: 0x10, ipId: 900 })],
    [
      'reply',
      tcp(t0 + 200n * US, {
        ...s,
        seq: x.sseq,
        ack: x.seq + q,
        flags: 0x18,
        payload: REPLY,
        ipId: 901,
      }),
    ],
    [
      'cack',
      tcp(t0 + 300n * US, { ...c, seq: x.seq + q, ack: x.sseq + r, flags: 0x10, ipId: x.ipId + 1 }),
    ],
  ];
  return parts
    .filter(([k]) => x.only === undefined || x.only.includes(k as never))
    .map(([, p]) => p);
}

/** A DNS query for `name` (type A, class IN) with transaction id `id`. */
export function dnsQuery(id: number, name: string): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt16BE(id, 0);
  h.writeUInt16BE(0x0100, 2);
  h.writeUInt16BE(1, 4);
  const labels = name.split('.').filter((l) => l !== '');
  const q = Buffer.concat([
    ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')])),
    Buffer.from([0, 0, 1, 0, 1]),
  ]);
  return Buffer.concat([h, q]);
}

/** The answer to `query`: the same id and question, QR set, one A record. */
export function dnsAnswer(query: Buffer): Buffer {
  const a = Buffer.from(query);
  a.writeUInt16BE(0x8180, 2);
  a.writeUInt16BE(1, 6);
  return Buffer.concat([a, Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 244, 2, 20])]);
}

export const NAME = 'hoptrace-probe-abc123.lab.';
export const QUERY = dnsQuery(0x4242, NAME);

/** A DNS query on `e` and (unless `answered` is false) its answer 300 µs later. */
export function dns(
  e: Ends,
  t0: bigint,
  opts: { ipId?: number; answered?: boolean; query?: Buffer } = {},
): Pkt[] {
  const query = opts.query ?? QUERY;
  const out = [udp(t0, { ...e, payload: query, ipId: opts.ipId ?? 7 })];
  if (opts.answered !== false)
    out.push(
      udp(t0 + 300n * US, {
        src: e.dst,
        sport: e.dport,
        dst: e.src,
        dport: e.sport,
        payload: dnsAnswer(query),
        ipId: 55,
      }),
    );
  return out;
}

/** Unrelated traffic at a point, so "nothing else there" is never what makes a case pass. */
export function background(t0: bigint): Pkt[] {
  const out: Pkt[] = [];
  for (let i = 0; i < 20; i++) {
    const e = { src: '10.244.7.1', sport: 20000 + i, dst: '10.244.8.1', dport: 443 };
    out.push(
      ...established(e, t0 + BigInt(i) * 50n * US, {
        seq: 5000 + i * 7919,
        sseq: 90000 + i,
        payload: `noise ${i}`,
        ipId: 3000 + i,
        tsVal: 77 + i,
      }),
    );
    out.push(
      udp(t0 + BigInt(i) * 50n * US + 7n * US, {
        src: '10.244.7.1',
        sport: 30000 + i,
        dst: '10.244.8.1',
        dport: 53,
        payload: dnsQuery(i, `n${i}.example.`),
        ipId: 4000 + i,
      }),
    );
  }
  return out;
}

export const sorted = (pkts: Pkt[]): Pkt[] =>
  [...pkts].sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0));

let n = 0;
/** Writes the three points' files (background traffic added) and returns them as PointFiles. */
export function files(decap: Pkt[], egress: Pkt[], backend: Pkt[]): PointFile[] {
  n++;
  return (
    [
      ['decap', decap],
      ['egress', egress],
      ['backend', backend],
    ] as const
  ).map(([name, pkts]) => ({
    name,
    file: writePcap(join(dir, `${n}-${name}.pcap`), sorted([...pkts, ...background(T0 - 2n * MS)])),
  }));
}

export type Asserts = Pick<typeof t, 'equal' | 'ok' | 'fail' | 'same' | 'match'>;

/** Both paths agree; returns the shared result (or fails the test and returns null). */
export function analyze(
  t: Asserts,
  points: PointFile[],
  selector: RequestSelector,
): AnalysisResult | null {
  const run = (fast: boolean): string => {
    try {
      return JSON.stringify(analyzeFiles({ points, inventory: INV, selector }, { fast }));
    } catch (e: unknown) {
      return `error: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
  const js = run(false);
  t.equal(run(true), js, 'the fast path and the JS path give the same result');
  if (js.startsWith('error')) {
    t.fail(js);
    return null;
  }
  return JSON.parse(js) as AnalysisResult;
}

export const point = (r: AnalysisResult, name: string): AnalysisResult['points'][number] => {
  const p = r.points.find((x) => x.name === name);
  if (p === undefined) throw new Error(`no point ${name}`);
  return p;
};

export const SEL: RequestSelector = { client: CLIENT, dst: SERVICE };
export const REQ: Ends = { src: CLIENT, sport: 40123, dst: SERVICE, dport: 80 };
export const MASQ: Ends = { src: BE_BRIDGE, sport: 33000, dst: BACKEND, dport: 8080 };
export const X: Exchange = { seq: 0x10000, sseq: 0x70000, ipId: 100, tsVal: 5555 };

/**
 * Three small capture files of one TCP request (decap, egress, backend) for the report tests:
 * the handshake, one HTTP request and its reply, each point with its own clock; options rewrite
 * the source at the backend (a masquerade), put a decoy connection from another client first, drop
 * the replies before egress (no-return), and add identity headers to the request.
 */
import { join } from 'node:path';
import { tcp, writePcap, type Pkt, type Seg } from './frames';

export const T0 = 1_800_000_000_000_000_000n;
const US = 1000n;
export const CLIENT = '10.90.0.42';
export const DECOY = '10.90.0.43';
export const BACKEND_POD = '10.244.2.5';
export const VPN_NODE = '192.168.50.1';

/** The inventory that names VPN_NODE: with it a rewrite to VPN_NODE is `cni-masquerade`. */
export const INVENTORY = {
  nodes: { 'vpn-node': [VPN_NODE, '10.244.1.1'], 'backend-node': ['192.168.50.2', '10.244.2.1'] },
  pods: {
    'vpn-0': { ip: '10.244.1.10', node: 'vpn-node', role: 'vpn' },
    'web-1': { ip: BACKEND_POD, node: 'backend-node', role: 'backend' },
  },
};

export interface PointFilesOptions {
  /** The source the backend sees (default: the client's, unchanged). */
  rewriteTo?: string;
  /** A connection from DECOY first, SYN only, at every point. */
  decoy?: boolean;
  /** The replies never reach egress or decap (so the client re-sends its SYN and never ACKs). */
  noReturn?: boolean;
  /** Extra request header lines, per point (e.g. X-Forwarded-For added at the backend). */
  headers?: Partial<Record<'decap' | 'egress' | 'backend', string>>;
  /** File names (default decap.pcap, …) inside `dir`. */
  names?: Partial<Record<'decap' | 'egress' | 'backend', string>>;
}

const ISN = 0x11223344;
const SISN = 0x55667788;

/** The packets of the connection as captured at one point, `at` on that point's clock. */
function connection(
  src: string,
  sport: number,
  at: { req: bigint; rep: bigint },
  payload: string,
  replies: boolean,
  /** The SYN-ACK reached the client: it ACKs and sends its request (else it re-sends its SYN). */
  acked = true,
): Pkt[] {
  const c = { src, sport, dst: BACKEND_POD, dport: 8080 };
  const s = { src: BACKEND_POD, sport: 8080, dst: src, dport: sport };
  const reply = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
  const segs: [bigint, Seg][] = acked
    ? [
        [at.req, { ...c, seq: ISN, flags: 0x02, ipId: 1001 }],
        [at.req + 700n * US, { ...c, seq: ISN + 1, ack: SISN + 1, flags: 0x10, ipId: 1002 }],
        [
          at.req + 750n * US,
          { ...c, seq: ISN + 1, ack: SISN + 1, flags: 0x18, payload, ipId: 1003 },
        ],
      ]
    : [
        [at.req, { ...c, seq: ISN, flags: 0x02, ipId: 1001 }],
        [at.req + 1_000_000n * US, { ...c, seq: ISN, flags: 0x02, ipId: 1002 }],
      ];
  if (replies && !acked)
    segs.push(
      [at.rep, { ...s, seq: SISN, ack: ISN + 1, flags: 0x12, ipId: 2001 }],
      [at.rep + 1_000_000n * US, { ...s, seq: SISN, ack: ISN + 1, flags: 0x12, ipId: 2002 }],
    );
  else if (replies)
    segs.push(
      [at.rep, { ...s, seq: SISN, ack: ISN + 1, flags: 0x12, ipId: 2001 }],
      [
        at.rep + 900n * US,
        {
          ...s,
          seq: SISN + 1,
          ack: ISN + 1 + payload.length,
          flags: 0x18,
          payload: reply,
          ipId: 2002,
        },
      ],
    );
  return segs.map(([ts, seg]) => tcp(ts, seg));
}

const sorted = (pkts: Pkt[]): Pkt[] => [...pkts].sort((a, b) => (a.ts < b.ts ? -1 : 1));

/** Writes decap/egress/backend files into `dir`; returns `[name, path]` in path order. */
export function writePointFiles(dir: string, o: PointFilesOptions = {}): [string, string][] {
  // Each point's clock: egress shares none with decap here (offline, every file is its own).
  const clock = { decap: 0n, egress: 20n * US, backend: 5_000n * US };
  const out: [string, string][] = [];
  for (const name of ['decap', 'egress', 'backend'] as const) {
    const skew = clock[name];
    const hop = name === 'decap' ? 0n : name === 'egress' ? 30n * US : 200n * US;
    const req = T0 + skew + hop;
    const rep = T0 + skew + 600n * US - hop;
    const src = name === 'backend' && o.rewriteTo !== undefined ? o.rewriteTo : CLIENT;
    const sport = src === CLIENT ? 40123 : 33000;
    const payload = `GET /hoptrace-probe-rep0 HTTP/1.1\r\nHost: web\r\n${o.headers?.[name] ?? ''}\r\n`;
    const replies = !(o.noReturn === true && name !== 'backend');
    const pkts = connection(src, sport, { req, rep }, payload, replies, o.noReturn !== true);
    if (o.decoy === true)
      pkts.push(
        tcp(T0 + skew + hop - 1_000n * US, {
          src: DECOY,
          sport: 50000,
          dst: BACKEND_POD,
          dport: 8080,
          seq: 777,
          flags: 0x02,
          ipId: 3001,
        }),
      );
    const file = join(dir, o.names?.[name] ?? `${name}.pcap`);
    writePcap(file, sorted(pkts));
    out.push([name, file]);
  }
  return out;
}

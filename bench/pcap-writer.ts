/**
 * A synthetic capture for the file benchmarks: classic pcap (µs, LINKTYPE_ETHERNET), half plain
 * TCP and half VXLAN-encapsulated TCP (like a node uplink carrying overlay traffic), with one probe
 * request (SYN, SYN-ACK, request) from the lab's VPN client early in the file so `hoptrace analyze`
 * has something to find but still reads every frame.
 *
 *   Ethernet[IPv4[TCP[48 B]]]                                   102 B
 *   Ethernet[IPv4[UDP 4789[VXLAN[Ethernet[IPv4[TCP[48 B]]]]]]]  152 B
 *
 * A BenchPointView makes the file one capture point's: the probe as that point sees it (its
 * addresses after the NAT before it, its clock offset) and background flows of its own, so three
 * points' files are distinct and analyze correlates the probe across them (BENCH_POINTS).
 */
import { closeSync, openSync, writeSync } from 'node:fs';

const PCAP_HEADER = Buffer.from('d4c3b2a1020004000000000000000000ffff000001000000', 'hex');
const REC = 16;
/**
 * pcapng: a little-endian Section Header Block (version 1.0, section length unknown) and one
 * Ethernet Interface Description Block (snaplen 65535, µs timestamps by default); then Enhanced
 * Packet Blocks of EPB header bytes each.
 */
const PCAPNG_HEADER = Buffer.from(
  '0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c000000' +
    '0100000014000000' +
    '01000000ffff0000' +
    '14000000',
  'hex',
);
const EPB = 28;
const ETH = 14;
const IP4 = 20;
const TCP = 20;
const UDP = 8;
const VXLAN = 8;

/** The probe request's endpoints (lab addresses: client tunnel address → service). */
export const BENCH_CLIENT = '10.90.0.42';
export const BENCH_SERVICE = '10.96.0.10';

/** How one capture point sees the probe, and what makes its file its own. */
export interface BenchPointView {
  /** The probe's source and destination at this point (request direction). */
  src: string;
  sport: number;
  dst: string;
  dport: number;
  /** Added to every timestamp: the hop's latency and the point's clock. */
  tsOffsetUs: number;
  /** Background flows of this point: their addresses' third octet is offset by it. */
  salt: number;
}

/**
 * Three points of one path, as the lab's preserve scenario sees it: the VPN gateway's decap and
 * egress see client → service, the backend sees client → pod after kube-proxy's DNAT (the
 * source preserved: analyze's verdict is `preserved`).
 */
export const BENCH_POINTS: Readonly<Record<'decap' | 'egress' | 'backend', BenchPointView>> = {
  decap: { src: BENCH_CLIENT, sport: 40123, dst: BENCH_SERVICE, dport: 80, tsOffsetUs: 0, salt: 0 },
  egress: {
    src: BENCH_CLIENT,
    sport: 40123,
    dst: BENCH_SERVICE,
    dport: 80,
    tsOffsetUs: 20,
    salt: 1,
  },
  backend: {
    src: BENCH_CLIENT,
    sport: 40123,
    dst: '10.244.2.20',
    dport: 8080,
    tsOffsetUs: 60,
    salt: 2,
  },
};

function ip4(s: string): number {
  return s.split('.').reduce((a, o) => ((a << 8) | Number(o)) >>> 0, 0);
}

function ipv4Checksum(b: Buffer, at: number): number {
  let s = 0;
  for (let i = 0; i < IP4; i += 2) s += b.readUInt16BE(at + i);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

interface TcpSpec {
  src: number;
  dst: number;
  sport: number;
  dport: number;
  seq: number;
  ack: number;
  flags: number;
  ipId: number;
  payload: Buffer;
}

/** Writes Ethernet/IPv4/TCP at `at`; returns the end offset. */
function putEthIpv4(
  b: Buffer,
  at: number,
  proto: number,
  src: number,
  dst: number,
  ipLen: number,
  ipId: number,
): number {
  b.writeUIntBE(0x02_00_00_00_00_02, at, 6);
  b.writeUIntBE(0x02_00_00_00_00_01, at + 6, 6);
  b.writeUInt16BE(0x0800, at + 12);
  const ip = at + ETH;
  b.fill(0, ip, ip + IP4);
  b[ip] = 0x45;
  b.writeUInt16BE(ipLen, ip + 2);
  b.writeUInt16BE(ipId & 0xffff, ip + 4);
  b[ip + 8] = 64;
  b[ip + 9] = proto;
  b.writeUInt32BE(src, ip + 12);
  b.writeUInt32BE(dst, ip + 16);
  b.writeUInt16BE(ipv4Checksum(b, ip), ip + 10);
  return ip + IP4;
}

function putTcpFrame(b: Buffer, at: number, t: TcpSpec): number {
  const tcp = putEthIpv4(b, at, 6, t.src, t.dst, IP4 + TCP + t.payload.length, t.ipId);
  b.writeUInt16BE(t.sport, tcp);
  b.writeUInt16BE(t.dport, tcp + 2);
  b.writeUInt32BE(t.seq >>> 0, tcp + 4);
  b.writeUInt32BE(t.ack >>> 0, tcp + 8);
  b[tcp + 12] = 0x50;
  b[tcp + 13] = t.flags;
  b.writeUInt16BE(64240, tcp + 14);
  b.writeUInt32BE(0, tcp + 16);
  t.payload.copy(b, tcp + TCP);
  return tcp + TCP + t.payload.length;
}

function putVxlanFrame(b: Buffer, at: number, vni: number, t: TcpSpec): number {
  const innerLen = ETH + IP4 + TCP + t.payload.length;
  const udp = putEthIpv4(
    b,
    at,
    17,
    ip4('192.168.50.1'),
    ip4('192.168.50.2'),
    IP4 + UDP + VXLAN + innerLen,
    t.ipId ^ 0x5a5a,
  );
  b.writeUInt16BE(40000 + (t.sport & 0x3ff), udp);
  b.writeUInt16BE(4789, udp + 2);
  b.writeUInt16BE(UDP + VXLAN + innerLen, udp + 4);
  b.writeUInt16BE(0, udp + 6);
  const vx = udp + UDP;
  b.writeUInt32BE(0x08000000, vx);
  b.writeUInt32BE((vni << 8) >>> 0, vx + 4);
  return putTcpFrame(b, vx + VXLAN, t);
}

/**
 * Writes `count` frames to `path` and returns the file size. Background flows: 4096 connections
 * between pod addresses exchanging 48-byte segments; frame i is VXLAN-encapsulated when i is odd.
 * `pcapng` writes the same frames as one section with one interface (what dumpcap writes).
 * `view` makes it one point's file (BENCH_POINTS); by default the decap point's, as it always was.
 * The probe's SYN is frame `probeAt` + 1 (0-based frame `probeAt`; 1000 unless given).
 */
export function writeBenchPcap(
  path: string,
  count: number,
  probeId: string,
  format: 'pcap' | 'pcapng' = 'pcap',
  view: BenchPointView = BENCH_POINTS.decap,
  probeAt = 1000,
): number {
  const ng = format === 'pcapng';
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(1 << 20);
  let used = 0;
  let size = 0;
  const flush = (): void => {
    writeSync(fd, chunk, 0, used);
    size += used;
    used = 0;
  };
  try {
    const header = ng ? PCAPNG_HEADER : PCAP_HEADER;
    writeSync(fd, header);
    size += header.length;
    const filler = Buffer.alloc(48, 'x');
    const request = Buffer.from(
      `GET /hoptrace-probe-${probeId} HTTP/1.1\r\nHost: ${BENCH_SERVICE}\r\n\r\n`,
    );
    const client = ip4(view.src);
    const service = ip4(view.dst);
    const bgSrc = ip4('10.244.1.0') + (view.salt << 8);
    const bgDst = ip4('10.244.2.0') + (view.salt << 8);
    const isn = 0x1234_5678;
    const tsBase = 1_700_000_000;
    for (let i = 0; i < count; i++) {
      if (used + 256 > chunk.length) flush();
      let t: TcpSpec;
      // The probe request: SYN, SYN-ACK, request at frames probeAt..probeAt+2 (all plain TCP).
      const probe = i - probeAt;
      if (probe === 0) {
        t = {
          src: client,
          dst: service,
          sport: view.sport,
          dport: view.dport,
          seq: isn,
          ack: 0,
          flags: 0x02,
          ipId: 7,
          payload: Buffer.alloc(0),
        };
      } else if (probe === 1) {
        t = {
          src: service,
          dst: client,
          sport: view.dport,
          dport: view.sport,
          seq: 0x0bad_cafe,
          ack: isn + 1,
          flags: 0x12,
          ipId: 0,
          payload: Buffer.alloc(0),
        };
      } else if (probe === 2) {
        t = {
          src: client,
          dst: service,
          sport: view.sport,
          dport: view.dport,
          seq: isn + 1,
          ack: 0x0bad_caff,
          flags: 0x18,
          ipId: 8,
          payload: request,
        };
      } else {
        const flow = i & 4095;
        t = {
          src: bgSrc + (flow & 0xff),
          dst: bgDst + (flow >> 8),
          sport: 30000 + flow,
          dport: 8080,
          seq: (flow * 7919 + i * 48) >>> 0,
          ack: (flow * 104729) >>> 0,
          flags: 0x18,
          ipId: i,
          payload: filler,
        };
      }
      const rec = used;
      const start = rec + (ng ? EPB : REC);
      const end =
        probe >= 0 && probe <= 2
          ? putTcpFrame(chunk, start, t)
          : i % 2 === 1
            ? putVxlanFrame(chunk, start, 100 + (i & 7), t)
            : putTcpFrame(chunk, start, t);
      const len = end - start;
      const usec = i * 10 + view.tsOffsetUs; // 100 k packets per second
      if (ng) {
        // EPB: type | total length | interface 0 | ts (µs) high, low | caplen | len | data, padded
        // to 32 bits | total length.
        const padded = (len + 3) & ~3;
        chunk.fill(0, end, start + padded);
        const total = EPB + padded + 4;
        const ts = BigInt(tsBase) * 1_000_000n + BigInt(usec);
        chunk.writeUInt32LE(6, rec);
        chunk.writeUInt32LE(total, rec + 4);
        chunk.writeUInt32LE(0, rec + 8);
        chunk.writeUInt32LE(Number(ts >> 32n), rec + 12);
        chunk.writeUInt32LE(Number(ts & 0xffffffffn), rec + 16);
        chunk.writeUInt32LE(len, rec + 20);
        chunk.writeUInt32LE(len, rec + 24);
        chunk.writeUInt32LE(total, start + padded);
        used = rec + total;
        continue;
      }
      chunk.writeUInt32LE(tsBase + Math.floor(usec / 1e6), rec);
      chunk.writeUInt32LE(usec % 1e6, rec + 4);
      chunk.writeUInt32LE(len, rec + 8);
      chunk.writeUInt32LE(len, rec + 12);
      used = end;
    }
    flush();
  } finally {
    closeSync(fd);
  }
  return size;
}

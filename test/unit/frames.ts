/**
 * Hand-made frames for analysis tests: Ethernet + IPv4 + TCP or UDP, and a classic pcap writer.
 * Fields are given, never defaulted from randomness, so every file is the same on every run.
 */
import { writeFileSync } from 'node:fs';

export interface Seg {
  src: string;
  dst: string;
  sport: number;
  dport: number;
  seq: number;
  ack?: number;
  flags: number;
  payload?: string;
  /** TCP options bytes (padded to 4). */
  options?: number[];
  ipId?: number;
  /** IPv4 total length 0 (a TSO super-packet as captured): left to the reference decoder. */
  tso?: boolean;
}

export interface Pkt {
  ts: bigint;
  data: Buffer;
  /** Captured bytes (default all). */
  caplen?: number;
}

export const ip4 = (s: string): number[] => s.split('.').map(Number);

export function eth(type: number, body: Buffer): Buffer {
  const h = Buffer.alloc(14);
  h.writeUIntBE(0x020000000002, 0, 6);
  h.writeUIntBE(0x020000000001, 6, 6);
  h.writeUInt16BE(type, 12);
  return Buffer.concat([h, body]);
}

export function ipv4(
  proto: number,
  src: string,
  dst: string,
  body: Buffer,
  id = 1,
  tso = false,
): Buffer {
  const h = Buffer.alloc(20);
  h[0] = 0x45;
  h.writeUInt16BE(tso ? 0 : 20 + body.length, 2);
  h.writeUInt16BE(id & 0xffff, 4);
  h[8] = 64;
  h[9] = proto;
  Buffer.from(ip4(src)).copy(h, 12);
  Buffer.from(ip4(dst)).copy(h, 16);
  return Buffer.concat([h, body]);
}

export function tcpHeader(s: Seg): Buffer {
  const opts = Buffer.from(s.options ?? []);
  const optLen = (opts.length + 3) & ~3;
  const h = Buffer.alloc(20 + optLen);
  h.writeUInt16BE(s.sport, 0);
  h.writeUInt16BE(s.dport, 2);
  h.writeUInt32BE(s.seq >>> 0, 4);
  h.writeUInt32BE((s.ack ?? 0) >>> 0, 8);
  h[12] = ((20 + optLen) / 4) << 4;
  h[13] = s.flags;
  h.writeUInt16BE(64240, 14);
  opts.copy(h, 20);
  return Buffer.concat([h, Buffer.from(s.payload ?? '', 'latin1')]);
}

export const tcp = (ts: bigint, s: Seg, caplen?: number): Pkt => {
  const p: Pkt = { ts, data: eth(0x0800, ipv4(6, s.src, s.dst, tcpHeader(s), s.ipId, s.tso)) };
  if (caplen !== undefined) p.caplen = caplen;
  return p;
};

/** Writes a nanosecond (or µs) little-endian pcap of Ethernet frames, in the given order. */
export function writePcap(path: string, pkts: Pkt[], micro = false): string {
  const parts: Buffer[] = [];
  const h = Buffer.alloc(24);
  h.writeUInt32LE(micro ? 0xa1b2c3d4 : 0xa1b23c4d, 0);
  h.writeUInt16LE(2, 4);
  h.writeUInt16LE(4, 6);
  h.writeUInt32LE(262144, 16);
  h.writeUInt32LE(1, 20);
  parts.push(h);
  for (const p of pkts) {
    const caplen = Math.min(p.caplen ?? p.data.length, p.data.length);
    const r = Buffer.alloc(16);
    r.writeUInt32LE(Number(p.ts / 1_000_000_000n), 0);
    const frac = p.ts % 1_000_000_000n;
    r.writeUInt32LE(Number(micro ? frac / 1000n : frac), 4);
    r.writeUInt32LE(caplen, 8);
    r.writeUInt32LE(p.data.length, 12);
    parts.push(r, p.data.subarray(0, caplen));
  }
  writeFileSync(path, Buffer.concat(parts));
  return path;
}

/** One UDP datagram (checksum 0: not computed, as IPv4 allows). */
export interface Datagram {
  src: string;
  dst: string;
  sport: number;
  dport: number;
  payload: Buffer;
  ipId?: number;
}

export const udp = (ts: bigint, d: Datagram): Pkt => {
  const h = Buffer.alloc(8);
  h.writeUInt16BE(d.sport, 0);
  h.writeUInt16BE(d.dport, 2);
  h.writeUInt16BE(8 + d.payload.length, 4);
  return { ts, data: eth(0x0800, ipv4(17, d.src, d.dst, Buffer.concat([h, d.payload]), d.ipId)) };
};

/** An ICMP echo request (type 8) or reply (type 0) with `data` (checksum 0: not checked here). */
export interface Echo {
  src: string;
  dst: string;
  type: 0 | 8;
  id: number;
  seq: number;
  data: Buffer;
  ipId?: number;
}

export const icmpEcho = (ts: bigint, e: Echo): Pkt => {
  const h = Buffer.alloc(8);
  h[0] = e.type;
  h.writeUInt16BE(e.id, 4);
  h.writeUInt16BE(e.seq, 6);
  return { ts, data: eth(0x0800, ipv4(1, e.src, e.dst, Buffer.concat([h, e.data]), e.ipId)) };
};

/** An ICMP error (`type`/`code`) from `from` to `to`, quoting the first 28 bytes of `quoted` (an IPv4 packet). */
export function icmpErrorOf(
  ts: bigint,
  from: string,
  to: string,
  type: number,
  code: number,
  quoted: Buffer,
): Pkt {
  const body = Buffer.concat([Buffer.from([type, code, 0, 0, 0, 0, 0, 0]), quoted.subarray(0, 28)]);
  return { ts, data: eth(0x0800, ipv4(1, from, to, body, 9)) };
}

/** `inner` (an Ethernet frame) in VXLAN (VNI `vni`) over UDP 4789 from `src:sport` to `dst`. */
export function vxlan(
  ts: bigint,
  src: string,
  sport: number,
  dst: string,
  vni: number,
  inner: Pkt,
): Pkt {
  const v = Buffer.alloc(8);
  v[0] = 0x08;
  v.writeUIntBE(vni, 4, 3);
  const payload = Buffer.concat([v, inner.data]);
  return udp(ts, { src, dst, sport, dport: 4789, payload });
}

/** A WireGuard data message (type 4) over UDP, `len` bytes of (pretend) ciphertext. */
export function wireguardData(
  ts: bigint,
  src: string,
  sport: number,
  dst: string,
  dport: number,
  len: number,
): Pkt {
  const h = Buffer.alloc(16 + len);
  h[0] = 4;
  h.writeUInt32LE(0x1234, 4);
  return udp(ts, { src, dst, sport, dport, payload: h });
}

/**
 * A pcapng writer for tests (draft-ietf-opsawg-pcapng): blocks in either byte order, including
 * malformed ones the tests build by hand from `block` and `option`.
 */

export const u16 = (v: number, le: boolean): Buffer => {
  const b = Buffer.alloc(2);
  if (le) b.writeUInt16LE(v);
  else b.writeUInt16BE(v);
  return b;
};

export const u32 = (v: number, le: boolean): Buffer => {
  const b = Buffer.alloc(4);
  if (le) b.writeUInt32LE(v >>> 0);
  else b.writeUInt32BE(v >>> 0);
  return b;
};

export const u64 = (v: bigint, le: boolean): Buffer => {
  const b = Buffer.alloc(8);
  if (le) b.writeBigUInt64LE(v);
  else b.writeBigUInt64BE(v);
  return b;
};

export function pad4(b: Buffer): Buffer {
  return Buffer.concat([b, Buffer.alloc((4 - (b.length % 4)) % 4)]);
}

/** type | total length | body | total length. */
export function block(type: number, body: Buffer, le: boolean): Buffer {
  const len = 12 + body.length;
  return Buffer.concat([u32(type, le), u32(len, le), body, u32(len, le)]);
}

export function option(code: number, value: Buffer, le: boolean): Buffer {
  return Buffer.concat([u16(code, le), u16(value.length, le), pad4(value)]);
}

/** opt_endofopt. */
export const END = (le: boolean): Buffer => Buffer.concat([u16(0, le), u16(0, le)]);

/** Section Header Block, version 1.0, unknown section length, a shb_userappl option. */
export function shb(le: boolean): Buffer {
  const body = Buffer.concat([
    u32(0x1a2b3c4d, le),
    u16(1, le),
    u16(0, le),
    Buffer.alloc(8, 0xff),
    option(4, Buffer.from('hoptrace test'), le),
    END(le),
  ]);
  return block(0x0a0d0d0a, body, le);
}

/** Interface Description Block with if_name, if_tsresol and if_tsoffset (seconds) when given. */
export function idb(
  le: boolean,
  linktype: number,
  name: string | null,
  tsresol: number | null,
  tsoffset: bigint | null = null,
): Buffer {
  const opts: Buffer[] = [];
  if (name !== null) opts.push(option(2, Buffer.from(name), le));
  if (tsresol !== null) opts.push(option(9, Buffer.from([tsresol]), le));
  if (tsoffset !== null) opts.push(option(14, u64(BigInt.asUintN(64, tsoffset), le), le));
  if (opts.length > 0) opts.push(END(le));
  return block(1, Buffer.concat([u16(linktype, le), u16(0, le), u32(262144, le), ...opts]), le);
}

/** Enhanced Packet Block; ts in the interface's units. */
export function epb(le: boolean, iface: number, ts: bigint, data: Buffer, wire?: number): Buffer {
  const body = Buffer.concat([
    u32(iface, le),
    u32(Number(ts >> 32n), le),
    u32(Number(ts & 0xffffffffn), le),
    u32(data.length, le),
    u32(wire ?? data.length, le),
    pad4(data),
  ]);
  return block(6, body, le);
}

/** Simple Packet Block. */
export function spb(le: boolean, data: Buffer): Buffer {
  return block(3, Buffer.concat([u32(data.length, le), pad4(data)]), le);
}

/** Interface Statistics Block: isb_ifrecv 4, isb_ifdrop 5, isb_osdrop 7 when given (u64 each). */
export function isb(
  le: boolean,
  iface: number,
  counts: { ifrecv?: bigint; ifdrop?: bigint; osdrop?: bigint },
): Buffer {
  const opts: Buffer[] = [];
  if (counts.ifrecv !== undefined) opts.push(option(4, u64(counts.ifrecv, le), le));
  if (counts.ifdrop !== undefined) opts.push(option(5, u64(counts.ifdrop, le), le));
  if (counts.osdrop !== undefined) opts.push(option(7, u64(counts.osdrop, le), le));
  if (opts.length > 0) opts.push(END(le));
  return block(5, Buffer.concat([u32(iface, le), u32(0, le), u32(0, le), ...opts]), le);
}

/**
 * A classic pcap file (little-endian, µs: what bench/pcap-writer.ts and tcpdump -w write) as
 * pcapng with one interface whose IDB carries if_tsoffset = `tsoffset` seconds (and if_tsresol
 * `tsresol`, 6 when null): each packet's time is written as its time in the pcap minus the offset,
 * in the interface's units, so a reader that honours the offset gives the pcap's times back.
 */
export function pcapWithTsoffset(
  pcap: Buffer,
  tsoffset: bigint,
  opts: { le?: boolean; tsresol?: number | null; name?: string | null } = {},
): Buffer {
  if (pcap.readUInt32LE(0) !== 0xa1b2c3d4) throw new Error('not a little-endian µs pcap');
  const le = opts.le ?? true;
  const tsresol = opts.tsresol ?? null;
  // ns per unit: 10^-tsresol s (decimal resolutions only).
  const unitNs = 10n ** BigInt(9 - (tsresol ?? 6));
  const out: Buffer[] = [
    shb(le),
    idb(le, pcap.readUInt32LE(20), opts.name ?? null, tsresol, tsoffset),
  ];
  for (let at = 24; at + 16 <= pcap.length;) {
    const caplen = pcap.readUInt32LE(at + 8);
    const ns =
      BigInt(pcap.readUInt32LE(at)) * 1_000_000_000n + BigInt(pcap.readUInt32LE(at + 4)) * 1000n;
    const units = (ns - tsoffset * 1_000_000_000n) / unitNs;
    if (units < 0n) throw new Error('a time before the offset: choose a smaller one');
    const data = pcap.subarray(at + 16, at + 16 + caplen);
    out.push(epb(le, 0, units, data, pcap.readUInt32LE(at + 12)));
    at += 16 + caplen;
  }
  return Buffer.concat(out);
}

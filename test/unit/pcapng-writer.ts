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

/** Interface Description Block with if_name and if_tsresol when given. */
export function idb(
  le: boolean,
  linktype: number,
  name: string | null,
  tsresol: number | null,
): Buffer {
  const opts: Buffer[] = [];
  if (name !== null) opts.push(option(2, Buffer.from(name), le));
  if (tsresol !== null) opts.push(option(9, Buffer.from([tsresol]), le));
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

/*
 * A pcapng writer (draft-ietf-opsawg-pcapng §3–§4): one section, its interfaces, packets with
 * nanosecond timestamps and comments. Pure: plain data in, the file's bytes out. Always written
 * little-endian (readers take either order from the byte-order magic), so the same input gives
 * the same bytes on every host.
 *
 * Every block (§3.1), lengths in bytes, the total length a multiple of 4 and given twice so a
 * reader can walk backwards:
 *
 *  0                   1                   2                   3
 *  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 * +---------------------------------------------------------------+
 * |                          Block Type                           |
 * +---------------------------------------------------------------+
 * |                      Block Total Length                       |
 * +---------------------------------------------------------------+
 * /                          Block Body                           /
 * +---------------------------------------------------------------+
 * |                      Block Total Length                       |
 * +---------------------------------------------------------------+
 *
 * Options (§3.5), at the end of a body: each value padded to 32 bits (the length field excludes
 * the padding); opt_endofopt (code 0, length 0) ends the list:
 *
 * +-------------------------------+-------------------------------+
 * |         Option Code           |        Option Length          |
 * +-------------------------------+-------------------------------+
 * /              Option Value (padded to 32 bits)                 /
 * +---------------------------------------------------------------+
 *
 * Section Header Block (§4.1), type 0x0A0D0D0A: byte-order magic 0x1A2B3C4D | major 1 | minor 0
 * | section length (64 bits, -1: not given) | options: opt_comment 1, shb_userappl 4.
 *
 * Interface Description Block (§4.2), type 1, one per interface, numbered from 0 in order:
 *
 * +-------------------------------+-------------------------------+
 * |           LinkType            |           Reserved            |
 * +-------------------------------+-------------------------------+
 * |                            SnapLen                            |
 * +---------------------------------------------------------------+
 * options: if_name 2, if_description 3, if_tsresol 9 (1 byte; 9 = 10^-9 s), if_fcslen 13 (1 byte).
 *
 * Enhanced Packet Block (§4.3), type 6:
 *
 * +---------------------------------------------------------------+
 * |                         Interface ID                          |
 * +---------------------------------------------------------------+
 * |                        Timestamp (High)                       |
 * +---------------------------------------------------------------+
 * |                        Timestamp (Low)                        |
 * +---------------------------------------------------------------+
 * |                    Captured Packet Length                     |
 * +---------------------------------------------------------------+
 * |                    Original Packet Length                     |
 * +---------------------------------------------------------------+
 * /                Packet Data (padded to 32 bits)                /
 * +---------------------------------------------------------------+
 * options: opt_comment 1. The timestamp counts the interface's if_tsresol units since the Unix
 * epoch: here nanoseconds on every interface.
 */

/** One interface (an Interface Description Block). */
export interface PcapngInterfaceInfo {
  /** LINKTYPE_* value (16 bits; the upper bits of a pcap link-type field go to `fcsLength`). */
  linktype: number;
  /** The capture's snapshot length (0: none given). */
  snaplen: number;
  /** if_name. */
  name: string;
  /** if_description. */
  description?: string;
  /** if_fcslen: bytes of frame check sequence at the end of each frame, when the capture said. */
  fcsLength?: number;
}

/** One packet (an Enhanced Packet Block). */
export interface PcapngPacketInfo {
  /** Index into the interfaces. */
  interfaceId: number;
  /** Nanoseconds since the Unix epoch (a negative value is written as 0). */
  tsNs: bigint;
  /** The captured bytes (a cut frame holds fewer than `originalLength`). */
  data: Uint8Array;
  /** The frame's length on the wire. */
  originalLength: number;
  /** opt_comment. */
  comment?: string;
}

export interface PcapngInput {
  /** shb_userappl, e.g. `hoptrace 0.1.0`. */
  userAppl: string;
  /** The section's opt_comment. */
  comment?: string;
  interfaces: readonly PcapngInterfaceInfo[];
  packets: readonly PcapngPacketInfo[];
}

const BT_SHB = 0x0a0d0d0a;
const BT_IDB = 1;
const BT_EPB = 6;
const BYTE_ORDER_MAGIC = 0x1a2b3c4d;
const OPT_ENDOFOPT = 0;
const OPT_COMMENT = 1;
const SHB_USERAPPL = 4;
const IF_NAME = 2;
const IF_DESCRIPTION = 3;
const IF_TSRESOL = 9;
const IF_FCSLEN = 13;
/** if_tsresol 9: timestamps in units of 10^-9 s. */
const TSRESOL_NS = 9;
/** An option's value is at most 65535 bytes (its 16-bit length). */
const MAX_OPTION = 0xffff;

type Option = [code: number, value: Uint8Array];

const pad4 = (n: number): number => (n + 3) & ~3;

/** UTF-8 bytes of `s`, cut back to a whole character when above an option's 65535 bytes. */
function text(s: string): Uint8Array {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= MAX_OPTION) return b;
  let end = MAX_OPTION;
  while (end > 0 && ((b[end] ?? 0) & 0xc0) === 0x80) end--;
  return b.subarray(0, end);
}

/** Bytes of an option list with its opt_endofopt; 0 when there are no options. */
const optionsLength = (opts: readonly Option[]): number =>
  opts.length === 0 ? 0 : opts.reduce((n, [, v]) => n + 4 + pad4(v.length), 4);

/** Writes the blocks into one buffer, sized before the first byte is written. */
class BlockWriter {
  private at = 0;
  constructor(readonly buf: Buffer) {}

  /** A block: type, total length, the fixed body written by `body`, options, total length. */
  block(type: number, fixed: number, body: () => void, opts: readonly Option[]): void {
    const len = 12 + fixed + optionsLength(opts);
    this.u32(type);
    this.u32(len);
    body();
    for (const [code, value] of opts) {
      this.u16(code);
      this.u16(value.length);
      this.bytes(value);
    }
    if (opts.length > 0) {
      this.u16(OPT_ENDOFOPT);
      this.u16(0);
    }
    this.u32(len);
  }

  u16(v: number): void {
    this.at = this.buf.writeUInt16LE(v, this.at);
  }

  u32(v: number): void {
    this.at = this.buf.writeUInt32LE(v >>> 0, this.at);
  }

  /** `b`, then zeros to the next 32-bit boundary (the buffer is zero-filled). */
  bytes(b: Uint8Array): void {
    this.buf.set(b, this.at);
    this.at += pad4(b.length);
  }

  get offset(): number {
    return this.at;
  }
}

const shbOptions = (input: PcapngInput): Option[] => [
  ...(input.comment === undefined ? [] : [[OPT_COMMENT, text(input.comment)] as Option]),
  [SHB_USERAPPL, text(input.userAppl)],
];

function idbOptions(i: PcapngInterfaceInfo): Option[] {
  const opts: Option[] = [[IF_NAME, text(i.name)]];
  if (i.description !== undefined) opts.push([IF_DESCRIPTION, text(i.description)]);
  opts.push([IF_TSRESOL, Uint8Array.of(TSRESOL_NS)]);
  if (i.fcsLength !== undefined) opts.push([IF_FCSLEN, Uint8Array.of(i.fcsLength & 0xff)]);
  return opts;
}

const epbOptions = (p: PcapngPacketInfo): Option[] =>
  p.comment === undefined ? [] : [[OPT_COMMENT, text(p.comment)]];

/**
 * The pcapng file of one section holding `interfaces` and `packets` in the order given (a
 * reader shows them in that order). Throws RangeError when a packet names an interface that is
 * not there (a caller's bug: the file would not open).
 */
export function writePcapng(input: PcapngInput): Buffer {
  const shb = shbOptions(input);
  const idbs = input.interfaces.map(idbOptions);
  const epbs = input.packets.map(epbOptions);
  let total = 12 + 16 + optionsLength(shb);
  for (const o of idbs) total += 12 + 8 + optionsLength(o);
  for (const [i, p] of input.packets.entries()) {
    if (!Number.isInteger(p.interfaceId) || p.interfaceId >= input.interfaces.length)
      throw new RangeError(`packet ${i} names interface ${p.interfaceId}, not described`);
    total += 12 + 20 + pad4(p.data.length) + optionsLength(epbs[i] ?? []);
  }
  const w = new BlockWriter(Buffer.alloc(total));
  w.block(
    BT_SHB,
    16,
    () => {
      w.u32(BYTE_ORDER_MAGIC);
      w.u16(1);
      w.u16(0);
      w.u32(0xffffffff); // section length -1: not given (§4.1)
      w.u32(0xffffffff);
    },
    shb,
  );
  for (const [i, iface] of input.interfaces.entries()) {
    w.block(
      BT_IDB,
      8,
      () => {
        w.u16(iface.linktype & 0xffff);
        w.u16(0);
        w.u32(iface.snaplen);
      },
      idbs[i] ?? [],
    );
  }
  for (const [i, p] of input.packets.entries()) {
    const ts = p.tsNs < 0n ? 0n : BigInt.asUintN(64, p.tsNs);
    w.block(
      BT_EPB,
      20 + pad4(p.data.length),
      () => {
        w.u32(p.interfaceId);
        w.u32(Number(ts >> 32n));
        w.u32(Number(ts & 0xffffffffn));
        w.u32(p.data.length);
        w.u32(p.originalLength);
        w.bytes(p.data);
      },
      epbs[i] ?? [],
    );
  }
  if (w.offset !== total) throw new RangeError(`pcapng size ${w.offset}, expected ${total}`);
  return w.buf;
}

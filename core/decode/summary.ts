/**
 * The decoder's C fast path, seen from TypeScript: the addon's `summarize` turns a run of frames
 * (a capture batch, or classic pcap records) into fixed 192-byte summary records
 * (native/pcap-batch/src/summary.c documents the layout). A record is either FAST — the frame was
 * one of the common shapes and the record holds exactly what core/decode would have produced — or
 * SLOW, and the frame is decoded here with the reference decoder. Either way `event()` returns the
 * same PacketEvent as decodeFrame + toPacketEvent (test/unit/summary-parity.test.ts).
 *
 * Callers that only need a few fields (analyze's prefilter, the capture worker) read them from the
 * record without building an event: see the field readers below.
 */
import type { PacketEvent, PacketKeys, Tuple, TunnelInfo } from '../../common/event';
import { TRANSPORT_NAMES, TUNNEL_KINDS } from '../../common/event';
import { formatIPv4, formatIPv6 } from '../../common/address';
import { decodeFrame, linktypeName, type DecodeOptions } from './frame';
import { Next, udpPortTable } from './tables';
import { toPacketEvent, type EventContext } from './event';

export const SUMMARY_BYTES = 192;

/** Source layouts (SUMMARY_LAYOUT_* in summary.h). */
export const SUMMARY_LAYOUT = {
  batch: 0,
  pcapLeUs: 1,
  pcapLeNs: 2,
  pcapBeUs: 3,
  pcapBeNs: 4,
  pcapngLe: 5,
  pcapngBe: 6,
} as const;

/** Why summarize stopped (SUMMARY_STOP_* in summary.h). */
export const SUMMARY_STOP = { end: 0, full: 1, bad: 2, block: 3 } as const;

// Record offsets and flags (summary.c).
export const R = {
  status: 0,
  flags: 1,
  innerProto: 2,
  outerProto: 3,
  innerTransport: 4,
  outerTransport: 5,
  portFlags: 6,
  tunnels: 7,
  caplen: 8,
  wireLength: 12,
  tsLo: 16,
  tsHi: 20,
  dataOffset: 24,
  flowHash: 28,
  sport: 32,
  dport: 34,
  outerSport: 36,
  outerDport: 38,
  tunnel0: 40,
  tunnelId0: 44,
  ipId: 52,
  seq: 56,
  ack: 60,
  tcpFlags: 64,
  markerLength: 65,
  window: 66,
  tsVal: 68,
  tsEcr: 72,
  payloadLength: 76,
  payloadHash: 80,
  requestLineHash: 84,
  src: 88,
  dst: 104,
  outerSrc: 120,
  outerDst: 136,
  marker: 152,
  markerHash: 184,
  /** pcapng records: the interface id (u32). */
  ifaceId: 188,
  /** A live capture's records (type-4 frames): the frame's offset from the frame's firstFrame. */
  frameOffset: 188,
  /** Counter records (status FOLD, native/pcap-batch/src/fold.h): u64 packets, bytes, last ts;
   * f64 first and last frame. */
  foldPackets: 52,
  foldBytes: 60,
  foldLastTs: 68,
  foldFirstFrame: 152,
  foldLastFrame: 160,
} as const;

/** A record's status: 1 FAST, 0 SLOW, FOLD a flow's counter record (live captures, fold.c). */
export const FOLD = 2;

export const SF = {
  outer: 1,
  innerV6: 2,
  outerV6: 4,
  tcp: 8,
  tsOpt: 16,
  payload: 32,
  ipId: 64,
  marker: 128,
} as const;
/** Port-flags byte (R.portFlags): inner ports, outer ports, payload and request-line hashes. */
export const PF = { innerPorts: 1, outerPorts: 2, hashes: 4 } as const;

const PORT_KIND = new Map<Next, number>([
  [Next.VXLAN, 1],
  [Next.Geneve, 2],
]);
const portTables = new WeakMap<Map<number, Next>, Buffer>();

/** The 65536-byte UDP port table summary.c reads, from the decoder's own port table. */
export function summaryPortTable(opts?: DecodeOptions): Buffer {
  const table = udpPortTable(opts);
  let b = portTables.get(table);
  if (b === undefined) {
    b = Buffer.alloc(65536);
    for (const [port, next] of table) b[port] = PORT_KIND.get(next) ?? 3;
    portTables.set(table, b);
  }
  return b;
}

/**
 * IPv4 address text by value: a capture sees the same few addresses over and over, and building
 * the dotted quad is most of a tuple's cost. A direct-mapped cache of 4,096 slots (a Map lookup
 * per address showed in profiles); a collision just formats the address again.
 */
const V4_SLOTS = 4096;
const v4Keys = new Uint32Array(V4_SLOTS);
const v4Vals: string[] = new Array<string>(V4_SLOTS).fill('');

function ipv4At(recs: Buffer, at: number): string {
  const v =
    (((recs[at] ?? 0) << 24) |
      ((recs[at + 1] ?? 0) << 16) |
      ((recs[at + 2] ?? 0) << 8) |
      (recs[at + 3] ?? 0)) >>>
    0;
  const slot = Math.imul(v, 0x9e3779b1) >>> 20;
  const s = v4Vals[slot] ?? '';
  if (v4Keys[slot] === v && s !== '') return s;
  const text = formatIPv4(recs, at);
  v4Keys[slot] = v;
  v4Vals[slot] = text;
  return text;
}

function tuple(
  recs: Buffer,
  base: number,
  v6: boolean,
  ipProto: number,
  transport: number,
  hasPorts: boolean,
  srcAt: number,
  dstAt: number,
  sportAt: number,
): Tuple {
  const t: Tuple = {
    proto: TRANSPORT_NAMES[transport] ?? 'other',
    ipProto,
    src: v6 ? formatIPv6(recs, base + srcAt) : ipv4At(recs, base + srcAt),
    dst: v6 ? formatIPv6(recs, base + dstAt) : ipv4At(recs, base + dstAt),
  };
  if (hasPorts) {
    t.sport = recs.readUInt16LE(base + sportAt);
    t.dport = recs.readUInt16LE(base + sportAt + 2);
  }
  return t;
}

let lastView: DataView | undefined;
let lastViewOf: Buffer | undefined;

/** A DataView of `b` (cached for the last buffer: getBigUint64 is a builtin, no BigInt math). */
function viewOf(b: Buffer): DataView {
  if (lastViewOf !== b || lastView === undefined) {
    lastView = new DataView(b.buffer, b.byteOffset, b.length);
    lastViewOf = b;
  }
  return lastView;
}

/**
 * The PacketEvent of record `i`: built from the record when FAST, else by decoding the frame's
 * bytes (src at the record's data offset) with the reference decoder. Nothing returned views src.
 */
export function summaryEvent(
  recs: Buffer,
  i: number,
  src: Uint8Array,
  linktype: number,
  frameIndex: number,
  ctx: EventContext,
  opts?: DecodeOptions,
): PacketEvent {
  const o = i * SUMMARY_BYTES;
  const caplen = recs.readUInt32LE(o + R.caplen);
  const wireLength = recs.readUInt32LE(o + R.wireLength);
  const tsNs = viewOf(recs).getBigUint64(o + R.tsLo, true);
  const status = recs[o];
  if (status !== 1 && status !== FOLD) {
    const at = recs.readUInt32LE(o + R.dataOffset);
    const d = decodeFrame(linktype, src.subarray(at, at + caplen), opts);
    return toPacketEvent({ index: frameIndex, tsNs, wireLength }, d, ctx);
  }
  const fl = recs[o + R.flags] ?? 0;
  const pf = recs[o + R.portFlags] ?? 0;
  const inner = tuple(
    recs,
    o,
    (fl & SF.innerV6) !== 0,
    recs[o + R.innerProto] ?? 0,
    recs[o + R.innerTransport] ?? 7,
    (pf & 1) !== 0,
    R.src,
    R.dst,
    R.sport,
  );
  const outer =
    (fl & SF.outer) === 0
      ? null
      : tuple(
          recs,
          o,
          (fl & SF.outerV6) !== 0,
          recs[o + R.outerProto] ?? 0,
          recs[o + R.outerTransport] ?? 7,
          (pf & 2) !== 0,
          R.outerSrc,
          R.outerDst,
          R.outerSport,
        );
  const tunnels: TunnelInfo[] = [];
  const nt = Math.min(2, recs[o + R.tunnels] ?? 0); // a record has room for two
  for (let k = 0; k < nt; k++) {
    const t: TunnelInfo = { kind: TUNNEL_KINDS[recs[o + R.tunnel0 + 2 * k] ?? 0] ?? 'vxlan' };
    if (recs[o + R.tunnel0 + 2 * k + 1] === 1) t.id = recs.readUInt32LE(o + R.tunnelId0 + 4 * k);
    tunnels.push(t);
  }
  const keys: PacketKeys = { payloadLength: 0 };
  if ((fl & SF.ipId) !== 0) keys.ipId = recs.readUInt32LE(o + R.ipId);
  if ((fl & SF.tcp) !== 0) {
    keys.tcpSeq = recs.readUInt32LE(o + R.seq);
    keys.tcpAck = recs.readUInt32LE(o + R.ack);
    keys.tcpFlags = recs[o + R.tcpFlags] ?? 0;
    keys.tcpWindow = recs.readUInt16LE(o + R.window);
  }
  if ((fl & SF.tsOpt) !== 0) {
    keys.tsVal = recs.readUInt32LE(o + R.tsVal);
    keys.tsEcr = recs.readUInt32LE(o + R.tsEcr);
  }
  if ((fl & SF.payload) !== 0) {
    keys.payloadLength = recs.readUInt32LE(o + R.payloadLength);
    if ((pf & PF.hashes) !== 0) {
      keys.payloadHash = recs.readUInt32LE(o + R.payloadHash);
      keys.requestLineHash = recs.readUInt32LE(o + R.requestLineHash);
      if ((fl & SF.marker) !== 0) keys.probeMarker = markerOf(recs, i);
    }
  }
  const ev: PacketEvent = {
    point: ctx.point,
    node: ctx.node,
    iface: ctx.iface,
    linktype: linktypeName(linktype),
    tsNs,
    frame: frameIndex,
    outer,
    inner,
    tunnels,
    keys,
    truncated: false,
    wireLength,
  };
  if (status === FOLD) {
    // A counter record's keys are zero and their flags cleared: `keys` is { payloadLength: 0 }.
    const v = viewOf(recs);
    ev.frame = recs.readDoubleLE(o + R.foldFirstFrame);
    ev.fold = {
      packets: Number(v.getBigUint64(o + R.foldPackets, true)),
      bytes: Number(v.getBigUint64(o + R.foldBytes, true)),
      lastTsNs: v.getBigUint64(o + R.foldLastTs, true),
      lastFrame: recs.readDoubleLE(o + R.foldLastFrame),
    };
  }
  return ev;
}

/** The probe marker id of a FAST record with SF.marker set. */
export function markerOf(recs: Buffer, i: number): string {
  const o = i * SUMMARY_BYTES;
  const n = recs[o + R.markerLength] ?? 0;
  return recs.toString('latin1', o + R.marker, o + R.marker + n);
}

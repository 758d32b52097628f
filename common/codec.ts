/**
 * PacketEvent <-> protobuf (hoptrace.v1.PacketEvent). Loaded by reflection from
 * proto/hoptrace.proto so the .proto file stays the single source of truth.
 */
import { join } from 'node:path';
import protobuf from 'protobufjs';
import type {
  PacketEvent,
  PacketKeys,
  TransportName,
  Tuple,
  TunnelInfo,
  TunnelKind,
} from './event';
import { TRANSPORT_NAMES, TUNNEL_KINDS } from './event';

const PROTO_PATH = join(__dirname, '..', '..', 'proto', 'hoptrace.proto');

let root: protobuf.Root | undefined;

/** The parsed proto/hoptrace.proto (loaded once). */
export function protoRoot(): protobuf.Root {
  root ??= protobuf.loadSync(PROTO_PATH);
  return root;
}

/** A message type of hoptrace.v1 by its short name. */
export function protoType(name: string): protobuf.Type {
  return protoRoot().lookupType(`hoptrace.v1.${name}`);
}

const TRANSPORTS: readonly TransportName[] = TRANSPORT_NAMES;
const TUNNELS: readonly TunnelKind[] = TUNNEL_KINDS;
/** LinkType enum names in wire order (enum value - 1). */
export const LINKTYPE_NAMES: readonly string[] = [
  'ethernet',
  'linux-sll',
  'linux-sll2',
  'raw',
  'ipv4',
  'ipv6',
  'null',
  'loop',
  'ppp',
  'other',
];

// Enum values are the list index + 1: 0 is always *_UNSPECIFIED.
function enumOf(list: readonly string[], name: string): number {
  const i = list.indexOf(name);
  return i < 0 ? list.length : i + 1;
}
function nameOf<T extends string>(list: readonly T[], value: number, fallback: T): T {
  return list[value - 1] ?? fallback;
}

interface WireTuple {
  proto: number;
  ipProto: number;
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
}

function tupleToWire(t: Tuple | null | undefined): WireTuple | undefined {
  if (!t) return undefined;
  const w: WireTuple = {
    proto: enumOf(TRANSPORTS, t.proto),
    ipProto: t.ipProto,
    src: t.src,
    dst: t.dst,
  };
  if (t.sport !== undefined) w.sport = t.sport;
  if (t.dport !== undefined) w.dport = t.dport;
  return w;
}

function tupleFromWire(w: WireTuple | null | undefined): Tuple | null {
  if (!w) return null;
  const t: Tuple = {
    proto: nameOf(TRANSPORTS, w.proto, 'other'),
    ipProto: w.ipProto,
    src: w.src,
    dst: w.dst,
  };
  if (w.sport != null) t.sport = w.sport;
  if (w.dport != null) t.dport = w.dport;
  return t;
}

/**
 * The protobufjs `fromObject` shape of one PacketEvent. common/envelope.ts puts these into
 * EventBatch.events, so a batch and a single event share one mapping.
 */
export function packetEventToWire(e: PacketEvent): Record<string, unknown> {
  return {
    point: e.point,
    node: e.node,
    iface: e.iface,
    linkType: enumOf(LINKTYPE_NAMES, e.linktype),
    // A decimal string keeps all 64 bits: protobufjs converts it with its Long support.
    tsNs: e.tsNs.toString(),
    frame: e.frame,
    outer: tupleToWire(e.outer),
    inner: tupleToWire(e.inner),
    related: tupleToWire(e.related),
    tunnels: e.tunnels.map((t) => ({
      kind: enumOf(TUNNELS, t.kind),
      id: t.id,
      messageType: t.messageType,
    })),
    keys: e.keys,
    truncated: e.truncated,
    error: e.error ?? '',
    wireLength: e.wireLength,
    ...(e.fold !== undefined
      ? {
          fold: {
            packets: e.fold.packets,
            bytes: e.fold.bytes,
            lastTsNs: e.fold.lastTsNs.toString(),
            lastFrame: e.fold.lastFrame,
          },
        }
      : {}),
  };
}

/** Encodes one event as a hoptrace.v1.PacketEvent message. */
export function encodePacketEvent(e: PacketEvent): Uint8Array {
  const T = protoType('PacketEvent');
  return T.encode(T.fromObject(packetEventToWire(e))).finish();
}

/** A PacketEvent as protobufjs `toObject` returns it with {@link WIRE_OBJECT_OPTIONS}. */
export interface WirePacketEvent {
  point: string;
  node: string;
  iface: string;
  linkType: number;
  tsNs: string;
  frame: string;
  outer?: WireTuple;
  inner?: WireTuple;
  related?: WireTuple;
  tunnels: { kind: number; id?: number; messageType?: number }[];
  keys?: Record<string, unknown>;
  truncated: boolean;
  error: string;
  wireLength: number;
  fold?: { packets: string; bytes: string; lastTsNs: string; lastFrame: string };
}

/** toObject options every hoptrace message is read with: 64-bit as decimal strings. */
export const WIRE_OBJECT_OPTIONS: protobuf.IConversionOptions = {
  longs: String,
  enums: Number,
  defaults: true,
};

/** Decodes a hoptrace.v1.PacketEvent message (throws protobufjs errors on malformed input). */
export function decodePacketEvent(bytes: Uint8Array): PacketEvent {
  const T = protoType('PacketEvent');
  return packetEventFromWire(T.toObject(T.decode(bytes), WIRE_OBJECT_OPTIONS) as WirePacketEvent);
}

/** The PacketEvent of a decoded (toObject) hoptrace.v1.PacketEvent. */
export function packetEventFromWire(o: WirePacketEvent): PacketEvent {
  const keys: PacketKeys = { payloadLength: 0 };
  for (const [k, v] of Object.entries(o.keys ?? {})) {
    if (v !== null && v !== undefined) (keys as unknown as Record<string, unknown>)[k] = v;
  }
  const ev: PacketEvent = {
    point: o.point,
    node: o.node,
    iface: o.iface,
    linktype: nameOf(LINKTYPE_NAMES, o.linkType, 'other'),
    tsNs: BigInt(o.tsNs),
    frame: Number(o.frame),
    outer: tupleFromWire(o.outer),
    inner: tupleFromWire(o.inner),
    tunnels: o.tunnels.map((t) => {
      const info: TunnelInfo = { kind: nameOf(TUNNELS, t.kind, 'vxlan') };
      if (t.id != null) info.id = t.id;
      if (t.messageType != null) info.messageType = t.messageType;
      return info;
    }),
    keys,
    truncated: o.truncated,
    wireLength: o.wireLength,
  };
  const related = tupleFromWire(o.related);
  if (related) ev.related = related;
  if (o.error !== '') ev.error = o.error;
  if (o.fold != null) {
    ev.fold = {
      packets: Number(o.fold.packets),
      bytes: Number(o.fold.bytes),
      lastTsNs: BigInt(o.fold.lastTsNs),
      lastFrame: Number(o.fold.lastFrame),
    };
  }
  return ev;
}

/**
 * The PacketEvents the simulated agents send.
 *
 * Stream events are unique by (node, frame): the events read back from the data directory
 * (readback.ts) say exactly which were stored, and which twice. Journey events are one TCP
 * connection as the three points of a capture see it, nothing rewritten (`preserved`, the reply
 * seen back at the first point), derived from the capture id so each capture of a run follows its
 * own connection and a verdict about another capture's connection is caught.
 */
import type { PacketEvent } from '../../common/event';

const T0 = 1_764_000_000_000_000_000n;
const MS = 1_000_000n;
const SYN = 0x02;
const PSH = 0x08;
const ACK = 0x10;

/** The client's tunnel address and the two pods every journey runs between. */
export const CLIENT = '10.90.0.42';
export const VPN_POD = '10.244.1.10';
export const BACKEND_POD = '10.244.2.5';
const SERVER_PORT = 8080;

/** The three points of a journey, in path order. */
export const JOURNEY_POINTS = ['decap', 'egress', 'backend'] as const;
export type JourneyPoint = (typeof JOURNEY_POINTS)[number];

/** One TCP data segment of an agent's own traffic: frame `frame` of `node`, unique. */
export function streamEvent(
  node: string,
  point: string,
  podIp: string,
  frame: number,
): PacketEvent {
  return {
    point,
    node,
    iface: 'eth0',
    linktype: 'ethernet',
    tsNs: T0 + BigInt(frame) * 1000n,
    frame,
    outer: null,
    inner: {
      proto: 'tcp',
      ipProto: 6,
      src: podIp,
      dst: '10.96.0.10',
      sport: 10_000 + (frame % 50_000),
      dport: 443,
    },
    tunnels: [],
    keys: {
      payloadLength: 1200,
      tcpFlags: ACK | PSH,
      tcpSeq: (frame * 1200) % 4_294_967_296,
      tcpAck: 1,
      ipId: frame & 0xffff,
    },
    truncated: false,
    wireLength: 1254,
  };
}

/** `count` stream events from frame `first` on. */
export function streamBatch(
  node: string,
  point: string,
  podIp: string,
  first: number,
  count: number,
): PacketEvent[] {
  const out: PacketEvent[] = [];
  for (let i = 0; i < count; i++) out.push(streamEvent(node, point, podIp, first + i));
  return out;
}

/** What tells one capture's connection from another's. */
export interface Journey {
  sport: number;
  isn: number;
  serverIsn: number;
}

/** FNV-1a, 32 bits. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** The connection capture `captureId` follows. */
export function journeyOf(captureId: string): Journey {
  const h = fnv1a(captureId);
  return { sport: 20_000 + (h % 40_000), isn: h, serverIsn: fnv1a(`${captureId}/server`) };
}

function tcp(
  point: string,
  node: string,
  iface: string,
  frame: number,
  tsNs: bigint,
  t: { src: string; sport: number; dst: string; dport: number },
  flags: number,
  seq: number,
  ack?: number,
): PacketEvent {
  const keys: PacketEvent['keys'] = { payloadLength: 0, tcpFlags: flags, tcpSeq: seq };
  if (ack !== undefined) keys.tcpAck = ack;
  return {
    point,
    node,
    iface,
    linktype: 'ethernet',
    tsNs,
    frame,
    outer: null,
    inner: { proto: 'tcp', ipProto: 6, ...t },
    tunnels: [],
    keys,
    truncated: false,
    wireLength: 74,
  };
}

/** The journey as `point` sees it: the SYN, then the SYN-ACK answering it (ack = ISN + 1). */
export function journeyEvents(
  point: JourneyPoint,
  node: string,
  iface: string,
  j: Journey,
): PacketEvent[] {
  const hop = BigInt(JOURNEY_POINTS.indexOf(point));
  const req = { src: CLIENT, sport: j.sport, dst: BACKEND_POD, dport: SERVER_PORT };
  const rep = { src: BACKEND_POD, sport: SERVER_PORT, dst: CLIENT, dport: j.sport };
  return [
    tcp(point, node, iface, 1, T0 + hop * MS, req, SYN, j.isn),
    tcp(point, node, iface, 2, T0 + (6n - hop) * MS, rep, SYN | ACK, j.serverIsn, j.isn + 1),
  ];
}

/**
 * `count` SYNs from the client, each a new connection (port and ISN of its own), none answered:
 * the first is the request, the rest keep the analysis busy. Every point sees the same ones.
 */
export function synFlood(
  point: JourneyPoint,
  node: string,
  first: number,
  count: number,
): PacketEvent[] {
  const hop = BigInt(JOURNEY_POINTS.indexOf(point));
  const out: PacketEvent[] = [];
  for (let i = first; i < first + count; i++) {
    const t = { src: CLIENT, sport: 1024 + (i % 60_000), dst: BACKEND_POD, dport: SERVER_PORT };
    out.push(
      tcp(
        point,
        node,
        'eth0',
        i + 1,
        T0 + BigInt(i) * 10_000n + hop * MS,
        t,
        SYN,
        fnv1a(`syn${i}`),
      ),
    );
  }
  return out;
}

/**
 * Mutated Envelope frames for the fuzz scenario: frames an agent sends (hello, event batches of
 * every event shape, status, lost, error, heartbeat, replies) encoded by common/envelope.ts, then
 * damaged. Most damage keeps the protobuf wire structure and changes what it says (wire.ts:
 * a value set to a boundary — 0, 2^31, 2^32 - 1, 2^53, 2^64 - 1 —, a string made empty, long,
 * invalid UTF-8 or random, a field dropped, doubled, renumbered or an unknown one added, at any
 * depth), so the frame gets past the decoder's framing and reaches its checks and the collector
 * behind them; the rest is byte-level (bit flips, random or boundary bytes, insertions, deletions,
 * truncation, a duplicated slice, a splice of two frames). Deterministic for a seed (xorshift32),
 * so a crash can be reproduced.
 */
import { encodeEnvelope } from '../../common/envelope';
import type { PacketEvent } from '../../common/event';
import type { Envelope } from '../../common/wire';
import { journeyEvents, journeyOf, streamEvent, synFlood } from './sim-events';
import { mutateFields } from './wire-mutate';

/** xorshift32: [0, 1) from a seed that is not 0. */
export function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4_294_967_296;
  };
}

/** Events of every shape the decoder and the collector handle. */
function eventsOf(rand: () => number, node: string): PacketEvent[] {
  const f = 1 + Math.floor(rand() * 1e6);
  const tcp = streamEvent(node, 'decap', '10.244.1.10', f);
  const [syn] = journeyEvents('decap', node, 'tun0', journeyOf(`c-fuzz-${f}`));
  const [flood] = synFlood('backend', node, f, 1);
  const udp: PacketEvent = {
    ...tcp,
    inner: {
      proto: 'udp',
      ipProto: 17,
      src: '10.90.0.42',
      dst: '10.96.0.10',
      sport: 5353,
      dport: 53,
    },
    keys: { payloadLength: 40, dnsId: f & 0xffff, dnsQuestion: f, payloadHash: f },
  };
  const vxlan: PacketEvent = {
    ...tcp,
    outer: {
      proto: 'udp',
      ipProto: 17,
      src: '192.168.50.1',
      dst: '192.168.50.2',
      sport: 40000,
      dport: 4789,
    },
    tunnels: [
      { kind: 'vxlan', id: 42 },
      { kind: 'wireguard', id: 7, messageType: 4 },
    ],
    keys: {
      ...tcp.keys,
      tsVal: f,
      tsEcr: 1,
      probeMarker: 'hoptrace-probe-abc',
      requestLineHash: f,
    },
  };
  const icmp: PacketEvent = {
    ...tcp,
    inner: { proto: 'icmp', ipProto: 1, src: '10.244.2.1', dst: '10.90.0.42' },
    related: {
      proto: 'tcp',
      ipProto: 6,
      src: '10.90.0.42',
      dst: '10.244.2.5',
      sport: 40000,
      dport: 80,
    },
    keys: { payloadLength: 0, icmpType: 3, icmpCode: 1, icmpId: 9, icmpSeq: 1 },
  };
  const ipv6: PacketEvent = {
    ...tcp,
    inner: {
      proto: 'tcp',
      ipProto: 6,
      src: 'fd00::42',
      dst: 'fd00:10::5',
      sport: 40000,
      dport: 80,
    },
    truncated: true,
    error: 'DECODE_TRUNCATED',
  };
  const all = [tcp, udp, vxlan, icmp, ipv6, ...(syn ? [syn] : []), ...(flood ? [flood] : [])];
  const n = 1 + Math.floor(rand() * 3);
  return Array.from({ length: n }, () => all[Math.floor(rand() * all.length)]!);
}

/** One valid frame an agent could send, seq `seq` where it has one. */
export function baseFrame(
  rand: () => number,
  agentId: string,
  seq: number,
  captureId: string,
): Envelope {
  const k = Math.floor(rand() * 12);
  const point = rand() < 0.5 ? 'decap' : 'backend';
  switch (k) {
    case 0:
      return {
        seq: 0,
        kind: 'hello',
        hello: {
          agentId,
          node: `${agentId}-node`,
          version: 'fuzz',
          nodeAddresses: ['192.168.50.1'],
          namespaces: [
            { path: '/run/netns/x', inode: 1, addresses: ['10.244.1.10'], interfaces: ['eth0'] },
          ],
          spoolFirstSeq: seq,
        },
      };
    case 1:
      return {
        seq,
        kind: 'status',
        status: {
          captureId,
          point,
          state: 'capturing',
          packets: seq,
          kernelDrops: 0,
          ifaceDrops: null,
          queueDrops: 0,
          errorCode: '',
          message: '',
          netns: '/run/netns/x',
          netnsAddresses: ['10.244.1.10'],
          iface: 'eth0',
          linkType: 'ethernet',
        },
      };
    case 2:
      return {
        seq,
        kind: 'lost',
        lost: { captureId, point, count: 100, reason: 'spool overflow' },
      };
    case 3:
      return {
        seq,
        kind: 'error',
        error: { code: 'CAPTURE_WORKER_FAILED', message: 'x', captureId, point },
      };
    case 4:
      return { seq: 0, kind: 'heartbeat', heartbeat: { unixMs: Date.now() } };
    case 5:
      return {
        seq: 0,
        kind: 'conntrackReport',
        conntrackReport: {
          requestId: 'r1',
          captureId,
          agentId,
          entries: [],
          errors: ['vpn: CONNTRACK x'],
        },
      };
    default:
      return {
        seq,
        kind: 'events',
        events: { captureId, point, events: eventsOf(rand, `${agentId}-node`) },
      };
  }
}

const BOUNDARY = [0x00, 0x01, 0x7f, 0x80, 0xff];

/** `bytes` damaged by one to three operators (`other` is spliced with). */
export function mutate(rand: () => number, bytes: Uint8Array, other: Uint8Array): Uint8Array {
  let b = Buffer.from(bytes);
  const pos = (len: number): number => Math.floor(rand() * Math.max(1, len));
  const ops = 1 + Math.floor(rand() * 3);
  for (let i = 0; i < ops; i++) {
    const at = pos(b.length);
    switch (Math.floor(rand() * 8)) {
      case 0:
        if (b.length > 0) b[at] = (b[at] ?? 0) ^ (1 << Math.floor(rand() * 8));
        break;
      case 1:
        if (b.length > 0) b[at] = Math.floor(rand() * 256);
        break;
      case 2:
        if (b.length > 0) b[at] = BOUNDARY[Math.floor(rand() * BOUNDARY.length)] ?? 0;
        break;
      case 3: {
        const ins = Buffer.from(Array.from({ length: 1 + pos(8) }, () => Math.floor(rand() * 256)));
        b = Buffer.concat([b.subarray(0, at), ins, b.subarray(at)]);
        break;
      }
      case 4:
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + pos(8))]);
        break;
      case 5:
        b = b.subarray(0, at);
        break;
      case 6: {
        const len = 1 + pos(16);
        b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + len), b.subarray(at)]);
        break;
      }
      default:
        b = Buffer.concat([b.subarray(0, at), Buffer.from(other).subarray(pos(other.length))]);
    }
  }
  return b;
}

/** Encoded base frames to mutate from (building and encoding one per frame would be the cost). */
export function corpus(
  rand: () => number,
  agentId: string,
  captureId: string,
  n: number,
): Uint8Array[] {
  return Array.from({ length: n }, (_, i) =>
    encodeEnvelope(baseFrame(rand, agentId, i + 1, captureId)),
  );
}

/** A mutated frame from the corpus: 4 in 5 structure-aware, 1 in 5 byte-level. */
export function mutatedFrame(rand: () => number, frames: readonly Uint8Array[]): Uint8Array {
  const pick = (): Uint8Array => frames[Math.floor(rand() * frames.length)] ?? new Uint8Array(0);
  return rand() < 0.8 ? mutateFields(rand, pick()) : mutate(rand, pick(), pick());
}

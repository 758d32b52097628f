/**
 * Synthetic PacketEvents for correlator/attribution tests: one TCP exchange (SYN, SYN-ACK, ACK,
 * request, response) as one capture point observes it, with the tuple that point would see.
 */
import type { PacketEvent } from '../../common/event';
import type { Inventory } from '../../common/inventory';

export interface Ep {
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

export const FIN = 0x01;
export const SYN = 0x02;
export const PSH = 0x08;
export const ACK = 0x10;

export const CLIENT = '10.90.0.42';
export const ISN = 4263588410;
export const SERVER_ISN = 1000000;
export const T0 = 1_700_000_000_000_000_000n;
export const MS = 1_000_000n;

export const ADDR = {
  vpnPod: '10.244.1.10',
  vpnNodeUplink: '192.168.50.1',
  vpnNodeBridge: '10.244.1.1',
  backendNodeUplink: '192.168.50.2',
  backendNodeBridge: '10.244.2.1',
  backendPod: '10.244.2.5',
  proxyPod: '10.244.2.9',
  clusterIp: '10.96.0.10',
} as const;

export const INVENTORY: Inventory = {
  nodes: {
    'vpn-node': [ADDR.vpnNodeUplink, ADDR.vpnNodeBridge],
    'backend-node': [ADDR.backendNodeUplink, ADDR.backendNodeBridge],
  },
  pods: {
    'vpn-0': { ip: ADDR.vpnPod, node: 'vpn-node', role: 'vpn' },
    'web-1': { ip: ADDR.backendPod, node: 'backend-node', role: 'backend' },
    'proxy-0': { ip: ADDR.proxyPod, node: 'backend-node', role: 'proxy' },
  },
};

/** The client's request as it leaves the tunnel: 10.90.0.42:40000 -> backend pod 10.244.2.5:8080. */
export const DIRECT: Ep = { src: CLIENT, sport: 40000, dst: ADDR.backendPod, dport: 8080 };

export const rev = (e: Ep): Ep => ({ src: e.dst, sport: e.dport, dst: e.src, dport: e.sport });

export interface PacketOpts {
  flags: number;
  seq: number;
  ack?: number;
  tsVal?: number;
  ipId?: number;
  ts: bigint;
  frame?: number;
  payloadLength?: number;
  probeMarker?: string;
  payloadHash?: number;
  requestLineHash?: number;
}

/** One decoded TCP packet at `point`. */
export function tcp(point: string, ep: Ep, o: PacketOpts): PacketEvent {
  const keys: PacketEvent['keys'] = {
    payloadLength: o.payloadLength ?? 0,
    tcpFlags: o.flags,
    tcpSeq: o.seq,
  };
  if (o.ack !== undefined) keys.tcpAck = o.ack;
  if (o.tsVal !== undefined) keys.tsVal = o.tsVal;
  if (o.ipId !== undefined) keys.ipId = o.ipId;
  if (o.probeMarker !== undefined) keys.probeMarker = o.probeMarker;
  if (o.payloadHash !== undefined) keys.payloadHash = o.payloadHash;
  if (o.requestLineHash !== undefined) keys.requestLineHash = o.requestLineHash;
  return {
    point,
    node: `${point}-node`,
    iface: 'eth0',
    linktype: 'ethernet',
    tsNs: o.ts,
    frame: o.frame ?? 0,
    outer: null,
    inner: { proto: 'tcp', ipProto: 6, src: ep.src, dst: ep.dst, sport: ep.sport, dport: ep.dport },
    tunnels: [],
    keys,
    truncated: false,
    wireLength: 54 + (o.payloadLength ?? 0),
  };
}

export interface RequestBytes {
  probeMarker?: string;
  payloadHash?: number;
  requestLineHash?: number;
  length?: number;
}

export const PROBE_REQUEST: Required<RequestBytes> = {
  probeMarker: 'abc123',
  payloadHash: 0x11111111,
  requestLineHash: 0x22222222,
  length: 78,
};

export interface ExchangeOpts {
  isn?: number;
  serverIsn?: number;
  tsVal?: number;
  ipId?: number;
  /** Offset from T0 for this point (captures downstream see packets a little later). */
  at?: bigint;
  /**
   * 'full': handshake, request, response. 'syn-synack': the SYN arrives and is answered, nothing
   * more. 'syn-only': SYN(s), no answer.
   */
  phase?: 'full' | 'syn-synack' | 'syn-only';
  /** Extra copies of the SYN (retransmissions), 1 s apart. */
  synRetransmits?: number;
  request?: RequestBytes;
}

/** One connection as one point sees it. */
export function exchange(point: string, ep: Ep, o: ExchangeOpts = {}): PacketEvent[] {
  const isn = o.isn ?? ISN;
  const sisn = o.serverIsn ?? SERVER_ISN;
  const ts = o.tsVal ?? 777000;
  const id = o.ipId ?? 4242;
  const t = T0 + (o.at ?? 0n);
  const phase = o.phase ?? 'full';
  const req = o.request ?? PROBE_REQUEST;
  const len = req.length ?? 78;
  const out: PacketEvent[] = [];
  let frame = 1;
  const push = (e: Ep, p: Omit<PacketOpts, 'frame'>): void => {
    out.push(tcp(point, e, { ...p, frame: frame++ }));
  };
  push(ep, { flags: SYN, seq: isn, tsVal: ts, ipId: id, ts: t });
  for (let i = 1; i <= (o.synRetransmits ?? 0); i++) {
    push(ep, {
      flags: SYN,
      seq: isn,
      tsVal: ts + 1000 * i,
      ipId: id,
      ts: t + BigInt(i) * 1000n * MS,
    });
  }
  if (phase === 'syn-only') return out;
  const back = rev(ep);
  const t1 = t + BigInt(o.synRetransmits ?? 0) * 1000n * MS;
  push(back, {
    flags: SYN | ACK,
    seq: sisn,
    ack: (isn + 1) >>> 0,
    tsVal: 5000,
    ipId: 0,
    ts: t1 + 1n * MS,
  });
  if (phase === 'syn-synack') return out;
  const dataSeq = (isn + 1) >>> 0;
  push(ep, {
    flags: ACK,
    seq: dataSeq,
    ack: sisn + 1,
    tsVal: ts + 1,
    ipId: id + 1,
    ts: t1 + 2n * MS,
  });
  const data: Omit<PacketOpts, 'frame'> = {
    flags: PSH | ACK,
    seq: dataSeq,
    ack: sisn + 1,
    tsVal: ts + 1,
    ipId: id + 2,
    ts: t1 + 2n * MS,
    payloadLength: len,
  };
  if (req.probeMarker !== undefined) data.probeMarker = req.probeMarker;
  if (req.payloadHash !== undefined) data.payloadHash = req.payloadHash;
  if (req.requestLineHash !== undefined) data.requestLineHash = req.requestLineHash;
  push(ep, data);
  push(back, {
    flags: ACK,
    seq: sisn + 1,
    ack: (dataSeq + len) >>> 0,
    tsVal: 5001,
    ipId: 1,
    ts: t1 + 3n * MS,
  });
  push(back, {
    flags: PSH | ACK,
    seq: sisn + 1,
    ack: (dataSeq + len) >>> 0,
    tsVal: 5002,
    ipId: 2,
    ts: t1 + 4n * MS,
    payloadLength: 120,
    payloadHash: 0x33333333,
  });
  push(ep, {
    flags: FIN | ACK,
    seq: (dataSeq + len) >>> 0,
    ack: sisn + 121,
    tsVal: ts + 2,
    ipId: id + 3,
    ts: t1 + 5n * MS,
  });
  return out;
}

export interface Pt {
  name: string;
  events: PacketEvent[];
  /** Every frame the point's capture held (PointEvents.capturedFrames), when given. */
  capturedFrames?: number;
}

export const pt = (name: string, events: PacketEvent[]): Pt => ({ name, events });

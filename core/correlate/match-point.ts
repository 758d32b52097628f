/**
 * Matching one request at one capture point, with keys that survive NAT: a new TCP connection by
 * its ISN, an already-open connection by its absolute sequence numbers, a UDP datagram by its
 * payload fingerprint (RequestShape in journey.ts).
 *
 * Pure: no clock, timers or I/O. Time is passed in (`nowNs`), and the offline entry point
 * (`correlateRequest`) needs no time at all beyond the event timestamps.
 *
 * Why these keys: Linux NAT (nf_nat) rewrites addresses and ports and fixes up checksums, but it
 * never touches the TCP sequence space, the RFC 7323 timestamp option or the IPv4 ID. So the SYN's
 * sequence number (the ISN, 32 random bits, RFC 9293 §3.4.1) names a connection on both sides of any
 * masquerade, including `--random-fully` where the source port changes too. A terminating proxy
 * opens a new connection (new ISN, new ports); only the request bytes survive, so that case is
 * matched on the payload keys the decoder hashed (probe marker, request line, first bytes).
 * NAT never touches a UDP payload either, so a datagram is recognised by its first bytes' hash and
 * its length (for DNS: the transaction id and the question), with the IPv4 ID beside them.
 */

import type { PacketEvent } from '../../common/event';
import {
  absDiff,
  capturedCount,
  endpointKey,
  reverseEndpoint,
  sameEndpoint,
  sortMatchKeys,
  type DataIdentity,
  type Endpoint,
  type Journey,
  type MatchKey,
  type PacketRef,
  type FlowPacket,
  MAX_FLOW_PACKETS,
  type PointEvents,
  type PointMatch,
  type PointStatus,
  type RequestIdentity,
  type RequestSelector,
  type RequestShape,
  type FlowProto,
} from './journey';
import { icmpErrorsAbout, icmpErrorsText } from './icmp-errors';
import { findOuter } from './outer';
import { tupleText } from '../../common/endpoint';
import { flowView, isSynOnly, type FlowView, type TcpView } from './flow-view';
import { outsideWindowText, synOutsideWindow } from './far-syn';

export type { FlowProto };

/** TCP flag bits (RFC 9293 §3.1). */
const FIN = 0x01;
const SYN = 0x02;
const RST = 0x04;
const ACK = 0x10;

/** Default correlation window around the request's first packet at the first point. */
export const DEFAULT_WINDOW_NS = 10_000_000_000n;

export { flowView, tcpView, type FlowView, type TcpView } from './flow-view';

/** An ICMP echo request (v4 type 8, v6 type 128). */
export const isEchoRequest = (v: FlowView): boolean =>
  v.ev.keys.icmpType === (v.proto === 'icmp' ? 8 : 128);

/** The request shape a packet without a SYN starts. */
const SHAPE_OF: Record<FlowProto, RequestShape> = {
  tcp: 'tcp-established',
  udp: 'udp',
  icmp: 'icmp-echo',
  icmpv6: 'icmp-echo',
};

export { isSynOnly };
const isSynAck = (v: TcpView): boolean => (v.flags & SYN) !== 0 && (v.flags & ACK) !== 0;

/** Sequence arithmetic is modulo 2^32 (RFC 9293 §3.4). */
const plus1 = (n: number): number => (n + 1) >>> 0;

export function byTime(a: FlowView, b: FlowView): number {
  if (a.ev.tsNs !== b.ev.tsNs) return a.ev.tsNs < b.ev.tsNs ? -1 : 1;
  return a.ev.frame - b.ev.frame;
}

export function matchesSelector(t: Endpoint, sel: RequestSelector): boolean {
  if (sel.client !== undefined && t.src !== sel.client) return false;
  if (sel.dst !== undefined && t.dst !== sel.dst) return false;
  if (sel.dport !== undefined && t.dport !== sel.dport) return false;
  return true;
}

/** The data identity of segment or datagram `d`, the request's first bytes. */
function dataOf(d: FlowView, seq: number): DataIdentity {
  const k = d.ev.keys;
  return {
    seq,
    payloadLength: k.payloadLength,
    probeMarker: k.probeMarker ?? null,
    payloadHash: k.payloadHash ?? null,
    requestLineHash: k.requestLineHash ?? null,
    dnsId: k.dnsId ?? null,
    dnsQuestion: k.dnsQuestion ?? null,
    frame: d.ev.frame,
  };
}

/**
 * The requests at the first point, oldest first: every new TCP connection (SYN without ACK) that
 * fits the selector — a retransmitted SYN (same tuple and ISN) is the same request. Only when
 * there is none: the first data segment of each already-open TCP connection and the first datagram
 * of each UDP flow that fit it (flowRequests). At most `limit` (the analysis asks for the first
 * only). Linear in the events after the sort: a data segment is found through an index by tuple
 * and seq, not by a scan per SYN.
 */
export function findRequests(
  point: PointEvents,
  selector: RequestSelector,
  windowNs: bigint = DEFAULT_WINDOW_NS,
  limit = Number.POSITIVE_INFINITY,
): RequestIdentity[] {
  const views = point.events.map(flowView).filter((v): v is FlowView => v !== null);
  views.sort(byTime);
  const syns = synRequests(point.name, views, selector, windowNs, limit);
  return syns.length > 0 ? syns : flowRequests(point.name, views, selector, limit);
}

function synRequests(
  pointName: string,
  views: FlowView[],
  selector: RequestSelector,
  windowNs: bigint,
  limit: number,
): RequestIdentity[] {
  const seen = new Set<string>();
  const out: RequestIdentity[] = [];
  let segments: Map<string, FlowView[]> | null = null;
  for (const v of views) {
    if (out.length >= limit) break;
    if (v.proto !== 'tcp' || !isSynOnly(v) || v.seq === null) continue;
    if (!matchesSelector(v.tuple, selector)) continue;
    const id = `${endpointKey(v.tuple)}#${v.seq}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const dataSeq = plus1(v.seq);
    // The first data segment of this connection: same tuple, seq right after the ISN.
    segments ??= dataSegments(views);
    const data = segments
      .get(`${endpointKey(v.tuple)}#${dataSeq}`)
      ?.find((d) => d.ev.tsNs >= v.ev.tsNs && d.ev.tsNs - v.ev.tsNs <= windowNs);
    out.push({
      point: pointName,
      shape: 'tcp-syn',
      proto: 'tcp',
      tuple: v.tuple,
      isn: v.seq,
      tsVal: v.ev.keys.tsVal ?? null,
      ipId: v.ev.keys.ipId ?? null,
      startTsNs: v.ev.tsNs,
      frame: v.ev.frame,
      data: data === undefined ? null : dataOf(data, dataSeq),
    });
  }
  return out;
}

/** TCP segments with payload by tuple and seq, each list in time order (`views` is sorted). */
function dataSegments(views: FlowView[]): Map<string, FlowView[]> {
  const out = new Map<string, FlowView[]>();
  for (const d of views) {
    if (d.proto !== 'tcp' || d.seq === null || d.ev.keys.payloadLength === 0) continue;
    const k = `${endpointKey(d.tuple)}#${d.seq}`;
    const list = out.get(k);
    if (list === undefined) out.set(k, [d]);
    else list.push(d);
  }
  return out;
}

/**
 * Whether `v` can be a request without a SYN: a TCP data segment, UDP datagram or ICMP echo
 * request with payload that fits the selector (ICMP has no port: `dport` is not asked of it),
 * which must name the client side (`client` or `dst`) unless `v` carries a probe marker.
 */
export function isFlowCandidate(v: FlowView, selector: RequestSelector): boolean {
  const k = v.ev.keys;
  if (k.payloadLength === 0 || (v.flags & SYN) !== 0) return false;
  const echo = v.proto === 'icmp' || v.proto === 'icmpv6';
  if (echo && !isEchoRequest(v)) return false;
  if (!matchesSelector(v.tuple, echo ? { ...selector, dport: undefined } : selector)) return false;
  return selector.client !== undefined || selector.dst !== undefined || k.probeMarker !== undefined;
}

/**
 * Requests without a SYN: per flow, the first TCP data segment (a connection already open when the
 * capture started) or UDP datagram that fits the selector. Which side is the client is only known
 * from the selector (`client` or `dst`) or a probe marker in the payload, so without either
 * nothing is selected: the first packet seen could be the server's.
 */
function flowRequests(
  pointName: string,
  views: FlowView[],
  selector: RequestSelector,
  limit: number,
): RequestIdentity[] {
  const seen = new Set<string>();
  const out: RequestIdentity[] = [];
  for (const v of views) {
    if (out.length >= limit) break;
    if (!isFlowCandidate(v, selector)) continue;
    const k = v.ev.keys;
    const flow = `${v.proto}/${endpointKey(v.tuple)}`;
    if (seen.has(flow)) continue;
    seen.add(flow);
    out.push({
      point: pointName,
      shape: SHAPE_OF[v.proto],
      proto: v.proto,
      tuple: v.tuple,
      isn: null,
      tsVal: k.tsVal ?? null,
      ipId: k.ipId ?? null,
      startTsNs: v.ev.tsNs,
      frame: v.ev.frame,
      data: dataOf(v, v.seq ?? k.icmpSeq ?? 0),
    });
  }
  return out;
}

interface Scored {
  view: FlowView;
  keys: MatchKey[];
  score: number;
}

/** The request-direction packets of the request at the first point. */
interface ClientPackets {
  /** TCP: by sequence number. UDP: unused. */
  bySeq: Map<number, FlowView[]>;
  /** TCP: what a reply acknowledging one of them carries (seq + length, + 1 for SYN/FIN). */
  acks: Set<number>;
}

function payloadKeys(v: FlowView, data: DataIdentity | null): MatchKey[] {
  if (data === null || v.ev.keys.payloadLength === 0) return [];
  const k = v.ev.keys;
  const out: MatchKey[] = [];
  if (data.probeMarker !== null && k.probeMarker === data.probeMarker) out.push('probe-marker');
  if (data.requestLineHash !== null && k.requestLineHash === data.requestLineHash)
    out.push('request-line');
  if (data.payloadHash !== null && k.payloadHash === data.payloadHash) out.push('payload-hash');
  if (data.dnsQuestion !== null && k.dnsQuestion === data.dnsQuestion) out.push('dns-question');
  return out;
}

/**
 * A UDP datagram is the request's when its first bytes and its length are the request's (NAT
 * rewrites neither); the IP ID and probe marker, when equal, add to the proof.
 */
function scoreDatagram(v: FlowView, id: RequestIdentity): Scored | null {
  const data = id.data;
  const k = v.ev.keys;
  if (data === null || data.payloadHash === null || k.payloadHash !== data.payloadHash) return null;
  if (k.payloadLength !== data.payloadLength) return null;
  const keys: MatchKey[] = ['payload-hash'];
  let score = 50;
  if (id.ipId !== null && k.ipId === id.ipId) {
    keys.push('ip-id');
    score += 5;
  }
  if (data.probeMarker !== null && k.probeMarker === data.probeMarker) {
    keys.push('probe-marker');
    score += 1;
  }
  if (data.dnsId !== null && k.dnsId === data.dnsId) keys.push('dns-id');
  if (data.dnsQuestion !== null && k.dnsQuestion === data.dnsQuestion) keys.push('dns-question');
  return { view: v, keys, score };
}

/**
 * An echo request is the request's when its sequence number, length and data are the request's;
 * the identifier may be rewritten (it is the tuple's port), the IP ID adds to the proof.
 */
function scoreEcho(v: FlowView, id: RequestIdentity): Scored | null {
  const data = id.data;
  const k = v.ev.keys;
  if (data === null || !isEchoRequest(v) || k.icmpSeq !== data.seq) return null;
  if (k.payloadLength !== data.payloadLength || k.payloadHash !== (data.payloadHash ?? undefined))
    return null;
  const keys: MatchKey[] = ['icmp-echo'];
  let score = 50;
  if (id.ipId !== null && k.ipId === id.ipId) {
    keys.push('ip-id');
    score += 5;
  }
  return { view: v, keys, score };
}

/** Keys proving that request-direction packet `v` belongs to the request connection. */
function scoreRequestPacket(
  v: FlowView,
  id: RequestIdentity,
  client: ClientPackets,
): Scored | null {
  if (id.shape === 'udp') return scoreDatagram(v, id);
  if (id.shape === 'icmp-echo') return scoreEcho(v, id);
  if (v.seq === null) return null;
  const peers = client.bySeq.get(v.seq);
  if (isSynOnly(v)) {
    if (id.isn === null || v.seq !== id.isn) return null;
    const keys: MatchKey[] = ['tcp-isn'];
    let score = 100;
    if (v.ev.keys.tsVal !== undefined && peers?.some((p) => p.ev.keys.tsVal === v.ev.keys.tsVal)) {
      keys.push('tsval');
      score += 20;
    }
    if (v.ev.keys.ipId !== undefined && peers?.some((p) => p.ev.keys.ipId === v.ev.keys.ipId)) {
      keys.push('ip-id');
      score += 5;
    }
    return { view: v, keys, score };
  }
  if ((v.flags & SYN) !== 0 || peers === undefined) return null;
  // A later segment: its seq is the ISN plus bytes sent, which NAT leaves alone. Require the same
  // length too, so a pure ACK and the data segment that shares its seq stay apart.
  const same = peers.filter((p) => p.ev.keys.payloadLength === v.ev.keys.payloadLength);
  if (same.length === 0) return null;
  const keys: MatchKey[] = ['tcp-seq'];
  let score = 60;
  if (v.ev.keys.tsVal !== undefined && same.some((p) => p.ev.keys.tsVal === v.ev.keys.tsVal)) {
    keys.push('tsval');
    score += 20;
  }
  if (v.ev.keys.ipId !== undefined && same.some((p) => p.ev.keys.ipId === v.ev.keys.ipId)) {
    keys.push('ip-id');
    score += 5;
  }
  const pk = payloadKeys(v, id.data);
  if (pk.length > 0) {
    keys.push(...pk);
    score += 10;
  }
  return { view: v, keys, score };
}

interface Group {
  tuple: Endpoint;
  best: Scored;
  keys: Set<MatchKey>;
}

function groupByTuple(items: Scored[], tupleOf: (s: Scored) => Endpoint): Group[] {
  const groups = new Map<string, Group>();
  for (const s of items) {
    const tuple = tupleOf(s);
    const k = endpointKey(tuple);
    const g = groups.get(k);
    if (g === undefined) {
      groups.set(k, { tuple, best: s, keys: new Set(s.keys) });
    } else {
      for (const key of s.keys) g.keys.add(key);
      if (s.score > g.best.score) g.best = s;
    }
  }
  return [...groups.values()];
}

function topGroups(groups: Group[]): Group[] {
  const top = Math.max(...groups.map((g) => g.best.score));
  return groups.filter((g) => g.best.score === top);
}

/**
 * When one capture (e.g. tcpdump -i any on a node) sees the very same packet on two interfaces,
 * before and after a translation, the tied groups carry identical NAT-invariant keys. Then the
 * copy captured last is the one furthest down the path. Returns null for genuinely different
 * packets or equal timestamps: that stays ambiguous.
 */
function latestCopy(groups: Group[]): Group | null {
  const sig = (v: FlowView): string | null => {
    const k = v.ev.keys;
    if (k.tsVal === undefined && k.ipId === undefined) return null;
    return `${v.seq ?? 'x'}/${v.flags}/${k.payloadLength}/${k.tsVal ?? 'x'}/${k.ipId ?? 'x'}/${k.payloadHash ?? 'x'}`;
  };
  const first = groups[0];
  const s = first === undefined ? null : sig(first.best.view);
  if (s === null || groups.some((g) => sig(g.best.view) !== s)) return null;
  const sorted = [...groups].sort((a, b) => byTime(a.best.view, b.best.view));
  const last = sorted[sorted.length - 1];
  const prev = sorted[sorted.length - 2];
  if (last === undefined || prev === undefined || last.best.view.ev.tsNs === prev.best.view.ev.tsNs)
    return null;
  return last;
}

function packetRef(v: FlowView): PacketRef {
  return {
    frame: v.ev.frame,
    tsNs: v.ev.tsNs,
    node: v.ev.node,
    iface: v.ev.iface,
    tuple: v.tuple,
    tcpFlags: v.ev.keys.tcpFlags ?? null,
    seq: v.seq,
  };
}

export function emptyPoint(
  point: string,
  capturedEvents: number,
  status: PointStatus,
  detail: string,
): PointMatch {
  return {
    point,
    status,
    capturedEvents,
    matchedBy: [],
    replyMatchedBy: [],
    proxied: false,
    seenRequest: false,
    seenSyn: false,
    seenReply: false,
    observed: null,
    isn: null,
    firstTsNs: null,
    lastTsNs: null,
    requestPackets: 0,
    replyPackets: 0,
    retransmits: 0,
    packet: null,
    flow: [],
    flowOmitted: 0,
    candidates: [],
    icmpErrors: [],
    detail,
  };
}

/** Fill counts, reply and timestamps for flow `tuple` at one point (`views`: one transport). */
function describeConnection(
  base: PointMatch,
  views: FlowView[],
  tuple: Endpoint,
  isn: number | null,
  acks?: ReadonlySet<number>,
): PointMatch {
  const back = reverseEndpoint(tuple);
  const req = views.filter((v) => sameEndpoint(v.tuple, tuple));
  const rep = views.filter((v) => sameEndpoint(v.tuple, back));
  const replyKeys = new Set<MatchKey>();
  if (rep.length > 0) replyKeys.add('reverse-tuple');
  if (isn !== null && rep.some((v) => isSynAck(v) && v.ack === plus1(isn)))
    replyKeys.add('syn-ack');
  if (
    acks !== undefined &&
    rep.some((v) => (v.flags & ACK) !== 0 && v.ack !== null && acks.has(v.ack))
  )
    replyKeys.add('tcp-ack');
  // A retransmission carries a sequence number already sent with the same control bits and
  // length (a datagram: the same first bytes and length); pure ACKs repeat their seq legitimately
  // and are not counted.
  const sent = new Set<string>();
  let retransmits = 0;
  for (const [dir, list] of [
    ['>', req],
    ['<', rep],
  ] as const) {
    for (const v of list) {
      const len = v.ev.keys.payloadLength;
      if (len === 0 && (v.flags & (SYN | FIN | RST)) === 0) continue;
      const at = v.proto === 'udp' ? `h${v.ev.keys.payloadHash ?? 'x'}` : (v.seq ?? 'x');
      // A tunnel's copy of a packet (the VPN's outer packets on the same interface) is no resend.
      const tunnel = v.ev.tunnels.length > 0 ? 'T' : '';
      const k = `${tunnel}${dir}${at}:${v.flags & (SYN | FIN | RST)}:${len}`;
      if (sent.has(k)) retransmits++;
      else sent.add(k);
    }
  }
  const all = [...req, ...rep];
  let first: bigint | null = null;
  let last: bigint | null = null;
  for (const v of all) {
    if (first === null || v.ev.tsNs < first) first = v.ev.tsNs;
    if (last === null || v.ev.tsNs > last) last = v.ev.tsNs;
  }
  const flow = flowPackets(req, rep);
  return {
    ...base,
    observed: tuple,
    isn,
    seenRequest: req.length > 0,
    seenSyn: req.some((v) => isSynOnly(v) && (isn === null || v.seq === isn)),
    seenReply: rep.length > 0,
    replyMatchedBy: sortMatchKeys(replyKeys),
    requestPackets: req.length,
    replyPackets: rep.length,
    retransmits,
    firstTsNs: first,
    lastTsNs: last,
    flow,
    flowOmitted: all.length - flow.length,
  };
}

/** The connection's packets in time order (frame order on ties), the first MAX_FLOW_PACKETS. */
function flowPackets(req: FlowView[], rep: FlowView[]): FlowPacket[] {
  const tagged = [
    ...req.map((v) => ({ v, dir: 'request' as const })),
    ...rep.map((v) => ({ v, dir: 'reply' as const })),
  ];
  tagged.sort((a, b) =>
    a.v.ev.tsNs === b.v.ev.tsNs ? a.v.ev.frame - b.v.ev.frame : a.v.ev.tsNs < b.v.ev.tsNs ? -1 : 1,
  );
  return tagged.slice(0, MAX_FLOW_PACKETS).map(({ v, dir }) => ({
    frame: v.ev.frame,
    tsNs: v.ev.tsNs,
    dir,
    tuple: v.tuple,
    flags: v.flags,
    seq: v.seq,
    ack: v.ack,
    payloadLength: v.ev.keys.payloadLength,
    tunneled: v.ev.tunnels.length > 0,
  }));
}

function describeKeys(keys: MatchKey[], id: RequestIdentity, point: string): string {
  const parts: string[] = [];
  if (keys.includes('tcp-isn'))
    parts.push(`SYN seq ${id.isn ?? '?'} seen at ${id.point} and at ${point}`);
  else if (keys.includes('tcp-seq'))
    parts.push(
      id.isn === null
        ? `a segment with the request's sequence number (seq ${id.data?.seq ?? '?'}; the handshake was not captured) seen at ${point}`
        : `a segment with the request's seq (ISN ${id.isn}) seen at ${point}`,
    );
  if (keys.includes('tsval')) parts.push('same TCP TSval');
  if (keys.includes('ip-id')) parts.push('same IPv4 ID');
  if (keys.includes('icmp-echo'))
    parts.push(
      `an echo request with the same sequence number ${id.data?.seq ?? '?'} and ${id.data?.payloadLength ?? '?'} data bytes`,
    );
  if (id.shape === 'udp' && keys.includes('payload-hash'))
    parts.push(
      `the same ${id.data?.payloadLength ?? '?'}-byte datagram (same first payload bytes)`,
    );
  if (keys.includes('dns-id')) parts.push(`DNS id ${id.data?.dnsId ?? '?'}`);
  if (keys.includes('dns-question')) parts.push('the same DNS question');
  if (keys.includes('probe-marker')) parts.push(`probe marker ${id.data?.probeMarker ?? '?'}`);
  if (keys.includes('request-line')) parts.push('same request line');
  if (id.shape !== 'udp' && keys.includes('payload-hash')) parts.push('same first payload bytes');
  return parts.join('; ');
}

/** What the request is called in "not seen" sentences. */
function requestName(id: RequestIdentity): string {
  switch (id.shape) {
    case 'tcp-syn':
      return `ISN ${id.isn ?? '?'}` + (id.data === null ? '' : ' or the request bytes');
    case 'tcp-established':
      return "the request's sequence numbers or bytes";
    case 'udp':
      return "the request's datagram";
    case 'icmp-echo':
      return `the echo request (sequence ${id.data?.seq ?? '?'})`;
  }
}

const PAYLOAD_RANK: readonly MatchKey[] = ['probe-marker', 'request-line', 'payload-hash'];

/**
 * Groups of UDP datagrams carrying the probe marker, without the answers to them: a group whose
 * reversed tuple is an earlier group is the reply (a DNS answer repeats the question).
 */
function withoutAnswers(groups: Group[]): Group[] {
  const firstTs = (g: Group): bigint => g.best.view.ev.tsNs;
  return groups.filter((g) => {
    const q = groups.find((o) => o !== g && sameEndpoint(o.tuple, reverseEndpoint(g.tuple)));
    return q === undefined || firstTs(q) > firstTs(g);
  });
}

/** Find the request's connection (or datagram) among one later point's events. */
function matchPoint(
  id: RequestIdentity,
  client: ClientPackets,
  point: PointEvents,
  windowNs: bigint,
): PointMatch {
  const captured = capturedCount(point);
  if (captured === 0) {
    const frames = point.capturedFrames ?? 0;
    return {
      ...emptyPoint(
        point.name,
        0,
        'no-capture',
        frames > 0
          ? `${frames} frame${frames === 1 ? ' was' : 's were'} captured at ${point.name}, none a TCP segment, UDP datagram or ICMP echo that hoptrace could read`
          : `no events at all were captured at ${point.name}`,
      ),
      ...(point.capturedFrames === undefined ? {} : { capturedFrames: point.capturedFrames }),
    };
  }
  const proto = id.proto;
  const views = point.events
    .map(flowView)
    .filter(
      (v): v is FlowView =>
        v !== null && v.proto === proto && absDiff(v.ev.tsNs, id.startTsNs) <= windowNs,
    );
  views.sort(byTime);
  const base = emptyPoint(point.name, captured, 'matched', '');
  const acks = id.shape === 'tcp-established' ? client.acks : undefined;

  // 1. The same connection, recognised by its sequence space (survives any NAT), or the same datagram.
  const scored = views
    .map((v) => scoreRequestPacket(v, id, client))
    .filter((s): s is Scored => s !== null);
  if (scored.length > 0) {
    const tops = topGroups(groupByTuple(scored, (s) => s.view.tuple));
    const copy = tops.length > 1 ? latestCopy(tops) : null;
    const [only] = copy === null ? tops : [copy];
    if ((tops.length > 1 && copy === null) || only === undefined) {
      return ambiguous(
        base,
        tops,
        `${tops.length} ${proto === 'udp' ? 'flows' : 'connections'} at ${point.name} match the request equally`,
      );
    }
    const keys = sortMatchKeys(only.keys);
    const others = tops.filter((g) => g !== only).map((g) => g.tuple);
    return describeConnection(
      {
        ...base,
        matchedBy: keys,
        packet: packetRef(only.best.view),
        candidates: others,
        detail:
          describeKeys(keys, id, point.name) +
          (others.length === 0
            ? ''
            : `; the same packet appears earlier in this capture as ${others.map(tupleText).join(', ')} ` +
              '(seen before and after a translation); the latest copy is used'),
      },
      views,
      only.tuple,
      id.isn,
      acks,
    );
  }

  // 2. Only the reply was captured: a SYN-ACK acknowledging ISN+1 names the connection; without
  // a handshake, a segment acknowledging one of the request's segments does.
  const isn = id.isn;
  const replyOnly: Scored[] =
    isn !== null
      ? views
          .filter((v) => isSynAck(v) && v.ack === plus1(isn))
          .map((v): Scored => ({ view: v, keys: ['syn-ack'], score: 1 }))
      : acks !== undefined
        ? views
            .filter((v) => (v.flags & (ACK | SYN)) === ACK && v.ack !== null && acks.has(v.ack))
            .map((v): Scored => ({ view: v, keys: ['tcp-ack'], score: 1 }))
        : [];
  if (replyOnly.length > 0) {
    const groups = groupByTuple(replyOnly, (s) => reverseEndpoint(s.view.tuple));
    const [only] = groups;
    const what =
      isn !== null
        ? `SYN-ACKs at ${point.name} acknowledge ISN ${isn}`
        : `connections at ${point.name} acknowledge the request's segments`;
    if (groups.length > 1 || only === undefined) {
      return ambiguous(base, groups, `${groups.length} ${what}`);
    }
    return describeConnection(
      {
        ...base,
        matchedBy: isn !== null ? ['syn-ack'] : ['tcp-ack'],
        packet: packetRef(only.best.view),
        detail:
          isn !== null
            ? `only the reply was seen at ${point.name}: SYN-ACK with ack ${plus1(isn)} (ISN ${isn} + 1)`
            : `only the reply was seen at ${point.name}: a segment acknowledging the request's segments (ack ${only.best.view.ack ?? '?'})`,
      },
      views,
      only.tuple,
      isn,
      acks,
    );
  }

  // 3. A different connection (or a re-sent query) carrying the same request bytes: a
  // terminating proxy, or a DNS forwarder. A UDP datagram equal to the request was matched above,
  // so only the probe marker can name a forwarded query.
  const ranks =
    proto === 'udp'
      ? (['dns-question', 'probe-marker'] as const)
      : proto === 'tcp'
        ? PAYLOAD_RANK
        : [];
  for (const key of ranks) {
    const hits = views
      .filter((v) => (v.flags & SYN) === 0 && payloadKeys(v, id.data).includes(key))
      .map((v): Scored => ({ view: v, keys: payloadKeys(v, id.data), score: 1 }));
    if (hits.length === 0) continue;
    const all = groupByTuple(hits, (s) => s.view.tuple);
    const groups = proto === 'udp' ? withoutAnswers(all) : all;
    const [only] = groups;
    if (groups.length > 1 || only === undefined) {
      return ambiguous(
        base,
        groups,
        `${groups.length} different ${proto === 'udp' ? 'flows' : 'connections'} at ${point.name} carry the request (${key}); cannot tell which`,
      );
    }
    const syn = views.find((v) => isSynOnly(v) && sameEndpoint(v.tuple, only.tuple));
    const keys = sortMatchKeys(only.keys);
    const newIsn = syn?.seq ?? null;
    return describeConnection(
      {
        ...base,
        matchedBy: keys,
        proxied: true,
        packet: packetRef(only.best.view),
        detail:
          (proto === 'udp'
            ? `a different datagram ${tupleText(only.tuple)} (not the request's bytes: a forwarder re-sent the query)`
            : `a new connection ${tupleText(only.tuple)}` +
              (newIsn === null
                ? ''
                : ` (ISN ${newIsn}${id.isn === null ? '' : `, not ${id.isn}`})`)) +
          ` at ${point.name} carries the request: ${describeKeys(keys, id, point.name)}`,
      },
      views,
      only.tuple,
      newIsn,
    );
  }

  return {
    ...base,
    status: 'not-seen',
    detail:
      views.length === 0
        ? `${captured} events captured at ${point.name}, none ${proto === 'icmp' || proto === 'icmpv6' ? 'an ICMP echo' : proto.toUpperCase()} within the window`
        : `no packet at ${point.name} matches ${requestName(id)} within the window`,
  };
}

function ambiguous(base: PointMatch, groups: Group[], detail: string): PointMatch {
  return {
    ...base,
    status: 'ambiguous',
    matchedBy: sortMatchKeys(groups.flatMap((g) => [...g.keys])),
    candidates: groups.map((g) => g.tuple),
    detail,
  };
}

/** The first point's sentence: what was selected as the request, and what could not be. */
function selectedDetail(id: RequestIdentity, point: string): string {
  const t = tupleText(id.tuple);
  switch (id.shape) {
    case 'tcp-syn':
      return `first new TCP connection ${t} (ISN ${id.isn ?? '?'}) selected at ${point}`;
    case 'tcp-established':
      return (
        `no new TCP connection fits the selection at ${point}: the first data segment of the already-open ` +
        `connection ${t} (seq ${id.data?.seq ?? '?'}, ${id.data?.payloadLength ?? '?'} bytes, frame ${id.frame}) is the request; ` +
        'the handshake was not captured, so it is followed by sequence numbers, TSval and IPv4 ID'
      );
    case 'udp':
      return (
        `first UDP datagram ${t} (${id.data?.payloadLength ?? '?'} bytes, frame ${id.frame}) selected at ${point}; ` +
        'followed by its payload fingerprint, length and IPv4 ID, its reply by the reversed tuple'
      );
    case 'icmp-echo':
      return (
        `first ${id.proto === 'icmp' ? 'ICMP' : 'ICMPv6'} echo request ${id.tuple.src} -> ${id.tuple.dst} ` +
        `(identifier ${id.tuple.sport}, sequence ${id.data?.seq ?? '?'}, ${id.data?.payloadLength ?? '?'} data bytes, frame ${id.frame}) ` +
        `selected at ${point}; followed by its sequence number and data, its reply by the reversed addresses ` +
        '(the identifier stands for both ports of the tuples shown)'
      );
  }
}

/**
 * A point where the request was not seen within the window, matched again around its SYN when
 * that SYN is further away (far-syn.ts); the point as it was when there is none or it does not
 * match there.
 */
function matchOutsideWindow(
  m: PointMatch,
  id: RequestIdentity,
  client: ClientPackets,
  point: PointEvents,
  windowNs: bigint,
): PointMatch {
  if (m.status !== 'not-seen') return m;
  const at = synOutsideWindow(id, point.events, windowNs);
  if (at === null) return m;
  const there = matchPoint({ ...id, startTsNs: at }, client, point, windowNs);
  // Matched, or ambiguous there (an unknown, not a drop); not-seen around its own SYN cannot be.
  if (there.status !== 'matched' && there.status !== 'ambiguous') return m;
  const shift = at - id.startTsNs;
  return {
    ...there,
    outsideWindowNs: shift,
    detail: `${there.detail}; ${outsideWindowText(shift, windowNs, id.point)}`,
  };
}

/** Follow one identified request across the ordered points. */
export function correlateIdentity(
  id: RequestIdentity,
  points: readonly PointEvents[],
  windowNs: bigint = DEFAULT_WINDOW_NS,
): Journey {
  const [first, ...rest] = points;
  if (first === undefined) return { request: id, reason: 'no points', points: [], windowNs };
  const proto = id.proto;
  const firstViews = first.events
    .map(flowView)
    .filter(
      (v): v is FlowView =>
        v !== null && v.proto === proto && absDiff(v.ev.tsNs, id.startTsNs) <= windowNs,
    );
  firstViews.sort(byTime);
  const client: ClientPackets = { bySeq: new Map(), acks: new Set() };
  for (const v of firstViews) {
    if (v.seq === null || !sameEndpoint(v.tuple, id.tuple)) continue;
    const list = client.bySeq.get(v.seq);
    if (list === undefined) client.bySeq.set(v.seq, [v]);
    else list.push(v);
    const ctl = (v.flags & (SYN | FIN)) !== 0 ? 1 : 0;
    if (v.ev.keys.payloadLength > 0 || ctl > 0)
      client.acks.add((v.seq + v.ev.keys.payloadLength + ctl) >>> 0);
  }
  const selected = firstViews.find(
    (v) => v.ev.frame === id.frame && v.ev.tsNs === id.startTsNs && sameEndpoint(v.tuple, id.tuple),
  );
  const firstMatch = describeConnection(
    {
      ...emptyPoint(first.name, capturedCount(first), 'matched', ''),
      matchedBy: ['selector'],
      packet: selected === undefined ? null : packetRef(selected),
      detail: selectedDetail(id, first.name),
    },
    firstViews,
    id.tuple,
    id.isn,
    id.shape === 'tcp-established' ? client.acks : undefined,
  );
  // ICMP errors quoting the request (or its reply) as seen at a point, or at the last point that
  // saw it when this one did not.
  const echo = proto === 'icmp' || proto === 'icmpv6';
  const inWindow = (ev: PacketEvent): boolean => absDiff(ev.tsNs, id.startTsNs) <= windowNs;
  const withErrors = (m: PointMatch, p: PointEvents, about: Endpoint): PointMatch => {
    const errors = icmpErrorsAbout(p.events.filter(inWindow), about, echo);
    if (errors.length === 0) return m;
    return { ...m, icmpErrors: errors, detail: `${m.detail}; ${icmpErrorsText(errors)}` };
  };
  const out = [withErrors(firstMatch, first, id.tuple)];
  let last = id.tuple;
  for (const p of rest) {
    const found = matchOutsideWindow(matchPoint(id, client, p, windowNs), id, client, p, windowNs);
    const m = p.capturedSpan === undefined ? found : { ...found, capturedSpan: p.capturedSpan };
    out.push(withErrors(m, p, m.observed ?? last));
    if (m.observed !== null) last = m.observed;
  }
  return { request: id, reason: null, points: out, windowNs, outer: findOuter(id, points) };
}

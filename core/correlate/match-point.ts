/**
 * Matching one request at one capture point, with keys that survive NAT.
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
 */

import type { PacketEvent } from '../../common/event';
import {
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
  type PointEvents,
  type PointMatch,
  type PointStatus,
  type RequestIdentity,
  type RequestSelector,
} from './journey';

/** TCP flag bits (RFC 9293 §3.1). */
const FIN = 0x01;
const SYN = 0x02;
const RST = 0x04;
const ACK = 0x10;

/** Default correlation window around the first point's SYN. */
export const DEFAULT_WINDOW_NS = 10_000_000_000n;

export interface TcpView {
  ev: PacketEvent;
  tuple: Endpoint;
  flags: number;
  seq: number | null;
  ack: number | null;
}

export function tcpView(ev: PacketEvent): TcpView | null {
  const t = ev.inner;
  if (t === null || t.proto !== 'tcp' || t.sport === undefined || t.dport === undefined)
    return null;
  return {
    ev,
    tuple: { src: t.src, sport: t.sport, dst: t.dst, dport: t.dport },
    flags: ev.keys.tcpFlags ?? 0,
    seq: ev.keys.tcpSeq ?? null,
    ack: ev.keys.tcpAck ?? null,
  };
}

export const isSynOnly = (v: TcpView): boolean => (v.flags & SYN) !== 0 && (v.flags & ACK) === 0;
const isSynAck = (v: TcpView): boolean => (v.flags & SYN) !== 0 && (v.flags & ACK) !== 0;

/** Sequence arithmetic is modulo 2^32 (RFC 9293 §3.4). */
const plus1 = (n: number): number => (n + 1) >>> 0;

const absDiff = (a: bigint, b: bigint): bigint => (a > b ? a - b : b - a);

export function byTime(a: TcpView, b: TcpView): number {
  if (a.ev.tsNs !== b.ev.tsNs) return a.ev.tsNs < b.ev.tsNs ? -1 : 1;
  return a.ev.frame - b.ev.frame;
}

export function matchesSelector(t: Endpoint, sel: RequestSelector): boolean {
  if (sel.client !== undefined && t.src !== sel.client) return false;
  if (sel.dst !== undefined && t.dst !== sel.dst) return false;
  if (sel.dport !== undefined && t.dport !== sel.dport) return false;
  return true;
}

/**
 * Every new TCP connection (SYN without ACK) at the first point that fits the selector, oldest
 * first; a retransmitted SYN (same tuple and ISN) is the same request.
 */
export function findRequests(
  point: PointEvents,
  selector: RequestSelector,
  windowNs: bigint = DEFAULT_WINDOW_NS,
): RequestIdentity[] {
  const views = point.events.map(tcpView).filter((v): v is TcpView => v !== null);
  views.sort(byTime);
  const seen = new Set<string>();
  const out: RequestIdentity[] = [];
  for (const v of views) {
    if (!isSynOnly(v) || v.seq === null || !matchesSelector(v.tuple, selector)) continue;
    const id = `${endpointKey(v.tuple)}#${v.seq}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const dataSeq = plus1(v.seq);
    // The first data segment of this connection: same tuple, seq right after the ISN.
    const data = views.find(
      (d) =>
        d.ev.keys.payloadLength > 0 &&
        sameEndpoint(d.tuple, v.tuple) &&
        d.seq === dataSeq &&
        d.ev.tsNs >= v.ev.tsNs &&
        d.ev.tsNs - v.ev.tsNs <= windowNs,
    );
    out.push({
      point: point.name,
      tuple: v.tuple,
      isn: v.seq,
      tsVal: v.ev.keys.tsVal ?? null,
      ipId: v.ev.keys.ipId ?? null,
      synTsNs: v.ev.tsNs,
      frame: v.ev.frame,
      data:
        data === undefined
          ? null
          : {
              seq: dataSeq,
              payloadLength: data.ev.keys.payloadLength,
              probeMarker: data.ev.keys.probeMarker ?? null,
              payloadHash: data.ev.keys.payloadHash ?? null,
              requestLineHash: data.ev.keys.requestLineHash ?? null,
              frame: data.ev.frame,
            },
    });
  }
  return out;
}

interface Scored {
  view: TcpView;
  keys: MatchKey[];
  score: number;
}

/** Request-direction packets of the connection at the first point, by sequence number. */
type ClientPackets = Map<number, TcpView[]>;

function payloadKeys(v: TcpView, data: DataIdentity | null): MatchKey[] {
  if (data === null || v.ev.keys.payloadLength === 0) return [];
  const k = v.ev.keys;
  const out: MatchKey[] = [];
  if (data.probeMarker !== null && k.probeMarker === data.probeMarker) out.push('probe-marker');
  if (data.requestLineHash !== null && k.requestLineHash === data.requestLineHash)
    out.push('request-line');
  if (data.payloadHash !== null && k.payloadHash === data.payloadHash) out.push('payload-hash');
  return out;
}

/** Keys proving that request-direction packet `v` belongs to the request connection. */
function scoreRequestPacket(v: TcpView, id: RequestIdentity, client: ClientPackets): Scored | null {
  if (v.seq === null) return null;
  const peers = client.get(v.seq);
  if (isSynOnly(v)) {
    if (v.seq !== id.isn) return null;
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
  const sig = (v: TcpView): string | null => {
    const k = v.ev.keys;
    if (k.tsVal === undefined && k.ipId === undefined) return null;
    return `${v.seq ?? 'x'}/${v.flags}/${k.payloadLength}/${k.tsVal ?? 'x'}/${k.ipId ?? 'x'}`;
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

function packetRef(v: TcpView): PacketRef {
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
    candidates: [],
    detail,
  };
}

/** Fill counts, reply and timestamps for connection `tuple` at one point. */
function describeConnection(
  base: PointMatch,
  views: TcpView[],
  tuple: Endpoint,
  isn: number | null,
): PointMatch {
  const back = reverseEndpoint(tuple);
  const req = views.filter((v) => sameEndpoint(v.tuple, tuple));
  const rep = views.filter((v) => sameEndpoint(v.tuple, back));
  const replyKeys = new Set<MatchKey>();
  if (rep.length > 0) replyKeys.add('reverse-tuple');
  if (isn !== null && rep.some((v) => isSynAck(v) && v.ack === plus1(isn)))
    replyKeys.add('syn-ack');
  // A retransmission carries a sequence number already sent with the same control bits and
  // length; pure ACKs repeat their seq legitimately and are not counted.
  const sent = new Set<string>();
  let retransmits = 0;
  for (const [dir, list] of [
    ['>', req],
    ['<', rep],
  ] as const) {
    for (const v of list) {
      const len = v.ev.keys.payloadLength;
      if (len === 0 && (v.flags & (SYN | FIN | RST)) === 0) continue;
      const k = `${dir}${v.seq ?? 'x'}:${v.flags & (SYN | FIN | RST)}:${len}`;
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
  };
}

function describeKeys(keys: MatchKey[], id: RequestIdentity, point: string): string {
  const parts: string[] = [];
  if (keys.includes('tcp-isn')) parts.push(`SYN seq ${id.isn} seen at ${id.point} and at ${point}`);
  else if (keys.includes('tcp-seq'))
    parts.push(`a segment with the request's seq (ISN ${id.isn}) seen at ${point}`);
  if (keys.includes('tsval')) parts.push('same TCP TSval');
  if (keys.includes('ip-id')) parts.push('same IPv4 ID');
  if (keys.includes('probe-marker')) parts.push(`probe marker ${id.data?.probeMarker ?? '?'}`);
  if (keys.includes('request-line')) parts.push('same request line');
  if (keys.includes('payload-hash')) parts.push('same first payload bytes');
  return parts.join('; ');
}

const PAYLOAD_RANK: readonly MatchKey[] = ['probe-marker', 'request-line', 'payload-hash'];

/** Find the request's connection among one later point's events. */
function matchPoint(
  id: RequestIdentity,
  client: ClientPackets,
  point: PointEvents,
  windowNs: bigint,
): PointMatch {
  const captured = capturedCount(point);
  if (captured === 0) {
    return emptyPoint(
      point.name,
      0,
      'no-capture',
      `no events at all were captured at ${point.name}`,
    );
  }
  const views = point.events
    .map(tcpView)
    .filter((v): v is TcpView => v !== null && absDiff(v.ev.tsNs, id.synTsNs) <= windowNs);
  views.sort(byTime);
  const base = emptyPoint(point.name, captured, 'matched', '');

  // 1. The same connection, recognised by its sequence space (survives any NAT).
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
        `${tops.length} connections at ${point.name} match the request equally`,
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
            : `; the same packet appears earlier in this capture as ${others.map(endpointKey).join(', ')} ` +
              '(seen before and after a translation); the latest copy is used'),
      },
      views,
      only.tuple,
      id.isn,
    );
  }

  // 2. Only the reply was captured: a SYN-ACK acknowledging ISN+1 names the connection.
  const synAcks = views
    .filter((v) => isSynAck(v) && v.ack === plus1(id.isn))
    .map((v): Scored => ({ view: v, keys: ['syn-ack'], score: 1 }));
  if (synAcks.length > 0) {
    const groups = groupByTuple(synAcks, (s) => reverseEndpoint(s.view.tuple));
    const [only] = groups;
    if (groups.length > 1 || only === undefined) {
      return ambiguous(
        base,
        groups,
        `${groups.length} SYN-ACKs at ${point.name} acknowledge ISN ${id.isn}`,
      );
    }
    const m = describeConnection(
      {
        ...base,
        matchedBy: ['syn-ack'],
        packet: packetRef(only.best.view),
        detail: `only the reply was seen at ${point.name}: SYN-ACK with ack ${plus1(id.isn)} (ISN ${id.isn} + 1)`,
      },
      views,
      only.tuple,
      id.isn,
    );
    return m;
  }

  // 3. A different connection carrying the same request bytes: a terminating proxy.
  for (const key of PAYLOAD_RANK) {
    const hits = views
      .filter((v) => (v.flags & SYN) === 0 && payloadKeys(v, id.data).includes(key))
      .map((v): Scored => ({ view: v, keys: payloadKeys(v, id.data), score: 1 }));
    if (hits.length === 0) continue;
    const groups = groupByTuple(hits, (s) => s.view.tuple);
    const [only] = groups;
    if (groups.length > 1 || only === undefined) {
      return ambiguous(
        base,
        groups,
        `${groups.length} different connections at ${point.name} carry the request (${key}); cannot tell which`,
      );
    }
    const syn = views.find((v) => isSynOnly(v) && sameEndpoint(v.tuple, only.tuple));
    const keys = sortMatchKeys(only.keys);
    const isn = syn?.seq ?? null;
    return describeConnection(
      {
        ...base,
        matchedBy: keys,
        proxied: true,
        packet: packetRef(only.best.view),
        detail:
          `a new connection ${endpointKey(only.tuple)}` +
          (isn === null ? '' : ` (ISN ${isn}, not ${id.isn})`) +
          ` at ${point.name} carries the request: ${describeKeys(keys, id, point.name)}`,
      },
      views,
      only.tuple,
      isn,
    );
  }

  return {
    ...base,
    status: 'not-seen',
    detail:
      views.length === 0
        ? `${captured} events captured at ${point.name}, none TCP within the window`
        : `no packet at ${point.name} matches ISN ${id.isn}` +
          (id.data === null ? '' : ' or the request bytes') +
          ' within the window',
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

/** Follow one identified request across the ordered points. */
export function correlateIdentity(
  id: RequestIdentity,
  points: readonly PointEvents[],
  windowNs: bigint = DEFAULT_WINDOW_NS,
): Journey {
  const [first, ...rest] = points;
  if (first === undefined) return { request: id, reason: 'no points', points: [], windowNs };
  const firstViews = first.events
    .map(tcpView)
    .filter((v): v is TcpView => v !== null && absDiff(v.ev.tsNs, id.synTsNs) <= windowNs);
  firstViews.sort(byTime);
  const client: ClientPackets = new Map();
  for (const v of firstViews) {
    if (v.seq === null || !sameEndpoint(v.tuple, id.tuple)) continue;
    const list = client.get(v.seq);
    if (list === undefined) client.set(v.seq, [v]);
    else list.push(v);
  }
  const synView = firstViews.find(
    (v) => isSynOnly(v) && v.seq === id.isn && sameEndpoint(v.tuple, id.tuple),
  );
  const firstMatch = describeConnection(
    {
      ...emptyPoint(first.name, capturedCount(first), 'matched', ''),
      matchedBy: ['selector'],
      packet: synView === undefined ? null : packetRef(synView),
      detail: `first new TCP connection ${endpointKey(id.tuple)} (ISN ${id.isn}) selected at ${first.name}`,
    },
    firstViews,
    id.tuple,
    id.isn,
  );
  return {
    request: id,
    reason: null,
    points: [firstMatch, ...rest.map((p) => matchPoint(id, client, p, windowNs))],
    windowNs,
  };
}

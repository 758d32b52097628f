/**
 * Attribution: from a correlated journey and the inventory to the layer that replaced the client's
 * source address. A total function: it never throws and says "unknown, because …" rather than guess.
 *
 * Order of evaluation (first rule that applies wins):
 *   1. no request, fewer than two points, a point with no capture at all, an ambiguous match → unknown
 *      (exception: an empty capture at the backend alone, after every earlier point saw the request,
 *      is what a drop looks like and goes to rule 3, with a caveat in the reason)
 *   2. a point up to the backend saw a new connection with the request's bytes          → proxy
 *   3. the backend never saw the request                                                 → dropped
 *   4. the backend sees the client address                    → preserved, or no-return if the reply
 *                                                               never came back to the VPN egress
 *   5. the source changed: the first hop where it changed decides. Up to the VPN egress → vpn-pod;
 *      after it, the new address decides: the VPN node's → cni-masquerade, the backend node's →
 *      kube-proxy, anything else → unknown naming the hop and the address.
 * Combined findings: when the source was rewritten AND the reply never returned, the rewrite is the
 * primary finding (the backend never saw the client address, so a return route for the tunnel range
 * is not what failed) and `secondary` carries the missing reply. `no-return` is primary only when
 * the address was preserved — the classic missing return route / strict rp_filter case.
 */

import { replyPath, type ReplyPoint } from './reply-path';
import type { Inventory } from '../../common/inventory';
import type { ConntrackEntry } from '../../common/wire';
import type { Endpoint, Journey, MatchKey, PointMatch, RequestShape } from '../correlate/correlate';
import { hintFor } from './hints';
import type { Layer } from './layer';
import { hostPort, tupleText } from '../../common/endpoint';
import { icmpErrorsText } from '../correlate/icmp-errors';
import { outerFinding, type OuterFinding } from './outer-finding';
import { notCoveredText } from './coverage';
import { DEFAULT_WINDOW_NS } from '../correlate/match-point';

export type { Layer };

/** Why a point's packet is the request: the keys that matched and a sentence. */
export interface Evidence {
  point: string;
  matchedBy: MatchKey[];
  detail: string;
}

/** A further finding next to the primary one (e.g. a rewrite and a missing reply). */
export interface SecondaryFinding {
  layer: Layer;
  detail: string;
  hint: string;
}

/**
 * What the flow's conntrack entries say of the packet verdict (conntrack-evidence.ts): `incomplete`
 * when the collector left entries out and the ones kept do not decide it on their own.
 */
export type ConntrackStatus = 'confirms' | 'disagrees' | 'no-entries' | 'consistent' | 'incomplete';

/** The verdict `hoptrace analyze --json` prints under `verdict`. */
export interface Verdict {
  layer: Layer;
  rewrittenBetween: [string, string] | null;
  client: Endpoint | null;
  observed: Record<string, Endpoint | null>;
  evidence: Evidence[];
  hint: string;
  /** What was followed: a new TCP connection, one already open (no handshake captured), UDP. */
  shape?: RequestShape;
  /** The tunnel's outer flow as the VPN pod saw it, when a point captured it (outer-finding.ts). */
  outer?: OuterFinding;
  reason?: string;
  hop?: { from: string; to: string };
  before?: Endpoint;
  after?: Endpoint;
  node?: string;
  secondary?: SecondaryFinding[];
  /** Independent evidence that names the same layer (conntrack entries, core/attribute/conntrack-evidence.ts). */
  confirmedBy?: string[];
  /** The flow's conntrack entries and whether they confirm or disagree with the packet verdict. */
  conntrack?: {
    status: ConntrackStatus;
    detail: string;
    entries: ConntrackEntry[];
  };
}

export interface AttributeOptions {
  /** The client's tunnel address, when the first point is not right after decapsulation. */
  clientIp?: string | undefined;
  /** Name of the VPN pod's egress point (default 'egress', else the second of three or more). */
  egressPoint?: string | undefined;
  /** Name of the backend point (default 'backend', else the last). */
  backendPoint?: string | undefined;
}

interface Pod {
  name: string;
  ip: string;
  node: string;
  /** A PodRole, or whatever string a hand-written inventory holds. */
  role: string;
}

interface Inv {
  nodes: [string, string[]][];
  pods: Pod[];
}

const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;

/** Read whatever inventory we were given, skipping malformed entries instead of failing. */
function normalizeInventory(inv: unknown): Inv {
  const out: Inv = { nodes: [], pods: [] };
  if (!isRecord(inv)) return out;
  if (isRecord(inv['nodes'])) {
    for (const [name, addrs] of Object.entries(inv['nodes'])) {
      if (Array.isArray(addrs))
        out.nodes.push([name, addrs.filter((a): a is string => typeof a === 'string')]);
    }
  }
  if (isRecord(inv['pods'])) {
    for (const [name, p] of Object.entries(inv['pods'])) {
      if (isRecord(p) && typeof p['ip'] === 'string' && typeof p['node'] === 'string') {
        out.pods.push({
          name,
          ip: p['ip'],
          node: p['node'],
          role: typeof p['role'] === 'string' ? p['role'] : 'other',
        });
      }
    }
  }
  return out;
}

const nodesOf = (inv: Inv, addr: string): string[] =>
  inv.nodes.filter(([, addrs]) => addrs.includes(addr)).map(([n]) => n);

/** Points of the VPN pod itself: a path that ends at one of them has no backend point. */
const VPN_POINTS = new Set(['decap', 'egress']);

const fmt = (e: Endpoint): string => tupleText(e);
const uniq = (xs: string[]): string[] => [...new Set(xs)];

/** The ICMP errors quoting the request or its reply, per point, as one clause ('' when none). */
function icmpNote(pts: PointMatch[]): string {
  const parts = pts
    .filter((p) => Array.isArray(p.icmpErrors) && p.icmpErrors.length > 0)
    .map((p) => `at ${p.point}: ${icmpErrorsText(p.icmpErrors)}`);
  return parts.length === 0 ? '' : `; ICMP errors quote it ${parts.join('; ')}`;
}

/**
 * What a point holds that captured frames but none the analysis reads (PointMatch.capturedFrames):
 * said as such, never as a capture that saw nothing.
 */
function unreadFramesText(p: PointMatch): string {
  const n = p.capturedFrames ?? 0;
  return (
    `the ${p.point} capture holds ${n} frame${n === 1 ? '' : 's'}, none a TCP segment, UDP ` +
    'datagram or ICMP echo that hoptrace could read (other protocols, or a link type it does not ' +
    'decode: `hoptrace decode` shows each frame)'
  );
}

/** Decide the layer for one journey. Never throws. */
export function attributeSourceRewrite(
  journey: Journey,
  inventory: Inventory,
  opts: AttributeOptions = {},
): Verdict {
  try {
    return attribute(journey, normalizeInventory(inventory), opts);
  } catch (e: unknown) {
    // Last line of defence for malformed input: the promise is a verdict, not an exception.
    return {
      layer: 'unknown',
      rewrittenBetween: null,
      client: null,
      observed: {},
      evidence: [],
      hint: hintFor('unknown'),
      reason: `the journey could not be read (${e instanceof Error ? e.message : String(e)})`,
    };
  }
}

const SHAPES: readonly string[] = [
  'tcp-syn',
  'tcp-established',
  'udp',
  'icmp-echo',
] satisfies RequestShape[];
const isShape = (x: unknown): x is RequestShape => typeof x === 'string' && SHAPES.includes(x);

function isPointMatch(x: unknown): x is PointMatch {
  return isRecord(x) && typeof x['point'] === 'string' && typeof x['status'] === 'string';
}

function attribute(journey: Journey, inv: Inv, opts: AttributeOptions): Verdict {
  const v = attributeLayer(journey, inv, opts);
  const sighting = isRecord(journey) && isRecord(journey.outer) ? journey.outer : null;
  return sighting === null ? v : { ...v, outer: outerFinding(sighting, inv) };
}

function attributeLayer(journey: Journey, inv: Inv, opts: AttributeOptions): Verdict {
  const rawPoints: unknown = isRecord(journey) ? journey.points : undefined;
  const pts = (Array.isArray(rawPoints) ? (rawPoints as unknown[]) : []).filter(isPointMatch);
  const request = isRecord(journey) && isRecord(journey.request) ? journey.request : null;
  const client = request?.tuple ?? null;
  const seen = (p: PointMatch): boolean => p.status === 'matched' && p.observed !== null;
  const observed: Record<string, Endpoint | null> = {};
  for (const p of pts) observed[p.point] = seen(p) ? p.observed : null;
  const evidence: Evidence[] = pts.map((p) => ({
    point: p.point,
    matchedBy: Array.isArray(p.matchedBy) ? p.matchedBy : [],
    detail: typeof p.detail === 'string' ? p.detail : '',
  }));
  const clientAddr = opts.clientIp ?? client?.src;
  const shape = request !== null && isShape(request.shape) ? request.shape : undefined;
  const verdict = (
    layer: Layer,
    extra: Partial<Verdict> & { reason: string },
    ctx = {},
  ): Verdict => ({
    layer,
    rewrittenBetween: null,
    client,
    observed,
    evidence,
    hint: hintFor(layer, { clientSrc: clientAddr, ...ctx }),
    ...(shape === undefined ? {} : { shape }),
    ...extra,
  });

  // 1. Things that make any answer a guess.
  if (request === null || client === null) {
    const why =
      isRecord(journey) && typeof journey.reason === 'string'
        ? journey.reason
        : 'no request was selected';
    return verdict('unknown', { reason: why });
  }
  if (pts.length < 2) {
    return verdict('unknown', { reason: `need at least two capture points, got ${pts.length}` });
  }
  const names = pts.map((p) => p.point);
  const namedBackend = names.indexOf(opts.backendPoint ?? 'backend');
  const bi = namedBackend >= 0 ? namedBackend : pts.length - 1;
  const namedEgress = names.indexOf(opts.egressPoint ?? 'egress');
  // Never more than was captured: when no point is the backend (none named so, and the last one
  // is a VPN pod's own point), the verdict speaks of the hops between the points there are.
  const vpnOnly = namedBackend < 0 && VPN_POINTS.has(names[bi] ?? '');
  let ei = namedEgress >= 0 ? namedEgress : pts.length >= 3 ? 1 : -1;
  if ((ei >= bi && !(vpnOnly && ei === bi)) || ei === 0) ei = -1;
  const backend = pts[bi];
  const first = pts[0];
  if (backend === undefined || first === undefined || bi === 0) {
    return verdict('unknown', {
      reason: 'the backend point is the first point; nothing to compare',
    });
  }
  // An empty capture at the backend, with every earlier point holding the request, is what a drop
  // looks like (a valid capture that received nothing of the request's: it may hold other
  // protocols' frames, ARP or neighbour discovery); anywhere else an empty point is a gap.
  const missing = pts.filter((p) => p.status === 'no-capture');
  const emptyBackendOnly =
    missing.length === 1 && missing[0] === backend && pts.slice(0, bi).every(seen);
  if (missing.length > 0 && !emptyBackendOnly) {
    const empty = missing.filter((p) => (p.capturedFrames ?? 0) === 0).map((p) => p.point);
    const unread = missing.filter((p) => (p.capturedFrames ?? 0) > 0).map(unreadFramesText);
    return verdict('unknown', {
      reason: [
        ...(empty.length > 0
          ? [
              `no events at all were captured at ${empty.join(', ')}: the capture there did not run or saw nothing`,
            ]
          : []),
        ...unread,
      ]
        .join('; ')
        .concat(', so the path cannot be followed through it'),
    });
  }
  const amb = pts.find((p) => p.status === 'ambiguous');
  if (amb !== undefined) {
    return verdict('unknown', {
      reason:
        `ambiguous match at ${amb.point}: ${amb.detail}` +
        (amb.candidates.length > 0
          ? ` (candidates: ${amb.candidates.map(tupleText).join(', ')})`
          : '') +
        '; narrow the request with --dst or capture a single probe request',
    });
  }

  const path = pts.slice(0, bi + 1);

  // 2. A terminating proxy: the backend's connection is a different one with the same request.
  const pi = path.findIndex((p) => seen(p) && p.proxied);
  const proxied = path[pi];
  if (proxied?.observed != null) {
    const prev = [...path.slice(0, pi)].reverse().find(seen);
    const after = proxied.observed;
    const pod = inv.pods.find((p) => p.ip === after.src);
    const node = pod?.node ?? nodesOf(inv, after.src)[0];
    const who =
      pod !== undefined
        ? `proxy pod ${pod.name} (${pod.ip}, role ${pod.role}, node ${pod.node})`
        : node !== undefined
          ? `${after.src}, an address of node ${node} (a host-network proxy?)`
          : `${after.src}, an address the inventory does not know`;
    return verdict(
      'proxy',
      {
        rewrittenBetween: [prev?.point ?? first.point, proxied.point],
        hop: { from: prev?.point ?? first.point, to: proxied.point },
        ...(prev?.observed != null ? { before: prev.observed } : {}),
        after,
        ...(node !== undefined ? { node } : {}),
        reason:
          shape === 'udp'
            ? `${proxied.point} sees a new query ${fmt(after)} carrying the same question ` +
              `(${proxied.matchedBy.join(', ')}) but not the request's bytes, sent by ${who}`
            : `${proxied.point} sees a new TCP connection ${fmt(after)}` +
              (proxied.isn !== null
                ? ` (ISN ${proxied.isn}${request.isn === null ? '' : `, not ${request.isn}`})`
                : '') +
              ` carrying the same request (${proxied.matchedBy.join(', ')}), opened by ${who}`,
      },
      { pod: pod?.name },
    );
  }

  if (vpnOnly) {
    const notCaptured = `the backend was not captured, so nothing is known of the path after ${backend.point} (capture it too: --point backend=…)`;
    if (!seen(backend)) {
      const seenAt = path.filter(seen).map((p) => p.point);
      return verdict('unknown', {
        reason: `the request was seen at ${seenAt.join(', ') || 'no point'} but not at ${backend.point}; ${notCaptured}`,
      });
    }
    if (backend.observed?.src === (clientAddr ?? client.src)) {
      return verdict('unknown', {
        reason: `the source is unchanged from ${first.point} to ${backend.point} (${backend.observed.src}); ${notCaptured}`,
      });
    }
    // The source changed between captured points: that hop is named below, as with a backend.
  }

  // 3. Never reached the backend.
  if (!seen(backend)) {
    const last = [...path.slice(0, bi)].reverse().find((p) => seen(p) && p.seenRequest);
    const lastIdx = last === undefined ? -1 : names.indexOf(last.point);
    const next = pts[lastIdx + 1] ?? backend;
    const from = last?.point ?? first.point;
    // Not seen is a drop only where the capture ran then: a file whose frames lie at another time
    // shows nothing about the request (core/attribute/coverage.ts; a file of no frame still reads
    // as a drop, with the caution below).
    // (A journey read back from JSON may carry its times as strings: then no span is checked.)
    const uncovered =
      typeof request.startTsNs === 'bigint'
        ? notCoveredText(
            next,
            request.startTsNs,
            first.point,
            typeof journey.windowNs === 'bigint' ? journey.windowNs : DEFAULT_WINDOW_NS,
          )
        : null;
    if (uncovered !== null) {
      return verdict('unknown', {
        reason:
          `the request was seen at ${from} but not at ${next.point}, and ${uncovered}; ` +
          `give the ${next.point} capture made while the request was sent` +
          icmpNote(pts),
      });
    }
    const secondary = rewriteFinding(
      path.slice(0, bi).filter(seen),
      clientAddr ?? client.src,
      ei,
      names,
      inv,
      backend,
    );
    return verdict(
      'dropped',
      {
        hop: { from, to: next.point },
        ...(last?.observed != null ? { before: last.observed } : {}),
        reason:
          `the request was seen at ${
            path
              .filter(seen)
              .map((p) => p.point)
              .join(', ') || 'no point'
          } ` +
          `but never at ${backend.point} (last seen at ${from}, missing from ${next.point} on)` +
          (backend.status === 'no-capture'
            ? (backend.capturedFrames ?? 0) > 0
              ? `; ${unreadFramesText(backend)}, so confirm it captured what it should before trusting this`
              : `; the ${backend.point} capture holds no packets at all, so confirm it ran before trusting this`
            : '') +
          icmpNote(pts),
        ...(secondary !== null ? { secondary: [secondary.asSecondary] } : {}),
      },
      { from, to: next.point },
    );
  }

  // 4./5. Reached the backend: where (if anywhere) did the source change?
  const seenPath = path.filter(seen);
  const secondary: SecondaryFinding[] = [];
  const unseen = path.filter((p) => !seen(p)).map((p) => p.point);
  if (unseen.length > 0) {
    secondary.push({
      layer: 'unknown',
      detail: `not seen at ${unseen.join(', ')} although the backend saw it: a capture filter, a different path, or a late capture there`,
      hint: 'check the capture at those points',
    });
  }
  const back = returnFindings(path, backend);
  const returnFinding = back.missing;
  if (back.gaps !== null) secondary.push(back.gaps);
  const backendSrc = backend.observed?.src;
  const ctxBackendNode = backendNodes(inv, backend)[0];

  if (backendSrc === (clientAddr ?? client.src)) {
    if (returnFinding !== null) {
      return verdict(
        'no-return',
        {
          reason: `the backend saw the client address ${backendSrc}, but ${returnFinding}${icmpNote(pts)}`,
          // A reply that came back past the backend's node was not lost there.
          ...(ctxBackendNode !== undefined && back.stop === undefined
            ? { node: ctxBackendNode }
            : {}),
          ...(secondary.length > 0 ? { secondary } : {}),
        },
        { backendNode: ctxBackendNode, replyStop: back.stop },
      );
    }
    const portNote =
      backend.observed !== null && backend.observed.sport !== client.sport
        ? ` (the source port changed ${client.sport} -> ${backend.observed.sport}; the address did not)`
        : '';
    return verdict('preserved', {
      reason: `${backend.point} sees the client address ${backendSrc}${portNote}, ${back.came}`,
      ...(secondary.length > 0 ? { secondary } : {}),
    });
  }

  const rw = rewriteFinding(seenPath, clientAddr ?? client.src, ei, names, inv, backend);
  if (rw === null) {
    return verdict('unknown', {
      reason: `${backend.point} sees ${backendSrc ?? 'no source'}, not the client address ${clientAddr ?? client.src}, but no hop with the change was found`,
    });
  }
  if (returnFinding !== null) {
    secondary.push({
      layer: 'no-return',
      detail: returnFinding,
      hint: 'the reply is addressed to the rewritten source, so check the path back from the backend to it',
    });
  }
  secondary.push(...rw.extra);
  return {
    layer: rw.layer,
    rewrittenBetween: [rw.from.point, rw.to.point],
    client,
    observed,
    evidence,
    hint:
      rw.layer === 'unknown'
        ? hintFor('unknown', { noInventory: inv.nodes.length === 0 && inv.pods.length === 0 })
        : hintFor(rw.layer, { clientSrc: clientAddr, node: rw.node, backendNode: ctxBackendNode }),
    ...(shape === undefined ? {} : { shape }),
    reason: vpnOnly ? `${rw.reason}; the backend was not captured` : rw.reason,
    hop: { from: rw.from.point, to: rw.to.point },
    ...(rw.from.observed !== null ? { before: rw.from.observed } : {}),
    ...(rw.to.observed !== null ? { after: rw.to.observed } : {}),
    ...(rw.node !== undefined ? { node: rw.node } : {}),
    ...(secondary.length > 0 ? { secondary } : {}),
  };
}

/** Nodes that host the backend: the pod owning the backend-observed destination, else role 'backend'. */
function backendNodes(inv: Inv, backend: PointMatch): string[] {
  const dst = backend.observed?.dst;
  const byIp = inv.pods.filter((p) => p.ip === dst).map((p) => p.node);
  if (byIp.length > 0) return uniq(byIp);
  return uniq(inv.pods.filter((p) => p.role === 'backend').map((p) => p.node));
}

/** Nodes that host the VPN pod: the pod owning the egress source, and every role 'vpn' pod. */
function vpnNodes(inv: Inv, egress: PointMatch | undefined): string[] {
  const src = egress?.observed?.src;
  return uniq([
    ...inv.pods.filter((p) => p.ip === src).map((p) => p.node),
    ...inv.pods.filter((p) => p.role === 'vpn').map((p) => p.node),
  ]);
}

/** A journey point as reply-path.ts reads it. */
function replyPoint(p: PointMatch): ReplyPoint {
  return {
    name: p.point,
    seen: p.status === 'matched' && p.observed !== null,
    seenReply: p.seenReply,
    seenSyn: p.seenSyn,
    flow: p.flow,
  };
}

/**
 * What the captures say of the reply over `path` (the points up to the backend): `missing` why it
 * did not come back to the client's side (null when it did); `came` how it is known that it did,
 * for the verdict's reason; `gaps` a note for points that saw the request but captured no reply
 * although it came back.
 */
function returnFindings(
  path: PointMatch[],
  backend: PointMatch,
): {
  missing: string | null;
  came: string;
  gaps: SecondaryFinding | null;
  /** The reply came back past the backend's node to `from`, and not on to `to`. */
  stop?: { from: string; to: string };
} {
  const rp = replyPath(path.map(replyPoint));
  if (rp === null) return { missing: null, came: '', gaps: null };
  if (rp.kind === 'missing') {
    if (rp.lastSeenAt !== null) {
      return {
        ...(rp.lastSeenAt === backend.point
          ? {}
          : { stop: { from: rp.lastSeenAt, to: rp.missingAt } }),
        missing:
          `the reply was seen at ${rp.lastSeenAt}` +
          (backend.seenReply && rp.lastSeenAt !== backend.point ? ` and ${backend.point}` : '') +
          ` and never came back to ${rp.missingAt}`,
        came: '',
        gaps: null,
      };
    }
    return {
      missing:
        `no reply was seen at any point, ${rp.missingAt} included, and the client never acknowledged ` +
        `one: the backend did not answer, or its answer died before the ${backend.point} capture`,
      came: '',
      gaps: null,
    };
  }
  const gaps =
    rp.notCapturedAt.length === 0
      ? null
      : {
          layer: 'unknown' as const,
          detail:
            `no reply was captured at ${rp.notCapturedAt.join(', ')}, although ` +
            (rp.kind === 'seen'
              ? `${rp.at} saw it come back`
              : `the client acknowledged one (its ACK at ${rp.ack.point}, frame ${rp.ack.frame})`) +
            ': those captures may hold the request direction only (a capture filter), or dropped it',
          hint: 'capture both directions there to see the reply on its way back',
        };
  const came =
    rp.kind === 'seen'
      ? 'and the reply came back'
      : `and the client acknowledged an answer (its ACK at ${rp.ack.point}, frame ${rp.ack.frame}), ` +
        'though no point captured the reply itself';
  return { missing: null, came, gaps };
}

interface Rewrite {
  layer: Layer;
  from: PointMatch;
  to: PointMatch;
  node: string | undefined;
  reason: string;
  extra: SecondaryFinding[];
  asSecondary: SecondaryFinding;
}

/** Locate and classify the first hop where the source stopped being the client address. */
function rewriteFinding(
  seenPath: PointMatch[],
  clientAddr: string,
  ei: number,
  names: string[],
  inv: Inv,
  backend: PointMatch,
): Rewrite | null {
  const k = seenPath.findIndex((p) => p.observed !== null && p.observed.src !== clientAddr);
  const from = seenPath[k - 1];
  const to = seenPath[k];
  if (k < 1 || from?.observed == null || to?.observed == null) return null;
  const S = to.observed.src;
  const toIdx = names.indexOf(to.point);
  const hop = `between ${from.point} and ${to.point} from ${from.observed.src} to ${S}`;
  const extra: SecondaryFinding[] = [];
  const later = seenPath.slice(k + 1).find((p) => p.observed !== null && p.observed.src !== S);
  if (later?.observed != null) {
    extra.push({
      layer: 'unknown',
      detail: `rewritten again before ${later.point}: ${S} -> ${later.observed.src}`,
      hint: 'a second translation follows the first; fix the first, then analyze again',
    });
  }
  const egress = ei >= 0 ? seenPath.find((p) => p.point === names[ei]) : undefined;
  const vpn = vpnNodes(inv, egress ?? seenPath[0]);
  const backs = backendNodes(inv, backend);
  const pod = inv.pods.find((p) => p.ip === S);
  const result = (layer: Layer, reason: string, node?: string): Rewrite => ({
    layer,
    from,
    to,
    node,
    reason,
    extra,
    asSecondary: {
      layer,
      detail: reason,
      hint:
        layer === 'unknown' ? hintFor('unknown') : hintFor(layer, { clientSrc: clientAddr, node }),
    },
  });

  // Up to and including the VPN egress capture, only the VPN pod itself can have translated.
  if ((ei >= 0 && toIdx <= ei) || (ei < 0 && pod?.role === 'vpn')) {
    const vpnPod =
      inv.pods.find((p) => p.role === 'vpn' && p.ip === S) ??
      inv.pods.find((p) => p.role === 'vpn');
    return result(
      'vpn-pod',
      `source rewritten ${hop} inside the VPN pod${vpnPod !== undefined ? ` (${vpnPod.name})` : ''}` +
        (pod === undefined ? '' : `; ${S} is pod ${pod.name}`),
      vpnPod?.node,
    );
  }
  const owners = nodesOf(inv, S);
  const inVpn = owners.filter((n) => vpn.includes(n));
  const inBack = owners.filter((n) => backs.includes(n));
  // A Service hop shows as a destination change between the VPN egress and the backend (DNAT).
  const egressObs = (egress ?? seenPath[0])?.observed ?? null;
  const backObs = backend.observed;
  const dnatText =
    egressObs !== null &&
    backObs !== null &&
    (egressObs.dst !== backObs.dst || egressObs.dport !== backObs.dport)
      ? `; the Service hop was DNATed ${hostPort(egressObs.dst, egressObs.dport)} -> ${hostPort(backObs.dst, backObs.dport)}`
      : '';
  const dnat = dnatText !== '';
  if (inVpn.length > 0 && inBack.length > 0) {
    // One node hosting both, or the address listed under two nodes (an inventory mistake, or an
    // address every node carries, as a CNI's gateway): say which, never the first node alone.
    const both = inVpn.find((n) => inBack.includes(n));
    const whose =
      both !== undefined
        ? `an address of node ${both}, which hosts both the VPN pod and the backend`
        : `an address the inventory lists under both the VPN pod's node ${inVpn[0] ?? '?'} and the backend's node ${inBack[0] ?? '?'}`;
    if (dnat) {
      return result(
        'unknown',
        `source rewritten ${hop}, ${whose}` +
          `${dnatText}: the CNI masquerade and kube-proxy's Service masquerade would both produce it`,
      );
    }
    return result(
      'cni-masquerade',
      `source rewritten ${hop}, an address of the VPN pod's node ${inVpn[0] ?? '?'} (no Service DNAT seen)` +
        (both === undefined
          ? `; the inventory lists it under the backend's node ${inBack[0] ?? '?'} too`
          : ''),
      inVpn[0],
    );
  }
  if (inVpn.length > 0) {
    if (dnat) {
      // kube-proxy on the *source* node also marks ClusterIP traffic from outside --cluster-cidr
      // for masquerade (KUBE-SERVICES `! -s <clusterCIDR> -j KUBE-MARK-MASQ`), with the same result.
      extra.push({
        layer: 'kube-proxy',
        detail:
          `the destination was a Service (DNAT seen)${dnatText.replace(/^; /, ': ')}; kube-proxy on ${inVpn[0] ?? 'the VPN node'} ` +
          'also masquerades ClusterIP traffic from sources outside its --cluster-cidr, which yields the same address',
        hint: 'check `iptables -t nat -S KUBE-SERVICES` on the VPN node for `! -s <clusterCIDR> -j KUBE-MARK-MASQ`',
      });
    }
    return result(
      'cni-masquerade',
      `source rewritten ${hop}, an address of the VPN pod's node ${inVpn[0] ?? '?'}${dnatText}`,
      inVpn[0],
    );
  }
  if (inBack.length > 0) {
    if (!dnat) {
      extra.push({
        layer: 'unknown',
        detail:
          'no Service DNAT was seen between the VPN egress and the backend; kube-proxy normally masquerades only Service traffic',
        hint: 'check for another masquerade rule on the backend node',
      });
    }
    return result(
      'kube-proxy',
      `source rewritten ${hop}, an address of the backend's node ${inBack[0] ?? '?'}${dnatText}`,
      inBack[0],
    );
  }
  const known = [
    vpn.length === 0 ? 'the inventory names no VPN pod' : `VPN node: ${vpn.join(', ')}`,
    backs.length === 0 ? 'no backend pod' : `backend node: ${backs.join(', ')}`,
  ].join('; ');
  if (owners.length > 0) {
    return result(
      'unknown',
      `source rewritten ${hop}, an address of node ${owners.join(', ')}, which is neither the VPN pod's nor the backend's node (${known})`,
    );
  }
  if (pod !== undefined) {
    return result(
      'unknown',
      `source rewritten ${hop}, the address of pod ${pod.name} (role ${pod.role}); the TCP connection is the same one, so ${pod.name} translated it without terminating it`,
    );
  }
  if (inv.nodes.length === 0 && inv.pods.length === 0) {
    return result(
      'unknown',
      `source rewritten ${hop}; no inventory was given (or it names no node and no pod), so the ` +
        'address cannot be tied to a node or pod, nor the rewrite to a layer',
    );
  }
  return result(
    'unknown',
    `source rewritten ${hop}, an address the inventory does not know (${known})`,
  );
}

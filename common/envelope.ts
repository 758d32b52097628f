/**
 * Envelope <-> protobuf (hoptrace.v1.Envelope): one Envelope per WebSocket binary message between
 * an agent and the collector. Decoding never trusts the peer: anything that is not a well-formed
 * Envelope with a body throws HoptraceError WIRE_MALFORMED.
 */
import { decodeAckEnvelope, encodeAckEnvelope } from './ack-wire';
import protobuf from 'protobufjs';
import { COMMAND_LIMITS } from './command-limits';
import { REPLY_LIMITS, REPORT_LIMITS } from './report-limits';
import { cutText } from './text-cut';
import { HoptraceError } from './errors';
import { decodeEventsEnvelope, encodeEventsEnvelope, malformed } from './events-wire';
import {
  WIRE_OBJECT_OPTIONS,
  packetEventFromWire,
  packetEventToWire,
  protoType,
  type WirePacketEvent,
} from './codec';
import {
  framesReplyFromWire,
  framesReplyToWire,
  framesRequestFromWire,
  framesRequestToWire,
} from './frames-wire';
import { FACT_PARTS } from './wire';
import type {
  CaptureCommand,
  ConntrackEntry,
  ConntrackQuery,
  ConntrackReport,
  ConntrackTuple,
  DoctorReport,
  DoctorRequest,
  DoctorTarget,
  FactLeftOut,
  NamespaceFacts,
  NatRule,
  RouteEntry,
  CaptureState,
  CaptureStatus,
  Envelope,
  EnvelopeKind,
  ErrorReport,
  EventBatch,
  FactPart,
  Hello,
  HelloAck,
  Lost,
  NamespaceInfo,
  StopCommand,
} from './wire';

/**
 * What a refused Envelope was about, when that much could be read: a newer peer's body kind (its
 * field number, and the seq it came with), or the capture or request whose body broke a bound or
 * did not decode (so the agent can answer it instead of leaving the collector waiting).
 */
export interface RefusedEnvelope {
  /**
   * A body field number this version does not know (proto Envelope.body): a well-formed Envelope
   * of a newer peer, which a receiver ignores (proto/hoptrace.proto Envelope).
   */
  unknownField?: number;
  /** With unknownField: the Envelope's seq (> 0: a spooled message, to acknowledge). */
  seq?: number;
  kind?: string;
  captureId?: string;
  point?: string;
  requestId?: string;
}

/**
 * The error of an Envelope refused with what it was about (RefusedEnvelope): WIRE_MALFORMED, or
 * the body's own error (`from`: FRAMES_MALFORMED), its code, where and hint kept.
 */
export class EnvelopeRefused extends HoptraceError {
  constructor(
    detail: string,
    readonly refused: RefusedEnvelope,
    from?: HoptraceError,
  ) {
    const opts: { where?: string; hint?: string } = from === undefined ? { where: 'envelope' } : {};
    if (from?.where !== undefined) opts.where = from.where;
    if (from?.hint !== undefined) opts.hint = from.hint;
    super(from?.code ?? 'WIRE_MALFORMED', detail, opts);
  }
}

/** What a decode error was about, when decodeEnvelope could tell (else undefined). */
export function refusedEnvelopeOf(e: unknown): RefusedEnvelope | undefined {
  return e instanceof EnvelopeRefused ? e.refused : undefined;
}

/**
 * WebSocket close codes the collector uses towards agents (RFC 6455 §7.4.2: 4000-4999 are for
 * applications). The reason text of the close frame is the error code.
 */
export const CLOSE_CODES = {
  /** The collector shuts down. */
  GOING_AWAY: 1001,
  /** ws: a message larger than maxPayload (WIRE_TOO_LARGE). */
  TOO_LARGE: 1009,
  /** Storing a message failed (HUB_HANDLER_FAILED); the agent reconnects and resends. */
  HANDLER_FAILED: 1011,
  /**
   * Not acceptable as sent: not an Envelope — a text frame, garbage protobuf, no body
   * (WIRE_MALFORMED) —, or a hello whose node name or agent id is not one (AGENT_BAD_NAME).
   */
  MALFORMED: 4400,
  /** A hello listing more than the collector keeps (HELLO_TOO_LARGE: common/hello-limits.ts). */
  HELLO_TOO_LARGE: 4413,
  /** A hello for a node (or an agent id of a node) this peer's identity may not speak for (AUTH_WRONG_NODE). */
  WRONG_NODE: 4403,
  /** No hello within the hello timeout (WIRE_HELLO_TIMEOUT). */
  HELLO_TIMEOUT: 4408,
  /** A newer connection with the same agent id took over (AGENT_REPLACED). */
  REPLACED: 4409,
  /** A valid Envelope the agent must not send now (WIRE_UNEXPECTED). */
  UNEXPECTED: 4422,
  /** Another agent already speaks for this node over the shared token (AGENT_NODE_TAKEN). */
  NODE_TAKEN: 4423,
} as const;

/** Kinds an agent spools (seq > 0, acknowledged, resent after a reconnect). */
export const SPOOLED_KINDS = ['events', 'status', 'lost', 'error'] as const;
export type SpooledKind = (typeof SPOOLED_KINDS)[number];

/** Kinds an agent may send; everything else is collector -> agent. */
export const AGENT_KINDS: readonly EnvelopeKind[] = [
  'hello',
  'heartbeat',
  'events',
  'status',
  'lost',
  'error',
  'doctorReport',
  'conntrackReport',
  'framesReply',
];

/** Agent replies to a collector request: not spooled (seq 0), matched by requestId. */
export const REPLY_KINDS = ['doctorReport', 'conntrackReport', 'framesReply'] as const;

/** True for kinds that carry a seq and are acknowledged. */
export function isSpooledKind(kind: EnvelopeKind): kind is SpooledKind {
  return (SPOOLED_KINDS as readonly string[]).includes(kind);
}

const STATES: readonly CaptureState[] = ['arming', 'capturing', 'stopped', 'failed'];

// --- encode -----------------------------------------------------------------------------------

function u64(n: number): string {
  return Math.trunc(n).toString();
}

function optU64(n: number | null): string | undefined {
  return n === null ? undefined : u64(n);
}

function bodyToWire(env: Envelope): [string, Record<string, unknown>] {
  switch (env.kind) {
    case 'hello': {
      const h = env.hello;
      return [
        'hello',
        {
          agentId: h.agentId,
          node: h.node,
          version: h.version,
          nodeAddresses: h.nodeAddresses,
          namespaces: h.namespaces.map((n) => ({ ...n, inode: u64(n.inode) })),
          spoolFirstSeq: u64(h.spoolFirstSeq),
          ...(h.maxCaptures === undefined ? {} : { maxCaptures: h.maxCaptures }),
        },
      ];
    }
    case 'helloAck':
      return ['helloAck', { ...env.helloAck, lastSeq: u64(env.helloAck.lastSeq) }];
    case 'capture':
      return ['capture', { ...env.capture, deadlineUnixMs: u64(env.capture.deadlineUnixMs) }];
    case 'framesRequest':
      return ['framesRequest', framesRequestToWire(env.framesRequest)];
    case 'framesReply':
      return ['framesReply', framesReplyToWire(env.framesReply)];
    case 'stop':
      return ['stop', { ...env.stop }];
    case 'events':
      return [
        'events',
        {
          captureId: env.events.captureId,
          point: env.events.point,
          events: env.events.events.map(packetEventToWire),
        },
      ];
    case 'status': {
      const s = env.status;
      return [
        'status',
        {
          ...s,
          state: STATES.indexOf(s.state) + 1,
          packets: u64(s.packets),
          kernelDrops: optU64(s.kernelDrops),
          ifaceDrops: optU64(s.ifaceDrops),
          queueDrops: u64(s.queueDrops),
          foldedPackets: u64(s.foldedPackets ?? 0),
          foldFullSent: u64(s.foldFullSent ?? 0),
        },
      ];
    }
    case 'lost':
      return ['lost', { ...env.lost, count: u64(env.lost.count) }];
    case 'error':
      return ['error', { ...env.error }];
    case 'heartbeat':
      return ['heartbeat', { unixMs: u64(env.heartbeat.unixMs) }];
    case 'ack':
      return ['ack', { seq: u64(env.ack.seq) }];
    case 'doctorRequest':
      return ['doctorRequest', { ...env.doctorRequest }];
    case 'doctorReport':
      return ['doctorReport', { ...env.doctorReport }];
    case 'conntrackQuery':
      return ['conntrackQuery', { ...env.conntrackQuery }];
    case 'conntrackReport':
      return ['conntrackReport', { ...env.conntrackReport }];
  }
}

/** Encodes one Envelope as a hoptrace.v1.Envelope message. */
export function encodeEnvelope(env: Envelope): Uint8Array {
  // The hot message (one per event batch) has a hand-written encoder: events-wire.ts.
  if (env.kind === 'events') return encodeEventsEnvelope(env.seq, env.events);
  // …and so has its answer, one per batch (ack-wire.ts; the same bytes as reflection's).
  if (env.kind === 'ack') return encodeAckEnvelope(env.seq, env.ack.seq);
  return encodeEnvelopeReflect(env);
}

/** The reflection encoder for every kind (events-wire.ts is tested against it). */
export function encodeEnvelopeReflect(env: Envelope): Uint8Array {
  if (env.kind === 'events' && env.events.encoded !== undefined) {
    throw new Error('pre-encoded events go through encodeEnvelope (events-wire.ts)');
  }
  const T = protoType('Envelope');
  const [field, body] = bodyToWire(env);
  return T.encode(T.fromObject({ seq: u64(env.seq), [field]: body })).finish();
}

// --- decode -----------------------------------------------------------------------------------

/** A decimal uint64 as a JS number; beyond 2^53 cannot be represented exactly and is refused. */
function num(s: unknown, field: string): number {
  const n = typeof s === 'number' ? s : Number(s);
  if (!Number.isSafeInteger(n) || n < 0) throw malformed(`${field} ${String(s)} is out of range`);
  return n;
}

/**
 * The largest sequence number either side accepts: 2^52. Agents number a run from the microseconds
 * since the epoch (~1.8·10^15 today, 2^52 in the year 2112), so a restart continues above the last
 * run; below 2^53, so seq + 1 stays an exact integer, and a peer announcing a seq near 2^53 is
 * refused instead of persisted.
 */
export const MAX_SEQ = 2 ** 52;

function seqNum(s: unknown, field: string): number {
  const n = num(s, field);
  if (n > MAX_SEQ) throw malformed(`${field} ${String(s)} is beyond 2^52`);
  return n;
}

function optNum(s: unknown, field: string): number | null {
  return s === undefined || s === null ? null : num(s, field);
}

type Obj = Record<string, unknown>;

function str(o: Obj, k: string): string {
  const v = o[k];
  return typeof v === 'string' ? v : '';
}
/** An agent's free text or name kept to `max` characters (common/report-limits.ts). */
function cut(o: Obj, k: string, max: number): string {
  return cutText(str(o, k), max);
}
function strs(o: Obj, k: string): string[] {
  const v = o[k];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}
function objs(o: Obj, k: string): Obj[] {
  const v = o[k];
  return Array.isArray(v) ? (v as Obj[]) : [];
}

/** Which capture or request a body of `kind` is about: its names that are within bounds. */
function aboutOf(kind: string, o: Obj): RefusedEnvelope {
  const about: RefusedEnvelope = { kind };
  const name = (k: string): string | undefined => {
    const v = str(o, k);
    return v.length <= COMMAND_LIMITS.name ? v : undefined;
  };
  const captureId = name('captureId');
  const point = name('point');
  const requestId = name('requestId');
  if (captureId !== undefined) about.captureId = captureId;
  if (point !== undefined) about.point = point;
  if (requestId !== undefined) about.requestId = requestId;
  return about;
}

/**
 * Refuses a collector → agent body beyond COMMAND_LIMITS (common/command-limits.ts), naming the
 * field and which capture or request it was (aboutOf).
 */
function checkBounds(kind: string, o: Obj, checks: [string, number, number][]): void {
  for (const [field, length, limit] of checks) {
    if (length <= limit) continue;
    throw new EnvelopeRefused(
      `the ${kind} body's ${field} is ${length} long (at most ${limit})`,
      aboutOf(kind, o),
    );
  }
}

/** The length of the longest string (a loop: a list may be long). */
function longest(list: readonly string[]): number {
  let n = 0;
  for (const x of list) n = Math.max(n, x.length);
  return n;
}

/** The bounds of a DoctorTarget list (doctorRequest, conntrackQuery). */
function targetChecks(o: Obj): [string, number, number][] {
  const L = COMMAND_LIMITS;
  const targets = objs(o, 'targets');
  const checks: [string, number, number][] = [['targets', targets.length, L.targets]];
  for (const t of targets.slice(0, L.targets)) {
    const routeTo = strs(t, 'routeTo');
    checks.push(
      ['target name', str(t, 'name').length, L.name],
      ['target', str(t, 'target').length, L.target],
      ['routeTo', routeTo.length, L.routeTo],
      ['routeTo address', longest(routeTo), L.address],
    );
  }
  return checks;
}

function helloFromWire(o: Obj): Hello {
  const maxCaptures = num(o.maxCaptures ?? 0, 'maxCaptures');
  const namespaces: NamespaceInfo[] = objs(o, 'namespaces').map((n) => ({
    path: str(n, 'path'),
    inode: num(n.inode, 'namespace inode'),
    addresses: strs(n, 'addresses'),
    interfaces: strs(n, 'interfaces'),
  }));
  return {
    agentId: str(o, 'agentId'),
    node: str(o, 'node'),
    version: str(o, 'version'),
    nodeAddresses: strs(o, 'nodeAddresses'),
    namespaces,
    spoolFirstSeq: seqNum(o.spoolFirstSeq, 'spoolFirstSeq'),
    // 0: an agent older than the field (proto Hello.max_captures).
    ...(maxCaptures > 0 ? { maxCaptures } : {}),
  };
}

function statusFromWire(o: Obj): CaptureStatus {
  const state = STATES[num(o.state, 'state') - 1];
  if (state === undefined) throw malformed(`capture state ${String(o.state)} is unknown`);
  const folded = num(o.foldedPackets ?? 0, 'foldedPackets');
  const full = num(o.foldFullSent ?? 0, 'foldFullSent');
  return {
    ...(folded > 0 ? { foldedPackets: folded } : {}),
    ...(full > 0 ? { foldFullSent: full } : {}),
    captureId: str(o, 'captureId'),
    point: str(o, 'point'),
    state,
    packets: num(o.packets, 'packets'),
    kernelDrops: optNum(o.kernelDrops, 'kernelDrops'),
    ifaceDrops: optNum(o.ifaceDrops, 'ifaceDrops'),
    queueDrops: num(o.queueDrops, 'queueDrops'),
    errorCode: cut(o, 'errorCode', REPORT_LIMITS.code),
    message: cut(o, 'message', REPORT_LIMITS.text),
    netns: cut(o, 'netns', REPORT_LIMITS.netns),
    netnsAddresses: strs(o, 'netnsAddresses')
      .filter((a) => a.length <= REPORT_LIMITS.address)
      .slice(0, REPORT_LIMITS.netnsAddresses),
    iface: cut(o, 'iface', REPORT_LIMITS.iface),
    linkType: cut(o, 'linkType', REPORT_LIMITS.iface),
  };
}

function targetsFromWire(o: Obj): DoctorTarget[] {
  return objs(o, 'targets').map((t) => ({
    name: str(t, 'name'),
    target: str(t, 'target'),
    routeTo: strs(t, 'routeTo'),
  }));
}

/** An address family on the wire: 0 (a peer older than IPv6 doctor facts) is 4. */
function familyFromWire(v: unknown): 4 | 6 {
  const n = num(v ?? 0, 'family');
  if (n === 0 || n === 4) return 4;
  if (n === 6) return 6;
  throw malformed(`address family ${n} is neither 4 nor 6`);
}

/**
 * What decoding left out of one part of an agent's reply, summed by what it was (a report of
 * 20,000 routes with 20 flags each says so in two lines, not 20,001).
 */
class LeftOut {
  private readonly lists = new Map<string, { lists: number; entries: number; max: number }>();
  private readonly cuts = new Map<string, number>();

  /** The first `max` entries of `list`; the rest counted. Sliced before decoding: they cost nothing. */
  first<T>(list: T[], max: number, noun: string): T[] {
    if (list.length <= max) return list;
    const e = this.lists.get(noun) ?? { lists: 0, entries: 0, max };
    e.lists++;
    e.entries += list.length - max;
    this.lists.set(noun, e);
    return list.slice(0, max);
  }

  /** `count` strings described by `what` (`rule arguments cut at N characters`) were cut. */
  cut(count: number, what: string): void {
    if (count > 0) this.cuts.set(what, (this.cuts.get(what) ?? 0) + count);
  }

  /** In words: `routes: 3616 left out (at most 16384 kept)`; [] when nothing was. */
  details(): string[] {
    const out: string[] = [];
    for (const [noun, e] of this.lists) {
      const each = e.lists > 1 ? ` of each of ${e.lists} lists` : '';
      out.push(`${noun}: ${e.entries} left out (at most ${e.max} kept${each})`);
    }
    for (const [what, n] of this.cuts) out.push(`${what}: ${n}`);
    return out;
  }
}

/** An agent's strings in a list, each cut at `max` characters (REPLY_LIMITS). */
function cutStrs(list: string[], max: number): string[] {
  return list.map((v) => cutText(v, max));
}

function routeFromWire(o: Obj, left: LeftOut): RouteEntry {
  const R = REPORT_LIMITS;
  return {
    dst: cut(o, 'dst', R.address),
    gateway: cut(o, 'gateway', R.address),
    dev: cut(o, 'dev', R.iface),
    type: cut(o, 'type', R.code),
    prefsrc: cut(o, 'prefsrc', R.address),
    flags: cutStrs(left.first(strs(o, 'flags'), REPLY_LIMITS.routeFlags, 'route flags'), R.code),
  };
}

function obj(o: Obj, k: string): Obj | null {
  const v = o[k];
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : null;
}

/** '' (an older agent, or a failed read) and anything unknown: not read. */
function ipvsStateFromWire(s: string): NamespaceFacts['ipvsState'] {
  return s === 'read' || s === 'absent' ? s : 'unread';
}

/** A nat rule: an argument cut changes what the rule matches, so it is counted as left out. */
function natRuleFromWire(r: Obj, left: LeftOut): NatRule {
  const L = REPLY_LIMITS;
  const args = left.first(strs(r, 'args'), L.ruleArgs, 'rule arguments');
  left.cut(
    args.filter((a) => a.length > L.ruleArg).length,
    `rule arguments cut at ${L.ruleArg} characters`,
  );
  return {
    chain: cut(r, 'chain', L.chain),
    args: cutStrs(args, L.ruleArg),
    text: cut(r, 'text', REPORT_LIMITS.text),
  };
}

/**
 * One namespace's facts within REPLY_LIMITS (common/report-limits.ts): strings cut, lists kept to
 * their bound; a part of which something was left out is named in leftOut (not read in full: no
 * check runs on it), never taken for the whole of it.
 */
function factsFromWire(f: Obj): NamespaceFacts {
  const L = REPLY_LIMITS;
  const R = REPORT_LIMITS;
  // iptables-save's rules and nft's share the nat lists: what is left out may be of either.
  const left = {
    addresses: new LeftOut(),
    rp_filter: new LeftOut(),
    routes: new LeftOut(),
    'nat, nft': new LeftOut(),
    ipvs: new LeftOut(),
  };
  const nat = left['nat, nft'];
  const route = (r: Obj): RouteEntry => routeFromWire(r, left.routes);
  const ipvs = left.ipvs.first(objs(f, 'ipvs'), L.ipvs, 'IPVS virtual services').map((s) => ({
    proto: cut(s, 'proto', R.code),
    address: cut(s, 'address', R.address),
    port: num(s.port ?? 0, 'ipvs port'),
    scheduler: cut(s, 'scheduler', R.code),
    reals: left.ipvs.first(objs(s, 'reals'), L.ipvsReals, 'IPVS real servers').map((r) => ({
      address: cut(r, 'address', R.address),
      port: num(r.port ?? 0, 'ipvs port'),
      forward: cut(r, 'forward', R.code),
    })),
  }));
  const facts: NamespaceFacts = {
    name: cut(f, 'name', L.name),
    target: cut(f, 'target', L.target),
    netns: cut(f, 'netns', R.netns),
    node: cut(f, 'node', L.name),
    addresses: cutStrs(
      left.addresses.first(strs(f, 'addresses'), L.addresses, 'addresses'),
      R.address,
    ),
    rpFilter: left.rp_filter
      .first(objs(f, 'rpFilter'), L.rpFilter, 'rp_filter values')
      .map((r) => ({ iface: cut(r, 'iface', R.iface), value: num(r.value ?? 0, 'rp_filter') })),
    routes: left.routes.first(objs(f, 'routes'), L.routes, 'routes').map(route),
    lookups: left.routes.first(objs(f, 'lookups'), L.lookups, 'route lookups').map((l) => {
      const r = obj(l, 'route');
      return {
        to: cut(l, 'to', R.address),
        route: r === null ? null : route(r),
        error: cut(l, 'error', R.text),
      };
    }),
    natChains: cutStrs(nat.first(strs(f, 'natChains'), L.natChains, 'nat chains'), L.chain),
    natRules: nat
      .first(objs(f, 'natRules'), L.natRules, 'nat rules')
      .map((r) => natRuleFromWire(r, nat)),
    ipvsState: ipvsStateFromWire(str(f, 'ipvsState')),
    ipvs,
    family: familyFromWire(f.family),
    errorCode: cut(f, 'errorCode', R.code),
    message: cut(f, 'message', R.text),
    // Each part once: a longer list is no agent's.
    unread: [...new Set(strs(f, 'unread'))].filter((p): p is FactPart =>
      (FACT_PARTS as readonly string[]).includes(p),
    ),
  };
  const leftOut: FactLeftOut[] = [];
  for (const [parts, l] of Object.entries(left))
    for (const detail of l.details())
      for (const part of parts.split(', ')) leftOut.push({ part: part as FactPart, detail });
  return leftOut.length === 0 ? facts : { ...facts, leftOut };
}

function tupleFromWire(o: Obj | null): ConntrackTuple {
  return {
    src: o === null ? '' : cut(o, 'src', REPORT_LIMITS.address),
    dst: o === null ? '' : cut(o, 'dst', REPORT_LIMITS.address),
    sport: o === null ? 0 : num(o.sport ?? 0, 'sport'),
    dport: o === null ? 0 : num(o.dport ?? 0, 'dport'),
  };
}

function entryFromWire(e: Obj): ConntrackEntry {
  const R = REPORT_LIMITS;
  return {
    name: cut(e, 'name', REPLY_LIMITS.name),
    netns: cut(e, 'netns', R.netns),
    node: cut(e, 'node', REPLY_LIMITS.name),
    proto: cut(e, 'proto', R.code),
    state: cut(e, 'state', R.code),
    orig: tupleFromWire(obj(e, 'orig')),
    reply: tupleFromWire(obj(e, 'reply')),
    snat: e.snat === true,
    dnat: e.dnat === true,
    raw: cut(e, 'raw', R.text),
  };
}

/** A report's refusal (error_code, message), when it carries one; '' (not refused): none. */
function refusalFromWire(o: Obj): { errorCode?: string; message?: string } {
  const errorCode = cut(o, 'errorCode', REPORT_LIMITS.code);
  return errorCode === '' ? {} : { errorCode, message: cut(o, 'message', REPORT_LIMITS.text) };
}

function bodyFromWire(kind: string, o: Obj, seq: number): Envelope {
  switch (kind) {
    case 'hello':
      return { seq, kind, hello: helloFromWire(o) };
    case 'helloAck': {
      const helloAck: HelloAck = {
        collectorId: str(o, 'collectorId'),
        lastSeq: seqNum(o.lastSeq, 'lastSeq'),
      };
      return { seq, kind, helloAck };
    }
    case 'capture': {
      const L = COMMAND_LIMITS;
      checkBounds(kind, o, [
        ['captureId', str(o, 'captureId').length, L.name],
        ['point', str(o, 'point').length, L.name],
        ['target', str(o, 'target').length, L.target],
        ['iface', str(o, 'iface').length, L.iface],
        ['filter', str(o, 'filter').length, L.filter],
      ]);
      const capture: CaptureCommand = {
        captureId: str(o, 'captureId'),
        point: str(o, 'point'),
        target: str(o, 'target'),
        iface: str(o, 'iface'),
        filter: str(o, 'filter'),
        snaplen: num(o.snaplen, 'snaplen'),
        deadlineUnixMs: num(o.deadlineUnixMs, 'deadlineUnixMs'),
      };
      const retainSnaplen = num(o.retainSnaplen ?? 0, 'retainSnaplen');
      if (retainSnaplen > 0) capture.retainSnaplen = retainSnaplen;
      if (o.retainPayload === true) capture.retainPayload = true;
      if (o.foldFlows === true) capture.foldFlows = true;
      return { seq, kind, capture };
    }
    case 'stop': {
      checkBounds(kind, o, [
        ['captureId', str(o, 'captureId').length, COMMAND_LIMITS.name],
        ['point', str(o, 'point').length, COMMAND_LIMITS.name],
      ]);
      const stop: StopCommand = { captureId: str(o, 'captureId'), point: str(o, 'point') };
      return { seq, kind, stop };
    }
    case 'events': {
      const events: EventBatch = {
        captureId: str(o, 'captureId'),
        point: str(o, 'point'),
        events: (objs(o, 'events') as unknown as WirePacketEvent[]).map(packetEventFromWire),
      };
      return { seq, kind, events };
    }
    case 'status':
      return { seq, kind, status: statusFromWire(o) };
    case 'lost': {
      const lost: Lost = {
        captureId: str(o, 'captureId'),
        point: str(o, 'point'),
        count: num(o.count, 'count'),
        reason: cut(o, 'reason', REPORT_LIMITS.text),
      };
      return { seq, kind, lost };
    }
    case 'error': {
      const error: ErrorReport = {
        code: cut(o, 'code', REPORT_LIMITS.code),
        message: cut(o, 'message', REPORT_LIMITS.text),
        captureId: str(o, 'captureId'),
        point: str(o, 'point'),
      };
      return { seq, kind, error };
    }
    case 'heartbeat':
      return { seq, kind, heartbeat: { unixMs: num(o.unixMs, 'unixMs') } };
    case 'ack':
      return { seq, kind, ack: { seq: seqNum(o.seq, 'ack seq') } };
    case 'doctorRequest': {
      checkBounds(kind, o, [
        ['requestId', str(o, 'requestId').length, COMMAND_LIMITS.name],
        ...targetChecks(o),
      ]);
      const doctorRequest: DoctorRequest = {
        requestId: str(o, 'requestId'),
        targets: targetsFromWire(o),
        family: familyFromWire(o.family),
      };
      return { seq, kind, doctorRequest };
    }
    case 'doctorReport': {
      // More facts than a request may ask for are not answers: ownFacts would drop them anyway.
      const doctorReport: DoctorReport = {
        requestId: cut(o, 'requestId', REPLY_LIMITS.name),
        agentId: cut(o, 'agentId', REPLY_LIMITS.name),
        node: cut(o, 'node', REPLY_LIMITS.name),
        facts: objs(o, 'facts').slice(0, REPLY_LIMITS.facts).map(factsFromWire),
        ...refusalFromWire(o),
      };
      return { seq, kind, doctorReport };
    }
    case 'conntrackQuery': {
      const L = COMMAND_LIMITS;
      const tuples = objs(o, 'tuples');
      checkBounds(kind, o, [
        ['requestId', str(o, 'requestId').length, L.name],
        ['captureId', str(o, 'captureId').length, L.name],
        ...targetChecks(o),
        ['tuples', tuples.length, L.tuples],
        [
          'tuple address',
          longest(tuples.flatMap((t) => [str(t, 'src'), str(t, 'dst')])),
          L.address,
        ],
      ]);
      const conntrackQuery: ConntrackQuery = {
        requestId: str(o, 'requestId'),
        captureId: str(o, 'captureId'),
        targets: targetsFromWire(o),
        tuples: objs(o, 'tuples').map((t) => tupleFromWire(t)),
      };
      return { seq, kind, conntrackQuery };
    }
    case 'conntrackReport': {
      const L = REPLY_LIMITS;
      const entries = objs(o, 'entries');
      const errors = strs(o, 'errors');
      const errorsLeft = errors.length - L.errors;
      const conntrackReport: ConntrackReport = {
        requestId: cut(o, 'requestId', L.name),
        captureId: cut(o, 'captureId', L.name),
        agentId: cut(o, 'agentId', L.name),
        entries: entries.slice(0, L.entries).map(entryFromWire),
        errors: [
          ...cutStrs(errors.slice(0, L.errors), REPORT_LIMITS.text),
          ...(errorsLeft > 0
            ? [`${errorsLeft} more errors left out (at most ${L.errors} kept)`]
            : []),
        ],
        ...(entries.length > L.entries ? { entriesLeftOut: entries.length - L.entries } : {}),
        ...refusalFromWire(o),
      };
      return { seq, kind, conntrackReport };
    }
    case 'framesRequest':
      return { seq, kind, framesRequest: framesRequestFromWire(o) };
    case 'framesReply':
      return { seq, kind, framesReply: framesReplyFromWire(o) };
    default:
      throw malformed(`unknown body ${kind}`);
  }
}

/** Decodes one hoptrace.v1.Envelope; throws HoptraceError WIRE_MALFORMED on anything else. */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  // Acks (what an agent receives per batch) and event batches (nearly all traffic to the
  // collector) take hand-written decoders; anything else, reflection. The ack's test is first:
  // it returns null on an event batch at its first bytes, where the events decoder would throw
  // and catch on an ack.
  const ack = decodeAckEnvelope(bytes);
  if (ack !== null) {
    seqNum(ack.seq, 'seq');
    seqNum(ack.ack.seq, 'ack seq');
    return ack;
  }
  const fast = decodeEventsEnvelope(bytes);
  if (fast === null) return decodeEnvelopeReflect(bytes);
  seqNum(fast.seq, 'seq');
  return fast;
}

/** The reflection decoder for every kind (events-wire.ts is tested against it). */
export function decodeEnvelopeReflect(bytes: Uint8Array): Envelope {
  const T = protoType('Envelope');
  let o: Obj;
  try {
    o = T.toObject(T.decode(bytes), WIRE_OBJECT_OPTIONS);
  } catch (e) {
    throw malformed(`not a protobuf Envelope (${e instanceof Error ? e.message : String(e)})`);
  }
  // Oneof members get no defaults: the member that is present is the body.
  const kind = (T.oneofs.body?.oneof ?? []).find((f) => o[f] !== undefined);
  if (kind === undefined) {
    // protobufjs skips fields it does not know: a body kind of a newer peer looks like none.
    const field = unknownField(bytes);
    if (field !== undefined)
      throw new EnvelopeRefused(
        `body field ${field} is not one this version knows (a newer peer)`,
        {
          unknownField: field,
          seq: seqNum(o.seq, 'seq'),
        },
      );
    throw malformed('the Envelope has no body');
  }
  const body = o[kind];
  if (typeof body !== 'object' || body === null) throw malformed(`the ${kind} body is empty`);
  const seq = seqNum(o.seq, 'seq');
  try {
    return bodyFromWire(kind, body as Obj, seq);
  } catch (e) {
    if (e instanceof EnvelopeRefused) throw e;
    // Refused, with which capture or request it was: a command or request the agent can identify
    // is answered (a point failed, a refused reply), not left for the collector to wait on. A
    // decoded PacketEvent can still hold values our types refuse (BigInt of a bad string).
    const about = aboutOf(kind, body as Obj);
    if (e instanceof HoptraceError) throw new EnvelopeRefused(e.detail, about, e);
    const why = e instanceof Error ? e.message : String(e);
    throw new EnvelopeRefused(`the ${kind} body is invalid (${why})`, about);
  }
}

/** The first top-level field number of `bytes` that Envelope does not declare, if any. */
function unknownField(bytes: Uint8Array): number | undefined {
  const T = protoType('Envelope');
  const r = protobuf.Reader.create(bytes);
  try {
    while (r.pos < r.len) {
      const tag = r.uint32();
      const field = tag >>> 3;
      if (T.fieldsById[field] === undefined) return field;
      r.skipType(tag & 7);
    }
  } catch {
    // Already decoded once by protobufjs: cannot fail here; if it did, there is no answer.
  }
  return undefined;
}

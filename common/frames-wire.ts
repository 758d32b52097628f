/**
 * The evidence-frame messages (proto/hoptrace.proto FramesRequest, FramesReply, StoredFrames) to
 * and from their protobufjs objects, with the bounds every reader checks: whoever sent them is not
 * trusted, and the collector's frames-<point>.pb file is read back through the same checks.
 * A message beyond a bound is refused whole (FRAMES_MALFORMED), never cut to fit.
 */
import { protoType, WIRE_OBJECT_OPTIONS } from './codec';
import { HoptraceError } from './errors';
import type { FrameRecord, FramesReply, FramesRequest, MissingFrame } from './wire';

/** What one frames message may carry. */
export const FRAMES_LIMITS = {
  /** Frames one request asks for (the analysis keeps at most 256 packets of a flow per point). */
  frames: 256,
  /** Bytes of frame data in one reply (the agent fills at most half of it). */
  replyBytes: 8 * 1024 * 1024,
  /** Bytes of one frame: libpcap's MAXIMUM_SNAPLEN. */
  frameBytes: 262144,
  /** A request id, capture id or point name. */
  name: 64,
  /** A reply's message. */
  message: 1024,
  /** Frames (records and missing, each) the collector stores for one point: a flow's 256 and more. */
  storedFrames: 512,
} as const;

/** A missing frame's reason, a reply's error code: a stable code, in the catalog's shape. */
const CODE_RE = /^[A-Z][A-Z0-9_]{0,63}$/;

/** What the collector stores per point (captures/<id>/frames-<point>.pb). */
export interface StoredFrames {
  captureId: string;
  point: string;
  /** The agent that answered ('' when none did). */
  agentId: string;
  /** LINKTYPE_* of the records; null when no frame was retained. */
  linkType: number | null;
  snaplen: number;
  records: FrameRecord[];
  missing: MissingFrame[];
  fetchedUnixMs: number;
  /** The agent's retention counters: frames kept, and numbered after retention stopped. */
  retained: number;
  retentionDropped: number;
}

export function framesMalformed(detail: string): HoptraceError {
  return new HoptraceError('FRAMES_MALFORMED', detail, {
    hint: 'both ends must run the same hoptrace version; a peer that sends this is broken',
  });
}

type Obj = Record<string, unknown>;

function str(o: Obj, k: string, max: number): string {
  const v = o[k];
  const s = typeof v === 'string' ? v : '';
  if (s.length > max) throw framesMalformed(`${k} is longer than ${max} characters`);
  return s;
}

/** A frame number: a positive integer below 2^53 (protobufjs gives uint64 as decimal strings). */
function frameNumber(v: unknown, what: string): number {
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isSafeInteger(n) || n < 1)
    throw framesMalformed(`${what} ${String(v)} is not a frame number`);
  return n;
}

function count(v: unknown, what: string): number {
  const n = typeof v === 'number' ? v : Number(v ?? 0);
  if (!Number.isSafeInteger(n) || n < 0)
    throw framesMalformed(`${what} ${String(v)} is out of range`);
  return n;
}

function list(o: Obj, k: string, max: number): unknown[] {
  const v = o[k];
  const a = Array.isArray(v) ? (v as unknown[]) : [];
  if (a.length > max) throw framesMalformed(`${a.length} ${k} (at most ${max})`);
  return a;
}

function code(s: string, what: string): string {
  if (s !== '' && !CODE_RE.test(s))
    throw framesMalformed(`${what} '${s.slice(0, 80)}' is not a code`);
  return s;
}

function linkTypeFromWire(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  return count(v, 'link type');
}

function snaplenFromWire(v: unknown): number {
  const n = count(v, 'snaplen');
  if (n > FRAMES_LIMITS.frameBytes)
    throw framesMalformed(`snaplen ${n} is above ${FRAMES_LIMITS.frameBytes}`);
  return n;
}

function recordsFromWire(o: Obj, maxFrames: number, maxBytes: number): FrameRecord[] {
  let total = 0;
  return list(o, 'records', maxFrames).map((x) => {
    const r = (typeof x === 'object' && x !== null ? x : {}) as Obj;
    const frame = frameNumber(r.frame, 'record frame');
    const data = r.data instanceof Uint8Array ? r.data : new Uint8Array(0);
    const origLen = count(r.origLen, 'orig_len');
    if (data.length > FRAMES_LIMITS.frameBytes)
      throw framesMalformed(
        `frame ${frame} holds ${data.length} bytes (at most ${FRAMES_LIMITS.frameBytes})`,
      );
    if (origLen < data.length)
      throw framesMalformed(
        `frame ${frame} holds ${data.length} bytes, more than its length ${origLen}`,
      );
    total += data.length;
    if (total > maxBytes) throw framesMalformed(`more than ${maxBytes} bytes of frames`);
    let tsNs: bigint;
    try {
      tsNs = BigInt(typeof r.tsNs === 'string' || typeof r.tsNs === 'number' ? r.tsNs : 0);
    } catch {
      throw framesMalformed(`frame ${frame} has no valid timestamp`);
    }
    return { frame, tsNs, origLen, data };
  });
}

function missingFromWire(o: Obj, maxFrames: number): MissingFrame[] {
  return list(o, 'missing', maxFrames).map((x) => {
    const m = (typeof x === 'object' && x !== null ? x : {}) as Obj;
    return {
      frame: frameNumber(m.frame, 'missing frame'),
      reason: code(str(m, 'reason', 64), 'reason') || 'FRAMES_MALFORMED',
    };
  });
}

function recordsToWire(records: readonly FrameRecord[]): Obj[] {
  return records.map((r) => ({
    frame: String(r.frame),
    tsNs: r.tsNs.toString(),
    origLen: r.origLen,
    data: r.data,
  }));
}

function missingToWire(missing: readonly MissingFrame[]): Obj[] {
  return missing.map((m) => ({ frame: String(m.frame), reason: m.reason }));
}

export function framesRequestToWire(r: FramesRequest): Obj {
  return { ...r, frames: r.frames.map(String) };
}

export function framesRequestFromWire(o: Obj): FramesRequest {
  return {
    requestId: str(o, 'requestId', FRAMES_LIMITS.name),
    captureId: str(o, 'captureId', FRAMES_LIMITS.name),
    point: str(o, 'point', FRAMES_LIMITS.name),
    frames: list(o, 'frames', FRAMES_LIMITS.frames).map((f) => frameNumber(f, 'frame')),
    release: o.release === true,
  };
}

export function framesReplyToWire(r: FramesReply): Obj {
  return {
    requestId: r.requestId,
    captureId: r.captureId,
    point: r.point,
    ...(r.linkType === null ? {} : { linkType: r.linkType }),
    snaplen: r.snaplen,
    records: recordsToWire(r.records),
    missing: missingToWire(r.missing),
    retained: String(r.retained),
    retentionDropped: String(r.retentionDropped),
    errorCode: r.errorCode,
    message: r.message,
  };
}

export function framesReplyFromWire(o: Obj): FramesReply {
  return {
    requestId: str(o, 'requestId', FRAMES_LIMITS.name),
    captureId: str(o, 'captureId', FRAMES_LIMITS.name),
    point: str(o, 'point', FRAMES_LIMITS.name),
    linkType: linkTypeFromWire(o.linkType),
    snaplen: snaplenFromWire(o.snaplen),
    records: recordsFromWire(o, FRAMES_LIMITS.frames, FRAMES_LIMITS.replyBytes),
    missing: missingFromWire(o, FRAMES_LIMITS.frames),
    retained: count(o.retained, 'retained'),
    retentionDropped: count(o.retentionDropped, 'retention_dropped'),
    errorCode: code(str(o, 'errorCode', 64), 'error code'),
    message: str(o, 'message', FRAMES_LIMITS.message),
  };
}

/** A point's fetched frames as the bytes of frames-<point>.pb. */
export function encodeStoredFrames(s: StoredFrames): Uint8Array {
  const T = protoType('StoredFrames');
  return T.encode(
    T.fromObject({
      captureId: s.captureId,
      point: s.point,
      agentId: s.agentId,
      ...(s.linkType === null ? {} : { linkType: s.linkType }),
      snaplen: s.snaplen,
      records: recordsToWire(s.records),
      missing: missingToWire(s.missing),
      fetchedUnixMs: String(s.fetchedUnixMs),
      retained: String(s.retained),
      retentionDropped: String(s.retentionDropped),
    }),
  ).finish();
}

/** frames-<point>.pb back; throws FRAMES_MALFORMED when it is not one (damaged, edited). */
export function decodeStoredFrames(bytes: Uint8Array): StoredFrames {
  const T = protoType('StoredFrames');
  let o: Obj;
  try {
    o = T.toObject(T.decode(bytes), WIRE_OBJECT_OPTIONS);
  } catch (e) {
    throw framesMalformed(
      `not a StoredFrames message (${e instanceof Error ? e.message : String(e)})`,
    );
  }
  // A point's file holds what several replies brought: up to storedFrames whole frames.
  const L = FRAMES_LIMITS;
  return {
    captureId: str(o, 'captureId', FRAMES_LIMITS.name),
    point: str(o, 'point', FRAMES_LIMITS.name),
    agentId: str(o, 'agentId', 4096),
    linkType: linkTypeFromWire(o.linkType),
    snaplen: snaplenFromWire(o.snaplen),
    records: recordsFromWire(o, L.storedFrames, L.storedFrames * L.frameBytes),
    missing: missingFromWire(o, L.storedFrames),
    fetchedUnixMs: count(o.fetchedUnixMs, 'fetched_unix_ms'),
    retained: count(o.retained, 'retained'),
    retentionDropped: count(o.retentionDropped, 'retention_dropped'),
  };
}

/**
 * Identity headers of the request at each point: its head, joined from its consecutive data
 * segments (request-segments.ts: by sequence number, retransmissions skipped, stopping at a gap,
 * at MAX_HEAD_SEGMENTS or MAX_HEAD_BYTES) until the head ends, from whatever bytes the shell still
 * has of those frames — offline the capture file read again (offline/identity-scan.ts), live the
 * frames the agents retained (liveIdentityHeaders below) — looked at by
 * core/decode/identity-headers.ts. Honest about what it did not have: a live capture that did not
 * ask for the payload has none (its agents retain headers only): no point is read, and the scan
 * says so (`headersOnly`); a frame in the chain cut
 * before the end of its payload (a snaplen, the retention bound) ends the chain and is
 * listed in `cut` with the bytes looked at; a head that went on past the segments read (a gap, a
 * bound, nothing more captured) in `continued`; a point whose first frame could not be had in
 * `notScanned` with why — so "no identity header" is never said about bytes nobody read. Pure.
 */
import type {
  AnalysisResult,
  FlowPacketSummary,
  IdentityHeaderScan,
  IdentityHeaderSeen,
  IdentityScanContinued,
  IdentityScanCut,
  PointSummary,
} from './analysis-result';
import { framePayloadSpan } from '../decode/frame';
import { scanIdentityHead } from '../decode/identity-headers';
import { HEADERS_ONLY_WHY } from './identity-text';
import { requestSegments } from './request-segments';
import type { RetainedFrames } from './live-evidence';

/** The captured bytes of one frame, as the shell has them. */
export interface ScanFrame {
  linktype: number;
  data: Uint8Array;
  /** The frame's length on the wire. */
  origLen: number;
  /** Why the frame may hold fewer bytes than the wire had (said when the payload was cut). */
  cutBy: string;
}

/** A point's request data frame (`packet`), or why its bytes cannot be had (a sentence). */
export type ScanFrameLookup = (point: string, packet: FlowPacketSummary) => ScanFrame | string;

/**
 * At most this many payload bytes of a request head are joined and read: nginx's and Envoy's
 * default limits on a whole request head are 8–96 KiB, and identity headers come early in it.
 */
export const MAX_HEAD_BYTES = 65536;

/** The request's first data segment at `point` (request direction, payload), or null. */
export function requestDataPacket(r: AnalysisResult, point: string): FlowPacketSummary | null {
  const p = r.points.find((x) => x.name === point);
  return p?.flow.find((f) => f.dir === 'request' && f.payloadLength > 0) ?? null;
}

/** A point's result: scanned or not, its headers, and how far it read if not to the head's end. */
type PointScan =
  | { scanned: false; why: string }
  | {
      scanned: true;
      seen: IdentityHeaderSeen[];
      cut?: IdentityScanCut;
      continued?: IdentityScanContinued;
    };

const join = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
};

/** The request head at point `p`, joined from its consecutive data segments as far as they go. */
function scanPoint(p: PointSummary, lookup: ScanFrameLookup): PointScan {
  const chain = requestSegments(p);
  const firstFrame = chain.segments[0]?.packet.frame;
  if (firstFrame === undefined) return { scanned: false, why: chain.after ?? '' };
  let bytes: Uint8Array = new Uint8Array(0);
  let wire = 0;
  /** Where each segment's bytes start in `bytes`, to name the frame a header starts in. */
  const starts: { at: number; frame: number }[] = [];
  const result = (
    extra: { cut?: IdentityScanCut; continued?: IdentityScanContinued } = {},
  ): PointScan => {
    const head = scanIdentityHead(bytes, 0, bytes.length);
    const frameAt = (at: number): number =>
      starts.filter((s) => s.at <= at).pop()?.frame ?? firstFrame;
    const seen = head.headers.map((h) => ({
      point: p.name,
      frame: frameAt(h.at),
      kind: h.kind,
      value: h.value,
    }));
    return { scanned: true, seen, ...extra };
  };
  const continued = (frame: number, why: string): PointScan =>
    result({
      continued: {
        point: p.name,
        frame,
        segments: starts.length,
        payloadBytes: bytes.length,
        why,
      },
    });
  for (const { packet, skip } of chain.segments) {
    const f = lookup(p.name, packet);
    const first = starts.length === 0;
    if (typeof f === 'string') {
      if (first) return { scanned: false, why: f };
      return continued(
        starts[starts.length - 1]?.frame ?? firstFrame,
        `frame ${packet.frame}, the next segment, could not be read: ${f}`,
      );
    }
    const span = framePayloadSpan(f.linktype, f.data);
    const cutAt = (got: number, onWire: number): PointScan => {
      const cut: IdentityScanCut = {
        point: p.name,
        frame: packet.frame,
        payloadBytes: got,
        payloadLength: onWire,
        why: f.cutBy,
      };
      if (starts.length > 1) cut.segments = starts.length;
      return result({ cut });
    };
    if (span === null) {
      // Cut inside (or right after) the headers: nothing of the payload to look at, and said why.
      if (f.data.length < f.origLen) {
        starts.push({ at: bytes.length, frame: packet.frame });
        return cutAt(bytes.length, wire + packet.payloadLength - skip);
      }
      if (first) return { scanned: false, why: 'the frame has no payload bytes captured' };
      return continued(
        starts[starts.length - 1]?.frame ?? firstFrame,
        `frame ${packet.frame}, the next segment, has no payload bytes captured`,
      );
    }
    const from = Math.min(span.start + skip, span.end);
    const room = MAX_HEAD_BYTES - bytes.length;
    const take = f.data.subarray(from, Math.min(span.end, from + room));
    const isCut = span.end - span.start < span.wireLength;
    starts.push({ at: bytes.length, frame: packet.frame });
    bytes = join(bytes, take);
    wire += Math.max(0, span.wireLength - skip);
    // A cut frame ends the chain: the bytes after its cut are not had, so later ones cannot join.
    if (isCut) return cutAt(bytes.length, wire);
    const head = scanIdentityHead(bytes, 0, bytes.length);
    if (head.complete) return result();
    if (bytes.length >= MAX_HEAD_BYTES)
      return continued(
        packet.frame,
        `the scan reads at most ${MAX_HEAD_BYTES} bytes of a request head`,
      );
  }
  const last = starts[starts.length - 1]?.frame ?? firstFrame;
  return chain.after === null ? result() : continued(last, chain.after);
}

/** Which identity headers the request carried at each point whose frames `lookup` gives. */
export function scanIdentityHeaders(
  r: AnalysisResult,
  lookup: ScanFrameLookup,
): IdentityHeaderScan {
  const scan: Required<Omit<IdentityHeaderScan, 'headersOnly'>> = {
    scanned: [],
    notScanned: [],
    seen: [],
    cut: [],
    continued: [],
  };
  for (const p of r.points) {
    const s = scanPoint(p, lookup);
    if (!s.scanned) {
      scan.notScanned.push({ point: p.name, why: s.why });
      continue;
    }
    scan.scanned.push(p.name);
    scan.seen.push(...s.seen);
    if (s.cut !== undefined) scan.cut.push(s.cut);
    if (s.continued !== undefined) scan.continued.push(s.continued);
  }
  return scan;
}

/**
 * A live capture's identity headers, from the frames the collector fetched (store.loadFrames per
 * point; `unreadable`: points whose stored frames could not be read, with why). `payloadAsked`:
 * the capture asked the agents for whole frames (`evidencePayload`); without it the agents
 * retained headers only, so no request head is read (`headersOnly`, every point with a request
 * data segment in `notScanned` with HEADERS_ONLY_WHY) — never "no identity header".
 */
export function liveIdentityHeaders(
  r: AnalysisResult,
  frames: ReadonlyMap<string, RetainedFrames>,
  payloadAsked: boolean,
  unreadable: ReadonlyMap<string, string> = new Map(),
): IdentityHeaderScan {
  if (!payloadAsked)
    return { ...scanIdentityHeaders(r, () => HEADERS_ONLY_WHY), headersOnly: true };
  return scanIdentityHeaders(r, (point, packet) => {
    const gone = unreadable.get(point);
    if (gone !== undefined) return gone;
    const rf = frames.get(point);
    if (rf === undefined) return `frame ${packet.frame} was not fetched from its agent`;
    const missing = rf.missing.find((m) => m.frame === packet.frame);
    const rec = rf.frames.find((x) => x.frame === packet.frame);
    if (rec === undefined)
      return missing === undefined
        ? `its agent did not return frame ${packet.frame}`
        : `its agent could not give frame ${packet.frame} (${missing.reason})`;
    if (rf.linktype === null) return `its agent kept no frames`;
    if (rec.tsNs !== BigInt(packet.tsNs))
      return `the bytes its agent returned for frame ${packet.frame} are not the frame analysed (FRAMES_MISMATCH)`;
    const cutBy = `the agent retained at most ${rf.snaplen} bytes a frame (the capture's snaplen)`;
    return { linktype: rf.linktype, data: rec.bytes, origLen: rec.origLen, cutBy };
  });
}

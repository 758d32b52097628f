/**
 * Identity headers of the request at each point: the first bytes of the request's first data
 * segment, from whatever bytes the shell still has of that frame — offline the capture file read
 * again (offline/identity-scan.ts), live the frames the agents retained (liveIdentityHeaders
 * below) — looked at by core/decode/identity-headers.ts. Honest about what it did not have: a
 * frame cut before the end of its payload (a snaplen, the agent's 256-byte retention) is listed in
 * `cut` with the bytes looked at, and a point whose frame could not be had in `notScanned` with
 * why, so "no identity header" is never said about bytes nobody read. Pure.
 */
import type { AnalysisResult, FlowPacketSummary, IdentityHeaderScan } from './analysis-result';
import { framePayloadSpan } from '../decode/frame';
import { identityHeadersIn } from '../decode/identity-headers';
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

/** The request's first data segment at `point` (request direction, payload), or null. */
export function requestDataPacket(r: AnalysisResult, point: string): FlowPacketSummary | null {
  const p = r.points.find((x) => x.name === point);
  return p?.flow.find((f) => f.dir === 'request' && f.payloadLength > 0) ?? null;
}

/** Which identity headers the request carried at each point whose frame `lookup` gives. */
export function scanIdentityHeaders(
  r: AnalysisResult,
  lookup: ScanFrameLookup,
): IdentityHeaderScan {
  const scan: IdentityHeaderScan = { scanned: [], notScanned: [], seen: [], cut: [] };
  for (const p of r.points) {
    const packet = requestDataPacket(r, p.name);
    if (packet === null) {
      scan.notScanned.push({ point: p.name, why: 'no data segment of the request was seen here' });
      continue;
    }
    const f = lookup(p.name, packet);
    if (typeof f === 'string') {
      scan.notScanned.push({ point: p.name, why: f });
      continue;
    }
    const span = framePayloadSpan(f.linktype, f.data);
    const at = { point: p.name, frame: packet.frame };
    if (span === null) {
      // Cut inside (or right after) the headers: nothing of the payload to look at, and said why.
      if (f.data.length >= f.origLen) {
        scan.notScanned.push({ point: p.name, why: 'the frame has no payload bytes captured' });
        continue;
      }
      scan.scanned.push(p.name);
      scan.cut.push({ ...at, payloadBytes: 0, payloadLength: packet.payloadLength, why: f.cutBy });
      continue;
    }
    scan.scanned.push(p.name);
    const payloadBytes = span.end - span.start;
    if (payloadBytes < span.wireLength)
      scan.cut.push({ ...at, payloadBytes, payloadLength: span.wireLength, why: f.cutBy });
    for (const h of identityHeadersIn(f.data, span.start, span.end))
      scan.seen.push({ ...at, ...h });
  }
  return scan;
}

/**
 * A live capture's identity headers, from the frames the collector fetched (store.loadFrames per
 * point; `unreadable`: points whose stored frames could not be read, with why). `payloadAsked`:
 * the capture asked the agents for whole frames (`evidencePayload`), so a cut is the capture's
 * snaplen, not retention's default.
 */
export function liveIdentityHeaders(
  r: AnalysisResult,
  frames: ReadonlyMap<string, RetainedFrames>,
  payloadAsked: boolean,
  unreadable: ReadonlyMap<string, string> = new Map(),
): IdentityHeaderScan {
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
    const cutBy = payloadAsked
      ? `the agent retained at most ${rf.snaplen} bytes a frame (the capture's snaplen)`
      : `the frame was cut at retention's ${rf.snaplen} B; capture with --evidence-payload to see all`;
    return { linktype: rf.linktype, data: rec.bytes, origLen: rec.origLen, cutBy };
  });
}

/**
 * The request's consecutive data segments at one point, in sequence order, from the point's flow
 * list (capture order): the first request-direction data segment, then each later one whose
 * sequence number is the next expected (RFC 9293 §3.4: sequence numbers count bytes modulo 2^32).
 * A segment wholly before the expected number is a retransmission or duplicate of bytes already
 * taken and is skipped; one that overlaps them gives only its new bytes (`skip`); one past it is a
 * gap (a segment missing here or captured out of order), where the chain stops and says why,
 * because bytes after a hole cannot be placed. Only sequence numbers are read here; the bytes
 * are the caller's (core/report/identity-scan.ts). Pure.
 */
import type { FlowPacketSummary, PointSummary } from './analysis-result';

/**
 * At most this many segments are joined: a request head longer than 16 full segments (~23 KB at
 * an MSS of 1448) is far past what any proxy writes before its identity headers; the bound keeps a
 * point's re-reading (offline: a file pass per segment) small.
 */
export const MAX_HEAD_SEGMENTS = 16;

/** One segment of the chain: its packet, and how many of its first payload bytes were taken before. */
export interface ChainSegment {
  packet: FlowPacketSummary;
  skip: number;
}

export interface RequestSegments {
  segments: ChainSegment[];
  /** Why no segment follows the last one, a sentence for the report; null: none can (a datagram). */
  after: string | null;
}

const HALF = 2 ** 31;
/** `b - a` modulo 2^32, as 0 … 2^32-1. */
const seqDiff = (b: number, a: number): number => (b - a + 2 ** 32) % 2 ** 32;

/** The request's consecutive data segments at point `p`, up to MAX_HEAD_SEGMENTS. */
export function requestSegments(p: PointSummary): RequestSegments {
  const data = p.flow.filter((f) => f.dir === 'request' && f.payloadLength > 0);
  const first = data[0];
  if (first === undefined)
    return { segments: [], after: 'no data segment of the request was seen here' };
  const segments: ChainSegment[] = [{ packet: first, skip: 0 }];
  // A datagram (no sequence number) is a whole message: nothing follows it.
  if (first.seq === null) return { segments, after: null };
  let next = (first.seq + first.payloadLength) % 2 ** 32;
  for (const f of data.slice(1)) {
    if (f.seq === null) continue;
    const behind = seqDiff(next, f.seq); // how far f starts before the expected number
    if (behind === 0 || (behind < HALF && behind < f.payloadLength)) {
      if (segments.length === MAX_HEAD_SEGMENTS)
        return { segments, after: `the scan reads at most ${MAX_HEAD_SEGMENTS} segments` };
      segments.push({ packet: f, skip: behind });
      next = (f.seq + f.payloadLength) % 2 ** 32;
    } else if (behind < HALF) {
      continue; // a retransmission or duplicate of bytes already taken
    } else {
      return {
        segments,
        after: `the next segment (seq ${next}) was not captured here before frame ${f.frame} (seq ${f.seq}): missing or out of order, so the bytes after it cannot be placed`,
      };
    }
  }
  return {
    segments,
    after:
      p.flowOmitted > 0
        ? `the analysis keeps only the connection's first ${p.flow.length} packets here`
        : 'no further data segment of the request was captured here',
  };
}

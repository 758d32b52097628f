/**
 * How far back toward the client the reply was seen, and what the captured request packets prove
 * about it. The first point is the one nearest the client (points are in path order): the reply
 * came back when that point saw it, or when the client acknowledged it — a TCP client sends an ACK
 * after its SYN only once a SYN-ACK reached it, so its ACK proves an answer arrived even where the
 * captures hold the request direction only (a capture filter). Otherwise the reply did not come
 * back, and the nearest point to the client that saw it says where it was last.
 *
 * Pure: takes the points as the journey (PointMatch) or the report (PointSummary) has them.
 */

/** What this module reads of one point. */
export interface ReplyPoint {
  name: string;
  /** The request was seen here (matched, with an observed tuple). */
  seen: boolean;
  seenReply: boolean;
  seenSyn: boolean;
  flow: readonly { dir: 'request' | 'reply'; flags: number; frame: number }[];
}

const SYN = 0x02;
const ACK = 0x10;

/** A client's ACK after its SYN at one point: the frame that proves an answer reached the client. */
export interface ClientAck {
  point: string;
  frame: number;
}

export type ReplyPath =
  /** The point nearest the client saw the reply. */
  | { kind: 'seen'; at: string; notCapturedAt: string[] }
  /** No point nearest the client saw it, but the client acknowledged an answer. */
  | { kind: 'acked'; ack: ClientAck; notCapturedAt: string[] }
  /**
   * The reply did not come back: `lastSeenAt` the nearest point to the client that saw it (null:
   * none did), `missingAt` the next point toward the client, which did not.
   */
  | { kind: 'missing'; missingAt: string; lastSeenAt: string | null };

/** The first request-direction ACK (without SYN) after a SYN at a point that saw the SYN. */
export function clientAck(points: readonly ReplyPoint[]): ClientAck | null {
  for (const p of points) {
    if (!p.seen || !p.seenSyn) continue;
    let synSeen = false;
    for (const f of p.flow) {
      if (f.dir !== 'request') continue;
      if ((f.flags & SYN) !== 0) synSeen = true;
      else if (synSeen && (f.flags & ACK) !== 0) return { point: p.name, frame: f.frame };
    }
  }
  return null;
}

/**
 * Where the reply got to, over `path`: the points from the client's side up to the backend that
 * the analysis follows (points that did not see the request say nothing about its reply).
 */
export function replyPath(path: readonly ReplyPoint[]): ReplyPath | null {
  const seen = path.filter((p) => p.seen);
  const nearest = seen[0];
  if (nearest === undefined) return null;
  const notCapturedAt = seen.filter((p) => !p.seenReply).map((p) => p.name);
  if (nearest.seenReply) return { kind: 'seen', at: nearest.name, notCapturedAt };
  const ack = clientAck(seen);
  if (ack !== null) return { kind: 'acked', ack, notCapturedAt };
  // On its way back: the nearest point to the client that saw it, and the next one that did not.
  const at = seen.findIndex((p) => p.seenReply);
  if (at < 0) return { kind: 'missing', missingAt: nearest.name, lastSeenAt: null };
  const next = seen.slice(0, at).reverse()[0] ?? nearest;
  return { kind: 'missing', missingAt: next.name, lastSeenAt: seen[at]?.name ?? null };
}

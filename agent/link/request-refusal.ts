/**
 * The answers to a collector's request the agent does not serve: a frames request refused (busy,
 * no retention, capture still running) and any doctor, conntrack or frames request the link
 * refused while decoding it (a bound of common/command-limits.ts broken, a value out of range).
 * Whatever request can be identified by its id is answered at once, with a stable code and why,
 * so the collector's caller hears the reason instead of waiting out its timeout.
 */
import type { RefusedEnvelope } from '../../common/envelope';
import { HoptraceError, type ErrorCode } from '../../common/errors';
import { FRAMES_LIMITS } from '../../common/frames-wire';
import type { ConntrackReport, DoctorReport, FramesReply, FramesRequest } from '../../common/wire';

/** A reply naming every frame asked for as missing, for one reason. */
export function framesRefused(
  req: FramesRequest,
  err: { code: string; message: string },
): FramesReply {
  const frames = [...new Set(req.frames)].sort((a, b) => a - b);
  return {
    requestId: req.requestId,
    captureId: req.captureId,
    point: req.point,
    linkType: null,
    snaplen: 0,
    records: [],
    missing: frames.map((frame) => ({ frame, reason: err.code })),
    retained: 0,
    retentionDropped: 0,
    errorCode: err.code,
    message: err.message,
  };
}

/** The reply to a request refused as it was decoded. */
export type RefusedReply =
  | { kind: 'doctorReport'; doctorReport: DoctorReport }
  | { kind: 'conntrackReport'; conntrackReport: ConntrackReport }
  | { kind: 'framesReply'; framesReply: FramesReply };

/**
 * The answer to a request the link refused as it decoded it (`what`, from the decoder's error
 * `code` and `detail`); null when it is no request or its id could not be read (nothing to answer
 * to). A doctor request or conntrack query is refused as DOCTOR_BAD_REQUEST, nothing read; a
 * frames request names no frame, with the decoder's code (FRAMES_MALFORMED, WIRE_MALFORMED).
 */
export function requestRefused(
  what: RefusedEnvelope,
  who: { agentId: string; node: string },
  code: ErrorCode,
  detail: string,
): RefusedReply | null {
  const requestId = what.requestId;
  if (requestId === undefined) return null;
  const captureId = what.captureId ?? '';
  if (what.kind === 'framesRequest') {
    const point = what.point ?? '';
    // The collector takes no longer names in a frames reply (FRAMES_LIMITS).
    if ([requestId, captureId, point].some((n) => n.length > FRAMES_LIMITS.name)) return null;
    const req = { requestId, captureId, point, frames: [], release: false };
    const message = `${code}: the frames request was refused: ${detail}`;
    return { kind: 'framesReply', framesReply: framesRefused(req, { code, message }) };
  }
  if (what.kind !== 'doctorRequest' && what.kind !== 'conntrackQuery') return null;
  const err = new HoptraceError(
    'DOCTOR_BAD_REQUEST',
    `the ${what.kind} was refused whole, nothing read: ${detail}`,
    {
      where: who.node,
      hint: 'the collector asked more than an agent takes (common/command-limits.ts): shorter targets and fewer namespaces, or the same hoptrace version on both ends',
    },
  );
  const refusal = { errorCode: err.code, message: err.message };
  if (what.kind === 'doctorRequest')
    return {
      kind: 'doctorReport',
      doctorReport: { requestId, agentId: who.agentId, node: who.node, facts: [], ...refusal },
    };
  return {
    kind: 'conntrackReport',
    conntrackReport: {
      requestId,
      captureId,
      agentId: who.agentId,
      entries: [],
      errors: [],
      ...refusal,
    },
  };
}

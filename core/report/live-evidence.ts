/**
 * evidence.pcapng of a live capture: the frames the agents retained of the matched connection
 * (fetched by the collector after the verdict, collector/frames-fetch.ts), one Interface
 * Description Block per point named `point@node/iface`, each frame cut again right after its
 * innermost transport header (headers only) unless the capture asked for the payload
 * (`evidencePayload`: the agents then retained whole frames, kept as retained), on the first
 * point's clock by the estimated offsets,
 * each with a comment naming its point, frame, direction and the keys that matched. A frame the
 * agent could not give is never invented: it is named, with the agent's reason, in `problems`.
 * Pure: frames in, bytes and a summary out.
 */
import type { AnalysisResult } from './analysis-result';
import { clockText, flowPacketText, framesText, notInFileText } from './evidence-text';
import { payloadOffset } from '../decode/frame';
import { writePcapng, type PcapngInterfaceInfo, type PcapngPacketInfo } from './pcapng';
import type { EvidenceSummary } from './report-document';
import { toReferenceClock, utcMicros } from './times';

/** One point's retained frames as the collector stored them (store.loadFrames). */
export interface RetainedFrames {
  point: string;
  linktype: number | null;
  snaplen: number;
  frames: readonly { frame: number; tsNs: bigint; origLen: number; bytes: Uint8Array }[];
  missing: readonly { frame: number; reason: string }[];
  /** Frames the point's retention kept, and those past its bound it did not (the agent's counters). */
  retained?: number;
  retentionDropped?: number;
}

export interface LiveEvidenceOptions {
  /** Keep the payload bytes the agents retained (the capture's `evidencePayload`); else headers only. */
  payload?: boolean;
}

export interface LiveEvidence {
  bytes: Buffer;
  summary: EvidenceSummary;
}

/** evidence.pcapng from the retained frames (`frames` by point; absent: none were fetched). */
export function liveEvidencePcapng(
  result: AnalysisResult,
  frames: ReadonlyMap<string, RetainedFrames>,
  version: string,
  opts: LiveEvidenceOptions = {},
): LiveEvidence {
  const payload = opts.payload === true;
  let cutFrames = 0;
  const full: string[] = [];
  const clock = new Map((result.clock ?? []).map((o) => [o.point, o]));
  const infos: PcapngInterfaceInfo[] = [];
  const summary: EvidenceSummary = {
    file: 'evidence.pcapng',
    packets: 0,
    headersOnly: !payload,
    interfaces: [],
    problems: [],
    note: '',
  };
  const placed: { ref: bigint; order: number; pkt: PcapngPacketInfo }[] = [];
  for (const [order, p] of result.points.entries()) {
    if (p.flow.length === 0) continue;
    const rf = frames.get(p.name);
    if (rf === undefined || rf.linktype === null) {
      const why =
        rf === undefined ? 'no frames were fetched from its agent' : 'its agent kept none';
      const reasons = [...new Set(rf?.missing.map((m) => m.reason) ?? [])].join(', ');
      summary.problems.push({
        point: p.name,
        code: rf?.missing[0]?.reason ?? 'FRAMES_NOT_FETCHED',
        detail: `${why}${reasons === '' ? '' : ` (${reasons})`}: its ${p.flow.length} packets are not in the file`,
      });
      continue;
    }
    const byFrame = new Map(rf.frames.map((f) => [f.frame, f]));
    const missing = new Map(rf.missing.map((m) => [m.frame, m.reason]));
    const id = infos.length;
    const name = `${p.name}@${p.node ?? '?'}/${p.iface ?? '?'}`;
    infos.push({
      linktype: rf.linktype,
      snaplen: rf.snaplen,
      name,
      description: `capture point ${order + 1} of ${result.points.length}: ${p.name} on node ${p.node ?? '?'}, interface ${p.iface ?? '?'}; frames retained by the agent (at most ${rf.snaplen} bytes each)${payload ? ', payload kept' : ', cut after the transport header'}`,
    });
    if ((rf.retentionDropped ?? 0) > 0)
      full.push(
        `${p.name}'s retention reached its bound after ${rf.retained ?? 0} frames (${rf.retentionDropped ?? 0} more not kept)`,
      );
    let n = 0;
    const lost = new Map<string, number[]>();
    const o = clock.get(p.name);
    for (const f of p.flow) {
      const rec = byFrame.get(f.frame);
      if (rec === undefined || rec.tsNs !== BigInt(f.tsNs)) {
        const reason =
          rec === undefined ? (missing.get(f.frame) ?? 'FRAMES_NOT_RETURNED') : 'FRAMES_MISMATCH';
        lost.set(reason, [...(lost.get(reason) ?? []), f.frame]);
        continue;
      }
      const cut = payload ? null : payloadOffset(rf.linktype, rec.bytes);
      const data = cut === null ? rec.bytes : rec.bytes.subarray(0, cut);
      if (payload && rec.bytes.length < rec.origLen) cutFrames++;
      const keys = f.dir === 'request' ? p.matchedBy : p.replyMatchedBy;
      placed.push({
        ref: toReferenceClock(rec.tsNs, o),
        order,
        pkt: {
          interfaceId: id,
          tsNs: toReferenceClock(rec.tsNs, o),
          data,
          originalLength: rec.origLen,
          comment: `${p.name} frame ${f.frame}: ${flowPacketText(f)}; matched by ${keys.length > 0 ? keys.join(',') : '(no key recorded)'}; captured ${utcMicros(rec.tsNs)} by ${p.node ?? '?'}'s clock, ${clockText(o)}`,
        },
      });
      n++;
    }
    for (const [reason, ns] of lost)
      summary.problems.push({
        point: p.name,
        code: reason,
        detail: `frame${ns.length === 1 ? '' : 's'} ${framesText(ns)} of the matched connection not in the file (${notInFileText(reason)})`,
      });
    summary.interfaces.push({ point: p.name, name, packets: n });
  }
  placed.sort((a, b) => (a.ref === b.ref ? a.order - b.order : a.ref < b.ref ? -1 : 1));
  summary.packets = placed.length;
  const ref = result.points[0]?.name ?? 'the first point';
  const snaplens = [...frames.values()].filter((f) => f.linktype !== null).map((f) => f.snaplen);
  const kept = payload
    ? `with their payload as retained (the capture asked for it: at most ${Math.max(0, ...snaplens)} bytes a frame, so a point's bounded retention holds fewer frames than headers only)` +
      (cutFrames > 0
        ? `; ${cutFrames} frame${cutFrames === 1 ? ' was' : 's were'} longer and cut there`
        : '')
    : 'each cut after its innermost transport header (no payload bytes)';
  summary.note =
    `The frames the agents retained of the matched connection, fetched after the verdict; ${kept}, ` +
    `times moved onto ${ref}'s clock by the estimated clock offsets (a point whose offset is not bounded keeps its own clock; each packet's comment says which).` +
    (full.length > 0 ? ` ${full.join('; ')}.` : '');
  const bytes = writePcapng({
    userAppl: `hoptrace ${version}`,
    comment: summary.note,
    interfaces: infos,
    packets: placed.map((x) => x.pkt),
  });
  return { bytes, summary };
}

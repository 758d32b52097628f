/**
 * evidence.pcapng of a repro: the frames the agents retained of every probe's matched connection,
 * one Interface Description Block per capture (a point of one pod incarnation, or the backend
 * capture of the whole run) named `point@node/iface`, each frame cut after its innermost transport
 * header (headers only) and commented with the probe it belongs to and that probe's verdict.
 * Times stay on each node's own clock (a repro estimates no clock offsets). A frame the agent
 * could not give, a capture whose frames are gone, frames beyond the bound: each is named in
 * `problems` with its reason, never left out silently. Pure: flows and fetched frames in, bytes
 * and a summary out.
 */
import type { ProbeFlow, TimelineRow } from './repro-core';
import { flowPacketText, framesText, notInFileText } from '../report/evidence-text';
import { payloadOffset } from '../decode/frame';
import { writePcapng, type PcapngInterfaceInfo, type PcapngPacketInfo } from '../report/pcapng';
import type { RetainedFrames } from '../report/live-evidence';
import { utcMicros } from '../report/times';

/** Frames fetched per capture at most (the first probes' first): bounds the agents' answers. */
export const REPRO_EVIDENCE_MAX_FRAMES = 2048;

/** One capture of the repro whose frames the evidence may hold. */
export interface ReproCapture {
  /** `backend`, or `decap (vpn-0)` as the text names it. */
  label: string;
  captureId: string;
  point: string;
  /** 0: the backend capture; else the attachment (pod incarnation). */
  epoch: number;
  agentId: string | null;
  node: string | null;
  iface: string;
  /** The pod incarnation of a decap or egress capture; null for the backend. */
  pod: string | null;
}

/** Which frames to ask each capture for. */
export interface FramesWanted {
  frames: number[];
  /** Frames of matched connections beyond REPRO_EVIDENCE_MAX_FRAMES (not asked for). */
  omitted: number;
}

export const captureKey = (point: string, epoch: number): string => `${point}#${epoch}`;

/** Per capture (captureKey), the frames of the probes' matched connections, bounded. */
export function reproFramesToFetch(
  flows: readonly ProbeFlow[],
  max = REPRO_EVIDENCE_MAX_FRAMES,
): Map<string, FramesWanted> {
  const all = new Map<string, Set<number>>();
  for (const f of flows) {
    const k = captureKey(f.point, f.epoch);
    const set = all.get(k) ?? new Set<number>();
    for (const p of f.packets) if (Number.isSafeInteger(p.frame) && p.frame > 0) set.add(p.frame);
    all.set(k, set);
  }
  const out = new Map<string, FramesWanted>();
  for (const [k, set] of all) {
    const sorted = [...set].sort((a, b) => a - b);
    out.set(k, { frames: sorted.slice(0, max), omitted: Math.max(0, sorted.length - max) });
  }
  return out;
}

/** What evidence.pcapng holds and lacks (report.json `evidence`, report.md, report.html). */
export interface ReproEvidenceSummary {
  file: 'evidence.pcapng';
  packets: number;
  headersOnly: true;
  /** One per capture that gave frames, in the file's interface order. */
  interfaces: { capture: string; name: string; point: string; epoch: number; packets: number }[];
  /** Each capture (or probe) whose packets are not all in the file, and why. */
  problems: { capture: string; code: string; detail: string }[];
  /** Probes with no matched packet at any capture (nothing of theirs to keep). */
  probesWithoutPackets: string[];
  note: string;
  /** SHA-256 (hex) and size of the file as written (set by the shell that writes it). */
  sha256?: string;
  bytes?: number;
}

export interface ReproEvidence {
  bytes: Buffer;
  summary: ReproEvidenceSummary;
}

/**
 * evidence.pcapng from the frames fetched per capture (`frames` by captureKey; a capture absent
 * from it was not asked, or gave nothing).
 */
export function reproEvidencePcapng(input: {
  rows: readonly TimelineRow[];
  flows: readonly ProbeFlow[];
  captures: readonly ReproCapture[];
  wanted: ReadonlyMap<string, FramesWanted>;
  frames: ReadonlyMap<string, RetainedFrames>;
  version: string;
}): ReproEvidence {
  const verdicts = new Map(input.rows.map((r) => [r.probeId, r.verdict]));
  const summary: ReproEvidenceSummary = {
    file: 'evidence.pcapng',
    packets: 0,
    headersOnly: true,
    interfaces: [],
    problems: [],
    probesWithoutPackets: input.rows
      .filter((r) => !input.flows.some((f) => f.probeId === r.probeId && f.packets.length > 0))
      .map((r) => r.probeId),
    note: '',
  };
  const infos: PcapngInterfaceInfo[] = [];
  const placed: { ts: bigint; order: number; pkt: PcapngPacketInfo }[] = [];
  for (const [order, c] of input.captures.entries()) {
    const k = captureKey(c.point, c.epoch);
    const want = input.wanted.get(k);
    if (want === undefined || (want.frames.length === 0 && want.omitted === 0)) continue;
    if (want.omitted > 0)
      summary.problems.push({
        capture: c.label,
        code: 'FRAMES_BOUND',
        detail: `${want.omitted} frames of later probes' connections were not asked for (at most ${REPRO_EVIDENCE_MAX_FRAMES} per capture)`,
      });
    const rf = input.frames.get(k);
    if (rf === undefined || rf.linktype === null) {
      const reasons = [...new Set(rf?.missing.map((m) => m.reason) ?? [])];
      summary.problems.push({
        capture: c.label,
        code: reasons[0] ?? 'FRAMES_NOT_FETCHED',
        detail: `${rf === undefined ? 'no frames were fetched from its agent' : 'its agent gave none'}${reasons.length === 0 ? '' : ` (${reasons.join(', ')})`}: its ${want.frames.length} frames are not in the file`,
      });
      continue;
    }
    const id = infos.length;
    // Two incarnations of a pod share point, node and interface: the pod tells them apart.
    const name = `${c.point}@${c.node ?? '?'}/${c.iface}${c.pod === null ? '' : ` (${c.pod})`}`;
    infos.push({
      linktype: rf.linktype,
      snaplen: rf.snaplen,
      name,
      description: `${c.epoch === 0 ? 'the backend capture of the whole run' : `capture ${c.label}, attachment ${c.epoch}`} (capture id ${c.captureId}) on node ${c.node ?? '?'}, interface ${c.iface}; frames retained by the agent, cut after the transport header`,
    });
    const byFrame = new Map(rf.frames.map((f) => [f.frame, f]));
    const missing = new Map(rf.missing.map((m) => [m.frame, m.reason]));
    const asked = new Set(want.frames);
    const lost = new Map<string, number[]>();
    const done = new Set<number>();
    let n = 0;
    for (const flow of input.flows) {
      if (flow.point !== c.point || flow.epoch !== c.epoch) continue;
      for (const p of flow.packets) {
        if (!asked.has(p.frame) || done.has(p.frame)) continue;
        done.add(p.frame);
        const rec = byFrame.get(p.frame);
        if (rec === undefined || rec.tsNs !== BigInt(p.tsNs)) {
          const reason =
            rec === undefined ? (missing.get(p.frame) ?? 'FRAMES_NOT_RETURNED') : 'FRAMES_MISMATCH';
          lost.set(reason, [...(lost.get(reason) ?? []), p.frame]);
          continue;
        }
        const cut = payloadOffset(rf.linktype, rec.bytes);
        placed.push({
          ts: rec.tsNs,
          order,
          pkt: {
            interfaceId: id,
            tsNs: rec.tsNs,
            data: cut === null ? rec.bytes : rec.bytes.subarray(0, cut),
            originalLength: rec.origLen,
            comment: `probe ${flow.probeId} (${verdicts.get(flow.probeId) ?? '?'}): ${c.label} frame ${p.frame}: ${flowPacketText(p)}; matched by ${flow.matchedBy.length > 0 ? flow.matchedBy.join(',') : '(no key recorded)'}; captured ${utcMicros(rec.tsNs)} by ${c.node ?? '?'}'s clock`,
          },
        });
        n++;
      }
    }
    for (const [reason, ns] of lost)
      summary.problems.push({
        capture: c.label,
        code: reason,
        detail: `${ns.length} frame${ns.length === 1 ? '' : 's'} (${framesText(ns, 12)}) not in the file (${notInFileText(reason)})`,
      });
    summary.interfaces.push({ capture: c.label, name, point: c.point, epoch: c.epoch, packets: n });
  }
  placed.sort((a, b) => (a.ts === b.ts ? a.order - b.order : a.ts < b.ts ? -1 : 1));
  summary.packets = placed.length;
  summary.note =
    'The frames the agents retained of each probe’s matched connection, fetched when the repro finished; one interface per capture (a point of one VPN pod incarnation, or the backend), each frame cut after its innermost transport header (no payload bytes), each packet’s comment naming its probe and verdict. Times are each node’s own clock.';
  const bytes = writePcapng({
    userAppl: `hoptrace ${input.version}`,
    comment: summary.note,
    interfaces: infos,
    packets: placed.map((x) => x.pkt),
  });
  return { bytes, summary };
}

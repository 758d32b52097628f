/**
 * evidence.pcapng for `hoptrace analyze`: the matched connection's packets from every point's
 * capture file, in one file Wireshark opens, one interface per point, on one clock.
 *
 * Each point's file is read again, streaming, from the analysis's last resume point before the
 * first frame its `flow` names (offline/seek-points.ts; from the file's start without one) up to
 * the last (the reader's
 * one reused buffer; only the chosen frames are copied: at most MAX_FLOW_PACKETS per point, each a
 * hundred-odd bytes headers only, at most libpcap's 262144 with `payload`), and
 * every chosen frame is decoded again and checked against the analysed packet (tuple, time, TCP
 * flags, seq, ack, payload length, tunnel): a file that changed since the analysis gives that
 * point an EVIDENCE_FILE_CHANGED problem and none of its packets, never other packets in their
 * place. By default a frame is kept only up to the end of its innermost transport header
 * (payloadOffset: TCP with options, UDP 8 bytes, ICMP 8) with its original length, so the file
 * holds the headers the verdict rests on and no application data; `payload: true` keeps the bytes
 * as captured. Packets are merged in time order on the first point's clock (times.ts
 * toReferenceClock); each packet's comment gives its point, frame number, direction, the keys that
 * matched, the time it was captured and the offset applied.
 *
 * Interface names: `point@node/iface` when the node is known; offline a file names no node, so
 * `point@file/<file name>` (and `#<pcapng interface name>` when a point's frames came from several
 * interfaces of its file). Each keeps its file's link type and snapshot length.
 *
 * Use (`analyze --report-dir`): `const ev = buildEvidencePcapng({ points, result, version })`,
 * write `ev.bytes` to evidence.pcapng, and give `ev.note` (and each of `ev.problems`) in the report.
 */
import { basename, resolve } from 'node:path';
import { isHoptraceError, type ErrorCode } from '../common/errors';
import { flowView } from '../core/correlate/match-point';
import { sameEndpoint } from '../core/correlate/journey';
import { toPacketEvent } from '../core/decode/event';
import { decodeFrame, linktypeOf, payloadOffset } from '../core/decode/frame';
import type { PacketEvent } from '../common/event';
import type {
  AnalysisResult,
  FlowPacketSummary,
  PointSummary,
} from '../core/report/analysis-result';
import { clockText, tcpFlagsText } from '../core/report/evidence-text';
import { writePcapng, type PcapngInterfaceInfo } from '../core/report/pcapng';
import { formatEndpoint } from '../core/report/report';
import { toReferenceClock, utcMicros, type ClockOffset } from '../core/report/times';
import type { PointFile } from './analyze-files';
import { isFileStop, openCaptureFile, type ResumePoint } from './pcap-file';
import { resumeFor } from './seek-points';
import { isStreamInput, readOnceText } from './point-inputs';

export interface EvidenceInput {
  /** The files the analysis read, by point name (`analyze --point NAME=FILE`). */
  points: readonly PointFile[];
  result: AnalysisResult;
  /** hoptrace's version: the file's shb_userappl is `hoptrace <version>`. */
  version: string;
  /** Keep every captured byte of each frame (default false: headers only). */
  payload?: boolean;
  /**
   * The analysis's resume points by point name (analyzeFiles' `seek` option): a point's file is
   * then read from the last one before its first frame wanted, not from its first frame.
   */
  seek?: ReadonlyMap<string, readonly ResumePoint[]> | undefined;
}

/** One interface of evidence.pcapng (its Interface Description Block). */
export interface EvidenceInterface {
  /** Interface id in the file (Wireshark's frame.interface_id). */
  id: number;
  point: string;
  /** if_name, e.g. `decap@file/decap.pcap`. */
  name: string;
  /** if_description. */
  description: string;
  /** LINKTYPE_* value, from the point's file. */
  linktype: number;
  snaplen: number;
  /** Packets written on this interface. */
  packets: number;
  file: string;
}

/** A point whose packets are not in the file, and why. */
export interface EvidenceProblem {
  point: string;
  file: string;
  /** EVIDENCE_FILE_CHANGED, or the FILE_* error reading the file again gave. */
  code: ErrorCode;
  detail: string;
}

export interface Evidence {
  /** The pcapng file. */
  bytes: Buffer;
  packets: number;
  interfaces: EvidenceInterface[];
  /** Frames cut after their innermost transport header (false: as captured). */
  headersOnly: boolean;
  /** Points left out of the file (their packets could not be read back as analysed). */
  problems: EvidenceProblem[];
  /** What the file holds, for the report (also the file's section comment). */
  note: string;
}

/** One frame read back, checked and cut. */
interface ReadFrame {
  entry: FlowPacketSummary;
  linktype: number;
  snaplen: number;
  ifaceName: string | undefined;
  wireLength: number;
  data: Buffer;
  ev: PacketEvent;
}

type PointRead = { frames: ReadFrame[] } | { problem: Omit<EvidenceProblem, 'point' | 'file'> };

/** Why the frame read back is not the analysed packet, or null when it is. */
function difference(entry: FlowPacketSummary, ev: PacketEvent): string | null {
  const v = flowView(ev);
  const at = `frame ${entry.frame}`;
  if (v === null) return `${at} holds no TCP, UDP or ICMP echo packet now`;
  if (!sameEndpoint(v.tuple, entry.tuple))
    return `${at}: tuple ${formatEndpoint(v.tuple)}, analysed ${formatEndpoint(entry.tuple)}`;
  const checks: [string, string, string][] = [
    ['time', `${ev.tsNs} ns`, `${entry.tsNs} ns`],
    ['TCP flags', `0x${v.flags.toString(16)}`, `0x${entry.flags.toString(16)}`],
    ['seq', String(v.seq), String(entry.seq)],
    ['ack', String(v.ack), String(entry.ack)],
    ['payload length', String(ev.keys.payloadLength), String(entry.payloadLength)],
    ['tunnel', String(ev.tunnels.length > 0), String(entry.tunneled)],
  ];
  for (const [what, now, then] of checks)
    if (now !== then) return `${at}: ${what} ${now}, analysed ${then}`;
  return null;
}

/** Reads `point`'s flow frames back from `file`: every one, checked, or the problem. */
function readPoint(
  p: PointSummary,
  file: string,
  headersOnly: boolean,
  seek: readonly ResumePoint[] | undefined,
): PointRead {
  const want = new Map(p.flow.map((f) => [f.frame, f]));
  const order = [...want.keys()].sort((a, b) => a - b);
  const last = order.at(-1) ?? 0;
  const resume = resumeFor(seek, order[0] ?? 0);
  const ctx = { point: p.name, node: '', iface: 'file' };
  const frames: ReadFrame[] = [];
  let cut = '';
  try {
    const reader = openCaptureFile(file, { resume });
    // The frames between the flow's are read past without building each one.
    let next = 0;
    reader.skipUntil(order[0] ?? 0);
    try {
      for (const f of reader.frames()) {
        if (f.index > last) break;
        while (next < order.length && (order[next] ?? 0) <= f.index) next++;
        reader.skipUntil(order[next] ?? last + 1);
        const entry = want.get(f.index);
        if (entry === undefined) continue;
        const ev = toPacketEvent(f, decodeFrame(f.linktype, f.data), ctx);
        const why = difference(entry, ev);
        if (why !== null) return { problem: { code: 'EVIDENCE_FILE_CHANGED', detail: why } };
        // A frame with no IP header read has no payload to drop: the flow holds none anyway.
        const keep = headersOnly ? (payloadOffset(f.linktype, f.data) ?? f.caplen) : f.caplen;
        frames.push({
          entry,
          linktype: f.linktype,
          snaplen: f.snaplen,
          ifaceName: f.ifaceName,
          wireLength: f.wireLength,
          data: Buffer.from(f.data.subarray(0, keep)),
          ev,
        });
      }
    } finally {
      reader.close();
    }
  } catch (e) {
    if (!isHoptraceError(e)) throw e;
    // Cut shorter than when it was analysed: the frames before the cut were read. Damaged right
    // after the flow's last frame (where the analysis stopped too): every frame was read.
    const readAll = isFileStop(e) && frames.length === want.size;
    if (e.code !== 'FILE_TRUNCATED' && !readAll)
      return { problem: { code: e.code, detail: e.detail } };
    if (e.code === 'FILE_TRUNCATED') cut = ` (it now ends inside a record: ${e.detail})`;
  }
  if (frames.length < want.size) {
    const found = new Set(frames.map((f) => f.entry.frame));
    const missing = [...want.keys()].filter((n) => !found.has(n));
    const list = missing.slice(0, 5).join(', ') + (missing.length > 5 ? ', …' : '');
    return {
      problem: {
        code: 'EVIDENCE_FILE_CHANGED',
        detail: `the file no longer holds frame${missing.length > 1 ? 's' : ''} ${list}${cut}`,
      },
    };
  }
  return { frames };
}

/** `request SYN`, `reply PSH,ACK len 38`, `request UDP len 30`, `reply echo`. */
function packetText(f: ReadFrame): string {
  const e = f.entry;
  const proto = f.ev.inner?.proto;
  let what: string;
  if (proto === 'tcp') {
    const names = tcpFlagsText(e.flags);
    what = names !== '' ? names : 'no flags';
  } else if (proto === 'udp') what = 'UDP';
  else what = 'echo';
  const len = e.payloadLength > 0 ? ` len ${e.payloadLength}` : '';
  return `${e.dir} ${what}${len}${e.tunneled ? ' (inside a tunnel)' : ''}`;
}

/** `2023-11-14T22:13:20.000300123Z`. */
function utcNanos(ns: bigint): string {
  const sub = ((ns % 1000n) + 1000n) % 1000n;
  return `${utcMicros(ns).slice(0, -1)}${String(sub).padStart(3, '0')}Z`;
}

function ifaceIdentity(f: ReadFrame): string {
  return `${f.linktype}/${f.snaplen}/${f.ifaceName ?? ''}`;
}

const nodeOf = (p: PointSummary): string | null =>
  p.node === null || p.node === '' ? null : p.node;

/** if_name of a point's interface (see the file's comment). */
function ifaceName(p: PointSummary, file: string, f: ReadFrame, several: boolean): string {
  const node = nodeOf(p);
  const base =
    node === null ? `${p.name}@file/${basename(file)}` : `${p.name}@${node}/${p.iface ?? 'file'}`;
  return several ? `${base}#${f.ifaceName ?? ifaceIdentity(f)}` : base;
}

/** The interface (IDB) of a point's frames like `f`; `id` its number in the file. */
function describeInterface(
  id: number,
  at: { p: PointSummary; index: number; of: number; file: string },
  f: ReadFrame,
  several: boolean,
): { summary: EvidenceInterface; info: PcapngInterfaceInfo } {
  const { p, file } = at;
  const name = ifaceName(p, file, f, several);
  const from = f.ifaceName === undefined ? '' : `, its interface ${f.ifaceName}`;
  const node = nodeOf(p);
  const description =
    `hoptrace point ${p.name} (${at.index + 1} of ${at.of}), read from ${resolve(file)}${from}; ` +
    (node === null ? 'the node is not known (a capture file names none)' : `node ${node}`);
  const info: PcapngInterfaceInfo = {
    linktype: linktypeOf(f.linktype),
    snaplen: f.snaplen,
    name,
    description,
  };
  // pcap's link-type field: bit 26 set says bits 28-31 give the FCS length in 16-bit words.
  if ((f.linktype & 0x04000000) !== 0) info.fcsLength = (f.linktype >>> 28) * 2;
  const summary: EvidenceInterface = {
    id,
    point: p.name,
    name,
    description,
    linktype: info.linktype,
    snaplen: f.snaplen,
    packets: 0,
    file,
  };
  return { summary, info };
}

/** `decap frame 3: request SYN; matched by selector; captured …Z, offset applied 0 (…)`. */
function packetComment(p: PointSummary, f: ReadFrame, clockPhrase: string): string {
  const e = f.entry;
  const keys = e.dir === 'request' ? p.matchedBy : p.replyMatchedBy;
  const by = keys.length > 0 ? keys.join(',') : '(no key recorded)';
  return `${p.name} frame ${e.frame}: ${packetText(f)}; matched by ${by}; captured ${utcNanos(BigInt(e.tsNs))}, ${clockPhrase}`;
}

interface Placed {
  /** The timestamp on the reference clock. */
  ref: bigint;
  /** The point's index: packets at the same time go in path order. */
  order: number;
  f: ReadFrame;
  iface: number;
  comment: string;
}

const byReferenceTime = (a: Placed, b: Placed): number => {
  if (a.ref !== b.ref) return a.ref < b.ref ? -1 : 1;
  if (a.order !== b.order) return a.order - b.order;
  return a.f.entry.frame - b.f.entry.frame;
};

/**
 * evidence.pcapng for an analysis of capture files: the matched connection's packets at every
 * point (headers only unless `payload`), on the first point's clock, each with a comment. Points
 * whose frames cannot be read back as analysed are left out and listed in `problems`; throws only
 * on a bug (never for a file).
 */
export function buildEvidencePcapng(input: EvidenceInput): Evidence {
  const headersOnly = input.payload !== true;
  const { result } = input;
  const clock = new Map((result.clock ?? []).map((o) => [o.point, o]));
  const interfaces: EvidenceInterface[] = [];
  const infos: PcapngInterfaceInfo[] = [];
  const placed: Placed[] = [];
  const problems: EvidenceProblem[] = [];
  const notes: string[] = [];
  for (const [index, p] of result.points.entries()) {
    const file = input.points.find((x) => x.name === p.name)?.file;
    if (file === undefined) {
      const detail = 'no capture file was given for this point';
      problems.push({ point: p.name, file: '', code: 'CLI_BAD_POINT', detail });
      continue;
    }
    if (p.flow.length === 0) {
      notes.push(`${p.name}: no packets of the connection (${p.status})`);
      continue;
    }
    if (isStreamInput(file)) {
      const detail = readOnceText(file, "and give its path to have this point's packets");
      problems.push({ point: p.name, file, code: 'FILE_STREAM', detail });
      continue;
    }
    const read = readPoint(p, file, headersOnly, input.seek?.get(p.name));
    if ('problem' in read) {
      problems.push({ point: p.name, file, ...read.problem });
      continue;
    }
    const ids = new Map<string, number>();
    const several = new Set(read.frames.map(ifaceIdentity)).size > 1;
    const offset = clock.get(p.name);
    const clockPhrase = clockText(offset);
    for (const f of read.frames) {
      const key = ifaceIdentity(f);
      let id = ids.get(key);
      if (id === undefined) {
        id = interfaces.length;
        ids.set(key, id);
        const at = { p, index, of: result.points.length, file };
        const { summary, info } = describeInterface(id, at, f, several);
        interfaces.push(summary);
        infos.push(info);
      }
      const iface = interfaces[id];
      if (iface !== undefined) iface.packets++;
      const ref = toReferenceClock(BigInt(f.entry.tsNs), offset);
      placed.push({ ref, order: index, f, iface: id, comment: packetComment(p, f, clockPhrase) });
    }
    if (p.flowOmitted > 0)
      notes.push(
        `${p.name}: ${p.flowOmitted} later packets of the connection are not included (the analysis keeps the first ${p.flow.length})`,
      );
  }
  placed.sort(byReferenceTime);
  const note = noteText(result, interfaces, placed.length, headersOnly, notes, problems, clock);
  const bytes = writePcapng({
    userAppl: `hoptrace ${input.version}`,
    comment: note,
    interfaces: infos,
    packets: placed.map((x) => ({
      interfaceId: x.iface,
      tsNs: x.ref,
      data: x.f.data,
      originalLength: x.f.wireLength,
      comment: x.comment,
    })),
  });
  return { bytes, packets: placed.length, interfaces, headersOnly, problems, note };
}

function noteText(
  result: AnalysisResult,
  interfaces: EvidenceInterface[],
  packets: number,
  headersOnly: boolean,
  notes: string[],
  problems: EvidenceProblem[],
  clock: ReadonlyMap<string, ClockOffset>,
): string {
  const perPoint = new Map<string, number>();
  for (const i of interfaces) perPoint.set(i.point, (perPoint.get(i.point) ?? 0) + i.packets);
  const counts = [...perPoint].map(([p, n]) => `${p} ${n}`).join(', ');
  const parts = [
    `evidence.pcapng holds ${packets} packets of the matched connection from ${perPoint.size} of ${result.points.length} points${counts === '' ? '' : ` (${counts})`}`,
    headersOnly
      ? 'Headers only: each frame is cut right after its innermost transport header (TCP with its options, UDP 8 bytes, ICMP 8) and keeps its original length'
      : 'Frames as captured (payload kept)',
  ];
  const ref = result.points[0]?.name ?? 'the first point';
  const shifted = [...perPoint.keys()]
    .filter((p) => p !== ref)
    .map((p) => `${p} ${clockText(clock.get(p))}`);
  parts.push(
    `Timestamps are on ${ref}'s clock${shifted.length > 0 ? ` (${shifted.join('; ')})` : ''}`,
    "Each packet's comment gives its point, its frame number in that point's file, its direction, the keys that matched the point, the time it was captured and the offset applied",
    ...notes,
    ...problems.map((x) => `${x.point} is left out: ${x.code}: ${x.detail}`),
  );
  return parts.map((x) => `${x}.`).join(' ');
}

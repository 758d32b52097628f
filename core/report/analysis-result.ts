/**
 * The analysis result's shape: what one request looked like at each point, the verdict, and each
 * point's capture health. Types only; analyze.ts builds them, capture-health.ts and report.ts read
 * them, and the collector serves them as JSON.
 */
import type { Verdict } from '../attribute/attribute';
import type { Endpoint, MatchKey, PointStatus } from '../correlate/correlate';
import type { IdentityHeaderKind } from '../decode/identity-headers';

/** One point's view of the request, JSON-safe (timestamps as decimal nanosecond strings). */
export interface PointSummary {
  name: string;
  status: PointStatus;
  /** Request and reply packets of the matched connection at this point. */
  packets: number;
  requestPackets: number;
  replyPackets: number;
  retransmits: number;
  /** All events captured at this point, matched or not. */
  capturedEvents: number;
  seenRequest: boolean;
  seenSyn: boolean;
  seenReply: boolean;
  proxied: boolean;
  observed: Endpoint | null;
  matchedBy: MatchKey[];
  replyMatchedBy: MatchKey[];
  /** Frame number of the packet that proved the match. */
  frame: number | null;
  firstTsNs: string | null;
  lastTsNs: string | null;
  detail: string;
  /**
   * Node and interface of the packet that proved the match (null when none did); node is null too
   * when not known (a capture file names no node).
   */
  node: string | null;
  iface: string | null;
  /** The matched connection's packets here in time order (the first MAX_FLOW_PACKETS). */
  flow: FlowPacketSummary[];
  /** Packets of the matched connection beyond `flow`. */
  flowOmitted: number;
  /**
   * Packets of the matched connection this point's agent counted per flow rather than sent as
   * events (core/correlate/folds.ts); not in `packets` and never matched one by one. Absent: none.
   */
  folded?: { requestPackets: number; replyPackets: number; lastTsNs: string };
  /**
   * Set when the request was found here only outside the window around its time at the first
   * point (core/correlate/far-syn.ts): its SYN's distance from that time, ns, as a decimal string.
   */
  outsideWindowNs?: string;
}

/** One packet of the matched connection at a point, JSON-safe (core/correlate FlowPacket). */
export interface FlowPacketSummary {
  frame: number;
  /** Nanoseconds since the Unix epoch, by this point's clock, as a decimal string. */
  tsNs: string;
  dir: 'request' | 'reply';
  tuple: Endpoint;
  flags: number;
  seq: number | null;
  ack: number | null;
  payloadLength: number;
  tunneled: boolean;
}

export interface AnalysisResult {
  verdict: Verdict;
  points: PointSummary[];
  /** Each point's capture as its agent last reported it, or as its file recorded it (capture-health.ts). */
  captureHealth?: CaptureHealth[];
  /** What the captures lost (or cannot tell) that may hide a missing request or reply. */
  caveats?: string[];
  /** Each point's clock against the first point's, from packets seen at both (times.ts). */
  clock?: ClockOffset[];
  /** The request's travel time between consecutive points, clock-corrected (times.ts). */
  hops?: HopLatency[];
  /**
   * Headers in the request that claim a client identity (X-Forwarded-For, Forwarded, X-Real-IP, a
   * PROXY protocol line), looked for in the request's head at each point, joined from its
   * consecutive data segments (core/report/identity-scan.ts: offline the files read again, live
   * the frames the agents retained). Absent:
   * not looked for (a live capture before its frames were fetched).
   */
  identityHeaders?: IdentityHeaderScan;
}

/** Which identity headers the request carried at which point (the shell hands the frames over). */
export interface IdentityHeaderScan {
  /** The points whose request data segment was read (in path order), and why others were not. */
  scanned: string[];
  notScanned: { point: string; why: string }[];
  seen: IdentityHeaderSeen[];
  /**
   * Scanned points whose frame held only the start of the request's payload (a snaplen, the
   * agent's retention): a header past `payloadBytes` could not be seen, so "none" is not known.
   */
  cut: IdentityScanCut[];
  /**
   * Scanned points whose request head did not end within the segments read (a segment missing or
   * out of order, the scan's bound, no more segments captured): a header past them was not seen.
   * Absent in reports written before it was added.
   */
  continued?: IdentityScanContinued[];
  /**
   * A live capture that did not ask for the payload: its agents retained headers only, so no
   * request head was read at any point (each is in `notScanned`). Absent otherwise.
   */
  headersOnly?: boolean;
}

/** One point whose request head went on past the segments read: how far, and why no further. */
export interface IdentityScanContinued {
  point: string;
  /** The last frame read (the request's last data segment joined). */
  frame: number;
  /** Data segments joined and read. */
  segments: number;
  /** Payload bytes read over those segments. */
  payloadBytes: number;
  why: string;
}

/** One point whose request frame (the last of the segments read) was cut: how much of its payload was looked at, and why no more. */
export interface IdentityScanCut {
  point: string;
  frame: number;
  /** Payload bytes the frame held (and the scan looked at), summed over the segments read. */
  payloadBytes: number;
  /** The payload's length on the wire (its IP header's), summed over the segments read. */
  payloadLength: number;
  /** The data segments read, the cut one (`frame`) last; absent: one. */
  segments?: number;
  why: string;
}

/** One header that claims a client identity, as it was in the request's payload at a point. */
export interface IdentityHeaderSeen {
  point: string;
  /** The frame (in that point's file) of the request data segment where the header starts. */
  frame: number;
  kind: IdentityHeaderKind;
  /** The header's value (at most 200 characters); for PROXY v2 the addresses it names, if any. */
  value: string;
}

/**
 * One point's capture as its agent last reported it (a live session's point record), or as its
 * capture file recorded it (`hoptrace analyze`: `file` set, `iface` the file's path).
 */
export interface CaptureHealth {
  point: string;
  node: string | null;
  iface: string;
  state: string;
  /** A status from the agent said the capture runs (counts below are its; else defaults); a file: true. */
  confirmed: boolean;
  /** Packets the capture delivered. */
  packets: number;
  /** Dropped by the kernel for lack of ring space; null = the source cannot count them. */
  kernelDrops: number | null;
  /** Dropped inside the agent (its queues, the worker's frame ring); 0 for a file (no agent). */
  queueDrops: number;
  /** Events the agent reported lost on the way to the collector (spool full); 0 for a file. */
  lost: number;
  /**
   * A capture file's format: kernelDrops is then what the file recorded (pcapng Interface
   * Statistics Blocks; classic pcap records none) and packets its frames.
   */
  file?: 'pcap' | 'pcapng';
  /**
   * A capture file's kernelDrops was given by the user (`hoptrace analyze --drops`: the count
   * tcpdump printed when it stopped), not recorded in the file.
   */
  dropsGiven?: boolean;
  /**
   * A pcapng file some of whose interfaces recorded drop counts while others that carried packets
   * did not (kernelDrops is then null: the drops are not known): what the ones that did recorded,
   * and the others ("interface 1 (eth1)"; the first 8 named, `count` in all).
   */
  dropsPartial?: { recorded: number; unrecorded: string[]; count: number };
  /**
   * A capture file that ends inside a record: the file offset of that record and what was cut
   * (the FILE_TRUNCATED detail). `packets` are the frames before it, which the analysis used.
   */
  truncated?: { offset: number; detail: string };
  /**
   * A capture file damaged after good frames (a record or block no reader can step past): the
   * file offset of that record or block, the error's code and detail. `packets` are the frames
   * before it, which the analysis used.
   */
  damaged?: {
    offset: number;
    detail: string;
    code: 'FILE_BAD_RECORD' | 'FILE_BAD_BLOCK' | 'FILE_TIME_RANGE';
  };
  /**
   * A capture file some of whose records no writer gives, read as given (libpcap reads them,
   * tcpdump flags them): `times`, a classic pcap record's fraction of a second of 10^6 µs (10^9 ns)
   * or more (0 for pcapng); `lengths`, a classic pcap record or pcapng (Enhanced) Packet Block with
   * a captured length above the original length. Absent when there is none.
   */
  invalidRecords?: { times: number; lengths: number };
  /** The target came from a stale pod list (session.ts PointRecord.targetNote). */
  targetNote?: string;
}

export type OffsetStatus = 'reference' | 'same-clock' | 'bounded' | 'upper-bound' | 'unbounded';

/** One point's clock against the reference point's clock. All nanosecond values are decimal strings. */
export interface ClockOffset {
  point: string;
  node: string | null;
  /** The point whose clock the others are measured against (the first point). */
  reference: string;
  status: OffsetStatus;
  /** θ = clock(point) − clock(reference): the estimate (middle of the bounds, or 0). */
  offsetNs: string | null;
  /** θ's lower bound (`bounded` only). */
  lowNs: string | null;
  /** θ's upper bound (`bounded` and `upper-bound`). */
  highNs: string | null;
  /** Which packets bounded it, or why it could not be bounded. */
  detail: string;
}

/** One hop between consecutive points: the request's first packet's travel time, clock-corrected. */
export interface HopLatency {
  from: string;
  to: string;
  /** Corrected by the estimated offsets (decimal ns), null when a point saw no request or has no estimate. */
  latencyNs: string | null;
  /** Bounds from the offsets' bounds (equal to latencyNs when both points share a clock). */
  lowNs: string | null;
  highNs: string | null;
  detail: string;
}

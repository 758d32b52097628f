/**
 * A gate for the addon's `summarize` (summary.h SummaryGate): which FAST frames get a summary
 * record in a pass of the offline analysis. The pass knows what it can use — a time window, the
 * request's transport and ports, or at the first point only new connections — and frames outside
 * it are counted in C (those whose inner transport is TCP or UDP: what the scans count as useful
 * events) but get no record, no payload hashes, no probe-marker search, and no JavaScript. SLOW
 * frames always get one (only the reference decoder can tell what they are), so a gate can only
 * leave out frames the pass would have counted and passed over: the analysis is the same, which
 * test/unit/summary-window.test.ts and analyze-fast.test.ts check.
 *
 * At a later point the gate can also leave out the data segments the pass's selection would pass
 * over (QUIET, summary.h): the selection keeps its bucket counts in the gate's `hot` map, and the
 * scan turns the test on only while the selection may pass data over (quietOn).
 *
 * Buffer (little-endian; pcap_batch.c read_gate): 0 u32 flags | 4 u32 proto | 8 u64 lo | 16 u64 hi
 * | 24 u64 best ts | 32 u32 port count | 36 u32 ports[8] | 68 u32 frames walked (out) | 72 u32
 * useful frames left out (out) | 80 u64 earliest and 88 u64 latest time walked (out) | 128 the 2^20-bit seen map (with SEEN) | the quiet region (with
 * QUIET: 16384 u32 hot, u32 seq / ack / data key counts, pad, 1024 u32 keys) | u32 frame of each
 * record.
 */
import type { TimeSpan } from '../common/time-span';

export const GATE = {
  window: 1,
  proto: 2,
  ports: 4,
  syn: 8,
  best: 16,
  seen: 32,
  quiet: 64,
  quietOn: 128,
  noQuick: 256,
} as const;

const HEAD = 128;
const SEEN_BYTES = 1 << 17;
const MAX_PORTS = 8;
/** The selection's hot map (LaterPointSelection) and the quiet test's keys (summary.h). */
export const HOT_BUCKETS = 1 << 14;
export const MAX_QUIET_KEYS = 1024;
const QUIET_BYTES = 4 * HOT_BUCKETS + 16 + 4 * MAX_QUIET_KEYS;
const U64_MAX = (1n << 64n) - 1n;
/** Inner IP protocol numbers of the request transports; 256 matches no frame (ICMP requests). */
export const GATE_PROTO = { tcp: 6, udp: 17, none: 256 } as const;

const clamp = (x: bigint): bigint => (x < 0n ? 0n : x > U64_MAX ? U64_MAX : x);

/** One pass's gate; its memory is allocated once and handed to every `summarize` call. */
export class SummaryGate {
  readonly buf: Buffer;
  /** The seen map (SEEN): TCP port pairs of the frames left out, in SelectScan's slots. */
  readonly seen: Uint32Array | null;
  /** Record i's frame, counted from the first frame of the call; valid until the next call. */
  readonly frameOf: Uint32Array;
  /** With QUIET: the selection's bucket counts, read by the C side (LaterPointSelection's own). */
  readonly hot: Uint32Array | null;
  private readonly keys: Uint32Array | null;
  private flags = 0;

  constructor(maxRecords: number, withSeen: boolean, withQuiet = false) {
    const seen = withSeen ? SEEN_BYTES : 0;
    const quiet = withQuiet ? QUIET_BYTES : 0;
    const memory = new ArrayBuffer(HEAD + seen + quiet + 4 * maxRecords);
    this.buf = Buffer.from(memory);
    this.seen = withSeen ? new Uint32Array(memory, HEAD, SEEN_BYTES / 4) : null;
    this.hot = withQuiet ? new Uint32Array(memory, HEAD + seen, HOT_BUCKETS) : null;
    this.keys = withQuiet
      ? new Uint32Array(memory, HEAD + seen + 4 * HOT_BUCKETS, 4 + MAX_QUIET_KEYS)
      : null;
    this.frameOf = new Uint32Array(memory, HEAD + seen + quiet, maxRecords);
    if (withSeen) this.set(GATE.seen, true);
  }

  /**
   * The keys a data segment must carry none of to be left out (QUIET): seqs, acks, payload and
   * request-line hashes. False (and no QUIET) without the region or with more than MAX_QUIET_KEYS.
   */
  quietKeys(seqs: readonly number[], acks: readonly number[], data: readonly number[]): boolean {
    const k = this.keys;
    if (k === null || seqs.length + acks.length + data.length > MAX_QUIET_KEYS) return false;
    const lists = [seqs, acks, data].map((l) =>
      [...new Set(l.map((x) => x >>> 0))].sort((a, b) => a - b),
    );
    let at = 4;
    lists.forEach((l, i) => {
      k[i] = l.length;
      k.set(l, at);
      at += l.length;
    });
    this.set(GATE.quiet, true);
    return true;
  }

  /** Turns the quiet test on or off for the next call (only with quietKeys given). */
  quietOn(on: boolean): void {
    this.set(GATE.quietOn, on && (this.flags & GATE.quiet) !== 0);
  }

  /**
   * Tests: the quiet test decided on each frame's record, not first on its bytes (summary.c
   * quiet_quick; the reference the quick path is checked against).
   */
  onRecordsOnly(): this {
    this.set(GATE.noQuick, true);
    return this;
  }

  private set(flag: number, on: boolean): void {
    this.flags = on ? this.flags | flag : this.flags & ~flag;
    this.buf.writeUInt32LE(this.flags >>> 0, 0);
  }

  /** Only frames with |ts - centre| <= span (both inclusive, as record-fields.ts Window). */
  window(centre: bigint, span: bigint): this {
    this.buf.writeBigUInt64LE(clamp(centre - span), 8);
    this.buf.writeBigUInt64LE(clamp(centre + span), 16);
    this.set(GATE.window, true);
    return this;
  }

  /** Only frames whose inner IP protocol is `proto` (GATE_PROTO). */
  proto(proto: number): this {
    this.buf.writeUInt32LE(proto, 4);
    this.set(GATE.proto, true);
    return this;
  }

  /** Only frames whose inner ports word (sport | dport << 16) is one of `ports` (none: no frame). */
  ports(ports: readonly number[]): this {
    if (ports.length > MAX_PORTS) throw new Error(`summary gate: at most ${MAX_PORTS} port pairs`);
    this.buf.writeUInt32LE(ports.length, 32);
    ports.forEach((p, i) => this.buf.writeUInt32LE(p >>> 0, 36 + 4 * i));
    this.set(GATE.ports, true);
    return this;
  }

  /**
   * A TCP SYN without ACK always gets a record, and the call stops after it (and after a SLOW
   * frame) unless `bestTs` is given and the frame is not earlier: the caller then updates the gate
   * before any later frame is decided.
   */
  syn(bestTs: bigint | null): this {
    this.set(GATE.syn, true);
    if (bestTs !== null) this.buf.writeBigUInt64LE(clamp(bestTs), 24);
    this.set(GATE.best, bestTs !== null);
    return this;
  }

  /** Frames the last call walked. */
  get frames(): number {
    return this.buf.readUInt32LE(68);
  }

  /** The earliest and latest time of the frames the last call walked; null when it walked none. */
  get span(): TimeSpan | null {
    if (this.frames === 0) return null;
    return { earliestNs: this.buf.readBigUInt64LE(80), latestNs: this.buf.readBigUInt64LE(88) };
  }

  /** Frames of the last call left out whose inner transport is TCP or UDP. */
  get skippedUseful(): number {
    return this.buf.readUInt32LE(72);
  }
}

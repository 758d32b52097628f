/**
 * The agent's bounded spool of messages for the collector. Every message keeps its seq until the
 * collector acknowledges it, so a collector restart or a broken connection loses nothing.
 *
 * Overflow policy: when `limit` event batches, or `maxBytes` bytes, are spooled, a NEW batch is
 * dropped (not the oldest). The byte bound matters once batches are large: 10,000 batches of
 * 2048 events are ~2 GB.
 * The spool then holds an unbroken prefix of the capture: the request hoptrace looks for is the
 * first new connection, so the early packets matter most, and dropped batches were never sent, so
 * the Lost count is exact (dropping the oldest could drop a batch already on the wire that the
 * collector may or may not have stored). Status, error and lost messages are exempt: they are few
 * and say what happened. Dropped events become one Lost per capture and point, updated in place
 * while it waits to be sent; at most one Lost per capture and point is on the wire: drops while it
 * is (sent, not yet acknowledged) are counted aside and become the next Lost once it is
 * acknowledged. So an overloaded link carries one Lost per round trip, not one per dropped batch
 * (each costs the collector a session.json save), and every dropped event is still counted once.
 *
 * An event batch is kept as its encoded bytes only: its PacketEvent objects are let go once
 * encoded (10,000 spooled batches of objects would be gigabytes; their bytes are a fraction of
 * that). Renumbering rewrites the seq at the head of those bytes (field 1, written first by
 * common/events-wire.ts) instead of encoding the events again.
 */
import { encodeEnvelope, type SpooledKind } from '../../common/envelope';
import { batchEventCount, type Envelope } from '../../common/wire';

export interface SpoolEntry {
  seq: number;
  kind: SpooledKind;
  env: Envelope;
  bytes: Uint8Array;
  /** Events in the message (batches only). */
  events: number;
}

/** The spool's default byte bound (all messages, encoded). */
export const DEFAULT_SPOOL_BYTES = 256 * 1024 * 1024;

export class Spool {
  /** Entries before `head` are acknowledged: their slots are emptied at once (see ackThrough). */
  private entries: (SpoolEntry | undefined)[] = [];
  private head = 0;
  /** Index (from head) of the next entry to transmit on the current connection. */
  private cursor = 0;
  private batches = 0;
  private byteCount = 0;
  private nextSeqValue: number;
  /** Lost entries not yet transmitted, by capture and point: further drops add to them. */
  private readonly pendingLost = new Map<string, SpoolEntry>();
  /** Lost entries transmitted and not yet acknowledged, by capture and point. */
  private readonly inFlightLost = new Map<string, SpoolEntry>();
  /** Drops counted while that point's Lost was on the wire: the next Lost, once it is acked. */
  private readonly deferredLost = new Map<
    string,
    { captureId: string; point: string; count: number }
  >();
  /** Events dropped because the spool was full, ever. */
  droppedEvents = 0;

  /** Dropped events counted but not yet in a spooled Lost (their point's Lost is on the wire). */
  get deferredLostEvents(): number {
    let n = 0;
    for (const d of this.deferredLost.values()) n += d.count;
    return n;
  }

  constructor(
    private readonly limit: number,
    firstSeq: number,
    private readonly maxBytes = DEFAULT_SPOOL_BYTES,
  ) {
    this.nextSeqValue = firstSeq;
  }

  get length(): number {
    return this.entries.length - this.head;
  }
  get bytes(): number {
    return this.byteCount;
  }
  get nextSeq(): number {
    return this.nextSeqValue;
  }
  /** Seq of the oldest entry, 0 when empty. */
  get firstSeq(): number {
    return this.entries[this.head]?.seq ?? 0;
  }

  /** Spools a message; returns its seq, or 0 when it was an event batch dropped for overflow. */
  add(env: Envelope & { kind: SpooledKind }): number {
    if (env.kind === 'events' && (this.batches >= this.limit || this.byteCount >= this.maxBytes)) {
      const n = batchEventCount(env.events);
      if (n > 0) {
        this.droppedEvents += n;
        this.addLost(env.events.captureId, env.events.point, n);
      }
      return 0;
    }
    return this.push(env).seq;
  }

  private push(env: Envelope & { kind: SpooledKind }): SpoolEntry {
    env.seq = this.nextSeqValue++;
    const bytes = encodeEnvelope(env);
    const entry: SpoolEntry = {
      seq: env.seq,
      kind: env.kind,
      // An event batch keeps its bytes, not its objects (see the top of this file).
      env:
        env.kind === 'events'
          ? {
              seq: env.seq,
              kind: 'events',
              events: { captureId: env.events.captureId, point: env.events.point, events: [] },
            }
          : env,
      bytes,
      events: env.kind === 'events' ? batchEventCount(env.events) : 0,
    };
    this.entries.push(entry);
    this.byteCount += bytes.length;
    if (env.kind === 'events') this.batches++;
    return entry;
  }

  private addLost(captureId: string, point: string, count: number): void {
    const key = `${captureId}\0${point}`;
    const pending = this.pendingLost.get(key);
    if (pending?.env.kind === 'lost') {
      pending.env.lost.count += count;
      this.byteCount -= pending.bytes.length;
      pending.bytes = encodeEnvelope(pending.env);
      this.byteCount += pending.bytes.length;
      return;
    }
    if (this.inFlightLost.has(key)) {
      const d = this.deferredLost.get(key);
      if (d === undefined) this.deferredLost.set(key, { captureId, point, count });
      else d.count += count;
      return;
    }
    const entry = this.push({
      seq: 0,
      kind: 'lost',
      lost: { captureId, point, count, reason: 'spool overflow' },
    });
    this.pendingLost.set(key, entry);
  }

  /** The next entry to transmit, or undefined when everything was sent. */
  takeNext(): SpoolEntry | undefined {
    const e = this.entries[this.head + this.cursor];
    if (!e) return undefined;
    this.cursor++;
    if (e.kind === 'lost') {
      for (const [k, v] of this.pendingLost)
        if (v === e) {
          this.pendingLost.delete(k);
          this.inFlightLost.set(k, v);
        }
    }
    return e;
  }

  /** Transmit from the oldest entry again (a new connection). */
  rewind(): void {
    this.cursor = 0;
  }

  /** Drops every entry with seq <= `seq` (stored by the collector); returns how many. */
  ackThrough(seq: number): number {
    let n = 0;
    for (;;) {
      const e = this.entries[this.head];
      if (!e || e.seq > seq) break;
      // Released now, not at the next compaction: with large batches the acknowledged bytes
      // waiting for one would be hundreds of MiB.
      this.entries[this.head] = undefined;
      this.head++;
      n++;
      this.byteCount -= e.bytes.length;
      if (e.kind === 'events') this.batches--;
      if (e.kind === 'lost') {
        for (const [k, v] of this.pendingLost) if (v === e) this.pendingLost.delete(k);
        for (const [k, v] of this.inFlightLost) if (v === e) this.inFlightLost.delete(k);
      }
    }
    this.cursor = Math.max(0, this.cursor - n);
    // A point's Lost was acknowledged: what was dropped meanwhile goes out as the next one.
    for (const [k, d] of this.deferredLost) {
      if (this.inFlightLost.has(k)) continue;
      this.deferredLost.delete(k);
      this.addLost(d.captureId, d.point, d.count);
    }
    // Compact now and then instead of shifting on every ack.
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
    return n;
  }

  /**
   * Gives every entry a new seq from `first` on. Used when the collector already holds seqs beyond
   * ours (it remembers an earlier run of this agent): without it, our messages would look like
   * duplicates and be dropped.
   */
  renumberFrom(first: number): void {
    this.nextSeqValue = first;
    for (let i = this.head; i < this.entries.length; i++) {
      const e = this.entries[i];
      if (!e) continue;
      e.seq = e.env.seq = this.nextSeqValue++;
      this.byteCount -= e.bytes.length;
      e.bytes = e.kind === 'events' ? withSeq(e.bytes, e.seq) : encodeEnvelope(e.env);
      this.byteCount += e.bytes.length;
    }
  }
}

/** An encoded Envelope with its seq (field 1, varint, first when present) replaced by `seq`. */
export function withSeq(bytes: Uint8Array, seq: number): Uint8Array {
  let rest = 0;
  if (bytes[0] === 0x08) {
    rest = 1;
    while (rest < bytes.length && ((bytes[rest] ?? 0) & 0x80) !== 0) rest++;
    rest++;
  }
  const head: number[] = [];
  if (seq !== 0) {
    head.push(0x08);
    let v = seq;
    while (v >= 0x80) {
      head.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    head.push(v);
  }
  const out = new Uint8Array(head.length + bytes.length - rest);
  out.set(head, 0);
  out.set(bytes.subarray(rest), head.length);
  return out;
}

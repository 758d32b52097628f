/**
 * Correlation: follow one TCP request across ordered capture points with keys that survive NAT.
 *
 * Pure: no clock, timers or I/O. Time is passed in (`nowNs`), and the offline entry point
 * (`correlateRequest`) needs no time at all beyond the event timestamps.
 *
 * Why these keys: Linux NAT (nf_nat) rewrites addresses and ports and fixes up checksums, but it
 * never touches the TCP sequence space, the RFC 7323 timestamp option or the IPv4 ID. So the SYN's
 * sequence number (the ISN, 32 random bits, RFC 9293 §3.4.1) names a connection on both sides of any
 * masquerade, including `--random-fully` where the source port changes too. A terminating proxy
 * opens a new connection (new ISN, new ports); only the request bytes survive, so that case is
 * matched on the payload keys the decoder hashed (probe marker, request line, first bytes).
 */

import type { PacketEvent } from '../common/event';
import type { Journey, PointEvents, RequestSelector, CorrelationResult } from './journey';
import { endpointKey } from './journey';
import {
  DEFAULT_WINDOW_NS,
  correlateIdentity,
  emptyPoint,
  findRequests,
  isSynOnly,
  tcpView,
} from './match-point';

export * from './journey';
export { DEFAULT_WINDOW_NS, correlateIdentity, findRequests } from './match-point';

/**
 * Offline correlation: select the request at the first point and follow it through the others.
 * Never throws; when no request is found, `request` is null and `reason` says why.
 */
export function correlateRequest(
  points: readonly PointEvents[],
  selector: RequestSelector,
  opts: { windowNs?: bigint | undefined } = {},
): CorrelationResult {
  const windowNs = opts.windowNs ?? DEFAULT_WINDOW_NS;
  const [first] = points;
  if (first === undefined)
    return { request: null, reason: 'no capture points were given', points: [], windowNs };
  const [id] = findRequests(first, selector, windowNs);
  if (id === undefined) {
    const what = [
      selector.client === undefined ? 'any client' : `client ${selector.client}`,
      selector.dst === undefined ? null : `dst ${selector.dst}`,
      selector.dport === undefined ? null : `dport ${selector.dport}`,
    ]
      .filter((s) => s !== null)
      .join(', ');
    return {
      request: null,
      reason: `no new TCP connection (SYN without ACK) from ${what} among ${first.events.length} events at ${first.name}`,
      points: points.map((p) =>
        emptyPoint(
          p.name,
          p.events.length,
          p.events.length === 0 ? 'no-capture' : 'not-seen',
          'no request selected',
        ),
      ),
      windowNs,
    };
  }
  return correlateIdentity(id, points, windowNs);
}

export interface CorrelatorOptions {
  /** Capture point names in path order; the first one selects requests. */
  points: readonly string[];
  selector?: RequestSelector | undefined;
  windowNs?: bigint | undefined;
  /** Buffer bound per point; beyond it events are dropped and counted, never blocking the reader. */
  maxEventsPerPoint?: number | undefined;
}

export interface CorrelatorStats {
  buffered: number;
  dropped: number;
  unknownPoint: number;
  emitted: number;
}

interface Buffered {
  ev: PacketEvent;
  arrivalNs: bigint;
}

/**
 * Streaming correlation for live agents. `add` buffers, `expire` returns the journeys whose
 * window closed and forgets old events. Arrival time (`nowNs`, the shell's clock) drives expiry;
 * event timestamps (each node's kernel clock) drive matching, so node clock skew cannot expire a
 * journey early.
 */
export class Correlator {
  private readonly names: readonly string[];
  private readonly selector: RequestSelector;
  private readonly windowNs: bigint;
  private readonly max: number;
  private readonly buf = new Map<string, Buffered[]>();
  private readonly emitted = new Map<string, bigint>();
  private counters: CorrelatorStats = { buffered: 0, dropped: 0, unknownPoint: 0, emitted: 0 };

  constructor(opts: CorrelatorOptions) {
    this.names = [...opts.points];
    this.selector = opts.selector ?? {};
    this.windowNs = opts.windowNs ?? DEFAULT_WINDOW_NS;
    this.max = opts.maxEventsPerPoint ?? 100_000;
    for (const n of this.names) this.buf.set(n, []);
  }

  /** Buffer one event; false when it was dropped (unknown point or full buffer). */
  add(event: PacketEvent, nowNs: bigint): boolean {
    const list = this.buf.get(event.point);
    if (list === undefined) {
      this.counters.unknownPoint++;
      return false;
    }
    if (list.length >= this.max) {
      this.counters.dropped++;
      return false;
    }
    list.push({ ev: event, arrivalNs: nowNs });
    return true;
  }

  private pointEvents(): PointEvents[] {
    return this.names.map((name) => ({
      name,
      events: (this.buf.get(name) ?? []).map((b) => b.ev),
    }));
  }

  /** Every request currently buffered at the first point, correlated with what is buffered now. */
  journeys(): Journey[] {
    const points = this.pointEvents();
    const [first] = points;
    if (first === undefined) return [];
    return findRequests(first, this.selector, this.windowNs).map((id) =>
      correlateIdentity(id, points, this.windowNs),
    );
  }

  /**
   * Journeys whose window closed by `nowNs` (each returned once), then drop events that no open
   * journey can still need: an event may precede its SYN by up to one window (clock skew), and a
   * journey closes one window after its SYN arrived, so two windows of history suffice.
   */
  expire(nowNs: bigint): Journey[] {
    const out: Journey[] = [];
    const firstName = this.names[0];
    const firstBuf = firstName === undefined ? [] : (this.buf.get(firstName) ?? []);
    const arrival = new Map<string, bigint>();
    for (const b of firstBuf) {
      const v = tcpView(b.ev);
      if (v === null || !isSynOnly(v)) continue;
      const k = `${endpointKey(v.tuple)}#${v.seq ?? 'x'}`;
      if (!arrival.has(k)) arrival.set(k, b.arrivalNs);
    }
    const points = this.pointEvents();
    const [first] = points;
    if (first !== undefined) {
      for (const id of findRequests(first, this.selector, this.windowNs)) {
        const k = `${endpointKey(id.tuple)}#${id.isn}`;
        const at = arrival.get(k);
        if (at === undefined || this.emitted.has(k) || at + this.windowNs > nowNs) continue;
        this.emitted.set(k, at);
        this.counters.emitted++;
        out.push(correlateIdentity(id, points, this.windowNs));
      }
    }
    const horizon = nowNs - 2n * this.windowNs;
    for (const [name, list] of this.buf) {
      this.buf.set(
        name,
        list.filter((b) => b.arrivalNs > horizon),
      );
    }
    for (const [k, at] of this.emitted) if (at <= horizon) this.emitted.delete(k);
    return out;
  }

  stats(): CorrelatorStats {
    let buffered = 0;
    for (const list of this.buf.values()) buffered += list.length;
    return { ...this.counters, buffered };
  }
}

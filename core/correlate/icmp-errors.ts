/**
 * ICMP errors as evidence of where a request (or its reply) died: an error quotes the head of the
 * packet it is about (RFC 792, RFC 4443 §3), which the decoder reports as the event's `related`
 * tuple. One whose quoted tuple is the request's, or its reply's, as seen at a point names the
 * router that gave up on it and why.
 */
import type { PacketEvent } from '../../common/event';
import type { Endpoint, IcmpErrorRef } from './journey';

const V4: Record<number, string> = {
  3: 'destination unreachable',
  4: 'source quench',
  5: 'redirect',
  11: 'time exceeded',
  12: 'parameter problem',
};
const V4_UNREACH: Record<number, string> = {
  0: 'net unreachable',
  1: 'host unreachable',
  2: 'protocol unreachable',
  3: 'port unreachable',
  4: 'fragmentation needed',
  9: 'net administratively prohibited',
  10: 'host administratively prohibited',
  13: 'communication administratively prohibited',
};
const V6: Record<number, string> = {
  1: 'destination unreachable',
  2: 'packet too big',
  3: 'time exceeded',
  4: 'parameter problem',
};
const V6_UNREACH: Record<number, string> = {
  0: 'no route to destination',
  1: 'administratively prohibited',
  3: 'address unreachable',
  4: 'port unreachable',
  5: 'source address failed policy',
  6: 'reject route',
};

/** "ICMP destination unreachable (host unreachable)" for an error reference. */
export function icmpErrorName(e: Pick<IcmpErrorRef, 'family' | 'type' | 'code'>): string {
  const v6 = e.family === 6;
  const type = (v6 ? V6 : V4)[e.type] ?? `type ${e.type}`;
  const unreach = e.type === (v6 ? 1 : 3) ? (v6 ? V6_UNREACH : V4_UNREACH)[e.code] : undefined;
  return `${v6 ? 'ICMPv6' : 'ICMP'} ${type} (${unreach ?? `code ${e.code}`})`;
}

const sameQuoted = (q: NonNullable<PacketEvent['related']>, t: Endpoint, echo: boolean): boolean =>
  q.src === t.src &&
  q.dst === t.dst &&
  (echo || q.sport === undefined || (q.sport === t.sport && q.dport === t.dport));

/** The ICMP errors among `events` that quote flow `tuple` (either direction), oldest first. */
export function icmpErrorsAbout(
  events: readonly PacketEvent[],
  tuple: Endpoint,
  echo: boolean,
): IcmpErrorRef[] {
  const back = { src: tuple.dst, sport: tuple.dport, dst: tuple.src, dport: tuple.sport };
  const out: IcmpErrorRef[] = [];
  for (const ev of events) {
    const q = ev.related;
    const i = ev.inner;
    if (q === undefined || i === null || ev.keys.icmpType === undefined) continue;
    const about = sameQuoted(q, tuple, echo)
      ? 'request'
      : sameQuoted(q, back, echo)
        ? 'reply'
        : null;
    if (about === null) continue;
    out.push({
      frame: ev.frame,
      tsNs: ev.tsNs,
      from: i.src,
      about,
      family: i.proto === 'icmpv6' ? 6 : 4,
      type: ev.keys.icmpType,
      code: ev.keys.icmpCode ?? 0,
    });
  }
  return out.sort((a, b) => (a.tsNs < b.tsNs ? -1 : a.tsNs > b.tsNs ? 1 : a.frame - b.frame));
}

/** One sentence for the errors at a point, or '' when there are none. */
export function icmpErrorsText(errors: readonly IcmpErrorRef[]): string {
  const [first] = errors;
  if (first === undefined) return '';
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  return `${icmpErrorName(first)} from ${first.from} about the ${first.about} (frame ${first.frame})${more}`;
}

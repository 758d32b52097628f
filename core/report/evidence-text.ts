/**
 * Words evidence.pcapng's packet comments share, offline (offline/evidence.ts) and live
 * (live-evidence.ts): the TCP flags of a packet and the clock offset applied to its time. Pure.
 */
import type { ClockOffset } from './analysis-result';
import { durationText } from './times';

const TCP_FLAG_NAMES = ['FIN', 'SYN', 'RST', 'PSH', 'ACK', 'URG', 'ECE', 'CWR'];

/** `SYN,ACK`; empty when no flag is set. */
export function tcpFlagsText(flags: number): string {
  return TCP_FLAG_NAMES.filter((_, i) => (flags & (1 << i)) !== 0).join(',');
}

/** The offset applied to a point's timestamps (−θ), and why, for its packets' comments. */
export function clockText(o: ClockOffset | undefined): string {
  if (o === undefined) return 'offset applied 0 (no clock offset was estimated)';
  if (o.status === 'reference') return 'offset applied 0 (the reference clock)';
  if (o.status === 'same-clock') return `offset applied 0 (same clock as ${o.reference})`;
  if (o.offsetNs === null)
    return `offset applied 0 (θ against ${o.reference} not known: ${o.status})`;
  const shift = -BigInt(o.offsetNs);
  const sign = shift > 0n ? '+' : '';
  return `offset applied ${sign}${durationText(shift)} (θ against ${o.reference}, ${o.status})`;
}

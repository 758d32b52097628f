/**
 * Words evidence.pcapng's packet comments and problems share, offline (offline/evidence.ts), live
 * (live-evidence.ts) and for a repro (core/repro/repro-evidence.ts): the TCP flags of a packet,
 * a matched packet in words, frame numbers as runs, why a frame is not in the file, and the clock
 * offset applied to its time. Pure.
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

/** A matched packet as its comment says it: `request SYN,ACK len 12 (inside a tunnel)`. */
export function flowPacketText(f: {
  dir: string;
  flags: number;
  payloadLength: number;
  tunneled: boolean;
}): string {
  const names = tcpFlagsText(f.flags);
  const what = names !== '' ? names : 'no TCP flags';
  return `${f.dir} ${what}${f.payloadLength > 0 ? ` len ${f.payloadLength}` : ''}${f.tunneled ? ' (inside a tunnel)' : ''}`;
}

/** Frame numbers as `3, 5, 7–12`; past `maxRuns` runs, the rest as `…`. */
export function framesText(ns: readonly number[], maxRuns = Infinity): string {
  const s = [...ns].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < s.length;) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === (s[j] ?? 0) + 1) j++;
    out.push(i === j ? String(s[i]) : `${s[i]}–${s[j]}`);
    i = j + 1;
  }
  return out.length > maxRuns ? `${out.slice(0, maxRuns).join(', ')}, …` : out.join(', ');
}

/** Why frames asked of an agent are not in evidence.pcapng, by the problem's code. */
export function notInFileText(reason: string): string {
  return reason === 'FRAMES_MISMATCH'
    ? 'the bytes the agent returned are not the frame analysed'
    : 'the agent did not return them';
}

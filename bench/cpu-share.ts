/**
 * The zero-loss comparison where the capture is the bottleneck (issue 20 goal 3). One sending
 * core offers ~540 k pps on this kernel, which both tools take without loss, so a ladder of
 * offered rates measures the sender. Here each tool runs under the same CPU budget (a share of
 * one core, bench/cgroup-cpu.ts) with the same kernel ring (32 MiB), and the rate climbs until
 * the tool loses packets, then is refined by bisection: the highest lossless rate is then the
 * capture's own limit at that budget. The sender runs outside the budget.
 *
 * Pure: the rate search, the summary and the ring's capacity; the trials are run by bench/link.ts.
 */

/** One trial of the search: the rate asked, the rate the veth offered, and whether it lost. */
export interface ShareStep {
  askedPps: number;
  offeredPps: number;
  lossless: boolean;
}

export interface ShareSearch {
  /** Rates tried in order while no loss is seen. */
  ladder: readonly number[];
  /** Bisection steps between the last lossless and the first lossy rate. */
  refine: number;
}

/** The ring both tools get under the budget (tcpdump -B 32768, the agent's bufferBytes). */
export const SHARE_RING_BYTES = 32 * 1024 * 1024;

/**
 * How many frames of `frameBytes` a TPACKET_V3 ring of `ringBytes` holds at once, so a report can
 * say which part of a flood the ring alone could have absorbed. Each frame takes a slot of its
 * own: the 48-byte tpacket3_hdr and the 20-byte sockaddr_ll, the frame placed so that its network
 * header is 16-aligned (an Ethernet frame at byte 82), the next slot 8-aligned — 192 bytes for the
 * flood's 106-byte frames, ~175 k of them in 32 MiB (block headers, 48 bytes a block, left out).
 */
export function ringFrames(frameBytes: number, ringBytes = SHARE_RING_BYTES): number {
  const slot = Math.ceil((82 + frameBytes) / 8) * 8;
  return Math.floor(ringBytes / slot);
}

/** The next rate to ask for, or null when the search is over. */
export function nextShareRate(steps: readonly ShareStep[], search: ShareSearch): number | null {
  const lossy = steps.filter((s) => !s.lossless);
  if (lossy.length === 0) {
    const tried = new Set(steps.map((s) => s.askedPps));
    return search.ladder.find((r) => !tried.has(r)) ?? null;
  }
  const first = steps.findIndex((s) => !s.lossless);
  if (steps.length - 1 - first >= search.refine) return null;
  const hi = Math.min(...lossy.map((s) => s.askedPps));
  const lo = Math.max(
    0,
    ...steps.filter((s) => s.lossless && s.askedPps < hi).map((s) => s.askedPps),
  );
  const mid = Math.round((lo + hi) / 2 / 1000) * 1000;
  return mid <= lo || mid >= hi ? null : mid;
}

export interface ShareLimit {
  /** Highest offered rate taken without loss (0 when even the first step lost). */
  losslessPps: number;
  /** Lowest asked rate that lost packets; null when none did (the limit is the sender's). */
  firstLossyAskedPps: number | null;
}

/** What the search found for one tool. */
export function shareLimit(steps: readonly ShareStep[]): ShareLimit {
  const lossy = steps.filter((s) => !s.lossless).map((s) => s.askedPps);
  const hi = lossy.length === 0 ? null : Math.min(...lossy);
  const ok = steps.filter((s) => s.lossless && (hi === null || s.askedPps < hi));
  return {
    losslessPps: Math.max(0, ...ok.map((s) => s.offeredPps)),
    firstLossyAskedPps: hi,
  };
}

/**
 * The goal row of the zero-loss comparison under the same CPU budget (bench/cpu-share.ts), judged
 * from each tool's highest lossless rate, and that rate in words; the whole agent's section
 * (bench/link-report.ts) renders the trials.
 */
import { shareLimit, type ShareLimit, type ShareStep } from './cpu-share';
import { fmt } from './proc';

export interface ShareGoal {
  goal: string;
  result: string;
  met: 'met' | 'missed' | 'not measured' | 'no loss at any rate offered';
}

export const SHARE_GOAL = "Agent: ≥ 95 % of tcpdump's zero-loss rate under the same CPU budget";

/** One tool's highest lossless rate, in words. */
export function limitText(name: string, l: ShareLimit): string {
  return l.firstLossyAskedPps === null
    ? `${name} lost nothing up to ${fmt(l.losslessPps / 1000)} k pps (the sender's limit, not the capture's)`
    : `${name} ${fmt(l.losslessPps / 1000)} k pps (first loss when ${fmt(l.firstLossyAskedPps / 1000)} k pps were asked)`;
}

/** The goal row from both tools' searches; `agentName` says which agent was measured. */
export function shareGoal(
  tcpdump: readonly ShareStep[],
  agent: readonly ShareStep[],
  agentName: string,
): ShareGoal {
  const td = shareLimit(tcpdump);
  const ag = shareLimit(agent);
  const senderLimited = td.firstLossyAskedPps === null || ag.firstLossyAskedPps === null;
  const r = td.losslessPps > 0 ? ag.losslessPps / td.losslessPps : NaN;
  return {
    goal: SHARE_GOAL,
    result: `${limitText(agentName, ag)}; ${limitText('tcpdump', td)}${Number.isFinite(r) ? `: ${fmt(100 * r)} %` : ''}`,
    met: senderLimited
      ? 'no loss at any rate offered'
      : Number.isFinite(r)
        ? r >= 0.95
          ? 'met'
          : 'missed'
        : 'not measured',
  };
}

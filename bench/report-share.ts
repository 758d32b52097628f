/**
 * BENCHMARKS.md's zero-loss comparison under the same CPU budget (bench/cpu-share.ts): every
 * trial of the search, and the goal row judged from each tool's highest lossless rate. Two
 * searches use it: the capture path alone (worker + the stand-in agent process, bench/capture.ts)
 * and the whole agent with its link (bench/link.ts), whose row is the goal's when it ran.
 */
import type { CaptureTool, CaptureTrial } from './capture';
import { shareLimit, type ShareLimit, type ShareStep } from './cpu-share';
import { fmt, table } from './proc';

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

/**
 * The section's Markdown (capture path alone). `addGoal` gets its goal row, or is null when the
 * whole agent's search ran too and the row is that one's.
 */
export function shareSection(
  trials: readonly CaptureTrial[],
  addGoal: ((g: ShareGoal) => void) | null,
): string {
  const share = trials.filter((t) => t.budgetPercent !== undefined);
  if (share.length === 0) return '';
  const percent = share[0]?.budgetPercent ?? 0;
  const steps = (tool: CaptureTool): ShareStep[] =>
    share
      .filter((t) => t.tool === tool)
      .map((t) => ({
        askedPps: t.ratePps,
        offeredPps: t.offered / t.elapsedS,
        lossless: t.loss === 0,
      }));
  const td = shareLimit(steps('tcpdump'));
  const agent = shareLimit(steps('native'));
  const name = 'the capture path (worker + the stand-in agent process, no link)';
  if (addGoal !== null) addGoal(shareGoal(steps('tcpdump'), steps('native'), name));
  const rows = share.map((t) => [
    t.tool === 'tcpdump' ? 'tcpdump' : 'agent (native)',
    fmt(t.ratePps / 1000) + ' k',
    fmt(t.offered / t.elapsedS / 1000) + ' k',
    fmt(t.delivered),
    fmt(t.loss),
    t.reportedDrops === null ? 'unknown' : fmt(t.reportedDrops + t.queueDrops),
    fmt((t.cpuNs + (t.parentCpuNs ?? 0)) / Math.max(1, t.delivered)),
    t.throttled === undefined
      ? '–'
      : `${fmt(t.throttled.throttled)} of ${fmt(t.throttled.periods)}`,
  ]);
  return `
### Zero loss where the capture is the bottleneck: both under ${fmt(percent, 1)} % of one core

One sending core offers more than either tool takes only when the tools are held back, so each
runs in a cgroup of its own with the same CFS quota (${fmt(percent, 1)} % of one core: ${fmt(percent * 1000)} µs per
100 ms period; bench/cgroup-cpu.ts) and the same 32 MiB kernel ring (tcpdump \`-B 32768\`, the
agent's \`bufferBytes\`). Here the agent is its capture path alone: the capture worker and the
stand-in agent process (bench/agent-child.ts: no link, no retention file) in one budget${
    addGoal === null
      ? '; the goal row is the whole agent\'s, with its link ("Zero loss under the same CPU budget: the whole agent" below)'
      : ''
  }. The sender runs outside the budget. The rate doubles until a tool loses packets, then
is refined by bisection; tools alternate step by step. ${limitText('Highest lossless: the capture path', agent)}; ${limitText('tcpdump', td)}.

${table(['capture', 'asked', 'offered', 'delivered', 'loss', 'reported drops', 'ns/packet (all processes)', 'throttled periods'], rows)}
`;
}

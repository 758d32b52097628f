/**
 * BENCHMARKS.md's zero-loss comparison under the same CPU budget (bench/cpu-share.ts): every
 * trial of the search, and the goal row judged from each tool's highest lossless rate.
 */
import type { CaptureTool, CaptureTrial } from './capture';
import { shareLimit, type ShareStep } from './cpu-share';
import { fmt, table } from './proc';

export interface ShareGoal {
  goal: string;
  result: string;
  met: 'met' | 'missed' | 'not measured' | 'no loss at any rate offered';
}

const GOAL = "Agent: ≥ 95 % of tcpdump's zero-loss rate under the same CPU budget";

/** The section's Markdown; adds its goal row. Empty when the run had no budget trials. */
export function shareSection(
  trials: readonly CaptureTrial[],
  addGoal: (g: ShareGoal) => void,
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
  const limitText = (name: string, l: ReturnType<typeof shareLimit>): string =>
    l.firstLossyAskedPps === null
      ? `${name} lost nothing up to ${fmt(l.losslessPps / 1000)} k pps (the sender's limit, not the capture's)`
      : `${name} ${fmt(l.losslessPps / 1000)} k pps (first loss when ${fmt(l.firstLossyAskedPps / 1000)} k pps were asked)`;
  const senderLimited = td.firstLossyAskedPps === null || agent.firstLossyAskedPps === null;
  const r = td.losslessPps > 0 ? agent.losslessPps / td.losslessPps : NaN;
  addGoal({
    goal: GOAL,
    result: `${limitText('the agent (worker + agent process)', agent)}; ${limitText('tcpdump', td)}${Number.isFinite(r) ? `: ${fmt(100 * r)} %` : ''}`,
    met: senderLimited
      ? 'no loss at any rate offered'
      : Number.isFinite(r)
        ? r >= 0.95
          ? 'met'
          : 'missed'
        : 'not measured',
  });
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
agent's \`bufferBytes\`). For the agent the budget holds its capture worker and the agent process
together. The sender runs outside the budget. The rate doubles until a tool loses packets, then
is refined by bisection; tools alternate step by step. ${limitText('Highest lossless: the agent', agent)}; ${limitText('tcpdump', td)}.

${table(['capture', 'asked', 'offered', 'delivered', 'loss', 'reported drops', 'ns/packet (all processes)', 'throttled periods'], rows)}
`;
}

/**
 * Renders BENCHMARKS.md from one run's results: machine, command, one table per measurement with
 * absolute numbers and ratios against tcpdump/tshark measured in the same run, and the goals of
 * issue 5 judged from those numbers.
 */
import type { CaptureResult, CaptureTool, CaptureTrial } from './capture';
import type { CorrelatorResult } from './correlator-child';
import type { FileResult, FileRow } from './files';
import type { LargeFileResult } from './large-files';
import { largeFileSection } from './large-report';
import type { Goal } from './goal';
export type { Goal } from './goal';
import type { LinkResult } from './link';
import { linkSection } from './link-report';
import type { LiveRow } from './live';
import { fmt, median, ratio, table } from './proc';

export interface Machine {
  nproc: number;
  cpu: string;
  kernel: string;
  node: string;
  libpcap: string;
  tcpdump: string;
  tshark: string;
  loadBefore: string;
  loadAfter?: string;
  date: string;
}

export interface BenchResults {
  machine: Machine;
  quick: boolean;
  command: string;
  capture?: CaptureResult;
  /** The whole agent, its link included (bench/link.ts), rendered in §1. */
  link?: LinkResult;
  correlator?: CorrelatorResult[];
  files?: FileResult;
  /** The large three-point case (bench/large-files.ts). */
  filesLarge?: LargeFileResult;
  live?: LiveRow[];
  errors: Record<string, string>;
  totalS?: number;
}

const pps = (t: CaptureTrial): number => t.offered / t.elapsedS;
const nsPerPacket = (t: CaptureTrial): number => t.cpuNs / Math.max(1, t.delivered);
const explained = (t: CaptureTrial): boolean =>
  t.reportedDrops !== null && t.loss === t.reportedDrops + t.queueDrops;
const corePct = (t: CaptureTrial): number => (100 * t.cpuNs) / 1e9 / t.elapsedS;

function toolName(t: CaptureTrial): string {
  const base =
    t.tool === 'tcpdump'
      ? 'tcpdump'
      : t.tool === 'native'
        ? 'agent (native)'
        : "agent (source: 'cap')";
  return t.bufferBytes === undefined ? base : `${base}, ${t.bufferBytes / 1024} KiB ring`;
}

function captureSection(c: CaptureResult, goals: Goal[]): string {
  const broad = c.trials.filter(
    (t) => t.filter === 'none' && t.bufferBytes === undefined && t.repeat === undefined,
  );
  const tcpdumpAt = (rate: number): CaptureTrial | undefined =>
    broad.find((t) => t.tool === 'tcpdump' && t.ratePps === rate);
  const rows = broad.map((t) => {
    const ref = tcpdumpAt(t.ratePps);
    const both = ref !== undefined && ref.loss === 0 && t.loss === 0;
    const agentCpu = t.cpuNs + (t.parentCpuNs ?? 0);
    return [
      toolName(t),
      t.ratePps === 0 ? 'max' : fmt(t.ratePps / 1000) + ' k',
      fmt(pps(t) / 1000, 0) + ' k',
      fmt(t.delivered),
      fmt(t.loss),
      t.reportedDrops === null ? 'unknown' : fmt(t.reportedDrops + t.queueDrops),
      fmt(corePct(t), 1) + ' %',
      fmt(nsPerPacket(t)),
      t.parentCpuNs === null ? '–' : fmt(agentCpu / Math.max(1, t.delivered)),
      t.tool === 'tcpdump' || !both ? '–' : ratio(nsPerPacket(t), nsPerPacket(ref)),
      t.loss === 0 ? '–' : explained(t) ? 'yes' : '**no**',
    ];
  });
  const flow = c.trials.filter((t) => t.filter === 'one-flow');
  const flowRef = flow.find((t) => t.tool === 'tcpdump');
  const flowRows = flow.map((t) => [
    toolName(t),
    fmt(pps(t) / 1000) + ' k',
    `${fmt(t.delivered)} / ${fmt(t.trickleSent)}`,
    fmt(t.vethDrops),
    fmt(corePct(t), 2) + ' %',
    t.tool === 'tcpdump' ? '–' : ratio(t.cpuNs, flowRef?.cpuNs),
  ]);
  // At full speed: results.json files of earlier runs also hold the stand-in's search under a CPU
  // budget, 32 MiB rings at asked rates, which this table is not about.
  const forced = c.trials.filter((t) => t.bufferBytes !== undefined && t.ratePps === 0);
  const forcedRows = forced.map((t) => [
    toolName(t),
    fmt(pps(t) / 1000) + ' k',
    fmt(t.offered),
    fmt(t.delivered),
    fmt(t.loss),
    t.reportedDrops === null ? 'unknown' : fmt(t.reportedDrops),
    fmt(t.queueDrops),
    t.reportedDrops !== null && t.loss === t.reportedDrops + t.queueDrops ? 'exact' : 'NOT exact',
  ]);

  // Goals: zero-loss rate, CPU per packet at the highest rate where both were lossless, exact drops.
  // Zero-loss rates over the ladder and the repeat pairs. The goal is missed only when the agent
  // lost packets at a rate tcpdump kept up with. When neither lost a packet at any rate the
  // sender reached, both limits lie above what this machine can offer: the sender's own rate
  // varies by ~10 % between trials, so the ratio of the highest rates reached says nothing.
  const allBroad = c.trials.filter((t) => t.filter === 'none' && t.bufferBytes === undefined);
  const z = { tcpdump: 0, native: 0, cap: 0 };
  for (const t of allBroad) {
    if (t.loss === 0) z[t.tool] = Math.max(z[t.tool], t.offered / t.elapsedS);
  }
  const zRatio = z.tcpdump > 0 ? z.native / z.tcpdump : NaN;
  const lossFree = (tool: CaptureTool): boolean =>
    allBroad.some((t) => t.tool === tool) && allBroad.every((t) => t.tool !== tool || t.loss === 0);
  const senderLimited = lossFree('native') && lossFree('tcpdump');
  goals.push({
    goal: "Agent: ≥ 95 % of tcpdump's zero-loss rate",
    result: senderLimited
      ? `neither lost a packet at any rate the sender reached (${allBroad.filter((t) => t.tool === 'native').length} agent and ${allBroad.filter((t) => t.tool === 'tcpdump').length} tcpdump trials): the agent up to ${fmt(z.native / 1000)} k pps, tcpdump up to ${fmt(z.tcpdump / 1000)} k pps (${fmt(100 * zRatio)} %, the sender's own spread); both limits lie above what this machine can offer`
      : `${fmt(z.native / 1000)} k vs ${fmt(z.tcpdump / 1000)} k pps (${fmt(100 * zRatio)} %)`,
    met: senderLimited
      ? 'no loss at any rate offered'
      : Number.isFinite(zRatio)
        ? zRatio >= 0.95
          ? 'met'
          : 'missed'
        : 'not measured',
  });
  // CPU per packet: the ladder's highest-rate pair and the repeat pairs (each tcpdump, then native,
  // back to back), where both were lossless; the goals take the median ratio, shown with its range.
  const pairs: [CaptureTrial, CaptureTrial][] = [];
  const ladderNative = broad.find((t) => t.tool === 'native' && t.ratePps === 0);
  const ladderTd = tcpdumpAt(0);
  if (ladderNative !== undefined && ladderTd !== undefined) pairs.push([ladderTd, ladderNative]);
  const repeats = c.trials.filter((t) => t.repeat !== undefined);
  for (const r of new Set(repeats.map((t) => t.repeat))) {
    const td = repeats.find((t) => t.repeat === r && t.tool === 'tcpdump');
    const nat = repeats.find((t) => t.repeat === r && t.tool === 'native');
    if (td !== undefined && nat !== undefined) pairs.push([td, nat]);
  }
  const clean = pairs.filter(([td, nat]) => td.loss === 0 && nat.loss === 0);
  const workerRatio = ([td, nat]: [CaptureTrial, CaptureTrial]): number =>
    nsPerPacket(nat) / nsPerPacket(td);
  const agentNs = (t: CaptureTrial): number =>
    (t.cpuNs + (t.parentCpuNs ?? 0)) / Math.max(1, t.delivered);
  const wholeRatio = ([td, nat]: [CaptureTrial, CaptureTrial]): number =>
    agentNs(nat) / nsPerPacket(td);
  const pairRows = pairs.map((p, i) => {
    const [td, nat] = p;
    return [
      i === 0 ? 'ladder' : `repeat ${i}`,
      `${fmt(pps(td) / 1000)} k / ${fmt(pps(nat) / 1000)} k`,
      fmt(nsPerPacket(td)),
      fmt(nsPerPacket(nat)),
      fmt(agentNs(nat)),
      td.loss === 0 && nat.loss === 0 ? fmt(workerRatio(p), 2) + '×' : 'lossy, left out',
      td.loss === 0 && nat.loss === 0 ? fmt(wholeRatio(p), 2) + '×' : '–',
    ];
  });
  const pairTable =
    pairs.length === 0
      ? 'No highest-rate pairs.'
      : table(
          [
            'pair',
            'offered (tcpdump / agent)',
            'tcpdump ns/packet',
            'worker ns/packet',
            'worker + agent process ns/packet',
            'worker vs tcpdump',
            'whole agent vs tcpdump',
          ],
          pairRows,
        );
  if (clean.length > 0) {
    const w = median(clean.map(workerRatio));
    const all = median(clean.map(wholeRatio));
    const range = (xs: number[]): string =>
      `${fmt(Math.min(...xs), 2)}–${fmt(Math.max(...xs), 2)}×`;
    const tdNs = median(clean.map(([td]) => nsPerPacket(td)));
    // Two rows: the capture process is what compares with tcpdump (capture, write out); the
    // agent process then does what tcpdump does not do at all, and the goal does not say which is
    // meant, so both are reported with their own status.
    goals.push({
      goal: "Agent: ≤ 2× tcpdump's CPU per packet — capture process (worker)",
      result: `median of ${clean.length} back-to-back pairs at the highest rate: worker ${fmt(median(clean.map(([, n]) => nsPerPacket(n))))} ns vs tcpdump ${fmt(tdNs)} ns per packet, ratio ${fmt(w, 2)}× (pairs ${range(clean.map(workerRatio))})`,
      met: w <= 2 ? 'met' : 'missed',
    });
    goals.push({
      goal: "Agent: ≤ 2× tcpdump's CPU per packet — whole agent (worker + agent process)",
      result: `median ${fmt(median(clean.map(([, n]) => agentNs(n))))} ns per packet, ${fmt(all, 2)}× (pairs ${range(clean.map(wholeRatio))}): the stand-in agent process reads the records the worker sends (with per-flow counters on, about one per 2,000 packets here), writes them as PacketEvent bytes and wraps them in Envelopes; no link (the whole-agent rows below have it)`,
      met: all <= 2 ? 'met' : 'missed',
    });
  } else {
    goals.push({
      goal: "Agent: ≤ 2× tcpdump's CPU per packet",
      result: 'no highest-rate pair where both were lossless',
      met: 'not measured',
    });
  }
  const f = forced[0];
  const lossyNative = c.trials.filter((t) => t.tool === 'native' && t.loss > 0);
  const unexplained = lossyNative.filter((t) => !explained(t));
  goals.push({
    goal: 'Agent: kernel drops reported exactly',
    result:
      (f === undefined
        ? 'no forced-loss trial'
        : `forced loss (256 KiB ring): lost ${fmt(f.loss)}, reported ${f.reportedDrops === null ? 'unknown' : fmt(f.reportedDrops + f.queueDrops)} (kernel ${fmt(f.reportedDrops)} + queue ${fmt(f.queueDrops)})`) +
      (unexplained.length === 0
        ? ''
        : `; but ${unexplained.map((t) => `at ${fmt(pps(t) / 1000)} k pps ${fmt(t.loss)} lost with ${fmt((t.reportedDrops ?? 0) + t.queueDrops)} reported`).join(', ')} — packets still in the ring when the stalled worker was stopped are neither delivered nor counted`),
    met: lossyNative.length === 0 ? 'not measured' : unexplained.length === 0 ? 'met' : 'missed',
  });

  return `## 1. Capture: agent vs tcpdump on the same veth

Two namespaces joined by a veth; \`udp-flood\` (AF_PACKET, sendmmsg, 64-byte UDP payload = 106-byte
frames, 8 source ports) sends on one side, the capture runs on the other side's interface, one
trial after another (tcpdump, native, cap at each rate; a tool leaves the ladder after its first
lossy step). The receiver drops the UDP in \`raw PREROUTING\`, so it neither answers nor spends on it.
**offered** = the receiving veth's rx+tx packet delta (what a tap there can see); **loss** =
offered − delivered. **CPU** = the capturing process (tcpdump; for the agent the capture worker,
all threads, from /proc/PID/task/*/schedstat): it decodes every packet in C in the libpcap
callback and the addon hands the records to the agent through shared memory. "+parent" adds the
agent process, measured the same way: a process of its own (bench/agent-child.ts) that does what
the agent runtime does with a capture — reading the records, writing each as PacketEvent bytes (in
C) and wrapping them in the Envelope it would send to the collector — and nothing of the
benchmark's own work (starting the sender, reading counters). tcpdump runs \`-s 128 -B 8192 -w /dev/null\`; the agent its defaults (native:
snaplen 512, 32 MiB ring, 50 ms block timeout, per-flow counters on; cap: snaplen 65535, 64 MiB,
immediate mode, every packet an event) — every frame here is shorter than 128 bytes, so snaplen
does not matter. With counters the native agent sends about one event per 2,000 packets of this
8-flow flood (README, "Per-flow counters"), so "+parent" is mostly the agent process's fixed cost
per second; the stand-in has no retention file and no link (the whole agent below has both).

### Broad filter (none)

${table(
  [
    'capture',
    'asked',
    'offered',
    'delivered',
    'loss',
    'reported drops',
    'CPU (core)',
    'ns/packet',
    'ns/packet +parent',
    'ns/packet vs tcpdump',
    'loss = reported?',
  ],
  rows,
)}

Highest zero-loss rate (ladder and repeat pairs): ${(['tcpdump', 'native', 'cap'] as CaptureTool[])
    .map((t) => `${t} ${fmt(z[t] / 1000)} k pps`)
    .join(', ')} (native/tcpdump ${fmt(100 * zRatio)} %, cap/tcpdump ${fmt(
    (100 * z.cap) / Math.max(1, z.tcpdump),
  )} %).

### CPU per packet at the highest rate, pair by pair

Runs on this machine move by tens of percent, so the highest rate is run again after the ladder,
tcpdump then the agent, back to back; the goals below take the median ratio over these pairs.

${pairTable}

### One flow under a flood (\`udp src port 40000\`)

The flood at full speed plus a 2 k pps trickle from source port 40000; the filter passes only the
trickle, and every trickle packet must be delivered. The BPF filter runs in the sender's softirq,
so the capture process pays only for what passes.

${table(['capture', 'flood offered', 'flow delivered / sent', 'veth drops', 'CPU (core)', 'CPU vs tcpdump'], flowRows)}

### Drops are counted, not guessed

${table(['capture', 'offered rate', 'offered', 'delivered', 'loss', 'kernel drops', 'queue drops', 'loss = reported?'], forcedRows)}
`;
}

function correlatorSection(rs: CorrelatorResult[], goals: Goal[]): string {
  const rows = rs.map((r) => [
    `${r.args.expireEveryMs} ms`,
    fmt(r.samples.at(-1)?.events),
    fmt(r.eventsPerS / 1e3) + ' k',
    fmt(r.correlatorEventsPerS / 1e3) + ' k',
    fmt(r.maxExpireMs),
    r.samples
      .map((s) => `${fmt(s.events / 1e6, 1)} M: ${fmt(s.heapUsedMiB)} / ${fmt(s.rssMiB)}`)
      .join('; '),
    fmt(r.samples.at(-1)?.buffered),
    `${r.complete}/${r.journeys} (${r.requests} sent)`,
    fmt(r.dropped),
  ]);
  const main = rs[0];
  if (main !== undefined) {
    const first = main.samples[0]?.heapUsedMiB ?? NaN;
    const last = main.samples.at(-1)?.heapUsedMiB ?? NaN;
    goals.push({
      goal: 'Correlator: ≥ 1 M events/s on one core',
      result: `${fmt(main.eventsPerS / 1e3)} k events/s with expire() every ${main.args.expireEveryMs} ms (${fmt(Math.max(...rs.map((r) => r.eventsPerS)) / 1e3)} k at best)`,
      met: main.eventsPerS >= 1e6 ? 'met' : 'missed',
    });
    goals.push({
      goal: 'Correlator: memory bounded by the window',
      result: `heap ${main.samples.map((s) => `${fmt(s.heapUsedMiB)} MiB at ${fmt(s.events / 1e6, 1)} M`).join(', ')}`,
      met: last <= first * 1.2 + 4 ? 'met' : 'missed',
    });
  }
  const a = main?.args;
  return `## 2. Correlator: events per second and memory on one core

A child process pinned to one core (\`taskset -c 1\`, \`--expose-gc\`) feeds synthetic PacketEvents
through \`Correlator.add\` — 4096 background TCP flows spread over three points plus one probe
request (SYN + request at all three points, masqueraded at the backend) every ${a?.requestEveryMs ?? '?'} ms —
and calls \`expire(now)\` on a simulated timer. The clock is simulated: ${fmt((a?.simulatedRate ?? 0) / 1000)} k events per second of
arrival time, window ${a?.windowMs ?? '?'} ms, so ~${fmt(((a?.simulatedRate ?? 0) * 2 * (a?.windowMs ?? 0)) / 1000)} events stay buffered. Heap and RSS are read
after a full GC at each checkpoint (GC time excluded). "correlator only" subtracts the time to
create the same events without the correlator.

${table(
  [
    'expire every',
    'events',
    'events/s',
    'correlator only',
    'slowest expire (ms)',
    'heap / RSS MiB at',
    'buffered at end',
    'journeys complete',
    'dropped',
  ],
  rows,
)}
`;
}

function fileSection(f: FileResult, goals: Goal[]): string {
  const by = (prefix: string): FileRow | undefined => f.rows.find((r) => r.tool.startsWith(prefix));
  const nn = by('tcpdump -nn');
  const tshark = by('tshark');
  const analyze = f.rows.find((r) => r.tool.startsWith('hoptrace analyze (3'));
  const analyzeSmall = f.rows.find((r) => r.tool.startsWith('hoptrace analyze (¼'));
  const rows = f.rows.map((r) => [
    r.tool,
    fmt(r.packets),
    fmt(r.cost.wallS, 2),
    fmt(r.cost.cpuS, 2),
    fmt(r.cost.peakRssMiB),
    r.packets === 0
      ? '–'
      : fmt((1e9 * r.cost.wallS) / r.packets / (r.tool.includes('3 points') ? 3 : 1)),
    ratio(nn?.cost.wallS, r.cost.wallS),
    ratio(tshark?.cost.wallS, r.cost.wallS),
  ]);
  if (analyze !== undefined && nn !== undefined && tshark !== undefined) {
    const slower = Math.min(nn.cost.wallS, tshark.cost.wallS);
    // The goal as asked: one analyze run against one run of each tool on the same file. analyze
    // reads that file three times (three points); "per file read" is shown beside it.
    const x = slower / analyze.cost.wallS;
    const startup = by('node -e 0');
    const floor = by('node floor-walk');
    const floorX = floor === undefined ? null : slower / floor.cost.wallS;
    goals.push({
      goal: '`analyze` ≥ 20× faster than `tshark -T fields` and `tcpdump -nn -r`',
      result: `${fmt(analyze.cost.wallS, 2)} s (three points, the file read 3×) vs tcpdump -nn ${fmt(nn.cost.wallS, 2)} s (${ratio(nn.cost.wallS, analyze.cost.wallS)}), tshark ${fmt(tshark.cost.wallS, 2)} s (${ratio(tshark.cost.wallS, analyze.cost.wallS)}); per file read ${ratio(slower * 3, analyze.cost.wallS)} of the faster of the two${startup === undefined ? '' : `; Node's startup alone takes ${fmt(startup.cost.wallS, 2)} s (${ratio(slower, startup.cost.wallS)} of tcpdump -nn)`}${floor === undefined ? '' : `; a Node process that only reads the three files and walks their record headers, nothing decoded, takes ${fmt(floor.cost.wallS, 2)} s (${ratio(slower, floor.cost.wallS)})`}`,
      met:
        x >= 20
          ? 'met'
          : floorX !== null && floorX < 20
            ? '**missed**: out of reach for Node here'
            : 'missed',
    });
  }
  if (analyze !== undefined && analyzeSmall !== undefined) {
    const grow = (analyze.cost.peakRssMiB ?? 0) / Math.max(1, analyzeSmall.cost.peakRssMiB ?? 1);
    goals.push({
      goal: '`analyze` memory bounded (not growing with the file)',
      result: `peak RSS ${fmt(analyzeSmall.cost.peakRssMiB)} MiB at ${fmt(analyzeSmall.packets)} packets, ${fmt(analyze.cost.peakRssMiB)} MiB at ${fmt(analyze.packets)} (${fmt(grow, 2)}× for 4× the file)`,
      met: grow < 1.3 ? 'met' : 'missed',
    });
  }
  return `## 3. Large pcap: \`hoptrace decode\` / \`analyze\` vs tcpdump and tshark

A synthetic classic pcap written by bench/pcap-writer.ts: ${fmt(f.packets)} frames (${fmt(f.fileMiB, 1)} MiB), half plain
Ethernet/IPv4/TCP, half VXLAN-encapsulated TCP, 4096 flows, 48-byte payloads, one probe request;
the pcapng row reads the same frames as a pcapng file (one interface, as dumpcap writes). The
floor-walk row (bench/floor-walk.ts) is the least any Node program reading the three files does:
Node's start, the reads, and a walk over the record headers, nothing decoded.
Each command runs alone, stdout to /dev/null; wall time measured around the process, peak RSS and
CPU from \`/usr/bin/time -v\`. \`analyze\` is given the same file at three points
(decap/egress/backend) and so decodes it three times; its verdict here: \`${f.analyzeLayer ?? 'none'}\`.
The ¼ rows are the same commands on a file with a quarter of the frames, to show memory growth.

${table(['command', 'frames', 'wall s', 'CPU s', 'peak RSS MiB', 'ns/frame (per read)', 'tcpdump -nn ÷ this', 'tshark ÷ this'], rows)}
`;
}

function liveSection(rows: LiveRow[], goals: Goal[]): string {
  const ok = rows.filter((r) => r.ok);
  const med = median(ok.map((r) => r.timeToVerdictMs));
  const max = Math.max(...ok.map((r) => r.timeToVerdictMs));
  goals.push({
    goal: 'Verdict ≤ 1 s after the request’s last packet (live lab)',
    result: `median ${fmt(med)} ms, max ${fmt(max)} ms over ${ok.length} correct runs${ok.length < rows.length ? ` (${rows.length - ok.length} runs wrong or failed)` : ''}`,
    met: ok.length === 0 ? 'not measured' : med <= 1000 ? 'met' : 'missed',
  });
  return `## 4. Live lab: time from the request's last packet to the verdict

\`lab/live.ts\` end to end: agents capture in the lab's namespaces (native source), events travel
worker → agent → WebSocket → collector; measured from curl's return to the collector's
\`finishedAt\` (ms resolution).

${table(
  ['scenario', 'verdict', 'state', 'as expected', 'curl end → verdict (ms)', 'scenario total (ms)'],
  rows.map((r) => [
    r.scenario,
    r.verdict,
    r.state,
    r.ok ? 'yes' : 'NO',
    fmt(r.timeToVerdictMs),
    fmt(r.durationMs),
  ]),
)}

Median time to verdict: **${fmt(med)} ms**.
`;
}

/** The whole BENCHMARKS.md. */
export function renderBenchmarks(r: BenchResults): string {
  const goals: Goal[] = [];
  const m = r.machine;
  const parts: string[] = [];
  parts.push(`# hoptrace benchmarks (issue 5)

Generated by \`${r.command}\` (bench/run.ts) on ${m.date}${r.quick ? ' — **quick run** (fewer rates, shorter trials, smaller file)' : ''}, in ${fmt(r.totalS)} s.
Raw results: \`bench/results.json\`. Regenerate with:

\`\`\`sh
sudo npm run bench            # full run (~7 min): setup, build, every section, rewrites this file
sudo npm run bench -- --quick # ~3 min
node dist/bench/run.js --only capture,files   # some sections (after npm run build)
node dist/bench/run.js --only capture --link-only --out X.md --json X.json  # the whole-agent rows alone
\`\`\`

> **Noise caveat.** Two cores, which other work may share during a run (load average
> ${m.loadBefore} before, ${m.loadAfter ?? '?'} after; a quiet machine reads near 0). Absolute numbers
> move by tens of percent between runs; compare the **ratios**, which come from trials run
> back-to-back in the same run under the same background load.

| machine | |
| --- | --- |
| CPUs (nproc) | ${m.nproc} |
| CPU model | ${m.cpu} |
| kernel | ${m.kernel} |
| Node | ${m.node} |
| libpcap (addon) | ${m.libpcap} |
| tcpdump | ${m.tcpdump} |
| tshark | ${m.tshark} |
`);
  if (r.capture !== undefined && r.capture.trials.length > 0)
    parts.push(captureSection(r.capture, goals));
  if (r.link !== undefined && r.link.trials.length > 0) {
    // Alone (--link-only) it still sits under §1's heading.
    if ((r.capture?.trials.length ?? 0) === 0)
      parts.push('## 1. Capture: agent vs tcpdump on the same veth\n');
    parts.push(linkSection(r.link, goals));
  }
  if (r.correlator !== undefined) parts.push(correlatorSection(r.correlator, goals));
  if (r.files !== undefined) parts.push(fileSection(r.files, goals));
  if (r.filesLarge !== undefined) parts.push(largeFileSection(r.filesLarge, goals));
  if (r.live !== undefined) parts.push(liveSection(r.live, goals));
  for (const [s, e] of Object.entries(r.errors))
    parts.push(`## ${s}: FAILED\n\n\`\`\`\n${e}\n\`\`\`\n`);
  parts.push(`## Goals of issue 5

${table(
  ['goal', 'this run', 'status'],
  goals.map((g) => [
    g.goal,
    g.result,
    g.met === 'met' ? 'met' : g.met === 'missed' ? '**missed**' : g.met,
  ]),
)}
`);
  parts.push(LIMITS);
  return parts.join('\n');
}

const LIMITS = `## What limits the numbers

- **Capture, per packet.** With per-flow counters (the live default) most packets of a busy flow
  are only counted, and since 2026-12-06 a counted packet of the commonest shape is not decoded
  into a record at all (summary_quick + fold_quick: its flow found by addresses and ports, the
  same decision made): the worker's ~40 ns a packet at full speed here is mostly libpcap's walk of
  the ring and the first touch of each frame. What follows describes the record path, which every
  packet that is sent (and every packet with \`perPacket\`) takes. The worker decodes each such
  packet in C inside the libpcap callback
  (native/pcap-batch/src/summary.c) into a 192-byte summary record; the addon copies each batch
  into a ring of shared memory with streaming stores (frame_ring.c) and writes a 21-byte notice
  to the agent — no JavaScript runs per packet or per batch, and records of several wake-ups go
  out as one frame (a full 2 MiB batch, or 100 ms after the previous one). Under load the worker
  reads the kernel ring on a 20 ms timer instead of waking for each retired 256 KiB block
  (~220 a second at this rate; busy polling, pcap_batch.c), which took it from ~260–300 to
  ~220–270 ns per packet. perf on the worker at ~330 k pps: ~50 % in the C decoder, most of it
  stalls on the first read of each frame (the kernel wrote it into the ring on the other core);
  ~10 % xxHash32 of the payload; ~10 % the copy into shared memory; the rest wake-ups, Node's
  event loop and libpcap. tcpdump \`-w\` touches each frame once, to copy it into a stdio
  buffer, and hashes nothing; the agent also reads the payload (xxHash32 of the first 64 bytes
  and of the request line, the probe-marker search). That read is the job — the keys are what
  survives NAT. The CPU ratio also moves with the sender's rate: fixed costs per wake-up weigh
  less at higher rates, for both tools.
- **Capture, the agent process** ("+parent"): reading each batch in place from the shared ring,
  writing each FAST record as PacketEvent bytes in C (agent/capture/summary-wire.ts →
  summary_wire.c, no object per packet; SLOW records go through the reference decoder) and
  wrapping each chunk of 256 in the Envelope for the collector. Building a PacketEvent per packet
  and encoding it cost ~1.6 µs per packet here; bytes straight from the records through a socket
  ~0.6 µs; through the ring ~0.35 µs; in frames of up to 10,922 records (~30 a second at this
  rate instead of ~90: each wake-up of this process cost ~0.4 ms of CPU whatever the frame held)
  ~0.25 µs. What remains is writing the protobuf itself (~45 ns per event in a hot loop, ~90 ns
  here where each record was written on the other core), the two copies (the chunk, the
  Envelope) and the JavaScript per chunk and per frame. Writing the protobuf in the worker
  instead moves that cost, it does not remove it: measured there, +80–100 ns per packet.
- **Zero-loss rate**: neither tool has lost a packet at any rate this sender reaches with one
  core (its own rate varies by ~10 % between trials, with either tool), so both limits lie above
  what this machine can offer; the goal would be missed only by an agent trial with loss at a
  rate tcpdump kept up with.
- **One flow under a flood**: tcpdump wakes about once a second; the agent's worker polls its ring
  ~40 times a second (50 ms block timeout), hands over a batch a few times a second and starts
  with a cold JIT (every trial starts a fresh worker), so at 2 k pps its ~1–2 % of a core is a
  fixed cost per second, not per packet (idle, the worker takes ~0.2 %). The kernel's BPF filter
  runs in the sender's softirq for both.
- **Correlator**: one record of typed slots per event, strings interned through a small direct
  cache; what remains per event is the property reads of the incoming PacketEvent and the ring
  stores. Memory is two windows of events at most (maxEventsPerPoint drops and counts beyond).
- **Files**: \`analyze\` reads pcap and pcapng through the same C decoder
  (offline/summary-file.ts) and builds events only for the records its prefilter keeps
  (core/report/analyze.ts); machines without the addon use the TypeScript decoder (~0.6–3 µs per
  frame; pcapng took that path until this run's code: 4.0 s for the 3-point analysis). A single run
  starts with Node itself (the \`node -e 0\` row: 0.08–0.15 s across runs here) and ~40 ms of
  loading modules before it reads a byte, while a twentieth of \`tcpdump -nn -r\` on this file is
  0.11–0.15 s here. The floor-walk row measures what no Node analysis of the three files can go
  below — start, reads, one look at each record header. When that alone is under 20× of
  \`tcpdump -nn -r\` (the goal row says), the goal as stated (three points against one tcpdump
  run) is out of reach for any Node program on this machine, before a single frame is decoded.
  The ratio per file read is shown beside it. (tcpdump runs as a user would run it, with
  TZ unset; glibc then checks /etc/localtime for every timestamp it prints, and with
  \`TZ=:/etc/localtime\` the same command took 1.1 s instead of 2.3 s.) \`decode --json\` is bound
  by building and printing one JSON object per frame.
- **Live lab**: the verdict waits for the collector to see the request at every point and for its
  settle logic; the 50 ms TPACKET_V3 block timeout and the 50 ms event batcher in the agent add up
  to ~100–200 ms before the collector has the last packet.
`;

/**
 * Capture benchmark: tcpdump vs the agent's capture (NsCapture with the native source, and with
 * `source: 'cap'`) on the same veth interface, one trial after another in the same run.
 *
 * Topology (per-run namespaces from lab/netns.ts, removed in `finally` and on SIGINT/SIGTERM):
 *
 *   <prefix>tx: vtx 10.77.0.1 ══ veth ══ vrx 10.77.0.2 :<prefix>rx
 *   udp-flood (AF_PACKET, sendmmsg) ──►   capture on vrx; raw PREROUTING drops the UDP, so the
 *                                         receiver neither answers (ICMP) nor spends on it
 *
 * Per trial: capture opened → counters read → flood for `durationS` → drain → counters read →
 * capture stopped. "offered" is what the capture could see: the vrx rx+tx packet delta (veth
 * counts only what it handed to the receive path, so backlog drops before any tap are excluded and
 * reported as vethDrops). loss = offered − delivered for the broad filter; for the one-flow filter
 * the flow is udp-flood's trickle (src port 40000), whose every packet must be delivered.
 */
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { delay, Netns, runCommand } from '../lab/netns';
import type { AgentChildArgs, AgentChildReport } from './agent-child';
import { cpuNs } from './proc';
import { counters, RX, setupVeth, TX } from './veth';

export type CaptureTool = 'tcpdump' | 'native' | 'cap';

export interface CaptureTrial {
  tool: CaptureTool;
  filter: 'none' | 'one-flow';
  /** Requested flood rate (0 = as fast as one core sends). */
  ratePps: number;
  /** Frames udp-flood sent (flood + trickle). */
  sent: number;
  trickleSent: number;
  elapsedS: number;
  /** Packets the veth handed to the receive path of vrx (what a tap on vrx can see). */
  offered: number;
  /** Frames the sending veth dropped (receiver backlog full), never seen by any capture. */
  vethDrops: number;
  /** Packets delivered to the consumer (tcpdump: "packets captured"). */
  delivered: number;
  /** What must have been delivered: offered (broad filter) or trickleSent (one flow). */
  expected: number;
  loss: number;
  /** Drops the source itself reported (kernel ring; null = the source cannot know). */
  reportedDrops: number | null;
  /** NsCapture: events dropped on queues (worker pipe, batcher). */
  queueDrops: number;
  /** CPU of the capturing process (NsCapture: the worker), ns. */
  cpuNs: number;
  /**
   * NsCapture: CPU of the agent process (agent-child.ts: reads the worker's frames, writes the
   * Envelopes), ns; null for tcpdump.
   */
  parentCpuNs: number | null;
  /** Kernel ring size asked of the capture (undefined = the tool's default). */
  bufferBytes?: number;
  /** A repeat round of the highest-rate pair (tcpdump, native), after the ladder: 1, 2, … */
  repeat?: number;
}

const FLOW_FILTER = 'udp src port 40000';
const TRICKLE_PPS = 2000;

/** Compiles udp-flood.c into `dir`; throws naming the source when it is missing. */
export async function buildFlood(src: string, dir: string): Promise<string> {
  if (!existsSync(src)) {
    throw new Error(
      `the flood generator source ${src} is missing (set HOPTRACE_UDP_FLOOD_SRC to udp-flood.c)`,
    );
  }
  const bin = join(dir, 'udp-flood');
  await runCommand('cc', ['-O2', '-o', bin, src], 60_000);
  return bin;
}

export interface FloodResult {
  sent: number;
  trickle: number;
  elapsedS: number;
}

export function parseFlood(stdout: string): FloodResult {
  const num = (k: string): number => Number(new RegExp(`${k}=([\\d.]+)`).exec(stdout)?.[1] ?? NaN);
  return { sent: num('sent'), trickle: num('trickle'), elapsedS: num('elapsed') };
}

/** One running capture under test. */
export interface Running {
  /** The capturing process: tcpdump, or the agent's capture worker. */
  pid: number;
  /** The agent process (agent-child.js) that reads the worker's frames; none for tcpdump. */
  agentPid?: number;
  delivered(): number;
  /**
   * Resolves once delivery stopped growing (after the flood). `throttled`: the capture runs under
   * a CPU budget, so its backlog may take seconds to work off.
   */
  drain(throttled: boolean): Promise<void>;
  stop(): Promise<{ delivered: number; reportedDrops: number | null; queueDrops: number }>;
}

/** tcpdump -w /dev/null on vrx, once it said it listens (its ring: 8 MiB unless given). */
export async function startTcpdump(
  lab: Netns,
  filter: string,
  bufferBytes?: number,
): Promise<Running> {
  const ringKiB = bufferBytes === undefined ? 8192 : Math.round(bufferBytes / 1024);
  const args = ['-i', 'vrx', '-s', '128', '-B', String(ringKiB), '-w', '/dev/null', '-n'];
  if (filter !== '') args.push(filter);
  const child = lab.spawn(RX, 'tcpdump', args);
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => {
      reject(new Error(`tcpdump did not start: ${stderr}`));
    }, 10_000);
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
      if (stderr.includes('listening on')) {
        clearTimeout(t);
        resolve();
      }
    });
    child.once('exit', () => {
      clearTimeout(t);
      reject(new Error(`tcpdump exited: ${stderr}`));
    });
  });
  const closed = new Promise<void>((r) =>
    child.once('close', () => {
      r();
    }),
  );
  return {
    pid: child.pid ?? -1,
    delivered: () => 0,
    // tcpdump's TPACKET_V3 block timeout is 1 s (no --immediate-mode): a partly filled block is
    // handed over only then, and SIGINT does not flush it.
    async drain(throttled) {
      await delay(1200);
      if (!throttled) return;
      // Under a budget tcpdump may still be working off its ring: wait until its CPU time stops
      // growing (< 0.5 ms in 250 ms, four times in a row; block-timeout wake-ups cost less), at
      // most 10 s — as long as the agent's drain may take.
      const pid = child.pid ?? -1;
      const deadline = Date.now() + 10_000;
      let last = cpuNs(pid) ?? 0;
      let still = 0;
      while (still < 4 && Date.now() < deadline) {
        await delay(250);
        const now = cpuNs(pid) ?? last;
        still = now - last < 500_000 ? still + 1 : 0;
        last = now;
      }
    },
    async stop() {
      child.kill('SIGINT');
      await closed;
      const n = (what: string): number | null => {
        const m = new RegExp(`(\\d+) packets? ${what}`).exec(stderr);
        return m?.[1] === undefined ? null : Number(m[1]);
      };
      return {
        delivered: n('captured') ?? 0,
        reportedDrops: n('dropped by kernel'),
        queueDrops: 0,
      };
    },
  };
}

async function startNsCapture(
  lab: Netns,
  agent: AgentChild,
  tool: 'native' | 'cap',
  filter: string,
  bufferBytes: number | undefined,
): Promise<Running> {
  const spec = {
    point: 'bench',
    node: 'bench',
    iface: 'vrx',
    source: tool,
    ...(filter !== '' ? { filter } : {}),
    ...(bufferBytes !== undefined ? { bufferBytes } : {}),
  };
  const source = await agent.start({ spec, netnsPath: `/run/netns/${lab.full(RX)}` });
  if (source !== tool) {
    await agent.ask('stop');
    throw new Error(`asked for the ${tool} source, the worker runs ${source ?? '?'}`);
  }
  // The worker is the only process in the receiver namespace (nsenter execs node).
  const { stdout } = await runCommand('ip', ['netns', 'pids', lab.full(RX)]);
  const pid = Number(stdout.trim().split('\n')[0]);
  let delivered = 0;
  return {
    pid,
    agentPid: agent.pid,
    delivered: () => delivered,
    async drain() {
      // The worker hands events over in bursts (measured: seconds apart at 50 k pps), so wait
      // until neither deliveries nor reported drops moved for 1 s, at most 10 s.
      const progress = async (): Promise<number> => {
        const r = await agent.ask('progress');
        delivered = r.delivered;
        return r.delivered + r.queueDrops;
      };
      const deadline = Date.now() + 10_000;
      let last = await progress();
      let still = 0;
      while (still < 4 && Date.now() < deadline) {
        await delay(250);
        const now = await progress();
        still = now === last ? still + 1 : 0;
        last = now;
      }
    },
    async stop() {
      const r = await agent.ask('stop');
      delivered = r.delivered;
      return { delivered, reportedDrops: r.kernelDrops ?? null, queueDrops: r.queueDrops };
    },
  };
}

/** The agent process of every native/cap trial (agent-child.ts; its protocol). */
class AgentChild {
  private readonly child: ChildProcessByStdio<Writable, Readable, null>;
  private readonly lines: string[] = [];
  private waiter: (() => void) | undefined;
  private readonly exit: Promise<void>;
  private gone = false;

  constructor(script: string) {
    this.child = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: this.child.stdout }).on('line', (l) => {
      this.lines.push(l);
      this.waiter?.();
    });
    this.exit = new Promise((resolve) => {
      this.child.once('close', () => {
        this.gone = true;
        this.waiter?.();
        resolve();
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  private async next(): Promise<Record<string, unknown>> {
    const deadline = Date.now() + 30_000;
    while (this.lines.length === 0) {
      if (this.gone) throw new Error('the bench agent process exited (its stderr is above)');
      if (Date.now() > deadline) throw new Error('the bench agent process did not answer in 30 s');
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        timer = setTimeout(resolve, 1000);
      });
      clearTimeout(timer);
      this.waiter = undefined;
    }
    const msg = JSON.parse(this.lines.shift() ?? '{}') as Record<string, unknown>;
    if (typeof msg.error === 'string') throw new Error(`bench agent process: ${msg.error}`);
    return msg;
  }

  /** Starts a capture; the source the worker runs. */
  async start(args: AgentChildArgs): Promise<string | undefined> {
    this.child.stdin.write(`${JSON.stringify({ start: args })}\n`);
    const { source } = await this.next();
    return typeof source === 'string' ? source : undefined;
  }

  async ask(what: 'progress' | 'stop'): Promise<AgentChildReport> {
    this.child.stdin.write(`${what}\n`);
    return (await this.next()) as unknown as AgentChildReport;
  }

  /** Ends the process (stdin closed; killed if it does not exit within 10 s). */
  async close(): Promise<void> {
    if (this.gone) return;
    this.child.stdin.end();
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exit;
    clearTimeout(t);
  }
}

export interface CaptureOptions {
  rates: number[];
  durationS: number;
  /**
   * Extra back-to-back tcpdump/native pairs at the highest rate, so the CPU ratio is a median of
   * several pairs rather than one (runs on this shared machine move by tens of percent).
   */
  repeats: number;
  floodSrc: string;
  log: (s: string) => void;
}

export interface CaptureResult {
  /** Every trial; the report derives the zero-loss rates from them (bench/report.ts). */
  trials: CaptureTrial[];
}

async function trial(
  lab: Netns,
  agent: AgentChild,
  flood: string,
  rxMac: string,
  tool: CaptureTool,
  filter: 'none' | 'one-flow',
  ratePps: number,
  durationS: number,
  bufferBytes?: number,
): Promise<CaptureTrial> {
  const bpf = filter === 'none' ? '' : FLOW_FILTER;
  const running =
    tool === 'tcpdump'
      ? await startTcpdump(lab, bpf, bufferBytes)
      : await startNsCapture(lab, agent, tool, bpf, bufferBytes);
  try {
    const rx0 = await counters(lab, RX, 'vrx');
    const tx0 = await counters(lab, TX, 'vtx');
    const cpu0 = cpuNs(running.pid) ?? 0;
    const agent0 = running.agentPid !== undefined ? (cpuNs(running.agentPid) ?? 0) : 0;
    const trickle = filter === 'one-flow' ? TRICKLE_PPS : 0;
    const args = ['vtx', '10.77.0.1', '10.77.0.2', rxMac, String(ratePps), String(durationS)];
    args.push('64', '41000', '8', String(trickle), '40000');
    const out = await lab.exec(TX, flood, args, (durationS + 30) * 1000);
    const f = parseFlood(out.stdout);
    await running.drain(false);
    const cpu1 = cpuNs(running.pid) ?? cpu0;
    const agent1 = running.agentPid !== undefined ? (cpuNs(running.agentPid) ?? agent0) : 0;
    const rx1 = await counters(lab, RX, 'vrx');
    const tx1 = await counters(lab, TX, 'vtx');
    const res = await running.stop();
    const offered = rx1.rxPackets - rx0.rxPackets + (rx1.txPackets - rx0.txPackets);
    const expected = filter === 'none' ? offered : f.trickle;
    return {
      tool,
      filter,
      ratePps,
      sent: f.sent + f.trickle,
      trickleSent: f.trickle,
      elapsedS: f.elapsedS,
      offered,
      vethDrops: tx1.txDropped - tx0.txDropped,
      delivered: res.delivered,
      expected,
      loss: Math.max(0, expected - res.delivered),
      reportedDrops: res.reportedDrops,
      queueDrops: res.queueDrops,
      cpuNs: cpu1 - cpu0,
      parentCpuNs: running.agentPid === undefined ? null : agent1 - agent0,
      ...(bufferBytes !== undefined ? { bufferBytes } : {}),
    };
  } catch (e) {
    await running.stop().catch(() => undefined);
    throw e;
  }
}

/** Runs every trial; the namespaces and the flood binary are removed whatever happens. */
export async function benchCapture(opts: CaptureOptions): Promise<CaptureResult> {
  const lab = new Netns();
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-bench-flood-'));
  let agent: AgentChild | undefined;
  try {
    const flood = await buildFlood(opts.floodSrc, dir);
    const rxMac = await setupVeth(lab);

    agent = new AgentChild(join(__dirname, 'agent-child.js'));
    const trials: CaptureTrial[] = [];
    const tools: CaptureTool[] = ['tcpdump', 'native', 'cap'];
    const lossy = new Set<CaptureTool>();
    const show = (t: CaptureTrial): void => {
      opts.log(
        `capture: ${t.tool} ${t.filter} rate ${t.ratePps || 'max'}: offered ${Math.round(t.offered / t.elapsedS)} pps, delivered ${t.delivered}/${t.expected}, drops ${String(t.reportedDrops)}+${t.queueDrops}, cpu ${(t.cpuNs / 1e6).toFixed(0)} ms`,
      );
    };
    // Step the rate up; a tool leaves the ladder after its first lossy step. Tools alternate at
    // each step so that background load hits all of them alike.
    for (const rate of opts.rates) {
      for (const tool of tools) {
        if (lossy.has(tool)) continue;
        const t = await trial(lab, agent, flood, rxMac, tool, 'none', rate, opts.durationS);
        trials.push(t);
        show(t);
        if (t.loss > 0) lossy.add(tool);
      }
    }
    // The highest rate again, tcpdump and native back to back: the CPU ratio's median and spread.
    for (let round = 1; round <= opts.repeats; round++) {
      for (const tool of ['tcpdump', 'native'] as const) {
        const t = await trial(lab, agent, flood, rxMac, tool, 'none', 0, opts.durationS);
        t.repeat = round;
        trials.push(t);
        show(t);
      }
    }
    // One flow under a full-speed flood: every trickle packet must arrive.
    for (const tool of tools) {
      const t = await trial(lab, agent, flood, rxMac, tool, 'one-flow', 0, opts.durationS);
      trials.push(t);
      show(t);
    }
    // Forced loss: the native source with a 256 KiB ring at full speed, to check that what it
    // loses is exactly what it reports (kernel drops + queue drops).
    const forced = await trial(
      lab,
      agent,
      flood,
      rxMac,
      'native',
      'none',
      0,
      opts.durationS,
      256 * 1024,
    );
    trials.push(forced);
    show(forced);
    return { trials };
  } finally {
    await agent?.close();
    await lab.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Versions of the external tools, for the machine description. */
export function toolVersion(file: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 10_000 }, (err, stdout, stderr) => {
      const text = `${stdout}\n${stderr}`.trim().split('\n')[0] ?? '';
      resolve(err !== null && text === '' ? 'not installed' : text);
    });
  });
}

/**
 * The whole agent against tcpdump (issue 20 goal 1): the real `hoptrace agent` process, connected
 * over its real CollectorLink to a real `hoptrace collector` process, with the capture armed
 * through the collector's API (`POST /v1/captures`) as a user arms one — against
 * `tcpdump -w /dev/null` on the same veth (bench/veth.ts), pair by pair in the same run.
 *
 * Per agent trial: capture armed (a point on vrx in the receiver namespace, and a second, idle
 * one on that namespace's `lo`, because a capture has at least two points) → both points
 * capturing → CPU and counters read → flood → drain (the collector's event count for the point
 * stopped growing) → CPU and counters read → capture cancelled, its workers gone. CPU comes from
 * /proc/PID/task/TID/schedstat of every thread: the vrx worker, the idle point's worker, the
 * agent process (capture frames → Envelopes → spool → ws/TLS), the collector process (receive,
 * decode, store, hold for analysis). "delivered" is what reached the collector: the point's
 * stored events.
 *
 * The zero-loss search under a CPU budget (issue 20 goal 3, `share`): the same trials, tcpdump
 * and the whole agent alternating step by step at asked rates (bench/cpu-share.ts), each under the
 * same CFS quota of one core (bench/cgroup-cpu.ts) with the same 32 MiB ring — for the agent its
 * two capture workers and the agent process together; the collector and the sender stay outside.
 * A budget trial lets the capture settle first (`share.settleS`, no flood, outside the budget:
 * its CPU then is the tool's idle cost while capturing, recorded apart), then moves it into the
 * budget for a flood of `share.durationS` — long enough that the ring holds only a part of it, so
 * the search finds the capture's sustained rate rather than the ring's size plus the capture's
 * first seconds — and out again when the flood ends (the backlog is worked off outside it, for
 * both tools: no packet arrives then, so none can be lost).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accounted, type CaptureView, type PointView } from '../collector';
import { forget, removeOnExit } from '../lab/live-procs';
import { delay, Netns } from '../lab/netns';
import { buildFlood, parseFlood, startTcpdump } from './capture';
import { createCpuBudget, type CpuBudget } from './cgroup-cpu';
import { nextShareRate, SHARE_RING_BYTES, type ShareSearch, type ShareStep } from './cpu-share';
import { LinkPair, workerPids, type LinkScheme } from './link-procs';
import { cpuNs, median, rssMiB } from './proc';
import { counters, RX, setupVeth, TX } from './veth';

export type { LinkScheme };

/** One trial: tcpdump, or the whole agent over one scheme. */
export interface LinkTrial {
  tool: 'tcpdump' | LinkScheme;
  /** Round of the pairs (1, 2, …): each round runs tcpdump before each scheme's agent. */
  round: number;
  sent: number;
  elapsedS: number;
  /** Packets the veth handed to vrx's receive path. */
  offered: number;
  vethDrops: number;
  /**
   * tcpdump: packets captured; agent: packets the collector holds for the point — its packet
   * events and what its flow counters count (PacketEvent.fold).
   */
  delivered: number;
  /** Agent: events the collector stored for the point (flow counters included). */
  events?: number;
  /** Agent: packets its worker sent whole only because its flow table was full. */
  foldFullSent?: number;
  /** The flood: `flows` (8 source ports, the default) or `scan` (every packet a new flow). */
  load?: 'flows' | 'scan';
  /** Agent: packets its worker counted (the point's status). */
  workerPackets: number | null;
  /** Kernel + queue drops the capture reported, and events the link reported lost. */
  reportedDrops: number | null;
  linkLost: number;
  /** CPU of the capturing process (tcpdump; the agent's vrx worker), ns. */
  cpuNs: number;
  /** Agent: the idle point's worker, the agent process, the collector process (ns). */
  idleWorkerNs: number | null;
  agentNs: number | null;
  collectorNs: number | null;
  /** Agent process RSS after the drain (MiB). */
  agentRssMiB: number | null;
  /** A step of the search under a CPU budget: the rate asked (pps). */
  askedPps?: number;
  /** The trial ran under a CPU budget of this share of one core. */
  budgetPercent?: number;
  /** CFS periods of the trial in which the budget ran out, of all its periods. */
  throttled?: { periods: number; throttled: number };
  /**
   * Under a budget, the agent: whether delivery stood still (2 s) before the drain's 20 s
   * deadline (tcpdump's drain has no such answer: undefined).
   */
  drained?: boolean;
  /** Under a budget: how long the capture settled before the flood, no packet sent (s). */
  settleS?: number;
  /**
   * CPU the tool used while settling, outside the budget (ns): tcpdump; the agent's two workers
   * and its process. Its idle cost while capturing, start-up included.
   */
  settleCpuNs?: number;
}

export interface LinkOptions {
  schemes: LinkScheme[];
  rounds: number;
  durationS: number;
  floodSrc: string;
  /** Also one scan-like pair per scheme (every packet a new flow) after the rounds. */
  scan?: boolean;
  /**
   * The zero-loss search under the same CPU budget (percent of one core) for tcpdump and the
   * whole agent over `scheme`, after the rounds; none when absent. `settleS` (default
   * SHARE_SETTLE_S) and `durationS` (default SHARE_FLOOD_S) shape each of its trials.
   */
  share?: {
    /** Each budget's search, one after the other. */
    budgets: readonly ShareBudget[];
    scheme: LinkScheme;
    settleS?: number;
    durationS?: number;
  };
  log: (s: string) => void;
}

/** One zero-loss search: both tools held to `percent` of one core, rates asked by `search`. */
export interface ShareBudget {
  percent: number;
  search: ShareSearch;
}

/** A budget trial's wait between capturing and the flood: past the first second's transients. */
export const SHARE_SETTLE_S = 3;
/** A budget trial's flood: at the rates found, several times what the 32 MiB ring holds. */
export const SHARE_FLOOD_S = 10;
/** The flood's UDP payload; its frames are 42 bytes more (Ethernet, IPv4, UDP headers). */
const PAYLOAD_BYTES = 64;
export const FRAME_BYTES = 42 + PAYLOAD_BYTES;

export interface LinkResult {
  trials: LinkTrial[];
  /** When the rows were measured and the load average around them (they may be re-rendered). */
  date?: string;
  loadBefore?: string;
  loadAfter?: string;
}

const loadavg = (): string =>
  readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** Per-packet figures of one pair (tcpdump trial, agent trial). */
export interface LinkFigures {
  tcpdumpNs: number;
  workerNs: number;
  /** Events the collector stored per packet delivered (1 without flow counters). */
  eventsPerPacket: number;
  /** The agent process alone. */
  agentNs: number;
  /** Every worker + the agent process: what the agent costs the node. */
  wholeNs: number;
  collectorNsPerEvent: number;
  workerRatio: number;
  wholeRatio: number;
  lossless: boolean;
}

/** Whether a trial took every packet offered (tcpdump: captured; the agent: held by the collector). */
export function linkLossless(t: LinkTrial): boolean {
  return t.delivered >= t.offered;
}

const per = (ns: number | null, n: number): number => (ns ?? NaN) / Math.max(1, n);

/** The figures of a pair; NaN where a number is missing. */
export function linkFigures(td: LinkTrial, ag: LinkTrial): LinkFigures {
  const tcpdumpNs = per(td.cpuNs, td.delivered);
  const workerNs = per(ag.cpuNs, ag.delivered);
  const agentNs = per(ag.agentNs, ag.delivered);
  const wholeNs = per(ag.cpuNs + (ag.idleWorkerNs ?? 0) + (ag.agentNs ?? NaN), ag.delivered);
  return {
    tcpdumpNs,
    workerNs,
    eventsPerPacket: (ag.events ?? ag.delivered) / Math.max(1, ag.delivered),
    agentNs,
    wholeNs,
    collectorNsPerEvent: per(ag.collectorNs, ag.events ?? ag.delivered),
    workerRatio: workerNs / tcpdumpNs,
    wholeRatio: wholeNs / tcpdumpNs,
    lossless: linkLossless(td) && linkLossless(ag),
  };
}

/** Each agent trial with the tcpdump trial run just before it in the same round. */
export function linkPairs(trials: readonly LinkTrial[]): [LinkTrial, LinkTrial][] {
  const out: [LinkTrial, LinkTrial][] = [];
  let last: LinkTrial | undefined;
  for (const t of trials) {
    if (t.budgetPercent !== undefined) continue;
    if (t.tool === 'tcpdump') last = t;
    else if (last !== undefined && last.round === t.round) {
      out.push([last, t]);
      last = undefined;
    }
  }
  return out;
}

/** Median figures of one scheme's lossless pairs, and how many pairs there were. */
export function schemeSummary(
  trials: readonly LinkTrial[],
  scheme: LinkScheme,
): { pairs: number; lossless: number; median: LinkFigures | null; wholeRange: [number, number] } {
  const figs = linkPairs(trials)
    .filter(([, a]) => a.tool === scheme && a.load !== 'scan')
    .map(([td, a]) => linkFigures(td, a));
  const ok = figs.filter((f) => f.lossless);
  if (ok.length === 0)
    return { pairs: figs.length, lossless: 0, median: null, wholeRange: [NaN, NaN] };
  const m = (k: keyof Omit<LinkFigures, 'lossless'>): number => median(ok.map((f) => f[k]));
  const whole = ok.map((f) => f.wholeRatio);
  return {
    pairs: figs.length,
    lossless: ok.length,
    median: {
      tcpdumpNs: m('tcpdumpNs'),
      workerNs: m('workerNs'),
      eventsPerPacket: m('eventsPerPacket'),
      agentNs: m('agentNs'),
      wholeNs: m('wholeNs'),
      collectorNsPerEvent: m('collectorNsPerEvent'),
      workerRatio: m('workerRatio'),
      wholeRatio: m('wholeRatio'),
      lossless: true,
    },
    wholeRange: [Math.min(...whole), Math.max(...whole)],
  };
}

const FINAL = new Set(['resolved', 'timeout', 'cancelled', 'failed']);

function point(v: CaptureView, name: string): PointView {
  const p = v.points.find((x) => x.name === name);
  if (p === undefined) throw new Error(`capture ${v.id} has no point ${name}`);
  return p;
}

async function until<T>(what: string, ms: number, get: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${ms} ms`);
    await delay(100);
  }
}

interface Flood {
  load: 'flows' | 'scan';
  /**
   * Floods at `ratePps` (0, the default: as fast as one core sends) for `durationS` (default: the
   * rounds' duration).
   */
  run(ratePps?: number, durationS?: number): Promise<{ sent: number; elapsedS: number }>;
}

/** A trial's CPU budget, the rate asked of the flood under it, and how the trial is timed. */
interface Budgeted {
  budget: CpuBudget;
  askedPps: number;
  settleS: number;
  durationS: number;
}

/**
 * Waits `s` seconds, nothing sent: the CPU `pids` used meanwhile and the seconds it took (the
 * trial's settle fields).
 */
async function settle(pids: readonly number[], s: number): Promise<Partial<LinkTrial>> {
  const cpu = (): number => pids.reduce((sum, p) => sum + (cpuNs(p) ?? NaN), 0);
  const t0 = performance.now();
  const c0 = cpu();
  await delay(s * 1000);
  return { settleS: (performance.now() - t0) / 1000, settleCpuNs: cpu() - c0 };
}

/** The budget's fields of a trial, from cpu.stat before and after. */
function budgetFields(
  b: Budgeted,
  s0: { periods: number; throttled: number },
  s1: { periods: number; throttled: number },
  drained?: boolean,
): Partial<LinkTrial> {
  return {
    askedPps: b.askedPps,
    budgetPercent: b.budget.percent,
    throttled: { periods: s1.periods - s0.periods, throttled: s1.throttled - s0.throttled },
    ...(drained === undefined ? {} : { drained }),
  };
}

async function agentTrial(
  lab: Netns,
  pair: LinkPair,
  flood: Flood,
  round: number,
  budgeted?: Budgeted,
): Promise<LinkTrial> {
  const target = `/run/netns/${lab.full(RX)}`;
  const created = (await pair.api('POST', '/v1/captures', {
    points: [
      { name: 'veth', target, iface: 'vrx', node: pair.node },
      { name: 'idle', target, iface: 'lo', node: pair.node },
    ],
    timeoutMs: 600_000,
    stopOnFirstMatch: false,
  })) as CaptureView;
  const id = created.id;
  try {
    await until(`capture ${id} capturing`, 20_000, async () => {
      const v = await pair.capture(id);
      if (FINAL.has(v.state)) throw new Error(`capture ${id} ended: ${JSON.stringify(v.points)}`);
      return v.points.every((p) => p.state === 'capturing') ? v : undefined;
    });
    const workers = await until('both capture workers', 10_000, () => {
      const w = workerPids(pair.agentPid);
      const veth = w.find((x) => x.iface === 'vrx');
      const idle = w.find((x) => x.iface === 'lo');
      return Promise.resolve(
        veth !== undefined && idle !== undefined ? { veth: veth.pid, idle: idle.pid } : undefined,
      );
    });
    const cpu = (): number[] =>
      [workers.veth, workers.idle, pair.agentPid, pair.collectorPid].map((p) => cpuNs(p) ?? NaN);
    // Under a budget: both workers and the agent process (all their threads); not the collector.
    // They settle outside it first, so their start-up is measured apart and not in the flood.
    const agentPids = [workers.veth, workers.idle, pair.agentPid];
    const settled = budgeted === undefined ? {} : await settle(agentPids, budgeted.settleS);
    if (budgeted !== undefined) for (const pid of agentPids) budgeted.budget.add(pid);
    const s0 = budgeted?.budget.stat();
    const before = point(await pair.capture(id), 'veth');
    const rx0 = await counters(lab, RX, 'vrx');
    const tx0 = await counters(lab, TX, 'vtx');
    const c0 = cpu();
    const f = await flood.run(budgeted?.askedPps, budgeted?.durationS);
    // Held to the budget while packets arrive; once they stop, no packet can be lost any more
    // (what overflowed the ring is counted), so the backlog is worked off outside it — as for
    // tcpdump. (Draining inside it, a count that stood still for 2 s meant a starved agent
    // process, not a drained ring.)
    const s1 = budgeted?.budget.stat();
    budgeted?.budget.remove();
    // Delivered = held by the collector (packet events + what its counters count): wait until
    // the point's count stood still for 2 s (a worker writes counters alone once a second).
    let last = -1;
    let still = 0;
    const deadline = Date.now() + 20_000;
    let p = before;
    while (still < 8 && Date.now() < deadline) {
      await delay(250);
      p = point(await pair.capture(id), 'veth');
      still = accounted(p) === last ? still + 1 : 0;
      last = accounted(p);
    }
    const c1 = cpu();
    const rss = rssMiB(pair.agentPid);
    const rx1 = await counters(lab, RX, 'vrx');
    const tx1 = await counters(lab, TX, 'vtx');
    const d = c1.map((x, i) => x - (c0[i] ?? NaN));
    return {
      tool: pair.scheme,
      round,
      sent: f.sent,
      elapsedS: f.elapsedS,
      offered: rx1.rxPackets - rx0.rxPackets + (rx1.txPackets - rx0.txPackets),
      vethDrops: tx1.txDropped - tx0.txDropped,
      delivered: accounted(p) - accounted(before),
      events: p.events - before.events,
      foldFullSent: (p.foldFullSent ?? 0) - (before.foldFullSent ?? 0),
      load: flood.load,
      workerPackets: p.packets - before.packets,
      reportedDrops:
        p.kernelDrops === null ? null : p.kernelDrops - (before.kernelDrops ?? 0) + p.queueDrops,
      linkLost: p.lost - before.lost,
      cpuNs: d[0] ?? NaN,
      idleWorkerNs: d[1] ?? NaN,
      agentNs: d[2] ?? NaN,
      collectorNs: d[3] ?? NaN,
      agentRssMiB: rss,
      ...settled,
      ...(budgeted !== undefined && s0 !== undefined && s1 !== undefined
        ? budgetFields(budgeted, s0, s1, still >= 8)
        : {}),
    };
  } finally {
    // Out of the budget before the capture is cancelled, so that ending it is not throttled.
    budgeted?.budget.remove();
    await pair.api('DELETE', `/v1/captures/${encodeURIComponent(id)}`).catch(() => undefined);
    // The next trial starts only once this one's workers are gone and the collector finished it.
    await until(`capture ${id} finished`, 30_000, async () =>
      FINAL.has((await pair.capture(id)).state) ? true : undefined,
    );
    await until('the workers exited', 15_000, () =>
      Promise.resolve(workerPids(pair.agentPid).length === 0 ? true : undefined),
    );
  }
}

async function tcpdumpTrial(
  lab: Netns,
  flood: Flood,
  round: number,
  budgeted?: Budgeted,
): Promise<LinkTrial> {
  // Under a budget, the agent's ring size (tcpdump -B 32768).
  const running = await startTcpdump(
    lab,
    '',
    budgeted === undefined ? undefined : SHARE_RING_BYTES,
  );
  try {
    // As for the agent: settled outside the budget, then held to it.
    const settled = budgeted === undefined ? {} : await settle([running.pid], budgeted.settleS);
    budgeted?.budget.add(running.pid);
    const s0 = budgeted?.budget.stat();
    const rx0 = await counters(lab, RX, 'vrx');
    const tx0 = await counters(lab, TX, 'vtx');
    const c0 = cpuNs(running.pid) ?? 0;
    const f = await flood.run(budgeted?.askedPps, budgeted?.durationS);
    // As for the agent: the budget while packets arrive, the backlog worked off outside it.
    const s1 = budgeted?.budget.stat();
    budgeted?.budget.remove();
    await running.drain(budgeted !== undefined);
    const c1 = cpuNs(running.pid) ?? c0;
    const rx1 = await counters(lab, RX, 'vrx');
    const tx1 = await counters(lab, TX, 'vtx');
    const res = await running.stop();
    return {
      tool: 'tcpdump',
      round,
      sent: f.sent,
      elapsedS: f.elapsedS,
      offered: rx1.rxPackets - rx0.rxPackets + (rx1.txPackets - rx0.txPackets),
      vethDrops: tx1.txDropped - tx0.txDropped,
      delivered: res.delivered,
      load: flood.load,
      workerPackets: null,
      reportedDrops: res.reportedDrops,
      linkLost: 0,
      cpuNs: c1 - c0,
      idleWorkerNs: null,
      agentNs: null,
      collectorNs: null,
      agentRssMiB: null,
      ...settled,
      ...(budgeted !== undefined && s0 !== undefined && s1 !== undefined
        ? budgetFields(budgeted, s0, s1)
        : {}),
    };
  } catch (e) {
    await running.stop().catch(() => undefined);
    throw e;
  }
}

/** Runs the rounds; namespaces, processes and temp dirs are removed whatever happens. */
export async function benchLink(opts: LinkOptions): Promise<LinkResult> {
  const lab = new Netns();
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-bench-link-'));
  // Also on SIGINT/SIGTERM, with the collector and agent children (lab/live-procs.ts).
  removeOnExit(dir);
  const pairs: LinkPair[] = [];
  const date = new Date().toISOString();
  const loadBefore = loadavg();
  try {
    const bin = await buildFlood(opts.floodSrc, dir);
    const rxMac = await setupVeth(lab);
    const floodOf = (load: 'flows' | 'scan'): Flood => ({
      load,
      async run(ratePps = 0, durationS = opts.durationS) {
        const args = ['vtx', '10.77.0.1', '10.77.0.2', rxMac, String(ratePps), String(durationS)];
        // A scan: 24,000 source ports in turn, each packet a new flow (the agent's table holds
        // 4,096), so every packet is sent whole.
        args.push(String(PAYLOAD_BYTES), '41000', load === 'scan' ? '24000' : '8');
        args.push('0', '40000');
        const out = await lab.exec(TX, bin, args, (durationS + 30) * 1000);
        const f = parseFlood(out.stdout);
        return { sent: f.sent + f.trickle, elapsedS: f.elapsedS };
      },
    });
    const flood = floodOf('flows');
    for (const scheme of opts.schemes) {
      const pdir = join(dir, scheme);
      const p = await LinkPair.start(scheme, pdir, `/run/netns/${lab.prefix}*`).catch(
        (e: unknown) => {
          throw new Error(`starting the ${scheme} collector and agent: ${String(e)}`);
        },
      );
      pairs.push(p);
    }
    const trials: LinkTrial[] = [];
    const show = (t: LinkTrial): void => {
      opts.log(
        `link: ${t.tool} round ${t.round}: offered ${Math.round(t.offered / t.elapsedS)} pps, delivered ${t.delivered}/${t.offered}, cpu ${(t.cpuNs / 1e6).toFixed(0)} ms` +
          (t.agentNs === null
            ? ''
            : ` + agent ${(t.agentNs / 1e6).toFixed(0)} ms, collector ${((t.collectorNs ?? 0) / 1e6).toFixed(0)} ms, agent RSS ${t.agentRssMiB?.toFixed(0) ?? '?'} MiB`) +
          (t.settleCpuNs === undefined
            ? ''
            : `; settled ${(t.settleS ?? NaN).toFixed(1)} s at ${settleMsPerS(t).toFixed(1)} ms/s`),
      );
    };
    // One capture per scheme first, not counted: an agent the user runs has captured before, and
    // its first capture pays the JIT and the TLS session's warm-up once, not per packet.
    for (const p of pairs) {
      const w = await agentTrial(lab, p, flood, 0).catch((e: unknown) => {
        throw new Error(`${p.scheme} agent warm-up: ${String(e)}\n${p.logs()}`);
      });
      opts.log(`link: ${p.scheme} warm-up (not counted): ${w.delivered}/${w.offered} delivered`);
    }
    // A round: tcpdump before each scheme's agent, so each pair shares the background load.
    for (let round = 1; round <= opts.rounds; round++) {
      for (const p of pairs) {
        const td = await tcpdumpTrial(lab, flood, round);
        trials.push(td);
        show(td);
        const ag = await agentTrial(lab, p, flood, round).catch((e: unknown) => {
          throw new Error(`${p.scheme} agent trial: ${String(e)}\n${p.logs()}`);
        });
        trials.push(ag);
        show(ag);
      }
    }
    // The fallback, once per scheme: a scan-like load where every packet is a new flow.
    if (opts.scan === true) {
      const scan = floodOf('scan');
      for (const p of pairs) {
        const td = await tcpdumpTrial(lab, scan, opts.rounds + 1);
        trials.push(td);
        show(td);
        const ag = await agentTrial(lab, p, scan, opts.rounds + 1).catch((e: unknown) => {
          throw new Error(`${p.scheme} agent scan trial: ${String(e)}\n${p.logs()}`);
        });
        trials.push(ag);
        show(ag);
      }
    }
    if (opts.share !== undefined) await shareSearch(lab, pairs, flood, opts, trials, show);
    return { trials, date, loadBefore, loadAfter: loadavg() };
  } finally {
    for (const p of pairs) await p.close();
    await lab.destroy();
    rmSync(dir, { recursive: true, force: true });
    forget(dir);
  }
}

/** CPU a second the tool used while it settled, capturing with nothing sent (ms/s; NaN: none). */
export function settleMsPerS(t: LinkTrial): number {
  return (t.settleCpuNs ?? NaN) / 1e6 / (t.settleS ?? NaN);
}

/** One search step of a budget trial. */
export function shareStepOf(t: LinkTrial): ShareStep {
  return {
    askedPps: t.askedPps ?? 0,
    offeredPps: t.offered / t.elapsedS,
    lossless: linkLossless(t),
  };
}

/**
 * The zero-loss search under the same CPU budget: tcpdump and the whole agent over the chosen
 * scheme alternate step by step (as the capture ladder does), each step in a fresh cgroup that
 * is removed afterwards whatever happens.
 */
async function shareSearch(
  lab: Netns,
  pairs: readonly LinkPair[],
  flood: Flood,
  opts: LinkOptions,
  trials: LinkTrial[],
  show: (t: LinkTrial) => void,
): Promise<void> {
  const share = opts.share;
  if (share === undefined) return;
  const pair = pairs.find((p) => p.scheme === share.scheme);
  if (pair === undefined) throw new Error(`the budget search asks for ${share.scheme}, not run`);
  const round = opts.rounds + 2;
  const timed = {
    settleS: share.settleS ?? SHARE_SETTLE_S,
    durationS: share.durationS ?? SHARE_FLOOD_S,
  };
  for (const b of share.budgets)
    await budgetSearch(lab, pair, flood, b, round, timed, trials, show);
}

/** One budget's search: tcpdump and the agent alternating step by step. */
async function budgetSearch(
  lab: Netns,
  pair: LinkPair,
  flood: Flood,
  b: ShareBudget,
  round: number,
  timed: { settleS: number; durationS: number },
  trials: LinkTrial[],
  show: (t: LinkTrial) => void,
): Promise<void> {
  const steps = { tcpdump: [] as ShareStep[], agent: [] as ShareStep[] };
  for (;;) {
    let ran = false;
    for (const tool of ['tcpdump', 'agent'] as const) {
      const askedPps = nextShareRate(steps[tool], b.search);
      if (askedPps === null) continue;
      const budget = createCpuBudget(`hoptrace-bench-${process.pid}-link-${tool}`, b.percent);
      const budgeted = { budget, askedPps, ...timed };
      let t: LinkTrial;
      try {
        t =
          tool === 'tcpdump'
            ? await tcpdumpTrial(lab, flood, round, budgeted)
            : await agentTrial(lab, pair, flood, round, budgeted).catch((e: unknown) => {
                throw new Error(`${pair.scheme} agent budget trial: ${String(e)}\n${pair.logs()}`);
              });
      } finally {
        budget.remove();
      }
      trials.push(t);
      show(t);
      steps[tool].push(shareStepOf(t));
      ran = true;
    }
    if (!ran) return;
  }
}

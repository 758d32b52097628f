/**
 * A repro's verdicts, one per probe, judged again only for a probe whose inputs changed. Judging
 * one reads its events (30–40 ms a probe among 200 k events a point), and the view is served on
 * every probe the prober posts: judging every probe each time made a repro of n probes cost
 * O(n²) (a review measured 30 s a view at 1,000 probes).
 *
 * A probe's entry keeps its judgement (repro-core judgeProbeFlows), what the judgement read
 * (ProbeReads) and a stamp of those reads: the version of its source port's events at the first
 * point (its connection there, whichever SYN it finds), and then either the decap coverage (no
 * SYN) or the inventory, the pod its SYN's attachment names, the versions of the later points'
 * events in its window (core/repro/event-log.ts) and each not-capturing-yet answer it read.
 * Equal stamps mean equal reads, so the judgement is the same (it is a pure function of them);
 * anything else is judged again. The losses in flight are added afresh whenever the loss spans
 * changed. So the rows and flows are always those analyzeProbeFlows gives now (tested against it
 * through random interleavings in test/unit/repro-probe-cache.test.ts).
 */
import type { Inventory } from '../../common/inventory';
import type { PointEventLog } from './event-log';
import {
  judgeProbeFlows,
  lossesInFlight,
  firstLetGo,
  missedWhy,
  type LossSpan,
  type ProbeFlow,
  type ProbeReads,
  type ProbeReport,
  type ServedBy,
  type TimelineRow,
} from './repro-core';

/** What the verdicts of a repro are judged from (repro-core ProbeInput, for every probe). */
export interface ProbesInput {
  probes: readonly ProbeReport[];
  client: string;
  /** Points in path order (decap, egress, backend). */
  points: readonly PointEventLog[];
  epochs: ReadonlyMap<number, ServedBy>;
  inventory: Inventory;
  startMs: number;
  decapCoverage: readonly { fromMs: number; toMs: number | null }[];
  losses: readonly LossSpan[];
}

type Stamp = (number | string | boolean)[];

interface Entry {
  /** A copy of the probe as judged. */
  probe: ProbeReport;
  judged: { row: TimelineRow; flows: ProbeFlow[]; reads: ProbeReads };
  stamp: Stamp;
  /** The judged row with its losses in flight, as of `lossesVersion`. */
  row: TimelineRow;
  lossesVersion: number;
}

// JSON with the numbers it cannot tell apart (NaN, ±Infinity → null) kept apart.
const keyOf = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    typeof v === 'number' && !Number.isFinite(v) ? `#${v}` : v,
  );

/** A value's version: a new one whenever its JSON differs from the last one seen. */
class JsonVersion {
  private last: string | undefined;
  private version = 0;

  of(value: unknown): number {
    const key = keyOf(value);
    if (key !== this.last) {
      this.last = key;
      this.version++;
    }
    return this.version;
  }
}

/** The versions every probe's stamp reads the same way in one probes() call. */
interface Shared {
  points: readonly PointEventLog[];
  inventory: number;
  coverage: number;
  served: ReadonlyMap<number, string>;
}

/** The stamp of what `reads` (a judgement of `probe`) read, as the inputs are now. */
function stampOf(probe: ProbeReport, reads: ProbeReads, s: Shared): Stamp {
  const [first, ...rest] = s.points;
  const out: Stamp = [first?.portVersion(probe.sport) ?? 0];
  const syn = reads.syn;
  if (syn === null) {
    out.push(s.coverage, first === undefined ? false : firstLetGo(first, probe));
    return out;
  }
  out.push(s.inventory, s.served.get(syn.epoch) ?? '');
  for (const p of rest) p.versionsBetween(syn.loNs, syn.hiNs, out);
  for (const name of reads.lateAt) {
    const p = rest.find((x) => x.name === name);
    out.push(
      p === undefined
        ? 'no point'
        : (missedWhy(p, syn.epoch, earliest(p, syn.epoch), syn.tsNs, syn.loNs) ?? 'seen'),
    );
  }
  return out;
}

/** The earliest event at `p` of attachment `epoch` or of the backend capture (epoch 0). */
function earliest(p: PointEventLog, epoch: number): bigint | null {
  const a = p.firstNs(epoch);
  const b = epoch === 0 ? null : p.firstNs(0);
  return a === null ? b : b === null || a <= b ? a : b;
}

function sameStamp(a: Stamp, b: Stamp): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// ProbeReport holds only strings, numbers, booleans and null.
function sameProbe(a: ProbeReport, b: ProbeReport): boolean {
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => Object.is(x[k], y[k]));
}

/** One repro's verdicts, kept between calls: at most one entry per probe it was last given. */
export class ProbeCache {
  private entries: Entry[] = [];
  private base: { client: string; startMs: number; points: readonly PointEventLog[] } | null = null;
  private readonly inventory = new JsonVersion();
  private readonly coverage = new JsonVersion();
  private readonly losses = new JsonVersion();
  private judged = 0;

  /** Probes the last probes() judged (the others were as kept). */
  get judgedLast(): number {
    return this.judged;
  }

  /** Entries kept: never more than the probes of the last call. */
  get size(): number {
    return this.entries.length;
  }

  /** Lets every entry go (a finished repro's view is its bundle's from then on). */
  clear(): void {
    this.entries = [];
    this.base = null;
  }

  /** Every probe's row (with its losses in flight) and flows: analyzeProbeFlows of each, now. */
  probes(input: ProbesInput): { rows: TimelineRow[]; flows: ProbeFlow[] } {
    this.rebase(input);
    const shared: Shared = {
      points: input.points,
      inventory: this.inventory.of(input.inventory),
      coverage: this.coverage.of(input.decapCoverage),
      served: new Map([...input.epochs].map(([epoch, s]) => [epoch, keyOf(s)])),
    };
    const lossesVersion = this.losses.of(input.losses);
    const points = input.points;
    if (this.entries.length > input.probes.length) this.entries.length = input.probes.length;
    const rows: TimelineRow[] = [];
    const flows: ProbeFlow[] = [];
    this.judged = 0;
    input.probes.forEach((probe, i) => {
      let e = this.entries[i];
      if (
        e === undefined ||
        !sameProbe(e.probe, probe) ||
        !sameStamp(e.stamp, stampOf(probe, e.judged.reads, shared))
      ) {
        const judged = judgeProbeFlows({
          probe,
          client: input.client,
          points,
          epochs: input.epochs,
          inventory: input.inventory,
          startMs: input.startMs,
          decapCoverage: input.decapCoverage,
        });
        e = {
          probe: { ...probe },
          judged,
          stamp: stampOf(probe, judged.reads, shared),
          row: judged.row,
          lossesVersion: 0, // versions start at 1
        };
        this.entries[i] = e;
        this.judged++;
      }
      if (e.lossesVersion !== lossesVersion) {
        const row = e.judged.row;
        // Frozen: the view hands the same row out again; a change to it would be a stale verdict.
        e.row = Object.freeze({ ...row, lossesInFlight: lossesInFlight(row, probe, input.losses) });
        e.lossesVersion = lossesVersion;
      }
      rows.push(e.row);
      flows.push(...e.judged.flows);
    });
    return { rows, flows };
  }

  // Another client or first probe, or other event logs: nothing kept applies.
  private rebase(input: ProbesInput): void {
    const b = this.base;
    const same =
      b !== null &&
      b.client === input.client &&
      b.startMs === input.startMs &&
      b.points.length === input.points.length &&
      b.points.every((p, i) => p === input.points[i]);
    if (same) return;
    this.entries = [];
    this.base = { client: input.client, startMs: input.startMs, points: [...input.points] };
  }
}

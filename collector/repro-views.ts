/**
 * What a repro looks like from outside: its timeline (one verdict per probe), the lines about
 * what the captures lost, and the whole view `GET /v1/repros/:id` serves and the data directory
 * keeps. Built from the session's state on each request; only the verdicts are kept between
 * requests (Repro.probeCache), each judged again when what it was judged from changed.
 */
import type { Inventory } from '../common/inventory';
import { lossPhrase } from '../core/report/capture-health';
import { PointEventLog } from '../core/repro/event-log';
import {
  LOSS_SLACK_MS,
  type ProbeFlow,
  renderTimeline,
  type ServedBy,
  type TimelineRow,
} from '../core/repro/repro-core';
import {
  captureLabel,
  currentAttachment,
  iso,
  POINTS,
  served,
  type PointRec,
  type Repro,
  type ReproPointView,
  type ReproView,
} from './repro-state';

/** One verdict per probe, from the events the points delivered (repro-core analyzeProbe). */
export function reproTimeline(r: Repro, inventory: Inventory): TimelineRow[] {
  return reproProbes(r, inventory).rows;
}

/**
 * reproTimeline, and each probe's matched connection per capture (the evidence's frames): what
 * repro-core analyzeProbeFlows gives for each probe now, judged again only for the probes whose
 * inputs changed since the last view (core/repro/probe-cache.ts).
 */
export function reproProbes(
  r: Repro,
  inventory: Inventory,
): { rows: TimelineRow[]; flows: ProbeFlow[] } {
  return r.probeCache.probes({
    probes: r.probes,
    client: r.spec.client,
    // A finished repro's events are let go: empty logs then (its view is the bundle's).
    points: POINTS.map((name) => r.events.get(name) ?? new PointEventLog(name, 0)),
    epochs: new Map<number, ServedBy>(r.attachments.map((a) => [a.epoch, served(a)])),
    inventory,
    startMs: r.probes[0]?.startedAtMs ?? r.createdAtMs,
    decapCoverage: r.attachments.flatMap((a) => {
      const from = a.points[0]?.capturingAtMs;
      return from === undefined ? [] : [{ fromMs: from, toMs: a.detachedAtMs }];
    }),
    losses: r.losses,
  });
}

/**
 * Which captures lost packets (or cannot count their drops), and which probes judged by a
 * missing packet were in flight while one lost some: their verdict may rest on a lost packet
 * rather than a real gap.
 */
function lossLines(r: Repro, rows: readonly TimelineRow[]): string[] {
  const points: [string, PointRec][] = [
    ['backend', r.backend],
    ...r.attachments.flatMap((a) =>
      a.points.map((p): [string, PointRec] => [captureLabel(a, p), p]),
    ),
  ];
  const lines: string[] = [];
  let uncounted = false;
  for (const [label, p] of points) {
    if (p.capturingAtMs === undefined) continue; // never ran: its counts mean nothing
    const loss = lossPhrase({ ...p, confirmed: true });
    if (loss !== null) lines.push(`capture ${label} ${loss}`);
    if (p.kernelDrops === null) uncounted = true;
  }
  if (lines.length === 0) return [];
  const exposed = rows.filter((row) => row.lossesInFlight.length > 0);
  for (const row of exposed)
    lines.push(`probe ${row.probeId} (${row.verdict}): ${row.lossesInFlight.join('; ')}`);
  if (exposed.length > 0)
    lines.push(
      'Those probes may have lost their packets in the capture: run again before concluding.',
    );
  else if (r.losses.length > 0)
    lines.push(
      `No probe judged by a missing packet was in flight (±${LOSS_SLACK_MS / 1000} s) while a capture lost packets.`,
    );
  if (uncounted)
    lines.push(
      'A capture that cannot count its drops may have missed any probe: one judged dropped or not captured there is not proven.',
    );
  return ['', ...lines];
}

/** `GET /v1/repros/:id` of a live repro, attributed with `inventory`. */
export function reproView(r: Repro, inventory: Inventory): ReproView {
  if (r.frozen !== undefined) return r.frozen;
  const timeline = reproTimeline(r, inventory);
  const losses = lossLines(r, timeline);
  const pv = (p: PointRec): ReproPointView => ({
    name: p.name,
    agentId: p.agentId,
    state: p.state,
    events: p.events,
    packets: p.packets,
    kernelDrops: p.kernelDrops,
    queueDrops: p.queueDrops,
    lost: p.lost,
    ...(p.unheld === undefined ? {} : { unheld: p.unheld }),
    ...(p.error === undefined ? {} : { error: p.error }),
    ...(p.armed === undefined ? {} : p.armed),
  });
  return {
    id: r.id,
    state: r.finishedAtMs === null ? 'running' : 'finished',
    createdAt: iso(r.createdAtMs),
    finishedAt: r.finishedAtMs === null ? null : iso(r.finishedAtMs),
    finalReason: r.finalReason,
    spec: r.spec,
    backend: pv(r.backend),
    attachments: r.attachments.map((a) => ({
      epoch: a.epoch,
      pod: a.pod,
      attachedAt: iso(a.attachedAtMs),
      detachedAt: a.detachedAtMs === null ? null : iso(a.detachedAtMs),
      detachReason: a.detachReason,
      points: a.points.map(pv),
    })),
    waiting: r.finishedAtMs === null && currentAttachment(r) === undefined,
    marks: r.marks,
    timeline,
    summary: r.summary,
    text: [...renderTimeline(timeline, r.marks, r.summary), ...losses],
    lossText: losses,
    ...(r.bundle === null ? {} : { bundle: r.bundle }),
  };
}

/**
 * Concurrent captures: 20 captures created at once, over the same two agents, each following its
 * own connection among other traffic. Measured: every one reaches a verdict, about its own
 * connection, and how long that takes.
 */
import type { CaptureView } from '../../collector';
import { LiveCollector } from '../../lab/live-collector';
import { fmt, median } from '../proc';
import { connectFleet, makeFleet } from './fleet';
import { JOURNEY_AGENTS, journeyCapture, journeyMismatch, sendJourneys } from './journeys';
import { row, type Ctx, type ScenarioOut } from './types';
import { waitUntil } from './wait';

export async function scenarioCaptures(ctx: Ctx, out: ScenarioOut): Promise<void> {
  const count = ctx.quick ? 5 : 20;
  const noise = ctx.quick ? 200 : 5000;
  out.title = `${count} concurrent captures`;
  out.setup =
    `${count} captures POSTed at once, each with decap and egress on the VPN pod's agent and backend on ` +
    `the backend's (the same 2 agents for all); every point gets ${fmt(noise)} events of other traffic, ` +
    "then its capture's own connection (SYN, SYN-ACK; nothing rewritten)";
  const c = await LiveCollector.start({ allowSharedAgentToken: true });
  const { rows, notes } = out;
  try {
    const fleet = makeFleet(
      c,
      JOURNEY_AGENTS.map((a) => ({
        agentId: `captures-${a.role}`,
        node: `captures-${a.role}-node`,
        podIp: a.podIp,
      })),
    );
    for (const a of fleet.agents) sendJourneys(a, noise);
    await connectFleet(fleet);
    const t0 = Date.now();
    const created = await Promise.allSettled(
      Array.from({ length: count }, () => c.createCapture(journeyCapture(2000, 60_000))),
    );
    const ids = created.flatMap((r) => (r.status === 'fulfilled' ? [r.value.id] : []));
    const refused = created.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
    const doneAt = new Map<string, number>();
    const finals = new Map<string, CaptureView>();
    await waitUntil(
      async () => {
        for (const id of ids) {
          if (finals.has(id)) continue;
          const v = await c.capture(id);
          if (v.finishedAt === null) continue;
          finals.set(id, v);
          doneAt.set(id, Date.now() - t0);
        }
        return finals.size === ids.length;
      },
      90_000,
      `${count} captures final`,
      50,
    ).catch((e: unknown) => notes.push(e instanceof Error ? e.message : String(e)));
    const wrong = [...finals.values()].flatMap((v) => {
      const why = journeyMismatch(v);
      return why === null ? [] : [`${v.id}: ${why}`];
    });
    const times = [...doneAt.values()];
    rows.push(
      row(
        'captures created at once; refused',
        `${ids.length} created; ${refused.length} refused`,
        `${count}; 0`,
        ids.length === count,
      ),
    );
    rows.push(
      row(
        'captures with a verdict about their own connection (preserved, its client port)',
        `${finals.size - wrong.length} of ${count}`,
        `${count} of ${count}`,
        finals.size === count && wrong.length === 0,
      ),
    );
    rows.push(
      row(
        'time from the POSTs to each verdict (median, slowest)',
        `${fmt(median(times))} ms, ${fmt(Math.max(...times))} ms`,
        '–',
        null,
      ),
    );
    const reasons = new Map<string, number>();
    for (const v of finals.values()) {
      const r = (v.finalReason ?? '').replace(/\d+ ms/, 'N ms');
      reasons.set(r, (reasons.get(r) ?? 0) + 1);
    }
    notes.push(`Why they ended: ${[...reasons].map(([r, k]) => `${k} × "${r}"`).join('; ')}.`);
    notes.push(...refused.map((r) => `refused: ${r}`), ...wrong.map((w) => `wrong: ${w}`));
    fleet.close();
  } finally {
    await c.close();
  }
}

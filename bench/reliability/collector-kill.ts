/**
 * Collector SIGKILLs mid-stream: agents stream without pause while the collector is killed and
 * restarted on the same port and data directory, again and again. After a last restart (the
 * collector loads, and repairs, everything it stored), the data directory is read back: every
 * event an agent had acknowledged must be there, and none twice.
 */
import { LiveCollector } from '../../lab/live-collector';
import { fmt, median } from '../proc';
import { armStreams, drained, feed, startFleet } from './fleet';
import { checkStream, readStoredEvents } from './readback';
import { row, type Ctx, type ScenarioOut } from './types';
import { sleep, waitUntil } from './wait';

export async function scenarioCollectorKill(ctx: Ctx, out: ScenarioOut): Promise<void> {
  const kills = ctx.quick ? 1 : 10;
  const n = ctx.quick ? 3 : 8;
  const rate = 1000;
  const batch = 50;
  const backoff = { minMs: 100, maxMs: 1000 };
  out.title = `${kills} collector SIGKILLs mid-stream`;
  out.setup =
    `${n} simulated agents streaming ${fmt(rate)} events/s each in batches of ${batch}; the collector ` +
    `SIGKILLed ${kills} times at random moments 0.3–1.2 s after the agents were back, restarted on the ` +
    `same port and data directory each time, then once more at the end before the read-back; agent ` +
    `reconnect backoff ${backoff.minMs} ms doubling to ${backoff.maxMs} ms (the agent's: 200 ms to 10 s)`;
  const c = await LiveCollector.start({ allowSharedAgentToken: true });
  const { rows, notes } = out;
  try {
    const fleet = await startFleet(c, 'kill', n, { backoff });
    const agents = fleet.agents;
    const streams = await armStreams(c, agents);
    const f = feed(streams, rate, batch);
    const restartMs: number[] = [];
    const backMs: number[] = [];
    let inFlightAtKill = 0;
    for (let k = 0; k < kills; k++) {
      await sleep(300 + Math.random() * 900);
      inFlightAtKill += agents.filter((a) => a.spooled > 0).length;
      await c.kill();
      const t0 = Date.now();
      await c.restart();
      restartMs.push(Date.now() - t0);
      await waitUntil(
        () => agents.every((a) => a.connected),
        30_000,
        'agents back after a restart',
      );
      backMs.push(Date.now() - t0);
      ctx.log(`collector-kill: kill ${k + 1}/${kills}, back in ${Date.now() - t0} ms`);
    }
    await sleep(ctx.quick ? 300 : 1000);
    f.stop();
    await drained(agents, 120_000);
    await c.kill();
    await c.restart();
    await waitUntil(
      () => agents.every((a) => a.connected),
      30_000,
      'agents back after the last restart',
    );
    const views = (await c.api('GET', '/v1/captures')) as {
      captures: { points: { name: string; agentId: string | null; events: number }[] }[];
    };
    const stored = readStoredEvents(c.dataDir);
    let acked = 0;
    let missing = 0;
    let dups = 0;
    let unacked = 0;
    for (const s of streams) {
      const chk = checkStream(stored, s.agent.node, s.agent.tally(s.captureId, s.point).ackedRuns);
      acked += chk.acked;
      missing += chk.missing;
      dups += chk.duplicates;
      unacked += chk.unacked;
    }
    const loaded = views.captures.flatMap((v) => v.points).reduce((a, p) => a + p.events, 0);
    rows.push(
      row(
        'SIGKILLs of the collector while agents had unacknowledged messages in flight',
        `${kills} kills; ${inFlightAtKill} of ${kills * n} agent-kills with messages in flight`,
        `${kills}, mid-stream`,
        inFlightAtKill > 0,
      ),
    );
    rows.push(
      row(
        'acknowledged events lost (read back after the last restart)',
        `${fmt(missing)} of ${fmt(acked)}`,
        '0',
        missing === 0 && stored.unreadableBytes === 0,
      ),
    );
    rows.push(
      row(
        'events stored twice',
        `${fmt(dups)} (${fmt((100 * dups) / Math.max(1, acked), 2)} % of the acknowledged)`,
        '0',
        dups === 0,
      ),
    );
    rows.push(
      row(
        'events the collector reports after the last restart; records on disk; stored, never acknowledged',
        `${fmt(loaded)}; ${fmt(stored.records)}; ${fmt(unacked)}`,
        `${fmt(acked)} (the acknowledged)`,
        loaded === acked,
      ),
    );
    rows.push(
      row(
        'restart: SIGKILL → listening; → every agent back (median, max)',
        `${fmt(median(restartMs))} ms, ${fmt(Math.max(...restartMs))} ms; ${fmt(median(backMs))} ms, ${fmt(Math.max(...backMs))} ms`,
        '–',
        null,
      ),
    );
    const repaired = c
      .logs()
      .split('\n')
      .filter((l) => l.includes('event file repaired')).length;
    rows.push(row('event files repaired at start-up (torn tails cut)', `${repaired}`, '–', null));
    if (dups > 0)
      notes.push(
        "Duplicates: the hub stores a batch (append + fdatasync), then records the agent's seq in " +
          'agents.json, then acknowledges. A SIGKILL between the first two leaves the batch stored ' +
          'under an old seq, so the agent resends it after the restart and it is appended again ' +
          '(collector/hub.ts processSpooled, collector/store.ts lastSeq.set). Records that carry ' +
          '(agent, seq) would let the store drop the resend.',
      );
    fleet.close();
  } finally {
    await c.close();
  }
}

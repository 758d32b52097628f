/**
 * Disk full: the collector's data directory on a 512 KiB tmpfs, agents streaming as fast as the
 * collector acknowledges until appends fail with ENOSPC (the hub then closes with
 * HUB_HANDLER_FAILED and the agents keep what was not acknowledged), a few seconds of a full
 * disk, then space comes back (the tmpfs grows), the agents' resends complete, and after a
 * restart the data directory is read back: every acknowledged event there, none twice, no stray
 * bytes. See also test/lab/disk-full.test.ts (the store alone).
 */
import { execFileSync } from 'node:child_process';
import { LiveCollector } from '../../lab/live-collector';
import { fmt } from '../proc';
import { armStreams, drained, feed, startFleet, type Fleet } from './fleet';
import { checkStream, readStoredEvents } from './readback';
import { resizeTmpfs, withTmpfs } from './tmpfs';
import { row, type Ctx, type ScenarioOut } from './types';
import { sleep, waitUntil } from './wait';

/** The WebSocket close code of HUB_HANDLER_FAILED (common/envelope.ts CLOSE_CODES). */
const HANDLER_FAILED = 1011;

export async function scenarioDiskFull(ctx: Ctx, out: ScenarioOut): Promise<void> {
  out.title = 'disk full (512 KiB tmpfs as --data-dir)';
  if (!ctx.root) {
    out.skipped = 'mounting a tmpfs needs root';
    return;
  }
  const fullS = ctx.quick ? 1 : 5;
  out.setup =
    `2 simulated agents (spools of 64 batches) streaming batches of 100 events as fast as they are acknowledged into a ` +
    `collector whose --data-dir is a 512 KiB tmpfs, until appends fail; ${fullS} s of a full disk; ` +
    'the tmpfs grown to 16 MiB; the resends drained; a SIGKILL and restart; the read-back';
  const { rows, notes } = out;
  await withTmpfs('512k', async (mnt) => {
    const c = await LiveCollector.start({ allowSharedAgentToken: true, dataDir: `${mnt}/data` });
    let fleet: Fleet | undefined;
    try {
      fleet = await startFleet(c, 'full', 2, {
        backoff: { minMs: 100, maxMs: 1000 },
        spoolLimit: 64,
      });
      const agents = fleet.agents;
      const streams = await armStreams(c, agents);
      const acked = (): number =>
        streams.reduce((s, st) => s + st.agent.tally(st.captureId, st.point).acked, 0);
      const f = feed(streams, Infinity, 100);
      const refusals = (): number =>
        agents.reduce((s, a) => s + (a.counts.closes.get(HANDLER_FAILED) ?? 0), 0);
      await waitUntil(() => refusals() > 0, 60_000, 'the disk filling up');
      const ackedAtFull = acked();
      let health = 0;
      let healthOk = 0;
      const until = Date.now() + fullS * 1000;
      while (Date.now() < until) {
        health++;
        const ok = await fetch(`${c.url}/healthz`, { signal: AbortSignal.timeout(2000) })
          .then((r) => r.ok)
          .catch(() => false);
        if (ok) healthOk++;
        await sleep(100);
      }
      const ackedWhileFull = acked() - ackedAtFull;
      f.stop();
      const aliveWhileFull = c.running();
      resizeTmpfs(mnt, '16m');
      await drained(agents, 60_000).catch((e: unknown) => {
        throw new Error(
          `${e instanceof Error ? e.message : String(e)}: ${agents
            .map(
              (a) =>
                `${a.agentId} ${a.connected ? 'connected' : 'disconnected'} spooled ${a.spooled} closes ${JSON.stringify([...a.counts.closes])}`,
            )
            .join('; ')}; df: ${execFileSync('df', ['-k', mnt]).toString()}`,
        );
      });
      await c.kill();
      await c.restart();
      await waitUntil(
        () => agents.every((a) => a.connected),
        30_000,
        'agents back after the restart',
      );
      const stored = readStoredEvents(c.dataDir);
      let missing = 0;
      let dups = 0;
      let total = 0;
      for (const s of streams) {
        const chk = checkStream(
          stored,
          s.agent.node,
          s.agent.tally(s.captureId, s.point).ackedRuns,
        );
        missing += chk.missing;
        dups += chk.duplicates;
        total += chk.acked;
      }
      const repaired = c
        .logs()
        .split('\n')
        .filter((l) => l.includes('event file repaired')).length;
      rows.push(
        row(
          'events acknowledged before the disk was full; refusals while full (HUB_HANDLER_FAILED closes)',
          `${fmt(ackedAtFull)}; ${fmt(refusals())} refusals, ${fmt(ackedWhileFull)} events acknowledged while full`,
          '–',
          null,
        ),
      );
      rows.push(
        row(
          'collector alive with the disk full; /healthz answered',
          `${aliveWhileFull ? 'alive' : 'DEAD'}; ${healthOk} of ${health}`,
          `alive; ${health} of ${health}`,
          aliveWhileFull && healthOk === health,
        ),
      );
      rows.push(
        row(
          'acknowledged events lost (read back after space came back and a restart)',
          `${fmt(missing)} of ${fmt(total)}`,
          '0',
          missing === 0,
        ),
      );
      rows.push(row('events stored twice', fmt(dups), '0', dups === 0));
      rows.push(
        row(
          'stray bytes in the event files after the restart; files repaired at start-up',
          `${fmt(stored.unreadableBytes)} bytes; ${repaired} repaired`,
          '0 bytes',
          stored.unreadableBytes === 0,
        ),
      );
      if (dups > 0)
        notes.push(
          'Duplicates: with the disk full, a batch can be appended (and flushed) while the rewrite of ' +
            'agents.json that follows fails for want of space; the hub then closes without acknowledging, ' +
            'and the agent resends a batch that is already stored (collector/hub.ts processSpooled: ' +
            'lastSeqStore.set fails after the handler succeeded).',
        );
    } finally {
      fleet?.close();
      await c.close();
    }
  });
}

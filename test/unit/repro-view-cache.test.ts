/**
 * The collector's repro view (GET /v1/repros/:id, and the answer to each probe posted), whose
 * verdicts are kept between requests: driven through ReproManager as agents and the prober drive
 * it — packets in batches, some resent late inside old probes' windows and from an attachment
 * already detached, statuses that count drops, lost batches, the pod rescheduled (the agent's next
 * hello) — the view served is the one rendered with nothing kept, after every step.
 */
import { isDeepStrictEqual } from 'node:util';
import t from 'tap';
import { silentLogger } from '../../collector/logger';
import { ReproManager, type ReproView } from '../../collector/repro';
import type { Repro } from '../../collector/repro-state';
import { reproView } from '../../collector/repro-views';
import type { PacketEvent } from '../../common/event';
import type { Inventory } from '../../common/inventory';
import { ProbeCache } from '../../core/repro/probe-cache';
import { status } from './collector-fixtures';
import { LAB_REPRO, labNamespace, labReproHub } from './repro-fixtures';
import { DIRECT, MS, T0, exchange } from './fixtures-events';

const SPEC = LAB_REPRO;

/** What the test reads of the manager's own state: the repro and the inventory it judges with. */
interface Peek {
  repros: Map<string, Repro>;
  inventory(r: Repro): Inventory;
}

/** The view with nothing kept: every probe judged now (as before the cache). */
function fresh(m: ReproManager, id: string): ReproView | undefined {
  const peek = m as unknown as Peek;
  const r = peek.repros.get(id);
  return r === undefined
    ? undefined
    : reproView({ ...r, probeCache: new ProbeCache() }, peek.inventory(r));
}

function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a * 1103515245 + 12345) >>> 0;
    return Math.floor((a / 4294967296) * n);
  };
}

void t.test('the view served equals the one judged afresh after every message', async (t) => {
  const failures: string[] = [];
  const seen = { verdicts: new Set<string>(), lossLines: 0, quiet: 0 };
  for (let seed = 1; seed <= 3; seed++) {
    const rnd = random(seed);
    const hub = labReproHub();
    const vpn = hub.list.find((a) => a.agentId === 'a-vpn');
    if (vpn === undefined) throw new Error('no agent');
    const T = Number(T0 / MS);
    let now = T - 1000;
    const m = new ReproManager({ hub, logger: silentLogger(), nowMs: () => now });
    m.start();
    const v = await m.create(SPEC);
    const id = v.id;
    /** Batches not sent yet: [agent, capture id, point, events]. */
    const pending: [string, string, string, PacketEvent[]][] = [];
    let pods = 1;
    let probes = 0;
    const drops = new Map<string, number>();
    const check = (what: string, served: ReproView | undefined): void => {
      const want = fresh(m, id);
      if (!isDeepStrictEqual(served, want) || JSON.stringify(served) !== JSON.stringify(want))
        failures.push(`seed ${seed}: after ${what} the view differs`);
    };
    for (let step = 0; step < 90; step++) {
      const dice = rnd(100);
      const e = `${id}-e${pods}`;
      if (dice < 20) {
        // A probe: its packets go out in pieces, now or later.
        const at = BigInt(probes) * 1200n * MS;
        const ep = { ...DIRECT, sport: 41000 + rnd(12) };
        const phase = (['full', 'syn-synack', 'syn-only'] as const)[rnd(3)] ?? 'full';
        const parts: [string, string, string, bigint][] = [
          ['a-vpn', e, 'decap', 0n],
          ['a-vpn', e, 'egress', MS],
          ['a-web', `${id}-b`, 'backend', 2n * MS],
        ];
        for (const [agent, capture, point, d] of parts) {
          if (rnd(5) === 0) continue;
          const evs = exchange(point, ep, { isn: 7 + probes, at: at + d, phase });
          while (evs.length > 0) pending.push([agent, capture, point, evs.splice(0, 1 + rnd(3))]);
        }
        now = T + Number(at / MS) + 400;
        const sent = m.addProbe(id, {
          probeId: `p${probes++}`,
          sport: ep.sport,
          startedAtMs: T + Number(at / MS),
          endedAtMs: T + Number(at / MS) + 100 + rnd(2000),
          ok: phase === 'full',
          httpCode: phase === 'full' ? '200' : null,
          error: phase === 'full' ? null : 'curl exit 28: timeout',
        });
        check('a probe (its answer)', sent);
      } else if (dice < 60 && pending.length > 0) {
        const [b] = pending.splice(rnd(pending.length), 1);
        if (b !== undefined)
          await m.handle({
            kind: 'events',
            agentId: b[0],
            seq: 0,
            batch: { captureId: b[1], point: b[2], events: b[3] },
          });
      } else if (dice < 75) {
        // A status: capturing (the decap coverage starts), its drop counter maybe up.
        const [agent, capture, point]: [string, string, string] =
          rnd(2) === 0
            ? ['a-web', `${id}-b`, 'backend']
            : ['a-vpn', e, rnd(2) === 0 ? 'decap' : 'egress'];
        const k = `${capture}/${point}`;
        drops.set(k, (drops.get(k) ?? 0) + rnd(3));
        now += rnd(800);
        await m.handle({
          kind: 'status',
          agentId: agent,
          seq: 0,
          status: status(capture, point, 'capturing', { kernelDrops: drops.get(k) ?? 0 }),
        });
      } else if (dice < 82) {
        now += rnd(500);
        await m.handle({
          kind: 'lost',
          agentId: 'a-web',
          seq: 0,
          lost: { captureId: `${id}-b`, point: 'backend', count: 1 + rnd(5), reason: 'spool full' },
        });
      } else if (dice < 88) {
        // Rescheduled: the agent's next hello names the next pod; decap/egress follow it.
        pods++;
        vpn.hello = {
          ...vpn.hello,
          namespaces: [labNamespace(`/run/netns/vpn-pod-r${pods}`, `10.244.1.${20 + pods}`)],
        };
        now += 300;
        hub.setConnected('a-vpn', true);
      } else now += rnd(1000);
      const served = m.get(id);
      check(`step ${step}`, served);
      for (const r of served?.timeline ?? []) seen.verdicts.add(r.verdict);
      if ((served?.lossText ?? []).some((l) => l.startsWith('probe '))) seen.lossLines++;
      // Asked again with nothing new: every verdict is as kept.
      m.get(id);
      if ((m as unknown as Peek).repros.get(id)?.probeCache.judgedLast === 0) seen.quiet++;
    }
    t.equal(fresh(m, id)?.attachments.length, pods, `seed ${seed}: ${pods} attachments`);
    m.close();
  }
  t.same(failures, [], 'the view served is the fresh one at every step');
  for (const v of ['preserved', 'failed-to-connect', 'not-captured'])
    t.ok(seen.verdicts.has(v), `some probe judged ${v} (${[...seen.verdicts].join(', ')})`);
  t.ok(seen.lossLines > 0, 'some probe was in flight while a capture lost packets');
  t.equal(seen.quiet, 3 * 90, 'a view asked again judges nothing');
  t.end();
});

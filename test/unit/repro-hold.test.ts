/**
 * What running repros hold for their verdicts is bounded across the collector, and what is let go
 * is said (collector/repro-hold.ts). Before, each point of each repro let its oldest events go past
 * 500,000 without a word — a probe judged afterwards read as dropped from events that had arrived —
 * and 32 repros could hold 48 M events.
 */
import t from 'tap';
import { silentLogger } from '../../collector/logger';
import { ReproManager } from '../../collector/repro';
import { letGoByCapture, pointHoldCap } from '../../collector/repro-hold';
import { PointEventLog } from '../../core/repro/event-log';
import type { PacketEvent } from '../../common/event';
import { status } from './collector-fixtures';
import { reproReportSchemaErrors } from './report-schema';
import { LAB_REPRO, labReproHub } from './repro-fixtures';
import { DIRECT, MS, T0, exchange } from './fixtures-events';

void t.test('the budget is shared by every live repro point, at most 500,000 a point', (t) => {
  t.equal(pointHoldCap(400_000, 1), 133_333);
  t.equal(pointHoldCap(400_000, 0), 133_333, 'a repro being made counts as one');
  t.equal(pointHoldCap(400_000, 32), 4_166);
  t.equal(pointHoldCap(3_000_000, 1), 500_000, 'never more than a point held before');
  t.equal(pointHoldCap(2, 5), 1, 'at least one');
  t.end();
});

void t.test(
  'a log past its share lets the first received go, counted by capture with their times',
  (t) => {
    const ev = (ms: number): PacketEvent => ({ tsNs: BigInt(ms) * MS, inner: null }) as PacketEvent;
    const log = new PointEventLog('backend', 500_000);
    t.strictSame(
      log.add([
        { epoch: 1, event: ev(500) },
        { epoch: 0, event: ev(100) },
        { epoch: 1, event: ev(300) },
      ]),
      [],
      'nothing past the cap',
    );
    const gone = log.add([{ epoch: 2, event: ev(900) }], 1);
    t.strictSame(letGoByCapture(gone), [
      { epoch: 1, count: 2, fromMs: 300, toMs: 500 },
      { epoch: 0, count: 1, fromMs: 100, toMs: 100 },
    ]);
    t.equal(log.events.length, 1);
    t.equal(log.events[0]?.event.tsNs, 900n * MS, 'the last received stays');
    t.strictSame(letGoByCapture(log.add([], 1)), [], 'a cap that did not shrink lets nothing go');
    t.end();
  },
);

const SPEC = LAB_REPRO;

function manager(maxHeldEvents: number): ReproManager {
  const hub = labReproHub();
  const T = Number(T0 / MS);
  return new ReproManager({ hub, logger: silentLogger(), nowMs: () => T, maxHeldEvents });
}

async function send(
  repros: ReproManager,
  agentId: string,
  captureId: string,
  point: string,
  events: PacketEvent[],
): Promise<void> {
  await repros.handle({
    kind: 'status',
    agentId,
    seq: 0,
    status: status(captureId, point, 'capturing', { kernelDrops: 0, packets: events.length }),
  });
  await repros.handle({ kind: 'events', agentId, seq: 0, batch: { captureId, point, events } });
}

void t.test(
  'a probe whose events were let go at a point is cautioned, and the capture says how many',
  async (t) => {
    const per = exchange('backend', DIRECT).length;
    // One repro: each point holds a third of the budget, two exchanges' worth.
    const repros = manager(3 * 2 * per);
    t.teardown(() => {
      repros.close();
    });
    const v = await repros.create(SPEC);
    const ep = { ...DIRECT, sport: 40001 };
    await send(repros, 'a-vpn', `${v.id}-e1`, 'decap', exchange('decap', ep));
    await send(repros, 'a-vpn', `${v.id}-e1`, 'egress', exchange('egress', ep, { at: MS }));
    await send(repros, 'a-web', `${v.id}-b`, 'backend', exchange('backend', ep, { at: 2n * MS }));
    // Then two more connections reach the backend: the probe's events there are the oldest.
    for (const sport of [40002, 40003])
      await send(
        repros,
        'a-web',
        `${v.id}-b`,
        'backend',
        exchange('backend', { ...DIRECT, sport }, { at: 3000n * MS }),
      );
    t.equal(
      repros.heldEvents(),
      2 * per + 2 * per,
      'decap and egress hold theirs, the backend two',
    );
    const T = Number(T0 / MS);
    const view = repros.addProbe(v.id, {
      probeId: 'p1',
      sport: 40001,
      startedAtMs: T,
      endedAtMs: T + 50,
      ok: true,
      httpCode: '200',
      error: null,
    });
    t.equal(view?.backend.unheld, per, 'the backend let the probe’s connection go');
    const row = view?.timeline[0];
    t.not(row?.verdict, 'preserved', 'its events at the backend are gone');
    t.match(
      row?.detail,
      /backend's events of that time were let go by the collector \(past its memory bound for repros\): not judged/,
      'the row says why the backend has no SYN (was: "backend was not capturing yet … (just re-attached)")',
    );
    t.match(
      row?.lossesInFlight.join(' '),
      new RegExp(`capture backend lost ${per} events in the collector \\(past its memory bound\\)`),
      'the probe says its verdict may rest on events the collector let go',
    );
    t.match(
      view?.lossText?.join('\n'),
      /capture backend lost \d+ events in the collector \(past its memory bound\)[\s\S]*run again before concluding/,
    );
    t.equal(view?.attachments[0]?.points[0]?.unheld, undefined, 'decap let nothing go');
  },
);

void t.test(
  'a probe whose first point let its events go is not judged "between two pods"',
  async (t) => {
    const per = exchange('decap', DIRECT).length;
    const repros = manager(3 * per);
    t.teardown(() => {
      repros.close();
    });
    const v = await repros.create(SPEC);
    const ep = { ...DIRECT, sport: 40001 };
    await send(repros, 'a-vpn', `${v.id}-e1`, 'decap', exchange('decap', ep));
    // Another connection at decap a moment later: the probe's events there go.
    await send(
      repros,
      'a-vpn',
      `${v.id}-e1`,
      'decap',
      exchange('decap', { ...DIRECT, sport: 40002 }, { at: 10n * MS }),
    );
    const T = Number(T0 / MS);
    const view = repros.addProbe(v.id, {
      probeId: 'p1',
      sport: 40001,
      startedAtMs: T,
      endedAtMs: T + 50,
      ok: true,
      httpCode: '200',
      error: null,
    });
    const row = view?.timeline[0];
    t.equal(row?.verdict, 'not-captured');
    t.match(row?.detail, /decap's events of that time were let go by the collector/);
    t.notMatch(row?.detail, /between two pods/, 'not a capture gap it did not see');
    // curl's own "could not connect" stays certain without a capture.
    const failed = repros.addProbe(v.id, {
      probeId: 'p2',
      sport: 40003,
      startedAtMs: T,
      endedAtMs: T + 50,
      ok: false,
      httpCode: null,
      error: 'curl exit 7: could not connect',
    });
    t.equal(failed?.timeline[1]?.verdict, 'failed-to-connect');
  },
);

void t.test('two live repros share the budget: each point holds half as much', async (t) => {
  const per = exchange('backend', DIRECT).length;
  const repros = manager(3 * 2 * per);
  t.teardown(() => {
    repros.close();
  });
  const a = await repros.create(SPEC);
  await repros.create(SPEC);
  await send(repros, 'a-web', `${a.id}-b`, 'backend', exchange('backend', DIRECT));
  await send(
    repros,
    'a-web',
    `${a.id}-b`,
    'backend',
    exchange('backend', { ...DIRECT, sport: 40009 }, { at: MS }),
  );
  t.equal(repros.heldEvents(), per, 'one exchange of the two is held');
  t.equal(repros.get(a.id)?.backend.unheld, per);
});

void t.test(
  'the bundle of a repro whose point let events go counts them in its capture health',
  async (t) => {
    const per = exchange('backend', DIRECT).length;
    const repros = manager(3 * 2 * per);
    t.teardown(() => {
      repros.close();
    });
    const v = await repros.create(SPEC);
    for (const [at, sport] of [
      [0n, 40001],
      [MS, 40002],
      [2n * MS, 40003],
    ] as const)
      await send(
        repros,
        'a-web',
        `${v.id}-b`,
        'backend',
        exchange('backend', { ...DIRECT, sport }, { at }),
      );
    t.equal(repros.get(v.id)?.backend.unheld, per, 'the backend let one exchange go');
    await repros.finishReadingRoutes(v.id, []);
    const text = (name: 'report.md' | 'report.json' | 'report.html'): string =>
      repros.bundleFile(v.id, name)?.body.toString('utf8') ?? '';
    // Before, the bundle had kernel drops, agent drops and lost, and no word of these events.
    const md = text('report.md');
    t.match(
      md,
      /\| capture \| state \| events \| packets \| kernel drops \| agent drops \| lost \| unheld \| error \|/,
    );
    t.match(
      md,
      new RegExp(`\\| backend \\| [a-z]+ \\| \\d+ \\| \\d+ \\| 0 \\| 0 \\| 0 \\| ${per} \\|`),
    );
    t.match(
      md,
      /unheld: events the collector received and let go, unanalysed, past its memory bound/,
    );
    const doc = JSON.parse(text('report.json')) as {
      captureHealth: { capture: string; unheld?: number }[];
    };
    t.same(reproReportSchemaErrors(doc), [], 'report.json is valid against its schema');
    t.strictSame(
      doc.captureHealth.map((c) => [c.capture, c.unheld]),
      [
        ['backend', per],
        ['decap (vpn-pod)', 0],
        ['egress (vpn-pod)', 0],
      ],
    );
    const older = { ...doc.captureHealth[0] };
    delete older.unheld;
    t.same(
      reproReportSchemaErrors({ ...doc, captureHealth: [older] }),
      [],
      'a report.json written before unheld was counted still reads as valid',
    );
    const html = text('report.html');
    t.match(html, /<th scope="col">lost<\/th><th scope="col">unheld<\/th>/);
    t.match(html, new RegExp(`<td>0</td><td>${per}</td>`));
  },
);

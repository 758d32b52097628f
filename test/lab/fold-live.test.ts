// Per-flow counters live (issue 20): the agents fold a long connection's packets into counters
// past its first ones, and the verdict is the one every packet as an event gives. The backend
// answers the probe with 4 MiB (lab/http-server.ts `?bytes=`), thousands of reply packets at every
// point; the same scenario runs folded (the default) and with `perPacket`. Checked: the layer and
// the scenario's expectation; every point accounts for each packet exactly once (the agent's final
// count = packet events + the packets its counters hold, no drops); the counters are there (and
// absent per packet); report.json counts them for the matched connection. Needs root; fails with
// the reason otherwise. Traffic stays inside the lab's namespaces.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { accounted, type CaptureView } from '../../collector';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { LiveCollector, runLiveScenario, type LiveRun } from '../../lab/live';
import { listNamespaces } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';

const REPLY_BYTES = 4 << 20;
const missing = missingPrerequisites();

if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  const base = findScenario('kube-proxy-nodeport');
  if (base === undefined) throw new Error('no scenario kube-proxy-nodeport');
  const scenario = { ...base, responseBytes: REPLY_BYTES };
  const prefixes: string[] = [];
  let collector: LiveCollector | undefined;
  t.before(async () => {
    collector = await LiveCollector.start();
  });
  t.teardown(async () => {
    await collector?.close();
  });

  /** The capture once every point's final count arrived and equals what was stored. */
  async function settled(run: LiveRun): Promise<CaptureView> {
    const c = collector;
    if (c === undefined) throw new Error('the collector did not start');
    return c
      .waitCapture(
        run.captureId,
        (v) => v.points.every((p) => p.state === 'stopped' && p.packets === accounted(p)),
        'every point stopped with its packets accounted for',
        15_000,
      )
      .catch(() => c.capture(run.captureId));
  }

  for (const perPacket of [false, true]) {
    void t.test(`a 4 MiB reply, ${perPacket ? 'every packet an event' : 'folded'}`, async (t) => {
      const c = collector;
      if (c === undefined) throw new Error('the collector did not start');
      const run = await runLiveScenario(c, scenario, {
        // The capture runs its whole 8 s (not up to the first conclusive verdict), so every
        // point holds the whole reply; it then ends as `timeout`, with its verdict.
        request: (body) => ({
          ...body,
          stopOnFirstMatch: false,
          timeoutMs: 8000,
          ...(perPacket ? { perPacket: true } : {}),
        }),
      });
      prefixes.push(run.prefix);
      t.ok(run.probe.answered, `the client got its answer (${run.probe.summary})`);
      t.equal(run.state, 'timeout', `ran its whole time (${run.finalReason ?? '-'})`);
      t.equal(run.verdict?.layer, base.expect.layer, `layer (${run.verdict?.reason ?? '-'})`);
      t.same(
        run.mismatches.filter((m) => !m.startsWith('capture ended timeout')),
        [],
        'no mismatch with the scenario',
      );
      const view = await settled(run);
      for (const p of view.points) {
        t.equal(p.kernelDrops, 0, `${p.name}: no kernel drops`);
        t.equal(p.queueDrops, 0, `${p.name}: no queue drops`);
        t.equal(p.lost, 0, `${p.name}: nothing lost`);
        t.equal(
          p.packets,
          accounted(p),
          `${p.name}: ${p.packets} packets = ${p.events} events − ${p.foldEvents ?? 0} counters + ${p.foldedPackets ?? 0} counted`,
        );
        t.ok(p.packets > 1000, `${p.name}: the long reply was captured (${p.packets} packets)`);
        if (perPacket) t.equal(p.foldEvents, undefined, `${p.name}: no counters per packet`);
        else {
          t.ok((p.foldEvents ?? 0) > 0, `${p.name}: counters arrived (${p.foldEvents ?? 0})`);
          t.ok(
            p.events * 10 < p.packets,
            `${p.name}: ${p.events} events for ${p.packets} packets (fewer than a tenth)`,
          );
        }
      }
      const c2 = c.dataDir;
      const report = JSON.parse(
        readFileSync(join(c2, 'captures', run.captureId, 'report.json'), 'utf8'),
      ) as Partial<AnalysisResult>;
      // report.json carries the analysis's members at its top level (report-document.ts).
      const points = report.points ?? [];
      t.equal(points.length, 3, 'report.json lists the three points');
      for (const p of points) {
        if (perPacket) t.equal(p.folded, undefined, `${p.name}: nothing counted per flow`);
        else
          t.ok(
            (p.folded?.replyPackets ?? 0) > 100,
            `${p.name}: the reply's counted packets are the matched connection's (${p.folded?.replyPackets ?? 0})`,
          );
      }
    });
  }

  void t.test('no namespace of these runs is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

// `hoptrace repro` in the live lab: the VPN pod is deleted mid-run and rescheduled with a new
// address; the decap and egress points follow it. Asserts the per-probe timeline: before the
// deletion, during the gap, and through the replacement. Needs root; traffic stays in the lab.
import t from 'tap';
import { LiveCollector } from '../../lab/live-collector';
import { listNamespaces } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { DEFAULT_REPRO_OPTIONS, REPLACEMENT_IP, REPRO_SCENARIOS, runRepro } from '../../lab/repro';
import { ADDR } from '../../lab/addresses';

const missing = missingPrerequisites();

if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  let collector: LiveCollector | undefined;
  const prefixes: string[] = [];
  t.before(async () => {
    collector = await LiveCollector.start();
  });
  t.teardown(async () => {
    await collector?.close();
  });
  const opts = DEFAULT_REPRO_OPTIONS;

  for (const sc of REPRO_SCENARIOS) {
    void t.test(`repro ${sc.name}`, async (t) => {
      if (collector === undefined) throw new Error('no collector');
      const run = await runRepro(collector, sc, opts);
      prefixes.push(run.prefix);
      const rows = run.view.timeline;
      t.comment(run.view.text.join('\n'));
      t.equal(rows.length, opts.count, 'one row per probe');
      t.equal(run.view.attachments.length, 2, 'attached to the old pod, then to the replacement');
      t.equal(run.view.attachments[1]?.pod.ip, REPLACEMENT_IP, 'the replacement has the new IP');

      const before = rows.filter((r) => r.startedAtMs < run.deletedAtMs);
      t.equal(before.length, opts.deleteAfter, 'probes before the deletion');
      for (const r of before) {
        t.ok(r.ok, `${r.probeId} before: answered`);
        t.equal(r.verdict, sc.expect.good, `${r.probeId} before: ${sc.expect.good}`);
        t.equal(r.servedBy?.ip, ADDR.vpnPod, `${r.probeId} before: served by the old pod`);
      }

      const gapEnd = run.deletedAtMs + opts.replacementDelayMs;
      const gap = rows.filter((r) => r.startedAtMs >= run.deletedAtMs && r.startedAtMs < gapEnd);
      t.ok(gap.length >= 2, `${gap.length} probes in the gap`);
      for (const r of gap) {
        t.notOk(r.ok, `${r.probeId} in the gap: no answer`);
        t.equal(r.verdict, 'failed-to-connect', `${r.probeId} in the gap: failed to connect`);
        t.equal(r.servedBy, null, `${r.probeId} in the gap: no VPN pod`);
      }

      const after = rows.filter((r) => r.startedAtMs >= run.replacementReadyAtMs);
      const captured = after.filter((r) => r.servedBy !== null && r.verdict !== 'not-captured');
      t.ok(
        captured.length >= 3,
        `${captured.length} probes after the reschedule captured through the replacement`,
      );
      for (const r of captured)
        t.equal(r.servedBy?.ip, REPLACEMENT_IP, `${r.probeId} after: served by the replacement`);
      const summary = run.view.summary;
      t.equal(summary?.recovered, sc.expect.recovered, `recovered: ${summary?.why ?? '-'}`);
      if (sc.expect.recovered) {
        for (const r of after) t.ok(r.ok, `${r.probeId} after: answered`);
        for (const r of captured)
          t.equal(r.verdict, sc.expect.good, `${r.probeId} after: ${sc.expect.good}`);
        t.ok((summary?.brokenMs ?? 0) > 0, `broken for ${summary?.brokenMs ?? '?'} ms`);
      } else {
        for (const r of after) t.notOk(r.ok, `${r.probeId} after: no answer`);
        for (const r of captured)
          t.equal(
            r.verdict,
            sc.expect.afterBroken,
            `${r.probeId} after: ${sc.expect.afterBroken ?? ''}`,
          );
        t.match(
          summary?.why ?? '',
          /return route on node vpn-node .*still points at 10\.244\.1\.10, the deleted pod/,
          'names the stale route',
        );
      }
    });
  }

  void t.test('nothing of the repro lab is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, [], 'no namespace of this run');
  });
}

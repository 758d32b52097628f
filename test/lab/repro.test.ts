// `hoptrace repro` in the live lab: the VPN pod is deleted mid-run and rescheduled with a new
// address; the decap and egress points follow it. Asserts the per-probe timeline: before the
// deletion, during the gap, and through the replacement; then the bundle written when it finished,
// form by form (report.json against proto/repro-report.schema.json, report.html and timeline.svg
// well-formed with a mark per probe and the deletion and replacement marked, evidence.pcapng read
// back by tshark, inventory.json). Needs root; traffic stays in the lab.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { LiveCollector } from '../../lab/live-collector';
import { listNamespaces } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { DEFAULT_REPRO_OPTIONS, REPLACEMENT_IP, REPRO_SCENARIOS, runRepro } from '../../lab/repro';
import type { ReproView } from '../../collector';
import { ADDR } from '../../lab/addresses';
import { markupErrors } from '../unit/markup-check';
import { reproReportSchemaErrors } from '../unit/report-schema';
import { tsharkColumn } from '../unit/tshark';

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
      await checkBundle(t, collector, run.view);
    });
  }

  void t.test('nothing of the repro lab is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, [], 'no namespace of this run');
  });
}

interface ReproDoc {
  schemaVersion: number;
  inputs: { captures: { capture: string; captureId: string | null; node: string | null }[] };
  captureHealth: { capture: string; state: string; packets: number }[];
  timeline: unknown[];
  evidence: {
    packets: number;
    interfaces: { name: string; point: string; epoch: number; packets: number }[];
    problems: { capture: string; code: string; detail: string }[];
  } | null;
  evidenceMissing: string | null;
}

/** The bundle the collector wrote when the repro finished, form by form. */
async function checkBundle(
  t: Pick<typeof import('tap'), 'equal' | 'same' | 'ok' | 'not' | 'match' | 'notMatch' | 'comment'>,
  collector: LiveCollector,
  view: ReproView,
): Promise<void> {
  t.equal(view.bundle?.state, 'written', `bundle: ${view.bundle?.detail ?? 'none'}`);
  const dir = join(collector.dataDir, 'repros', view.id);
  const read = (name: string): string => readFileSync(join(dir, name), 'utf8');
  const doc = JSON.parse(read('report.json')) as ReproDoc;
  t.same(reproReportSchemaErrors(doc), [], 'report.json is valid against its schema');
  t.equal(doc.schemaVersion, 1);
  t.equal(doc.timeline.length, view.timeline.length, 'report.json: every probe');
  t.equal(doc.inputs.captures.length, 5, 'inputs: the backend and both attachments’ decap/egress');
  t.ok(
    doc.inputs.captures.every((c) => c.captureId !== null && c.node !== null),
    'every capture with its id and node',
  );
  t.ok(
    doc.captureHealth.every((c) => c.packets > 0),
    `capture health: ${doc.captureHealth.map((c) => `${c.capture} ${c.state} ${c.packets}`).join(', ')}`,
  );
  const probes = view.timeline.length;
  for (const name of ['report.html', 'timeline.svg']) {
    const x = read(name);
    t.same(markupErrors(x, name.endsWith('.html')), [], `${name} is well-formed`);
    t.equal((x.match(/<g class="probe /g) ?? []).length, probes, `${name}: one mark per probe`);
    t.match(x, /class="mark deleted"/, `${name}: the deletion marked`);
    t.match(x, /class="mark replacement-ready"/, `${name}: the replacement marked`);
    t.match(x, /class="broken-window"/, `${name}: the broken window shaded`);
  }
  t.notMatch(read('report.html'), /<script/i, 'report.html: no script');
  const inv = JSON.parse(read('inventory.json')) as { nodes: Record<string, string[]> };
  t.ok(Object.keys(inv.nodes).includes('vpn-node'), 'inventory.json: the inventory as used');

  // evidence.pcapng: tshark counts what report.json says it holds, interface by interface.
  const ev = doc.evidence;
  t.not(ev, null, `evidence: ${doc.evidenceMissing ?? ''}`);
  if (ev === null) return;
  t.comment(
    `evidence.pcapng: ${ev.interfaces.map((i) => `${i.name} ${i.packets}`).join(', ')}; problems: ${ev.problems.map((p) => `${p.capture} ${p.code} ${p.detail}`).join('; ') || 'none'}`,
  );
  t.ok(ev.packets > 0, 'evidence.pcapng holds packets');
  // The old pod's decap capture ended with its interface (deleted first, as CNI DEL does): its
  // agent still holds what it retained, written when the capture closed.
  for (const point of ['decap', 'egress'])
    t.ok(
      ev.interfaces.some((i) => i.epoch === 1 && i.point === point && i.packets > 0),
      `the deleted pod’s ${point} capture gave its frames`,
    );
  t.same(ev.problems, [], 'nothing missing');
  t.ok(
    ev.interfaces.some((i) => i.epoch === 2 && i.packets > 0),
    'the replacement’s captures gave theirs',
  );
  t.ok(
    ev.problems.every((p) => /^[A-Z_]+$/.test(p.code) && p.detail !== ''),
    'whatever is missing is named with a code',
  );
  const names = tsharkColumn(join(dir, 'evidence.pcapng'), 'frame.interface_name');
  t.equal(names.length, ev.packets, 'tshark counts every packet report.json names');
  for (const i of ev.interfaces)
    t.equal(names.filter((n) => n === i.name).length, i.packets, `${i.name}: ${i.packets} packets`);
  // Served as written, with its content type.
  const res = await fetch(`${collector.url}/v1/repros/${view.id}/evidence.pcapng`, {
    headers: { authorization: `Bearer ${collector.token}` },
  });
  t.equal(res.headers.get('content-type'), 'application/vnd.tcpdump.pcap');
  t.same(
    Buffer.from(await res.arrayBuffer()),
    readFileSync(join(dir, 'evidence.pcapng')),
    'GET /v1/repros/:id/evidence.pcapng serves the file',
  );
}

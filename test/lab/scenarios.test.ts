// Every lab scenario end to end: real namespaces, kernel NAT, tcpdump at decap/egress/backend,
// one probe in the scenario's request shape, the analyzer's verdict, its bundle checked form by
// form and its Reproduce line run again. Runs as root; without the tools it fails with the reason.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { listNamespaces, Netns } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { ipv6EndpointsWithoutBrackets, runScenario } from '../../lab/run';
import { appSeesProbe, SCENARIOS } from '../../lab/scenarios';
import { checkBundle } from '../unit/bundle-check';

const bin = join(__dirname, '..', '..', '..', 'bin', 'hoptrace');

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  const base = mkdtempSync(join(tmpdir(), 'hoptrace-lab-test-'));
  const prefixes: string[] = [];
  t.teardown(() => {
    rmSync(base, { recursive: true, force: true });
  });

  // Sequential on purpose: each scenario builds 6–7 namespaces, runs, tears down.
  for (const s of SCENARIOS) {
    void t.test(s.name, async (t) => {
      const lab = new Netns();
      prefixes.push(lab.prefix);
      const run = await runScenario(s, { outDir: join(base, s.name), lab });
      const v = run.verdict;
      t.equal(run.analyzerError, null, 'the analyzer ran');
      t.equal(
        run.probe.answered,
        s.expect.answered,
        `the client ${s.expect.answered ? 'gets an answer' : 'gets none'} (${run.probe.summary})`,
      );
      if (appSeesProbe(s.expect))
        t.equal(
          run.appObserved?.src,
          s.expect.backendSrc,
          'the backend application saw the expected source',
        );
      t.equal(v?.layer, s.expect.layer, `layer (reason: ${v?.reason ?? '-'})`);
      t.same(v?.rewrittenBetween, s.expect.rewrittenBetween, 'rewrittenBetween');
      t.equal(v?.observed['backend']?.src ?? null, s.expect.backendSrc, 'backend observed src');
      if (s.expect.sportChanges === true)
        t.not(v?.observed['egress']?.sport, v?.observed['backend']?.sport, 'source port changed');
      t.same(run.mismatches, [], 'no mismatch');
      if (s.ipv6 && v !== null)
        t.same(
          ipv6EndpointsWithoutBrackets(v),
          [],
          'IPv6 endpoints in the evidence as [addr]:port',
        );
      // tcpdump writes classic pcap: every file read, none records its drops, and a verdict that
      // rests on a missing packet says so.
      t.same(
        v?.files?.map((f) => [f.point, f.format, f.dropped]),
        ['decap', 'egress', 'backend'].map((p) => [p, 'pcap', null]),
        'each capture file as the analyzer read it',
      );
      t.ok((v?.files?.[0]?.frames ?? 0) > 0, 'frames counted (decap saw the probe)');
      if (['dropped', 'no-return'].includes(s.expect.layer)) {
        t.ok((v?.caveats ?? []).length > 0, 'a caution');
        for (const c of v?.caveats ?? [])
          t.match(c, /its capture is a classic pcap file, which records no drop counts/);
      } else t.same(v?.caveats, [], 'no caution: every point saw the request and the reply');
      // The bundle `analyze --report-dir` writes, every form; its Reproduce line, run as printed
      // (with --json), gives the same verdict from the files and the inventory beside the report.
      t.not(run.bundleDir, null, 'the bundle was written');
      if (run.bundleDir !== null) {
        const doc = checkBundle(t, run.bundleDir, {
          points: run.points.map((p) => p.name),
          layer: s.expect.layer,
        });
        t.same(
          doc.inputs.map((i) => ('sha256' in i ? /^[0-9a-f]{64}$/.test(i.sha256 ?? '') : false)),
          run.points.map(() => true),
          'report.json: the SHA-256 of every input file',
        );
        const [cmd, sub, ...args] = doc.reproduce.argv;
        t.same([cmd, sub], ['hoptrace', 'analyze'], `Reproduce: ${doc.reproduce.command}`);
        const again = spawnSync(process.execPath, [bin, 'analyze', ...args, '--json'], {
          encoding: 'utf8',
          timeout: 60_000,
        });
        // analyze's exit code: 0 a conclusive verdict, 3 unknown (cli/exit-codes.ts).
        const exit = s.expect.layer === 'unknown' ? 3 : 0;
        t.equal(again.status, exit, `the Reproduce line runs (${again.stderr.trim()})`);
        if (again.status === exit)
          t.equal(
            (JSON.parse(again.stdout) as { verdict: { layer: string } }).verdict.layer,
            s.expect.layer,
            'the Reproduce line gives the same verdict',
          );
      }
      t.notOk(
        (await listNamespaces()).some((n) => n.startsWith(lab.prefix)),
        `no ${lab.prefix}* namespace left`,
      );
    });
  }

  void t.test('no namespace of this run is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

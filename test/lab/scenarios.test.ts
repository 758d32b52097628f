// Every lab scenario end to end: real namespaces, kernel NAT, tcpdump at decap/egress/backend,
// one probe in the scenario's request shape, the analyzer's verdict, its bundle checked form by
// form and its Reproduce line run again. Runs as root; without the tools it fails with the reason.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { listNamespaces, Netns } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { ipv6EndpointsWithoutBrackets, runScenario } from '../../lab/run';
import { appSeesProbe, SCENARIOS } from '../../lab/scenarios';
import { checkBundle } from '../unit/bundle-check';
import { shiftPcapTimes } from '../unit/pcap-shift';

const bin = join(__dirname, '..', '..', '..', 'bin', 'hoptrace');

/** The backend node's clock 3.5 s ahead, on purpose (issue 16: the estimate brackets it). */
const SHIFT_NS = 3_500_000_000n;

/**
 * The Reproduce line's analysis again with the backend's file moved SHIFT_NS later: the backend's
 * clock offset is bounded around the shift, and the verdict is the same.
 */
function shiftedBackend(t: Test, args: readonly string[], layer: string, cwd: string): void {
  const i = args.findIndex((a) => a.startsWith('backend='));
  const file = args[i]?.slice('backend='.length);
  t.ok(file !== undefined, 'the backend file in the Reproduce line');
  if (file === undefined) return;
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-clock-shift-'));
  try {
    const shifted = join(dir, 'backend-shifted.pcap');
    writeFileSync(shifted, shiftPcapTimes(readFileSync(file), SHIFT_NS));
    const argv = args.map((a, k) => (k === i ? `backend=${shifted}` : a));
    const r = spawnSync(process.execPath, [bin, 'analyze', ...argv, '--json'], {
      encoding: 'utf8',
      timeout: 60_000,
      cwd,
    });
    t.equal(r.status, 0, `analyze with the backend 3.5 s ahead (${r.stderr.trim()})`);
    if (r.status !== 0) return;
    const res = JSON.parse(r.stdout) as AnalysisResult;
    t.equal(res.verdict.layer, layer, 'the same verdict with the backend clock 3.5 s ahead');
    const c = res.clock?.find((x) => x.point === 'backend');
    t.equal(c?.status, 'bounded', `the backend's offset is bounded (${c?.detail ?? '-'})`);
    const low = BigInt(c?.lowNs ?? '1');
    const high = BigInt(c?.highNs ?? '-1');
    t.ok(low <= SHIFT_NS && SHIFT_NS <= high, `[${low}, ${high}] ns brackets the 3.5 s shift`);
    for (const h of res.hops ?? [])
      if (h.latencyNs !== null)
        t.ok(BigInt(h.latencyNs) >= 0n, `hop ${h.from}→${h.to}: ${h.latencyNs} ns, not negative`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

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
        // It names the bundle's inventory.json by that name: run in the bundle's directory.
        const again = spawnSync(process.execPath, [bin, 'analyze', ...args, '--json'], {
          encoding: 'utf8',
          timeout: 60_000,
          cwd: run.bundleDir,
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
        // Every namespace shares the host's clock: a bounded offset brackets 0.
        for (const c of doc.clock ?? [])
          if (c.status === 'bounded')
            t.ok(
              BigInt(c.lowNs ?? '1') <= 0n && 0n <= BigInt(c.highNs ?? '-1'),
              `clock of ${c.point}: [${c.lowNs ?? '?'}, ${c.highNs ?? '?'}] ns brackets 0 (one host clock)`,
            );
        if (s.name === 'preserve') shiftedBackend(t, args, s.expect.layer, run.bundleDir);
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

// A live capture's Reproduce line reproduces: the `hoptrace capture` command a finished capture's
// report.json prints (its placeholders filled: the token file) is run again as a process while the
// scenario's request is sent again, and gives the same verdict. Real namespaces, real kernel NAT
// (the cni-masquerade scenario); needs root, fails with the reason otherwise.
import { spawn } from 'node:child_process';
import t from 'tap';
import type { CaptureView } from '../../collector';
import { allCapturing, LiveCollector, runArmedProbe, withLiveScene } from '../../lab/live';
import { CLI_MAIN } from '../../lab/live-collector';
import { delay } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('the printed hoptrace capture command gives the same verdict', async (t) => {
    const collector = await LiveCollector.start();
    t.teardown(() => collector.close());
    const scenario = findScenario('cni-masquerade');
    if (scenario === undefined) throw new Error('no cni-masquerade scenario');
    await withLiveScene(collector, scenario, async (scene) => {
      await scene.startAgents();
      const first = await runArmedProbe(scene);
      t.equal(first.verdict?.layer, 'cni-masquerade', 'the first capture');
      const doc = (await collector.api('GET', `/v1/captures/${first.captureId}/report.json`)) as {
        reproduce: { argv: string[]; command: string };
        verdict: { layer: string };
      };
      t.equal(doc.reproduce.argv[0], 'hoptrace');
      t.ok(
        doc.reproduce.argv.includes('TOKEN_FILE'),
        'the token is a placeholder, never in a report',
      );
      const argv = doc.reproduce.argv
        .slice(1)
        .map((a) => (a === 'TOKEN_FILE' ? collector.tokenFile : a));
      t.notOk(
        argv.includes('COLLECTOR_URL'),
        'the collector URL is named (it listens on one address)',
      );
      const child = spawn(process.execPath, [CLI_MAIN, ...argv, '--json'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      // The command armed a new capture: send the request again once every point captures.
      const deadline = Date.now() + 15_000;
      let armed: CaptureView | undefined;
      while (armed === undefined && Date.now() < deadline) {
        const list = (await collector.api('GET', '/v1/captures')) as { captures: CaptureView[] };
        armed = list.captures.find((c) => c.id !== first.captureId && allCapturing(c));
        if (armed === undefined) await delay(100);
      }
      t.ok(armed, `the printed command armed a capture (stderr: ${stderr})`);
      await scene.sendProbe();
      const code = await exited;
      t.equal(code, 0, `exit 0 (stderr: ${stderr})`);
      const out = JSON.parse(stdout) as { analysis: { verdict: { layer: string } } | null };
      t.equal(out.analysis?.verdict.layer, doc.verdict.layer, 'the same verdict');
    });
  });
}

// `kubectl hoptrace capture` in the live lab: the plugin, from its arguments, reaches a real
// collector subprocess through the simulated API server's port-forward (test/unit/k8s-fixtures.ts)
// with the token of the Secret it reads there; the collector reads the lab's pods and nodes from
// that API server (--kubeconfig), so `vpn/wg-0` and `web/deploy/web` are resolved by Kubernetes
// names; real agents capture in the lab's namespaces; a probe crosses real kernel NAT. The verdict
// is compared with the scenario's expectation and the bundle is read back from disk (tshark for
// evidence.pcapng). Needs root; fails with the reason otherwise.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { connectCluster } from '../../cli/kubectl/cluster';
import { runKubectl } from '../../cli/kubectl/run';
import { BUNDLE_FILES, type CaptureView } from '../../collector';
import type { PodObject } from '../../collector/k8s/facts';
import { ADDR } from '../../lab/addresses';
import { allCapturing, labVerdictOf, LiveCollector, withLiveScene } from '../../lab/live';
import { delay } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { backendObserved, compareWithExpectation } from '../../lab/run';
import { findScenario } from '../../lab/scenarios';
import { pod, startFakeApiServer, type FakeApiServer } from '../unit/k8s-fixtures';
import { tsharkFields } from '../unit/tshark';

const COLLECTOR_POD = 'hoptrace-collector-7c9d-lab01';

/** The lab's pods as the API server lists them, and the collector pod in front of `port`. */
function labCluster(fake: FakeApiServer, collector: LiveCollector): void {
  fake.pods = [
    pod('vpn', 'wg-0', {
      ip: ADDR.vpnPod,
      node: 'vpn-node',
      labels: { app: 'wg' },
      owner: { kind: 'StatefulSet', name: 'wg' },
    }),
    pod('web', 'web-1', {
      ip: ADDR.backendPod,
      node: 'backend-node',
      labels: { app: 'web' },
      owner: { kind: 'ReplicaSet', name: 'web-6d4b' },
    }),
    {
      metadata: {
        name: COLLECTOR_POD,
        namespace: 'hoptrace',
        labels: {
          'app.kubernetes.io/name': 'hoptrace',
          'app.kubernetes.io/component': 'collector',
        },
      },
      spec: {
        nodeName: 'backend-node',
        containers: [
          {
            name: 'collector',
            image: 'hoptrace:lab',
            args: ['collector', '--listen', `0.0.0.0:${collector.port}`],
            ports: [{ name: 'api', containerPort: collector.port, protocol: 'TCP' }],
          },
        ],
      },
      status: {
        phase: 'Running',
        podIP: '10.244.2.50',
        conditions: [{ type: 'Ready', status: 'True' }],
      },
    } as PodObject,
  ];
  fake.workloads.set('deployments/web/web', { app: 'web' });
  fake.secrets.set('hoptrace/hoptrace-token', { token: `${collector.token}\n` });
  fake.forwards.set(`hoptrace/${COLLECTOR_POD}:${collector.port}`, {
    host: '127.0.0.1',
    port: collector.port,
  });
}

/** The kubectl target of a lab point (its pod IP): the pod by name, the backend by workload. */
const KUBE_TARGET: Record<string, string> = {
  [ADDR.vpnPod]: 'vpn/wg-0',
  [ADDR.backendPod]: 'web/deploy/web',
};

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('cni-masquerade through kubectl hoptrace capture: verdict and bundle', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kubectl-lab-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const fake = await startFakeApiServer(dir);
    t.teardown(() => fake.close());
    const collector = await LiveCollector.start({
      collectorArgs: ['--kubeconfig', fake.kubeconfig],
    });
    t.teardown(() => collector.close());
    labCluster(fake, collector);
    const scenario = findScenario('cni-masquerade');
    if (scenario === undefined) throw new Error('no cni-masquerade scenario');
    await withLiveScene(collector, scenario, async (scene) => {
      await scene.startAgents();
      const req = scene.request();
      const argv = [
        'capture',
        '--kubeconfig',
        fake.kubeconfig,
        ...req.points.flatMap((p) => {
          const target = KUBE_TARGET[p.target];
          if (target === undefined) throw new Error(`no kubectl target for ${p.target}`);
          return [`--${p.name}`, `${target}:${p.iface}`];
        }),
        '--client',
        req.client ?? '',
        '--dst',
        `${req.dst ?? ''}:${String(req.dport ?? '')}`,
        '--timeout',
        '20s',
        '--settle',
        '1200ms',
        '--json',
      ];
      const out: string[] = [];
      const err: string[] = [];
      const prepared = await scene.prepareProbe();
      const running = runKubectl(argv, {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
        env: {},
        cwd: dir,
        connect: (flags) => connectCluster(flags, {}),
        pollMs: 100,
      });
      // The capture id from `capture ID armed on …`; the probe once every point captures.
      let id: string | undefined;
      for (let i = 0; i < 300 && id === undefined; i++) {
        id = err.map((l) => /^capture (c-\S+) armed on /.exec(l)?.[1]).find(Boolean);
        if (id === undefined) await delay(50);
      }
      if (id === undefined) {
        await prepared.close();
        throw new Error(`no capture armed: ${err.join('\n')}`);
      }
      let probe;
      try {
        await collector.waitCapture(id, allCapturing, 'every point capturing', 15_000);
        probe = await prepared.send();
      } finally {
        await prepared.close();
      }
      const code = await running;
      t.equal(code, 0, `resolved: exit 0 (${err.join(' | ')})`);
      t.match(
        err.join('\n'),
        new RegExp(`^capture ${id} armed on pod hoptrace/${COLLECTOR_POD} via port-forward`, 'm'),
      );
      t.match(err.join('\n'), /web\/deploy\/web|^\[/m);
      // The verdict, as the lab judges every live run: against the scenario's expectation.
      const json = JSON.parse(out.join('\n')) as { capture: CaptureView };
      const verdict = labVerdictOf(json.capture);
      const mismatches = compareWithExpectation(scenario.expect, {
        verdict,
        analyzerError: verdict === null ? `capture ${json.capture.state}` : null,
        probe,
        appObserved: backendObserved(scene.backendLog(), scene.probeId),
      });
      t.same(mismatches, [], `verdict ${verdict?.layer ?? 'none'} as the scenario expects`);
      // The collector resolved the Kubernetes names through the API server it was given.
      t.match(
        json.capture.points.map((p) => p.target),
        req.points.map((p) => (p.target === ADDR.vpnPod ? 'vpn/wg-0' : 'web/web-1')),
      );
      t.ok(fake.requests.some((q) => q.startsWith('GET /api/v1/pods')));
      t.ok(
        fake.requests.some((q) =>
          q.startsWith(`GET /api/v1/namespaces/hoptrace/pods/${COLLECTOR_POD}/portforward`),
        ),
      );
      // The bundle on disk, evidence.pcapng with the packets of every point.
      const bundle = join(dir, `hoptrace-${id}`);
      for (const f of BUNDLE_FILES) t.ok(existsSync(join(bundle, f)), `${f} downloaded`);
      // Every file checked against the collector's SHA256SUMS on the way (bundle-download.ts).
      t.match(err.join('\n'), /^ {2}verified [1-9]\d* files against SHA256SUMS$/m);
      t.match(
        err.join('\n'),
        new RegExp(`^bundle: ${bundle.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}/`, 'm'),
      );
      const ifaces = new Set(
        tsharkFields(join(bundle, 'evidence.pcapng'), ['frame.interface_name']).map(
          ([i = '']) => i.split('@')[0],
        ),
      );
      t.same(
        [...ifaces].sort(),
        req.points.map((p) => p.name).sort(),
        'evidence.pcapng: packets at every point',
      );
      t.match(readFileSync(join(bundle, 'report.md'), 'utf8'), id);
    });
  });
}

/**
 * `kubectl hoptrace` end to end against the simulated cluster (kubectl-fixtures.ts): the
 * kubeconfig and context as kubectl picks them, the collector reached through the API server's
 * port-forward with the token of its Secret, over TLS with the CA of hoptrace-tls; status,
 * capture from argument parsing to the downloaded bundle, report ID; the stable errors for no
 * cluster, no collector, no permission.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFile, spawnSync } from 'node:child_process';
import t from 'tap';
import { parse, parseAllDocuments } from 'yaml';
import { loadClientLibrary } from '../../collector/k8s/client';
import { loadKubeConfig } from '../../cli/kubectl/kube-config';
import { loadManifests } from '../../cli/kubectl/manifests';
import { parseKubeTarget } from '../../cli/kubectl/targets';
import { pod } from './k8s-fixtures';
import {
  COLLECTOR_POD,
  startEmptyCluster,
  startKubeScene,
  type KubeScene,
} from './kubectl-fixtures';

const root = join(__dirname, '..', '..', '..');
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

/** A process run without blocking this one (the collector and the API server live here). */
function runProcess(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, cwd, timeout: 60_000 }, (e, stdout, stderr) => {
      resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : -1, stdout, stderr });
    });
  });
}

const SUBCOMMANDS = ['capture', 'status', 'report', 'install', 'uninstall', 'doctor', 'repro'];
const MANIFEST_PATHS = [
  '/api/v1/namespaces/hoptrace',
  '/api/v1/namespaces/hoptrace/serviceaccounts/hoptrace-collector',
  '/api/v1/namespaces/hoptrace/serviceaccounts/hoptrace-agent',
  '/apis/rbac.authorization.k8s.io/v1/clusterroles/hoptrace-collector-read',
  '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/hoptrace-collector-read',
  '/apis/apps/v1/namespaces/hoptrace/deployments/hoptrace-collector',
  '/api/v1/namespaces/hoptrace/services/hoptrace-collector',
  '/apis/apps/v1/namespaces/hoptrace/daemonsets/hoptrace-agent',
  '/apis/networking.k8s.io/v1/namespaces/hoptrace/networkpolicies/hoptrace-collector',
];

const CAPTURE = [
  'capture',
  '--decap',
  'vpn/wg-0:tun0',
  '--egress',
  'vpn/wg-0:eth0',
  '--backend',
  'web/web-1:eth0',
  '--client',
  '141.142.228.5',
  '--evidence-wait',
  '0s',
];

function kc(s: KubeScene): string[] {
  return ['--kubeconfig', s.fake.kubeconfig];
}

void t.test('help for the plugin and every subcommand; usage errors exit 2', async (t) => {
  const s = await startKubeScene(t);
  const help = await s.run(['--help']);
  t.equal(help.code, 0);
  for (const c of SUBCOMMANDS) t.match(help.out.join('\n'), new RegExp(`^  ${c}\\b`, 'm'), c);
  t.match(help.out.join('\n'), /--kubeconfig FILE\] \[--context NAME\] \[-n NAMESPACE\]/);
  t.equal((await s.run([])).code, 2, 'no command is a usage error');
  for (const c of SUBCOMMANDS) {
    const r = await s.run([c, '--help']);
    t.equal(r.code, 0, `${c} --help`);
    t.match(r.out[0], new RegExp(`^usage: kubectl hoptrace ${c} .*--kubeconfig FILE`), c);
  }
  const unknown = await s.run(['sniff']);
  t.equal(unknown.code, 2);
  t.match(unknown.err[0], /^CLI_USAGE: unknown command 'sniff'/);
  const noBackend = await s.run(['capture', ...kc(s), '--decap', 'vpn/wg-0:tun0']);
  t.equal(noBackend.code, 2);
  t.match(noBackend.err[0], /CLI_USAGE: kubectl hoptrace capture: give --backend/);
  const badTarget = await s.run([
    'capture',
    ...kc(s),
    '--decap',
    'vpn/wg-0',
    '--backend',
    'x:eth0',
  ]);
  t.equal(badTarget.code, 2);
  t.match(badTarget.err[0], /CLI_BAD_POINT: --decap: 'vpn\/wg-0': no :IFACE/);
  const badId = await s.run(['report', ...kc(s), '../etc']);
  t.equal(badId.code, 2);
  t.notOk(
    s.fake.requests.some((q) => q.includes('/namespaces/hoptrace/')),
    'a usage error reaches no API server',
  );
  const noUrl = await s.run(['repro', ...kc(s), '--vpn-workload', 'x']);
  t.equal(noUrl.code, 2);
  t.match(
    noUrl.err[0],
    /CLI_USAGE: kubectl hoptrace repro: give --vpn-workload, --backend, .*\(missing: --backend, /,
  );
  const noImage = await s.run(['install', ...kc(s)]);
  t.equal(noImage.code, 2);
  t.match(noImage.err[0], /CLI_USAGE: kubectl hoptrace install: give --image IMAGE/);
});

void t.test('targets as kubectl users write them', (t) => {
  t.same(parseKubeTarget('--decap', 'vpn/wg-0:wg0', 'default'), {
    kind: 'pod',
    namespace: 'vpn',
    name: 'wg-0',
    iface: 'wg0',
  });
  t.same(parseKubeTarget('--decap', 'wg-0:wg0', 'vpn'), {
    kind: 'pod',
    namespace: 'vpn',
    name: 'wg-0',
    iface: 'wg0',
  });
  t.same(parseKubeTarget('--backend', 'deploy/web:eth0', 'web'), {
    kind: 'deployment',
    namespace: 'web',
    name: 'web',
    iface: 'eth0',
  });
  t.same(parseKubeTarget('--decap', 'vpn/sts/wg:wg0', 'default'), {
    kind: 'statefulset',
    namespace: 'vpn',
    name: 'wg',
    iface: 'wg0',
  });
  t.same(parseKubeTarget('--decap', 'deploy/pod/web:eth0', 'x'), {
    kind: 'pod',
    namespace: 'deploy',
    name: 'web',
    iface: 'eth0',
  });
  t.same(parseKubeTarget('--backend', '10.244.2.5:eth0', 'x'), {
    kind: 'ip',
    ip: '10.244.2.5',
    iface: 'eth0',
  });
  t.same(parseKubeTarget('--backend', '[fd00::5]:eth0', 'x'), {
    kind: 'ip',
    ip: 'fd00::5',
    iface: 'eth0',
  });
  for (const bad of ['vpn/wg-0', 'Vpn/wg-0:eth0', 'a/b/c/d:eth0', 'vpn/job/x:eth0', 'fd00::5:eth0'])
    t.throws(() => parseKubeTarget('--decap', bad, 'default'), { code: 'CLI_BAD_POINT' }, bad);
  t.end();
});

void t.test(
  'kubeconfig, $KUBECONFIG, --context and the context namespace; no cluster',
  async (t) => {
    const s = await startKubeScene(t);
    const k8s = await loadClientLibrary();
    const two = join(s.dir, 'two-contexts');
    const cfg = JSON.parse(readFileSync(s.fake.kubeconfig, 'utf8')) as {
      contexts: { name: string; context: Record<string, string> }[];
    };
    cfg.contexts.push({
      name: 'other',
      context: { cluster: 'sim', user: 'sim', namespace: 'vpn' },
    });
    writeFileSync(two, JSON.stringify(cfg));
    const viaEnv = loadKubeConfig(k8s, {}, { KUBECONFIG: `${two}:${join(s.dir, 'absent')}` });
    t.match(viaEnv, { source: '$KUBECONFIG', context: 'sim', namespace: 'default' });
    t.match(loadKubeConfig(k8s, { kubeconfig: two, context: 'other' }, {}), {
      context: 'other',
      namespace: 'vpn',
      server: s.fake.url,
    });
    mkdirSync(join(s.dir, 'home', '.kube'), { recursive: true });
    copyFileSync(two, join(s.dir, 'home', '.kube', 'config'));
    t.match(loadKubeConfig(k8s, {}, { HOME: join(s.dir, 'home'), KUBECONFIG: '' }), {
      source: '~/.kube/config',
    });
    t.throws(() => loadKubeConfig(k8s, { kubeconfig: two, context: 'prod' }, {}), {
      code: 'K8S_CONFIG',
      message: /no context 'prod'.*contexts there: sim, other/,
    });
    const none = await s.run(['status'], { HOME: join(s.dir, 'nohome') });
    t.equal(none.code, 1);
    t.match(none.err[0], /^kubectl hoptrace: K8S_CONFIG: .*no kubeconfig found/);
    // The context's namespace is where a bare pod name is looked for.
    const bare = await s.run([
      'capture',
      '--kubeconfig',
      two,
      '--context',
      'other',
      '--decap',
      'wg-0:tun0',
      '--backend',
      'web/web-1:eth0',
      '--no-download',
      '--evidence-wait',
      '0s',
      '--evidence-payload',
      '--doctor-tunnel-range',
      '10.90.0.0/24',
    ]);
    t.equal(bare.code, 0, bare.err.join('\n'));
    const made = s.collector.sessions.list()[0];
    t.match(made?.points[0], { target: 'vpn/wg-0' });
    // --evidence-payload and --doctor-tunnel-range reach the capture request as hoptrace capture's.
    const doc = JSON.parse(s.collector.sessions.report(made?.id ?? '', 'json') ?? '{}') as {
      capture?: { request?: { evidencePayload?: boolean; doctor?: { tunnelRange: string } } };
    };
    t.equal(doc.capture?.request?.evidencePayload, true, 'evidencePayload asked');
    t.same(doc.capture?.request?.doctor, { tunnelRange: '10.90.0.0/24' }, 'doctor asked');
    const asked = s.fake.requests.length;
    const badRange = await s.run([
      'capture',
      ...kc(s),
      '--decap',
      'vpn/wg-0:tun0',
      '--backend',
      'web/web-1:eth0',
      '--doctor-tunnel-range',
      '10.90.0.0/99',
    ]);
    t.equal(badRange.code, 2);
    t.match(
      badRange.err[0],
      /CLI_USAGE: .*--doctor-tunnel-range: '10\.90\.0\.0\/99' is not an IPv4 or IPv6 CIDR/,
    );
    t.equal(s.fake.requests.length, asked, 'a bad range reaches no API server');
  },
);

void t.test('status: collector, agents per node, versions, captures running', async (t) => {
  const s = await startKubeScene(t);
  const r = await s.run(['status', ...kc(s)]);
  t.equal(r.code, 0, r.err.join('\n'));
  const text = r.out.join('\n');
  t.match(
    text,
    new RegExp(
      `^collector: pod hoptrace/${COLLECTOR_POD} on backend-node, ready, image hoptrace:0\\.1\\.0, 2 agents connected`,
      'm',
    ),
  );
  t.match(text, /^agents: 2 of 2 nodes connected$/m);
  t.match(text, /^ {2}vpn-node +hoptrace-agent-a1b2c \(Running\) +connected +test +shared-token$/m);
  t.match(text, /^captures running: 0$/m);
  // The token came from the Secret and the collector from the pod's port-forward, over TLS.
  t.ok(s.fake.requests.includes('GET /api/v1/namespaces/hoptrace/secrets/hoptrace-token'));
  t.ok(s.fake.requests.includes('GET /api/v1/namespaces/hoptrace/secrets/hoptrace-tls'));
  t.ok(
    s.fake.requests.some((q) =>
      q.startsWith(`GET /api/v1/namespaces/hoptrace/pods/${COLLECTOR_POD}/portforward?ports=`),
    ),
  );
  t.ok(s.fake.forwardsOpened >= 3, 'healthz, agents, captures: one forward each');

  const json = await s.run(['status', ...kc(s), '--json']);
  t.match(JSON.parse(json.out[0] ?? ''), {
    collector: { pod: `hoptrace/${COLLECTOR_POD}`, image: 'hoptrace:0.1.0' },
    nodes: [
      { node: 'backend-node', connected: true },
      { node: 'vpn-node', connected: true },
    ],
    running: [],
  });

  s.hub?.setConnected('agent-backend', false);
  s.fake.nodes = [...s.fake.nodes, { metadata: { name: 'gpu-node' } }];
  const partial = await s.run(['status', ...kc(s)]);
  t.equal(partial.code, 3, 'a node without a connected agent');
  t.match(partial.out.join('\n'), /^agents: 1 of 3 nodes connected$/m);
  t.match(partial.out.join('\n'), /^ {2}gpu-node +- +not connected +- +-$/m);
});

void t.test('no collector, no Secret, no permission, no API server: their codes', async (t) => {
  const s = await startKubeScene(t);
  const other = await s.run(['status', ...kc(s), '--hoptrace-namespace', 'tools']);
  t.equal(other.code, 1);
  t.match(other.err[0], /KUBECTL_NO_COLLECTOR: namespace tools: no collector pod .* \(install it/);

  const all = s.fake.pods;
  const collectorPod = all.find((p) => p.metadata?.name === COLLECTOR_POD);
  s.fake.pods = [
    ...all.filter((p) => p !== collectorPod),
    pod('hoptrace', COLLECTOR_POD, { phase: 'Pending' }),
  ];
  const podLabels = s.fake.pods.at(-1)?.metadata;
  if (podLabels) podLabels.labels = collectorPod?.metadata?.labels ?? {};
  const pending = await s.run(['status', ...kc(s)]);
  t.match(
    pending.err[0],
    new RegExp(
      `KUBECTL_NO_COLLECTOR: .*no ready collector pod in namespace hoptrace \\(${COLLECTOR_POD} Pending\\)`,
    ),
  );
  s.fake.pods = all;

  s.fake.secrets.delete('hoptrace/hoptrace-token');
  const noToken = await s.run(['status', ...kc(s)]);
  t.match(
    noToken.err[0],
    /KUBECTL_NO_SECRET: namespace hoptrace: no Secret hoptrace\/hoptrace-token/,
  );
  s.fake.secrets.set('hoptrace/hoptrace-token', { token: 'wrong-token-0123456789' });
  const wrong = await s.run(['status', ...kc(s)]);
  t.equal(wrong.code, 1);
  t.match(wrong.err[0], /API_UNAUTHORIZED/);
  s.fake.secrets.set('hoptrace/hoptrace-token', { token: 'kubectl-test-token-0123456789' });

  s.fake.refuse = /\/secrets\//;
  const noSecrets = await s.run(['status', ...kc(s)]);
  t.match(
    noSecrets.err[0],
    /K8S_FORBIDDEN: .*get secret hoptrace\/hoptrace-token: HTTP 403 \(your kubeconfig user may not get secret/,
  );
  s.fake.refuse = /\/portforward$/;
  const noForward = await s.run(['status', ...kc(s)]);
  t.equal(noForward.code, 1);
  t.match(
    noForward.err[0],
    /K8S_FORBIDDEN: port-forward hoptrace\/.*403.*create` on pods\/portforward/,
  );
  s.fake.refuse = undefined;

  const port = [...s.fake.forwards.keys()][0] ?? '';
  const to = s.fake.forwards.get(port);
  s.fake.forwards.clear();
  const nothing = await s.run(['status', ...kc(s)]);
  t.match(nothing.err[0], /KUBECTL_PORT_FORWARD: port-forward hoptrace\/.*error forwarding port/);
  if (to) s.fake.forwards.set(port, to);

  await s.fake.close();
  const down = await s.run(['status', ...kc(s)]);
  t.equal(down.code, 1);
  t.match(down.err[0], /K8S_API_UNREACHABLE: .*list pods in hoptrace/);
});

void t.test('capture: arguments to verdict to the bundle in ./hoptrace-<id>/', async (t) => {
  const s = await startKubeScene(t);
  const r = await s.run([...CAPTURE, ...kc(s)]);
  t.equal(r.code, 0, r.err.join('\n'));
  const text = r.out.join('\n');
  const id = /^capture (c-\S+): resolved/m.exec(text)?.[1] ?? '';
  t.match(
    r.err[0],
    new RegExp(`^capture ${id} armed on pod hoptrace/${COLLECTOR_POD} via port-forward$`),
  );
  t.ok(
    r.err.some((l) => /decap: \w+ \d+ pkts/.test(l)),
    'progress per point',
  );
  t.match(text, /verdict: preserved/);
  t.notMatch(text + r.err.join('\n'), /svc:7070|report: /, 'no in-cluster URL to follow');
  t.match(text, /^again: {2}kubectl hoptrace capture --decap vpn\/wg-0:tun0 .*--kubeconfig /m);
  const dir = join(s.dir, `hoptrace-${id}`);
  t.match(
    text,
    new RegExp(
      `^bundle: ${dir}/ \\(report\\.md, report\\.json, report\\.html, sequence\\.svg`,
      'm',
    ),
  );
  for (const f of ['report.md', 'report.json', 'report.html', 'sequence.svg', 'inventory.json'])
    t.ok(existsSync(join(dir, f)), f);
  // Checked against the collector's SHA256SUMS, which comes home beside them.
  t.match(text, /^ {2}verified [45] files against SHA256SUMS$/m);
  t.ok(existsSync(join(dir, 'SHA256SUMS')), 'SHA256SUMS');
  t.match(JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')), {
    verdict: { layer: 'preserved' },
  });
  t.match(readFileSync(join(dir, 'sequence.svg'), 'utf8'), /^<svg /);
  // The collector resolved the pod targets from the API itself.
  t.match(s.collector.sessions.get(id)?.points, [
    { name: 'decap', target: 'vpn/wg-0', node: 'vpn-node' },
    { name: 'egress', target: 'vpn/wg-0' },
    { name: 'backend', target: 'web/web-1', node: 'backend-node' },
  ]);

  // report ID brings the same bundle home again, elsewhere.
  const again = await s.run(['report', id, '--out', 'copy', '--evidence-wait', '0s', ...kc(s)]);
  t.equal(again.code, 0, again.err.join('\n'));
  t.match(again.out.join('\n'), /^ {2}verified [45] files against SHA256SUMS$/m);
  t.equal(
    readFileSync(join(s.dir, 'copy', 'report.md'), 'utf8'),
    readFileSync(join(dir, 'report.md'), 'utf8'),
  );
  const unknown = await s.run(['report', 'c-nothing-0123abcd', ...kc(s)]);
  t.equal(unknown.code, 1);
  t.match(unknown.err[0], /API_NOT_FOUND/);
});

void t.test(
  'with real agents behind the collector the bundle has its evidence.pcapng',
  async (t) => {
    const s = await startKubeScene(t, { agents: 'replay' });
    const argv = CAPTURE.slice(0, -2); // the default --evidence-wait: the agents answer in time
    const r = await s.run([...argv, ...kc(s)]);
    t.equal(r.code, 0, r.err.join('\n'));
    const id = /^capture (c-\S+): resolved/m.exec(r.out.join('\n'))?.[1] ?? '';
    t.match(r.out.join('\n'), /verdict: preserved/);
    const status = await s.run(['status', ...kc(s)]);
    t.match(status.out.join('\n'), /^agents: 2 of 2 nodes connected$/m);
    const pcapng = readFileSync(join(s.dir, `hoptrace-${id}`, 'evidence.pcapng'));
    t.equal(pcapng.readUInt32LE(0), 0x0a0d0d0a, 'a pcapng Section Header Block');
    t.notMatch(r.out.join('\n'), /not in it/);
  },
);

void t.test('capture --json stays one object; workloads resolve to a pod', async (t) => {
  const s = await startKubeScene(t);
  s.fake.workloads.set('deployments/web/web', { app: 'web' });
  s.fake.workloads.set('statefulsets/vpn/wg', { app: 'wg' });
  const wg = s.fake.pods.find((p) => p.metadata?.name === 'wg-0');
  if (wg?.metadata) wg.metadata.labels = { app: 'wg' };
  const r = await s.run([
    'capture',
    ...kc(s),
    '-n',
    'web',
    '--decap',
    'vpn/sts/wg:tun0',
    '--egress',
    'vpn/sts/wg:eth0',
    '--backend',
    'deploy/web:eth0',
    '--json',
    '--evidence-wait',
    '0s',
  ]);
  t.equal(r.code, 0, r.err.join('\n'));
  t.equal(r.out.length, 1);
  const o = JSON.parse(r.out[0] ?? '') as { capture: { id: string; points: { target: string }[] } };
  t.same(
    o.capture.points.map((p) => p.target),
    ['vpn/wg-0', 'vpn/wg-0', 'web/web-1'],
  );
  t.ok(r.err.some((l) => l.startsWith(`bundle: ${join(s.dir, `hoptrace-${o.capture.id}`)}/`)));
  const none = await s.run([
    'capture',
    ...kc(s),
    '--decap',
    'vpn/deploy/nope:tun0',
    '--backend',
    'web/web-1:eth0',
  ]);
  t.equal(none.code, 1);
  t.match(none.err[0], /K8S_POD_NOT_FOUND: vpn\/deploy\/nope: no deployment vpn\/nope/);
});

void t.test(
  'a capture that times out: exit 3, the verdict says why, the bundle still comes',
  async (t) => {
    const s = await startKubeScene(t, { silentBackend: true });
    const r = await s.run([...CAPTURE, ...kc(s), '--timeout', '600ms', '--settle', '60s']);
    t.equal(r.code, 3);
    const text = r.out.join('\n');
    t.match(text, /: timeout \(timeout after 600 ms\)/);
    t.match(text, /no events from backend/);
    t.match(text, /^bundle: /m);
  },
);

void t.test(
  'kubectl finds the plugin on PATH and runs it: plugin list, --help, status',
  {
    skip: hasKubectl
      ? false
      : 'no kubectl on this machine (Debian: apt-get install kubernetes-client)',
  },
  async (t) => {
    const s = await startKubeScene(t);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(root, 'bin')}:${process.env['PATH'] ?? ''}`,
    };
    delete env['KUBECONFIG'];
    const list = await runProcess('kubectl', ['plugin', 'list'], env, s.dir);
    t.match(list.stdout, new RegExp(`${join(root, 'bin', 'kubectl-hoptrace')}$`, 'm'));
    const help = await runProcess('kubectl', ['hoptrace', 'status', '--help'], env, s.dir);
    t.equal(help.code, 0);
    t.match(help.stdout, /^usage: kubectl hoptrace status /);
    const status = await runProcess('kubectl', ['hoptrace', 'status', ...kc(s)], env, s.dir);
    t.equal(status.code, 0, status.stderr);
    t.match(status.stdout, /^agents: 2 of 2 nodes connected$/m);
    const noCluster = await runProcess(
      'kubectl',
      ['hoptrace', 'status'],
      { ...env, HOME: join(s.dir, 'nohome') },
      s.dir,
    );
    t.equal(noCluster.code, 1);
    t.match(noCluster.stderr, /^kubectl hoptrace: K8S_CONFIG: /);
    t.notMatch(noCluster.stderr, /\n\s+at /, 'no stack trace');
  },
);

void t.test('install → status → capture → uninstall on an empty simulated cluster', async (t) => {
  const c = await startEmptyCluster(t);
  const kcf = ['--kubeconfig', c.fake.kubeconfig];
  const before = await c.run(['status', ...kcf]);
  t.equal(before.code, 1);
  t.match(before.err[0], /KUBECTL_NO_COLLECTOR/);

  const r = await c.run(['install', '--image', 'registry.example/hoptrace:0.1.0', ...kcf]);
  t.equal(r.code, 0, r.err.join('\n'));
  const text = r.out.join('\n');
  t.match(text, /^ {2}created secret\/hoptrace-token /m);
  t.match(text, /^ {2}created secret\/hoptrace-tls .*ca\.key stays in /m);
  t.match(text, /^ {2}applied daemonset\/hoptrace-agent$/m);
  t.match(
    text,
    new RegExp(`^ready: collector pod hoptrace/${COLLECTOR_POD}; an agent on every node:$`, 'm'),
  );
  t.match(text, /^ {2}vpn-node: hoptrace-agent-a1b2c, connected \(version test\)$/m);
  t.match(text, /^ {2}backend-node: hoptrace-agent-d3e4f, connected/m);
  t.ok(
    r.err.some((l) => /agents connected on 2 of 2 nodes/.test(l)),
    'progress while waiting',
  );
  // Every object of deploy/base arrives whole (client-node's serializer drops nothing), as the
  // YAML says on the wire: client-node's typed models rename fields (NetworkPolicy's `from` is
  // `_from` in V1NetworkPolicyIngressRule), so the expectation is read as plain YAML.
  const k8s = await loadClientLibrary();
  const want = loadManifests(
    {
      ...k8s,
      loadYaml: (y: string) => parse(y) as unknown,
      loadAllYaml: (y: string) => parseAllDocuments(y).map((d) => d.toJS() as unknown),
    } as unknown as typeof k8s,
    'registry.example/hoptrace:0.1.0',
  );
  t.equal(want.length, MANIFEST_PATHS.length);
  want.forEach((m, i) => {
    t.same(c.fake.objects.get(MANIFEST_PATHS[i] ?? ''), m, `applied ${m.kind} ${m.metadata.name}`);
  });
  const deployment = c.fake.objects.get(
    '/apis/apps/v1/namespaces/hoptrace/deployments/hoptrace-collector',
  );
  t.match(deployment, {
    spec: { template: { spec: { containers: [{ image: 'registry.example/hoptrace:0.1.0' }] } } },
  });
  t.match(c.fake.objects.get('/apis/apps/v1/namespaces/hoptrace/daemonsets/hoptrace-agent'), {
    spec: { template: { spec: { containers: [{ image: 'registry.example/hoptrace:0.1.0' }] } } },
  });
  const token = c.fake.secrets.get('hoptrace/hoptrace-token')?.['token'];
  t.ok(token !== undefined && Buffer.from(token).length >= 32, 'a random token of 32 bytes');
  t.ok(existsSync(join(c.dir, 'hoptrace-tls', 'ca.key')), 'ca.key stays here');
  t.ok(
    c.fake.requests.every(
      (q) => !q.startsWith('PATCH') || q.includes('fieldManager=kubectl-hoptrace'),
    ),
    'server-side apply as kubectl-hoptrace',
  );

  // A second install keeps the Secrets (agents and users hold them).
  const again = await c.run(['install', '--image', 'registry.example/hoptrace:0.1.0', ...kcf]);
  t.equal(again.code, 0, again.err.join('\n'));
  t.match(again.out.join('\n'), /kept secret\/hoptrace-token[^]*kept secret\/hoptrace-tls/);
  t.same(c.fake.secrets.get('hoptrace/hoptrace-token')?.['token'], token);

  const status = await c.run(['status', ...kcf]);
  t.equal(status.code, 0, status.err.join('\n'));
  t.match(status.out.join('\n'), /image registry\.example\/hoptrace:0\.1\.0/);
  const cap = await c.run([...CAPTURE.slice(0, -2), ...kcf]);
  t.equal(cap.code, 0, cap.err.join('\n'));
  t.match(cap.out.join('\n'), /verdict: preserved/);
  t.notMatch(cap.out.join('\n'), /not in it/, 'evidence.pcapng too');

  const un = await c.run(['uninstall', ...kcf]);
  t.equal(un.code, 0, un.err.join('\n'));
  t.match(un.out.join('\n'), /^ {2}deleted secret\/hoptrace-token$/m);
  t.match(un.out.join('\n'), /deleted namespace\/hoptrace$/);
  t.same([...c.fake.objects.keys()], [], 'nothing applied is left');
  t.same([...c.fake.secrets.keys()], [], 'both Secrets gone');
  const twice = await c.run(['uninstall', ...kcf]);
  t.equal(twice.code, 0);
  t.match(twice.out.join('\n'), /was not there: namespace\/hoptrace/);
  t.equal((await c.run(['uninstall', ...kcf, '--hoptrace-namespace', 'x'])).code, 2);
});

void t.test('install that cannot finish: the wait ends with KUBECTL_INSTALL_FAILED', async (t) => {
  const c = await startEmptyCluster(t);
  c.fake.onApply = undefined; // no controllers: nothing ever starts
  const r = await c.run([
    'install',
    '--image',
    'hoptrace:0.1.0',
    '--timeout',
    '300ms',
    '--kubeconfig',
    c.fake.kubeconfig,
  ]);
  t.equal(r.code, 1);
  t.match(
    r.err.at(-1),
    /KUBECTL_INSTALL_FAILED: namespace hoptrace: not ready within 300ms: waiting for the collector pod/,
  );
  c.fake.refuse = /^PATCH .*clusterrole/;
  const denied = await c.run([
    'install',
    '--image',
    'hoptrace:0.1.0',
    '--kubeconfig',
    c.fake.kubeconfig,
  ]);
  t.equal(denied.code, 1);
  t.match(
    denied.err.at(-1),
    /K8S_FORBIDDEN: .*apply ClusterRole hoptrace-collector-read: HTTP 403/,
  );
});

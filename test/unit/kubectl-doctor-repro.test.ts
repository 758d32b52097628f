/**
 * `kubectl hoptrace doctor` end to end against the simulated cluster (kubectl-fixtures.ts): from
 * the arguments, through the API server's port-forward to the real collector and the agents'
 * (canned) doctor facts, to the findings printed; bad flags as one coded line. `repro` the same
 * way: the workload as kubectl users write it, the probes from this process to a backend on
 * loopback, the VPN pod deleted through the simulated API server, whose controller (onDelete) makes
 * the replacement that the collector follows, and the repro's bundle downloaded.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { parseVpnWorkload } from '../../cli/kubectl/repro';
import { COLLECTOR_POD, STALE_NEXT_HOP, startKubeScene, type KubeScene } from './kubectl-fixtures';
import { wgPod } from './k8s-fixtures';

function kc(s: KubeScene): string[] {
  return ['--kubeconfig', s.fake.kubeconfig];
}

type Asserts = Pick<typeof t, 'equal' | 'match' | 'notMatch'>;

/** Each command line of `cases` exits 2 with one coded line on stderr, no stack trace. */
async function usageErrors(
  t: Asserts,
  s: KubeScene,
  command: string,
  cases: [string[], RegExp][],
): Promise<void> {
  for (const [argv, want] of cases) {
    const r = await s.run([command, ...kc(s), ...argv]);
    t.equal(r.code, 2, argv.join(' '));
    t.equal(r.err.length, 1, 'one line');
    t.match(r.err[0], want);
    t.notMatch(r.err.join('\n'), /\n\s+at /, 'no stack trace');
  }
}

void t.test(
  'doctor: targets as kubectl writes them, the findings as hoptrace doctor prints them',
  async (t) => {
    const s = await startKubeScene(t);
    s.fake.workloads.set('deployments/web/web', { app: 'web' });
    const r = await s.run(['doctor', ...kc(s), '--vpn', 'vpn/wg-0', '--backend', 'web/deploy/web']);
    t.equal(r.code, 4, `an error finding: exit 4 (${r.err.join('\n')})`);
    const text = r.out.join('\n');
    t.match(
      text,
      /^hoptrace doctor — tunnel range 10\.90\.0\.0\/24, client 10\.90\.0\.1: [1-9]\d* error\(s\)/,
    );
    t.match(text, new RegExp(`^ERROR return-route  node backend-node`, 'm'));
    t.match(text, new RegExp(`still points at ${STALE_NEXT_HOP.replace(/\./g, '\\.')}`));
    // The agents were asked for the pods' namespaces by the IPs the API server gave.
    const asked = s.hub?.sent.flatMap((x) =>
      x.cmd.kind === 'doctorRequest'
        ? x.cmd.doctorRequest.targets.map((q) => `${x.agentId}:${q.name}=${q.target}`)
        : [],
    );
    t.same(asked, [
      'agent-vpn:vpn=10.244.1.10',
      'agent-vpn:vpn-node=',
      'agent-backend:backend-node=',
    ]);
    t.ok(s.fake.requests.includes('GET /api/v1/namespaces/vpn/pods/wg-0'));
    t.ok(
      s.fake.requests.some((q) =>
        q.startsWith(`GET /api/v1/namespaces/hoptrace/pods/${COLLECTOR_POD}/portforward`),
      ),
    );

    const json = await s.run([
      'doctor',
      ...kc(s),
      '-n',
      'web',
      '--vpn',
      'vpn/wg-0',
      '--backend',
      'web-1',
      '--json',
      '--client',
      '10.90.0.42',
    ]);
    t.equal(json.code, 4);
    const o = JSON.parse(json.out.join('\n')) as {
      client: string;
      summary: { errors: number };
      findings: { severity: string; check: string; detail: string }[];
    };
    t.match(o, { tunnelRange: '10.90.0.0/24', client: '10.90.0.42', summary: { errors: 1 } });
    t.match(
      o.findings.filter((f) => f.severity === 'error'),
      [
        {
          check: 'return-route',
          detail: /still points at 10\.244\.1\.99, a pod address that no namespace holds/,
        },
      ],
    );
  },
);

void t.test('doctor: bad flags are one coded line, and reach no API server', async (t) => {
  const s = await startKubeScene(t);
  const cases: [string[], RegExp][] = [
    [
      ['--vpn', 'vpn/wg-0'],
      /^kubectl hoptrace: CLI_USAGE: kubectl hoptrace doctor: give --vpn TARGET .* and --backend/,
    ],
    [
      ['--vpn', 'vpn/wg-0', '--backend', 'web/web-1', '--tunnel-range', 'ten'],
      /^kubectl hoptrace: CLI_USAGE: --tunnel-range: 'ten' is not an IPv4 or IPv6 CIDR/,
    ],
    [
      ['--vpn', 'vpn/wg-0', '--backend', 'web/web-1', '--client', 'fd00::1'],
      /^kubectl hoptrace: CLI_USAGE: --client: 'fd00::1' is not an IPv4 address/,
    ],
    [
      ['--vpn', 'Vpn/wg-0', '--backend', 'web/web-1'],
      /^kubectl hoptrace: CLI_BAD_POINT: --vpn: 'Vpn\/wg-0': 'Vpn' is not a namespace name/,
    ],
    [
      ['--vpn', 'a', '--backend', 'b', '--interface', 'eth0'],
      /^kubectl hoptrace: CLI_USAGE: kubectl hoptrace doctor: unknown flag '--interface'/,
    ],
  ];
  await usageErrors(t, s, 'doctor', cases);
  t.notOk(
    s.fake.requests.some((q) => q.includes('/namespaces/')),
    'a usage error reaches no API server (the collector reads nodes and pods on its own)',
  );
  const gone = await s.run(['doctor', ...kc(s), '--vpn', 'vpn/wg-9', '--backend', 'web/web-1']);
  t.equal(gone.code, 1);
  t.match(gone.err[0], /K8S_POD_NOT_FOUND: vpn\/wg-9: no pod vpn\/wg-9/);
  const pending = await s.run([
    'doctor',
    ...kc(s),
    '--vpn',
    'vpn/wg-0',
    '--backend',
    'web/pending-0',
  ]);
  t.equal(pending.code, 1);
  t.match(
    pending.err[0],
    /K8S_POD_NO_IP: web\/pending-0: pod web\/pending-0 has no IP \(Pending\)/,
  );
});

void t.test(
  'repro: probes, the deletion through the API, the replacement, the bundle',
  async (t) => {
    const s = await startKubeScene(t);
    const hub = s.hub;
    if (hub === undefined) throw new Error('the scene has no FakeHub');
    // The VPN StatefulSet's pod as the API server lists it (labels, uid, controller).
    s.fake.pods = [
      ...s.fake.pods.filter((p) => p.metadata?.name !== 'wg-0'),
      wgPod('wg-0', 'uid-wg-0', { ip: '10.244.1.10' }),
    ];
    s.fake.workloads.set('statefulsets/vpn/wg', { app: 'wg' });
    // These agents retain no frames and say so at once (a real agent's answer once its retention
    // is gone), so the repro's bundle is written without waiting out the frames' timeout.
    const before = hub.onSend;
    hub.onSend = (agentId, cmd) => {
      before?.(agentId, cmd);
      if (cmd.kind !== 'framesRequest') return;
      const q = cmd.framesRequest;
      setImmediate(() => {
        hub.reply({
          kind: 'framesReply',
          agentId,
          report: {
            requestId: q.requestId,
            captureId: q.captureId,
            point: q.point,
            linkType: null,
            snaplen: 0,
            records: [],
            missing: [],
            retained: 0,
            retentionDropped: 0,
            errorCode: 'RETENTION_GONE',
            message: 'this simulated agent retains no frames',
          },
        });
      });
    };
    // The StatefulSet controller and the CNI: a new wg-0 (new uid, new IP) in a new namespace.
    s.fake.onDelete = (old) => {
      s.fake.pods = [
        ...s.fake.pods.filter((x) => x !== old),
        wgPod('wg-0', 'uid-wg-0-b', { ip: '10.244.1.11' }),
      ];
      hub.list
        .find((a) => a.agentId === 'agent-vpn')
        ?.hello.namespaces.push({
          path: '/run/netns/vpn-b',
          inode: 3,
          addresses: ['10.244.1.11'],
          interfaces: ['tun0', 'eth0'],
        });
    };
    const seen: { path: string; port: number }[] = [];
    const backend = createServer((req, res) => {
      seen.push({ path: req.url ?? '', port: req.socket.remotePort ?? 0 });
      res.end('ok');
    });
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          backend.closeAllConnections();
          backend.close(() => {
            resolve();
          });
        }),
    );
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}/probe`;
    const r = await s.run([
      'repro',
      ...kc(s),
      '--vpn-workload',
      'vpn/sts/wg',
      '--decap-iface',
      'tun0',
      '--egress-iface',
      'eth0',
      '--backend',
      'web/web-1:eth0',
      '--client',
      '127.0.0.1',
      '--url',
      url,
      '--delete-after',
      '2',
      '--count',
      '4',
      '--interval',
      '30ms',
    ]);
    t.equal(r.code, 0, r.err.join('\n'));
    const text = r.out.join('\n');
    t.match(
      r.out[0],
      /^repro (r-[a-z0-9-]+): attached to vpn\/wg-0 \(10\.244\.1\.10\) on vpn-node/,
    );
    const id = /^repro (r-[a-z0-9-]+):/.exec(r.out[0] ?? '')?.[1] ?? '';
    t.match(text, /after probe 2: pod vpn\/wg-0/);
    t.match(text, /^summary: /m);
    // The selector read from the StatefulSet, the pod deleted through the API server, the
    // collector reached through the collector pod's port-forward.
    t.ok(s.fake.requests.includes('GET /apis/apps/v1/namespaces/vpn/statefulsets/wg'));
    t.ok(s.fake.requests.includes('DELETE /api/v1/namespaces/vpn/pods/wg-0'));
    t.ok(
      s.fake.requests.some((q) =>
        q.startsWith(`GET /api/v1/namespaces/hoptrace/pods/${COLLECTOR_POD}/portforward`),
      ),
    );
    t.equal(seen.length, 4, 'one request per probe reached the backend');
    t.ok(seen.every((x) => /^\/probe\/hoptrace-probe-r[0-9a-f]{6}n0[1-4]$/.test(x.path)));
    // Who was asked to capture what: the backend by the IP and node the API server gave for
    // web/web-1, the VPN pod's two points in its first namespace, then in the replacement's.
    const armed = hub.sent.flatMap((x) =>
      x.cmd.kind === 'capture'
        ? [`${x.agentId} ${x.cmd.capture.point} ${x.cmd.capture.target}`]
        : [],
    );
    t.match(armed, [
      'agent-backend backend 10.244.2.5',
      /^agent-vpn decap \/run\/netns\/vpn$/,
      /^agent-vpn egress \/run\/netns\/vpn$/,
    ]);
    t.ok(
      armed.some((a) => a === 'agent-vpn decap /run/netns/vpn-b'),
      `decap re-armed in the replacement's namespace (${armed.join('; ')})`,
    );
    // The bundle, brought home into ./hoptrace-<id>/.
    const dir = join(s.dir, `hoptrace-${id}`);
    t.match(text, new RegExp(`^bundle: ${dir.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}/ \\(`, 'm'));
    for (const f of ['report.md', 'report.json', 'report.html', 'timeline.svg', 'inventory.json'])
      t.ok(existsSync(join(dir, f)), f);
    t.ok(
      existsSync(join(dir, 'evidence.pcapng')) || /not in it: evidence\.pcapng/.test(text),
      'evidence.pcapng downloaded, or said missing',
    );
    const json = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as {
      id: string;
      attachments: { pod: { name: string; ip: string } }[];
      timeline: { probeId: string }[];
    };
    t.equal(json.id, id);
    t.same(
      json.attachments.map((a) => a.pod.ip),
      ['10.244.1.10', '10.244.1.11'],
    );
    t.equal(json.timeline.length, 4);
    t.match(readFileSync(join(dir, 'report.html'), 'utf8'), /<svg/);
  },
);

void t.test('repro: bad flags are one coded line, and reach no API server', async (t) => {
  const s = await startKubeScene(t);
  const base = [
    '--decap-iface',
    'wg0',
    '--egress-iface',
    'eth0',
    '--backend',
    'web/web-1:eth0',
    '--client',
    '10.90.0.42',
    '--url',
    'http://10.96.0.10/',
  ];
  const cases: [string[], RegExp][] = [
    [
      ['--vpn-workload', 'vpn/sts/wg'],
      /^kubectl hoptrace: CLI_USAGE: kubectl hoptrace repro: give --vpn-workload, --backend, --decap-iface, --egress-iface, --client, --url \(missing: --backend, --decap-iface, --egress-iface, --client, --url\)/,
    ],
    [
      ['--vpn-workload', 'vpn/wg-0', ...base],
      /^kubectl hoptrace: CLI_USAGE: --vpn-workload: 'vpn\/wg-0': is not a workload: the repro deletes a pod/,
    ],
    [
      ['--vpn-workload', 'app=wg', ...base],
      /^kubectl hoptrace: CLI_USAGE: --vpn-workload: 'app=wg': a label selector needs its namespace/,
    ],
    [
      ['--vpn-workload', 'vpn/sts/wg', ...base, '--client', 'me'],
      /^kubectl hoptrace: CLI_USAGE: --client: 'me' is not an IP address/,
    ],
    [
      ['--vpn-workload', 'vpn/sts/wg', ...base, '--delete-after', '20'],
      /^kubectl hoptrace: CLI_USAGE: --delete-after: --delete-after must be below --count/,
    ],
    [
      [
        '--vpn-workload',
        'vpn/sts/wg',
        ...base.slice(0, 4),
        '--backend',
        'web/web-1',
        ...base.slice(6),
      ],
      /^kubectl hoptrace: CLI_BAD_POINT: --backend: 'web\/web-1': no :IFACE/,
    ],
  ];
  await usageErrors(t, s, 'repro', cases);
  t.notOk(
    s.fake.requests.some((q) => q.includes('/namespaces/')),
    'a usage error reaches no API server',
  );
  const none = await s.run(['repro', ...kc(s), '--vpn-workload', 'vpn/sts/nope', ...base]);
  t.equal(none.code, 1);
  t.match(none.err[0], /K8S_POD_NOT_FOUND: vpn\/sts\/nope: no statefulset vpn\/nope/);
});

void t.test('repro: --vpn-workload as kubectl users write it', (t) => {
  t.same(parseVpnWorkload('vpn/sts/wg', 'default'), {
    namespace: 'vpn',
    ref: { kind: 'statefulset', name: 'wg' },
  });
  t.same(parseVpnWorkload('deploy/ovpn', 'vpn'), {
    namespace: 'vpn',
    ref: { kind: 'deployment', name: 'ovpn' },
  });
  t.same(parseVpnWorkload('vpn/app=wg,tier=edge', 'default'), {
    namespace: 'vpn',
    ref: { selector: 'app=wg,tier=edge' },
  });
  t.throws(() => parseVpnWorkload('wg-0', 'vpn'), { code: 'CLI_USAGE' });
  t.throws(() => parseVpnWorkload('10.244.1.10', 'vpn'), { code: 'CLI_USAGE' });
  t.throws(() => parseVpnWorkload('Vpn/sts/wg', 'vpn'), { code: 'CLI_USAGE' });
  t.end();
});

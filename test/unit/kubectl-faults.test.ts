/**
 * `kubectl hoptrace` against what goes wrong outside it: a collector pod that answers with another
 * shape, or never answers; an API server that accepts and stays silent; kubeconfig mistakes; bad
 * flags that must be refused before any request. Each ends in one coded line and the process
 * exits — spawned children are given a deadline, so a hang fails the test instead of holding it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex } from 'node:stream';
import t from 'tap';
import type * as K8s from '@kubernetes/client-node';
import { CollectorClient } from '../../cli/collector-client';
import { AGENT_LIST } from '../../cli/collector-replies';
import { connectCluster, type Cluster } from '../../cli/kubectl/cluster';
import { runKubectl } from '../../cli/kubectl/run';
import { loadClientLibrary } from '../../collector';
import { streamFetch } from '../../cli/kubectl/stream-fetch';
import { pod, startFakeApiServer } from './k8s-fixtures';
import { hasSleep, kubeconfig, silentListener, spawnPlugin } from './kubectl-spawn';

const COLLECTOR = {
  metadata: { name: 'hoptrace-collector-x' },
  spec: {
    nodeName: 'n1',
    containers: [
      {
        name: 'c',
        image: 'img',
        args: ['collector'],
        ports: [{ name: 'api', containerPort: 7070 }],
      },
    ],
  },
  status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
} as unknown as K8s.V1Pod;
const NODE = { metadata: { name: 'n1' } } as unknown as K8s.V1Node;

/** A port-forward to a fake collector: each request answered with `reply(path)`, or never (null). */
function httpDuplex(reply: (path: string) => string | null): Duplex {
  let buf = '';
  const d = new Duplex({
    read() {
      // pushed when answered
    },
    write(chunk: Buffer, _enc, cb) {
      buf += chunk.toString();
      const m = /^(\w+) (\S+)/.exec(buf);
      if (m !== null && buf.includes('\r\n\r\n')) {
        const r = reply(m[2] ?? '');
        if (r !== null) {
          d.push(
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(r)}\r\nconnection: close\r\n\r\n${r}`,
          );
          d.push(null);
        }
        buf = '';
      }
      cb();
    },
  });
  return d;
}

/** A cluster with a ready collector pod whose port-forward answers as `reply` says. */
function fakeCluster(
  reply: (path: string) => string | null,
  requestTimeoutMs = 30_000,
): Cluster & {
  forwards: Duplex[];
} {
  const forwards: Duplex[] = [];
  return {
    server: 'https://fake',
    context: 'fake',
    defaultNamespace: 'default',
    listPods: (_ns, sel) => Promise.resolve(sel.includes('collector') ? [COLLECTOR] : []),
    readPod: () => Promise.resolve(null),
    listNodes: () => Promise.resolve([NODE]),
    readSecret: () =>
      Promise.resolve(
        new Map([
          ['token', Buffer.from('t')],
          ['tls.crt', Buffer.from('x')],
        ]),
      ),
    readWorkloadSelector: () => Promise.resolve(null),
    portForward: () => {
      const d = httpDuplex(reply);
      forwards.push(d);
      return d;
    },
    apply: () => Promise.resolve(),
    remove: () => Promise.resolve(true),
    requestTimeoutMs,
    close: () => {
      for (const d of forwards) d.destroy();
    },
    forwards,
  };
}

async function run(argv: string[], cluster: Cluster) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runKubectl(argv, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: {},
    cwd: '/nonexistent',
    connect: () => Promise.resolve(cluster),
    pollMs: 20,
  });
  return { code, out, err };
}

const HEALTH = '{"ok":true,"collectorId":"c","agentsConnected":1}';

void t.test(
  'status: a reply of another shape is COLLECTOR_BAD_RESPONSE, not a TypeError',
  async (t) => {
    const cases: {
      name: string;
      agents: string;
      captures?: string;
      health?: string;
      want: RegExp;
    }[] = [
      {
        name: '{} for /v1/agents',
        agents: '{}',
        want: /GET \S+\/v1\/agents: not the agent list .*: agents is missing/,
      },
      { name: 'agents not a list', agents: '{"agents":{}}', want: /agents is not a list/ },
      {
        name: 'an agent without a node',
        agents: '{"agents":[{"connected":true}]}',
        want: /agents\[0\]\.node is missing/,
      },
      {
        name: 'an agent whose identity is a string',
        agents: '{"agents":[{"node":"n1","connected":true,"identity":"x"}]}',
        want: /agents\[0\]\.identity is not an object/,
      },
      {
        name: '{} for /v1/captures',
        agents: '{"agents":[]}',
        captures: '{}',
        want: /GET \S+\/v1\/captures: not the capture list .*: captures is missing/,
      },
      {
        name: 'a capture without points',
        agents: '{"agents":[]}',
        captures: '{"captures":[{"id":"c","state":"armed","createdAt":"x"}]}',
        want: /captures\[0\]\.points is missing/,
      },
      {
        name: 'healthz null',
        agents: '{"agents":[]}',
        health: 'null',
        want: /GET \/healthz answered HTTP 200, not a JSON object/,
      },
      {
        name: 'healthz not JSON',
        agents: '{"agents":[]}',
        health: 'hello',
        want: /GET \/healthz answered HTTP 200, not JSON/,
      },
    ];
    for (const c of cases) {
      const r = await run(
        ['status'],
        fakeCluster((path) =>
          path === '/healthz'
            ? (c.health ?? HEALTH)
            : path === '/v1/agents'
              ? c.agents
              : (c.captures ?? '{"captures":[]}'),
        ),
      );
      t.equal(r.code, 1, `${c.name}: exit 1 (an error), not 70`);
      t.match(r.err.join('\n'), /^kubectl hoptrace: COLLECTOR_BAD_RESPONSE: /, c.name);
      t.match(r.err.join('\n'), c.want, c.name);
      t.notMatch(r.err.join('\n'), /TypeError|internal error|\n\s+at /, `${c.name}: no stack`);
    }
    // The shape it reads, with optional fields absent, is fine.
    const ok = await run(
      ['status'],
      fakeCluster((path) =>
        path === '/healthz'
          ? '{}'
          : path === '/v1/agents'
            ? '{"agents":[{"node":"n1","connected":true}]}'
            : '{"captures":[{"id":"c-1","state":"armed","createdAt":"x","points":[{"name":"decap"}]}]}',
      ),
    );
    t.equal(ok.code, 0, ok.err.join('\n'));
    t.match(ok.out.join('\n'), /captures running: 1/);
  },
);

void t.test(
  'status: finished repros the collector holds in memory only are said; a count that is not one is not',
  async (t) => {
    const status = (health: string) =>
      run(
        ['status'],
        fakeCluster((path) =>
          path === '/healthz'
            ? health
            : path === '/v1/agents'
              ? '{"agents":[{"node":"n1","connected":true}]}'
              : '{"captures":[]}',
        ),
      );
    const pinned = await status('{"ok":true,"agentsConnected":1,"reprosPinned":2}');
    t.equal(pinned.code, 0, pinned.err.join('\n'));
    t.match(
      pinned.out.join('\n'),
      /^collector: 2 finished repros are held in memory only: their bundle or view is not in the collector's data directory \(writing it there failed: STORE_IO in its log\), and what is not there is gone when the collector stops$/m,
    );
    for (const h of [
      '{"reprosPinned":0}',
      '{"reprosPinned":"2"}',
      '{"reprosPinned":-1}',
      '{"reprosPinned":1.5}',
      '{}',
    ]) {
      const r = await status(h);
      t.equal(r.code, 0, `${h}: ${r.err.join('\n')}`);
      t.notMatch(r.out.join('\n'), /held in memory only/, `${h}: nothing said`);
    }
  },
);

void t.test(
  'capture, doctor, repro: a reply of another shape is COLLECTOR_BAD_RESPONSE, not a TypeError',
  async (t) => {
    const id = 'c-mb2x8k1a-0123abcd';
    const view = {
      id,
      state: 'resolved',
      points: [],
      progress: { requestSeen: true, layer: 'preserved' },
      finalReason: 'settled',
      reportUrls: {
        markdown: `/v1/captures/${id}/report.md`,
        json: `/v1/captures/${id}/report.json`,
      },
    };
    const capture = ['capture', '--decap', '10.244.1.10:tun0', '--backend', '10.244.2.5:eth0'];
    const cases: { name: string; argv: string[]; reply: (path: string) => string; want: RegExp }[] =
      [
        {
          name: 'capture: {} for POST /v1/captures',
          argv: capture,
          reply: () => '{}',
          want: /POST \S+\/v1\/captures: not a capture view .*: id is missing/,
        },
        {
          name: 'capture: a final view without reportUrls',
          argv: capture,
          reply: () => JSON.stringify({ ...view, reportUrls: undefined }),
          want: /reportUrls is missing/,
        },
        {
          name: 'capture: report.json without its verdict',
          argv: capture,
          reply: (path) => (path.endsWith('/report.json') ? '{"points":[]}' : JSON.stringify(view)),
          want: /GET \S+\/report\.json: not an analysis .*: verdict is missing/,
        },
        {
          name: 'doctor: [] for POST /v1/doctor',
          argv: ['doctor', '--vpn', '10.244.1.10', '--backend', '10.244.2.5'],
          reply: () => '[]',
          want: /POST \S+\/v1\/doctor: not a doctor report .*: the top level is not an object/,
        },
        {
          name: 'repro: {"id": 5} for POST /v1/repros',
          argv: [
            'repro',
            '--vpn-workload',
            'vpn/app=wg',
            '--backend',
            '10.244.2.5:eth0',
            '--decap-iface',
            'wg0',
            '--egress-iface',
            'eth0',
            '--client',
            '127.0.0.1',
            '--url',
            'http://127.0.0.1:1/probe',
          ],
          reply: () => '{"id":5}',
          want: /POST \S+\/v1\/repros: not a repro view .*: id is not a repro id/,
        },
      ];
    for (const c of cases) {
      const r = await run(
        c.argv,
        fakeCluster((path) => (path === '/healthz' ? HEALTH : c.reply(path))),
      );
      t.equal(r.code, 1, `${c.name}: exit 1 (an error), not 70`);
      t.match(r.err.join('\n'), /^kubectl hoptrace: COLLECTOR_BAD_RESPONSE: /m, c.name);
      t.match(r.err.join('\n'), c.want, c.name);
      t.notMatch(r.err.join('\n'), /TypeError|internal error|\n\s+at /, `${c.name}: no stack`);
    }
  },
);

void t.test('capture: every flag is checked before the API server is asked', async (t) => {
  const base = ['capture', '--decap', 'vpn/wg-0:tun0', '--backend', 'web/web-1:eth0'];
  const cases: [string[], RegExp][] = [
    [['--client', '999.1.1.1'], /CLI_USAGE: --client: '999\.1\.1\.1' is not an IP address/],
    [['--dst', '10.96.0.10:70000'], /CLI_USAGE: --dst: '10\.96\.0\.10:70000' is not IP or IP:PORT/],
    [['--timeout', '100d'], /CLI_USAGE: --timeout: '100d' is not a duration/],
    [['--timeout', '2h'], /CLI_USAGE: --timeout: .*is not a duration/],
    [['--timeout', '61m'], /CLI_USAGE: --timeout: '61m' is out of range: from 100ms to 60m/],
    [['--timeout', '10ms'], /CLI_USAGE: --timeout: '10ms' is out of range/],
    [['--settle', 'soon'], /CLI_USAGE: --settle: 'soon' is not a duration/],
    [['--filter', 'x'.repeat(4097)], /CLI_USAGE: --filter: the filter is longer than 4096/],
    [['--evidence-wait', '1d'], /CLI_USAGE: --evidence-wait: '1d' is not a duration/],
    [['--doctor-tunnel-range', '10.90.0.0/99'], /CLI_USAGE: --doctor-tunnel-range: /],
    [['--out', ''], /CLI_USAGE: .*--out: the path is empty/],
    [['--egress', 'vpn/wg-0'], /CLI_BAD_POINT: --egress: 'vpn\/wg-0': no :IFACE/],
    [['--egress', 'a/b/c/d:eth0'], /CLI_BAD_POINT: --egress: /],
  ];
  for (const [extra, want] of cases) {
    let asked = 0;
    const code = await runKubectl([...base, ...extra], {
      out: () => undefined,
      err: (l) => {
        t.match(l, want, extra.join(' ').slice(0, 40));
      },
      env: {},
      cwd: '/nonexistent',
      connect: () => {
        asked++;
        return Promise.reject(new Error('the API server was asked'));
      },
    });
    t.equal(code, 2, `${extra.join(' ').slice(0, 40)}: exit 2`);
    t.equal(asked, 0, `${extra.join(' ').slice(0, 40)}: no API server asked`);
  }
});

// ---- Nothing hangs: the process ends with the error (spawned, with a deadline of its own) ----

/** `kubectl hoptrace ARGV…` in this process with the real cluster connection and `env`. */
async function runReal(argv: string[], env: NodeJS.ProcessEnv) {
  const err: string[] = [];
  const code = await runKubectl(argv, {
    out: () => undefined,
    err: (l) => err.push(l),
    env,
    cwd: '/nonexistent',
    connect: (flags) => connectCluster(flags, env),
  });
  return { code, stderr: err.join('\n') };
}

void t.test(
  'an API server that accepts and never answers: the error, then the process exits',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kfaults-'));
    const silent = await silentListener(t);
    const server = `https://127.0.0.1:${silent.port}`;
    const cases = [
      ['https', kubeconfig(dir, 'silent', { server }, { token: 'abc' })],
      [
        'insecure-skip-tls-verify',
        kubeconfig(dir, 'insecure', { server, 'insecure-skip-tls-verify': true }, { token: 'abc' }),
      ],
      [
        'plain http',
        kubeconfig(
          dir,
          'http',
          { server: `http://127.0.0.1:${silent.port}`, 'insecure-skip-tls-verify': true },
          { token: 'abc' },
        ),
      ],
    ] as const;
    for (const [name, file] of cases) {
      const r = await spawnPlugin(['status', '--kubeconfig', file, '--request-timeout', '1s'], {});
      t.notOk(r.hung, `${name}: the process exits by itself (${r.ms} ms)`);
      t.equal(r.code, 1, name);
      t.match(
        r.stderr,
        /^kubectl hoptrace: K8S_API_UNREACHABLE: .*list pods in hoptrace .*no answer within 1 s/,
        name,
      );
    }
  },
);

void t.test(
  'an exec credential plugin that never finishes is killed; K8S_CONFIG',
  { skip: !hasSleep },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kfaults-'));
    const file = kubeconfig(
      dir,
      'exechang',
      { server: 'https://127.0.0.1:1' },
      {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1beta1',
          command: 'sleep',
          args: ['317'],
        },
      },
    );
    const r = await spawnPlugin(['status', '--kubeconfig', file, '--request-timeout', '1s'], {});
    t.notOk(r.hung, `the process exits by itself (${r.ms} ms)`);
    t.equal(r.code, 1);
    t.match(
      r.stderr,
      /^kubectl hoptrace: K8S_CONFIG: --kubeconfig .*: users\[u\]\.exec \(sleep 317\): did not finish within 1 s \(killed\)/,
    );
    const left = spawnSync('pgrep', ['-f', 'sleep 317'], { encoding: 'utf8' });
    t.equal(left.stdout.trim(), '', 'the plugin is not left running');
  },
);

/** A fake API server whose collector pod's port-forward leads to `port` on loopback. */
async function clusterWithCollectorAt(
  t: { teardown(fn: () => unknown): void },
  port: number,
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kfaults-'));
  const fake = await startFakeApiServer(dir);
  t.teardown(() => fake.close());
  const p = pod('hoptrace', 'hoptrace-collector-0', {
    labels: { 'app.kubernetes.io/name': 'hoptrace', 'app.kubernetes.io/component': 'collector' },
  });
  p.spec = { containers: [{ name: 'c', ports: [{ name: 'api', containerPort: 7070 }] }] } as never;
  (p.status as { conditions?: unknown }).conditions = [{ type: 'Ready', status: 'True' }];
  fake.pods = [p];
  fake.secrets.set('hoptrace/hoptrace-token', { token: 'tok' });
  fake.forwards.set('hoptrace/hoptrace-collector-0:7070', { host: '127.0.0.1', port });
  return fake.kubeconfig;
}

void t.test(
  'a collector that does not answer through the port-forward: the error, then exit',
  async (t) => {
    const silent = await silentListener(t);
    const kc = await clusterWithCollectorAt(t, silent.port);
    const r = await spawnPlugin(['status', '--kubeconfig', kc, '--request-timeout', '1s'], {});
    t.notOk(r.hung, `the process exits by itself (${r.ms} ms)`);
    t.equal(r.code, 1);
    t.match(
      r.stderr,
      /^kubectl hoptrace: KUBECTL_PORT_FORWARD: .*GET \/healthz through the port-forward failed \(no reply within 1 s\)/,
    );

    // It answers /healthz, then never /v1/agents.
    const half: Server = createHttpServer((req, res) => {
      if (req.url === '/healthz') res.end('{"ok":true,"collectorId":"c","agentsConnected":0}');
    });
    await new Promise<void>((resolve) => half.listen(0, '127.0.0.1', resolve));
    t.teardown(() => {
      half.closeAllConnections();
      half.close();
    });
    const kc2 = await clusterWithCollectorAt(t, (half.address() as AddressInfo).port);
    const r2 = await spawnPlugin(['status', '--kubeconfig', kc2, '--request-timeout', '1s'], {});
    t.notOk(r2.hung, `the process exits by itself (${r2.ms} ms)`);
    t.equal(r2.code, 1);
    t.match(
      r2.stderr,
      /^kubectl hoptrace: COLLECTOR_UNREACHABLE: .*GET .*\/v1\/agents failed \(no reply within 1 s\)/,
    );
  },
);

void t.test('install: --timeout ends the wait even inside a request that hangs', async (t) => {
  const cluster = fakeCluster(() => null); // every collector request hangs
  // The Kubernetes client library is loaded first: under tap's module hooks its first load alone
  // took 7–15 s on a loaded CI machine, which is not the wait --timeout bounds.
  await loadClientLibrary();
  const started = Date.now();
  const r = await Promise.race([
    run(
      [
        'install',
        '--image',
        'x/hoptrace:1',
        '--timeout',
        '1s',
        '--tls-dir',
        mkdtempSync(join(tmpdir(), 'hoptrace-tls-')),
      ],
      cluster,
    ),
    new Promise<null>((resolve) => {
      setTimeout(() => {
        resolve(null);
      }, 15_000).unref();
    }),
  ]);
  t.not(r, null, 'install returned');
  t.equal(r?.code, 1);
  t.match(r?.err.join('\n') ?? '', /KUBECTL_INSTALL_FAILED: .*not ready within 1s/);
  t.ok(
    Date.now() - started < 14_000,
    `within the timeout, not a request's (${Date.now() - started} ms)`,
  );
  t.ok(
    cluster.forwards.every((d) => d.destroyed),
    'the hanging forwards were destroyed',
  );
});

void t.test('a reply longer than the cap is cut off: COLLECTOR_BAD_RESPONSE', async (t) => {
  // Over node's fetch (hoptrace capture --collector URL): an endless body.
  const endless: Server = createHttpServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const more = (): void => {
      while (res.write(chunk));
      res.once('drain', more);
    };
    more();
  });
  await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    endless.closeAllConnections();
    endless.close();
  });
  const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`;
  const client = new CollectorClient(url, 't', fetch, {
    timeoutMs: 10_000,
    maxReplyBytes: 1 << 20,
  });
  await t.rejects(client.json('GET', '/v1/agents', AGENT_LIST), {
    code: 'COLLECTOR_BAD_RESPONSE',
    message: /longer than 1048576 bytes/,
  });
  // Through a port-forward (stream-fetch): the same, and the connection is destroyed.
  let conn: Duplex | undefined;
  const big = streamFetch(
    () => {
      conn = new Duplex({
        read() {
          // answered on write
        },
        write(_c, _e, cb) {
          this.push('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n');
          for (let i = 0; i < 40; i++) this.push(Buffer.alloc(64 * 1024, 0x20));
          cb();
        },
      });
      return conn;
    },
    { timeoutMs: 10_000, maxReplyBytes: 1 << 20 },
  );
  const viaForward = new CollectorClient('http://c', 't', big, {
    timeoutMs: 10_000,
    maxReplyBytes: 1 << 20,
  });
  await t.rejects(viaForward.json('GET', '/v1/agents', AGENT_LIST), {
    code: 'COLLECTOR_BAD_RESPONSE',
  });
  t.ok(conn?.destroyed, 'the forward was destroyed');
  // A declared length over the cap is refused before its body.
  const declared = streamFetch(
    () =>
      new Duplex({
        read() {
          // answered on write
        },
        write(_c, _e, cb) {
          this.push('HTTP/1.1 200 OK\r\ncontent-length: 999999999\r\n\r\n{');
          cb();
        },
      }),
    { timeoutMs: 10_000, maxReplyBytes: 1 << 20 },
  );
  await t.rejects(
    new CollectorClient('http://c', 't', declared).json('GET', '/v1/agents', AGENT_LIST),
    {
      code: 'COLLECTOR_BAD_RESPONSE',
    },
  );
});

void t.test(
  'through a port-forward, a status no fetch Response carries is COLLECTOR_BAD_RESPONSE',
  async (t) => {
    // 999: any three digits parse; 205: a status that may not have a body, sent with one.
    for (const [status, want] of [
      [999, /the reply to GET \/v1\/agents has HTTP status 999/],
      [205, /GET \/v1\/agents did not return JSON/],
    ] as const) {
      const odd = streamFetch(
        () =>
          new Duplex({
            read() {
              // answered on write
            },
            write(_c, _e, cb) {
              this.push(`HTTP/1.1 ${status} Odd\r\ncontent-length: 2\r\n\r\n{}`);
              this.push(null);
              cb();
            },
          }),
        { timeoutMs: 10_000, maxReplyBytes: 1 << 20 },
      );
      await t.rejects(
        new CollectorClient('http://c', 't', odd).json('GET', '/v1/agents', AGENT_LIST),
        {
          code: 'COLLECTOR_BAD_RESPONSE',
          message: want,
        },
      );
    }
  },
);

void t.test(
  'hoptrace capture --collector URL: a silent collector is aborted at the deadline',
  async (t) => {
    const silent = await silentListener(t);
    const client = new CollectorClient(`http://127.0.0.1:${silent.port}`, 't', fetch, {
      timeoutMs: 500,
      maxReplyBytes: 1 << 20,
    });
    const started = Date.now();
    await t.rejects(client.json('GET', '/v1/agents', AGENT_LIST), {
      code: 'COLLECTOR_UNREACHABLE',
      message: /no reply within 0\.5 s/,
    });
    t.ok(Date.now() - started < 5000, 'at its deadline');
  },
);

// ---- Configuration mistakes are K8S_CONFIG naming the field and the file ----

void t.test(
  'kubeconfig mistakes: K8S_CONFIG naming the field and file, not UNREACHABLE',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kfaults-'));
    const server = 'https://127.0.0.1:1';
    const exec = (command: string, args: string[] = []) => ({
      exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command, args },
    });
    const cases: [string, string, RegExp][] = [
      [
        'missing certificate-authority file',
        kubeconfig(
          dir,
          'ca',
          { server, 'certificate-authority': '/nonexistent/ca.crt' },
          { token: 'a' },
        ),
        /K8S_CONFIG: --kubeconfig .*ca\.yaml: clusters\[c\]\.certificate-authority: cannot read \/nonexistent\/ca\.crt \(ENOENT\)/,
      ],
      [
        'missing client-certificate file',
        kubeconfig(
          dir,
          'cert',
          { server },
          { 'client-certificate': '/nonexistent/c.crt', 'client-key': '/nonexistent/c.key' },
        ),
        /K8S_CONFIG: .*users\[u\]\.client-certificate: cannot read \/nonexistent\/c\.crt \(ENOENT\)/,
      ],
      [
        'certificate-authority-data that is not a certificate',
        kubeconfig(
          dir,
          'cadata',
          { server, 'certificate-authority-data': 'notbase64@@' },
          { token: 'a' },
        ),
        /K8S_CONFIG: .*clusters\[c\]\.certificate-authority-data: is not base64 of a PEM certificate/,
      ],
      [
        'missing exec plugin',
        kubeconfig(dir, 'execmissing', { server }, exec('/nonexistent/plugin')),
        /K8S_CONFIG: .*users\[u\]\.exec\.command: '\/nonexistent\/plugin' is not an executable file/,
      ],
      [
        'exec plugin not on PATH',
        kubeconfig(dir, 'execpath', { server }, exec('hoptrace-no-such-plugin')),
        /K8S_CONFIG: .*'hoptrace-no-such-plugin' is not an executable on PATH/,
      ],
      [
        'exec plugin printing non-JSON',
        kubeconfig(dir, 'execbadout', { server }, exec('sh', ['-c', 'echo notjson'])),
        /K8S_CONFIG: .*users\[u\]\.exec \(sh -c echo notjson\): printed something that is not JSON, not an ExecCredential: 'notjson'/,
      ],
      [
        'exec plugin failing',
        kubeconfig(dir, 'execfail', { server }, exec('sh', ['-c', 'echo no login >&2; exit 3'])),
        /K8S_CONFIG: .*users\[u\]\.exec \(sh -c .*\): exited with code 3: no login/,
      ],
      [
        'server: not a url',
        kubeconfig(dir, 'badurl', { server: 'not a url' }, { token: 'a' }),
        /K8S_CONFIG: .*clusters\[c\]\.server: 'not a url' is not an https:\/\/ URL/,
      ],
    ];
    for (const [name, file, want] of cases) {
      const r = await runReal(['status', '--kubeconfig', file, '--request-timeout', '5s'], {});
      t.equal(r.code, 1, name);
      t.match(r.stderr, want, name);
      t.notMatch(
        r.stderr,
        /K8S_API_UNREACHABLE|check the cluster is up/,
        `${name}: not reported as unreachable`,
      );
    }
    // In-cluster without the service account's files (this is not a pod).
    const home = mkdtempSync(join(tmpdir(), 'hoptrace-home-'));
    const pod = await runReal(['status'], {
      HOME: home,
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: '443',
    });
    t.equal(pod.code, 1);
    t.match(
      pod.stderr,
      /K8S_CONFIG: in-cluster: the service account token: cannot read \/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token \(ENOENT\) \(KUBERNETES_SERVICE_HOST is set/,
    );
  },
);

void t.test(
  '$KUBECONFIG: a missing file anywhere in the list is skipped, as kubectl does',
  async (t) => {
    const silent = await silentListener(t);
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-kfaults-'));
    const ok = kubeconfig(
      dir,
      'ok',
      { server: `https://127.0.0.1:${silent.port}` },
      { token: 'a' },
    );
    const r = await runReal(['status', '--request-timeout', '1s'], {
      HOME: dir,
      KUBECONFIG: `/nonexistent.yaml:${ok}`,
    });
    t.equal(r.code, 1);
    t.match(
      r.stderr,
      /K8S_API_UNREACHABLE: https:\/\/127\.0\.0\.1:\d+ \(context ctx\)/,
      'ok.yaml was used',
    );
    const none = await runReal(['status'], {
      HOME: dir,
      KUBECONFIG: '/nonexistent.yaml:/nope.yaml',
    });
    t.match(none.stderr, /K8S_CONFIG: \$KUBECONFIG: none of the files of \$KUBECONFIG exists/);
  },
);

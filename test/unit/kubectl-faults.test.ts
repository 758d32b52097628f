/**
 * `kubectl hoptrace` against what goes wrong outside it: a collector pod that answers with another
 * shape, or never answers; an API server that accepts and stays silent; kubeconfig mistakes; bad
 * flags that must be refused before any request. Each ends in one coded line and the process
 * exits — spawned children are given a deadline, so a hang fails the test instead of holding it.
 */
import { Duplex } from 'node:stream';
import t from 'tap';
import type * as K8s from '@kubernetes/client-node';
import type { Cluster } from '../../cli/kubectl/cluster';
import { runKubectl } from '../../cli/kubectl/run';

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
function fakeCluster(reply: (path: string) => string | null): Cluster & {
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
        want: /GET \/v1\/agents: the reply has no 'agents' list/,
      },
      { name: 'agents not a list', agents: '{"agents":{}}', want: /no 'agents' list/ },
      {
        name: 'an agent without a node',
        agents: '{"agents":[{"connected":true}]}',
        want: /agents\[0\] is not an agent/,
      },
      {
        name: 'an agent whose identity is a string',
        agents: '{"agents":[{"node":"n1","connected":true,"identity":"x"}]}',
        want: /agents\[0\] is not an agent/,
      },
      {
        name: '{} for /v1/captures',
        agents: '{"agents":[]}',
        captures: '{}',
        want: /GET \/v1\/captures: the reply has no 'captures' list/,
      },
      {
        name: 'a capture without points',
        agents: '{"agents":[]}',
        captures: '{"captures":[{"id":"c","state":"armed","createdAt":"x"}]}',
        want: /captures\[0\] is not a capture/,
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

// Socket-free checks of the lab's pure parts: the proxy's request rewrite, the expectation
// comparison, the scenario table's shape.
import t from 'tap';
import { rewriteRequestHead } from '../../lab/proxy';
import { compareWithExpectation } from '../../lab/run';
import { SCENARIOS } from '../../lab/scenarios';

void t.test('the proxy rewrites like nginx proxy_pass: HTTP/1.0, Host, Connection, XFF', (t) => {
  const head = [
    'GET /hoptrace-probe-abc123 HTTP/1.1',
    'Host: 10.244.2.9:8080',
    'User-Agent: curl/7.88.1',
    'Connection: keep-alive',
    'X-Forwarded-For: 203.0.113.7',
  ].join('\r\n');
  t.equal(
    rewriteRequestHead(head, '10.244.2.5:8080', '10.90.0.42'),
    [
      'GET /hoptrace-probe-abc123 HTTP/1.0',
      'Host: 10.244.2.5:8080',
      'Connection: close',
      'User-Agent: curl/7.88.1',
      'X-Forwarded-For: 203.0.113.7, 10.90.0.42',
      '',
      '',
    ].join('\r\n'),
  );
  t.equal(rewriteRequestHead('SSH-2.0-x', 'a:1', 'b'), null);
  t.end();
});

void t.test('compareWithExpectation names every difference', (t) => {
  const expect = {
    layer: 'kube-proxy',
    rewrittenBetween: ['egress', 'backend'] as [string, string],
    backendSrc: '10.244.2.1',
    curlOk: true,
    sportChanges: true,
  };
  const ok = compareWithExpectation(expect, {
    curl: { code: 0, httpCode: '200', body: '' },
    appObserved: { src: '10.244.2.1', sport: 40000 },
    analyzerError: null,
    verdict: {
      layer: 'kube-proxy',
      rewrittenBetween: ['egress', 'backend'],
      observed: {
        egress: { src: '10.90.0.42', sport: 50000, dst: '10.96.0.10', dport: 80 },
        backend: { src: '10.244.2.1', sport: 40000, dst: '10.244.2.5', dport: 8080 },
      },
      evidence: [],
      hint: '',
    },
  });
  t.same(ok, []);
  const bad = compareWithExpectation(expect, {
    curl: { code: 28, httpCode: null, body: '' },
    appObserved: null,
    analyzerError: null,
    verdict: {
      layer: 'preserved',
      rewrittenBetween: null,
      observed: { egress: { src: '10.90.0.42', sport: 1, dst: 'x', dport: 80 }, backend: null },
      evidence: [],
      hint: '',
    },
  });
  t.equal(bad.length, 6, bad.join('\n'));
  t.end();
});

void t.test('scenario names are unique and cover every layer', (t) => {
  const names = SCENARIOS.map((s) => s.name);
  t.equal(new Set(names).size, names.length);
  const layers = new Set(SCENARIOS.map((s) => s.expect.layer));
  for (const l of [
    'preserved',
    'vpn-pod',
    'cni-masquerade',
    'kube-proxy',
    'proxy',
    'no-return',
    'dropped',
  ]) {
    t.ok(layers.has(l), l);
  }
  t.ok(
    SCENARIOS.some((s) => s.decap === 'tun' && s.expect.layer === 'preserved'),
    'tun preserve',
  );
  t.ok(
    SCENARIOS.some((s) => s.decap === 'tun' && s.rules.length > 0),
    'tun NAT',
  );
  t.ok(
    SCENARIOS.some((s) => s.backendIface === 'any'),
    'backend on any',
  );
  t.end();
});

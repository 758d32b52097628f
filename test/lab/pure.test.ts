// Socket-free checks of the lab's pure parts: the proxy's request rewrite, the expectation
// comparison (the outer connection's finding too), the scenario table's shape, the inventories
// (dual-stack, through the VPN Service), the DNS messages of the DNS scenarios.
import t from 'tap';
import { encodeName, encodeQuery, encodeResponse, parseMessage } from '../../lab/dns-wire';
import { rewriteRequestHead } from '../../lab/proxy';
import { ADDR6 } from '../../lab/addresses';
import { compareWithExpectation, ipv6EndpointsWithoutBrackets } from '../../lab/run';
import { clientAddress, SCENARIOS } from '../../lab/scenarios';
import { labInventory } from '../../lab/topology';
import type { LabVerdict } from '../../lab/verdict';

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
    answered: true,
    sportChanges: true,
  };
  const ok = compareWithExpectation(expect, {
    probe: { request: 'http', answered: true, summary: 'curl: HTTP 200', code: 0, httpCode: '200' },
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
    probe: {
      request: 'http',
      answered: false,
      summary: 'curl failed (exit 28, no HTTP answer)',
      code: 28,
      httpCode: null,
    },
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

void t.test("compareWithExpectation checks the outer connection's source and class", (t) => {
  const expect = {
    layer: 'preserved',
    rewrittenBetween: null,
    backendSrc: '10.90.0.42',
    answered: true,
    outerSrc: '10.244.1.1',
    outerClass: 'node' as const,
  };
  const run = (outer?: LabVerdict['outer']): Parameters<typeof compareWithExpectation>[1] => ({
    probe: { request: 'http', answered: true, summary: 'curl: HTTP 200', code: 0, httpCode: '200' },
    appObserved: { src: '10.90.0.42', sport: 40000 },
    analyzerError: null,
    verdict: {
      layer: 'preserved',
      rewrittenBetween: null,
      observed: { backend: { src: '10.90.0.42', sport: 40000, dst: '10.244.2.5', dport: 8080 } },
      evidence: [],
      hint: '',
      ...(outer === undefined ? {} : { outer }),
    },
  });
  const outer = {
    point: 'egress',
    tunnel: 'vxlan',
    src: '10.244.1.1',
    sport: 40000,
    dst: '10.244.1.10',
    dport: 4789,
    class: 'node' as const,
    node: 'vpn-node',
    by: 'inner-tuple' as const,
    frame: 7,
    detail: '',
  };
  t.same(compareWithExpectation(expect, run(outer)), []);
  t.same(compareWithExpectation(expect, run()), [
    'outer source not reported, expected 10.244.1.1',
    'outer class not reported, expected node',
  ]);
  t.same(compareWithExpectation(expect, run({ ...outer, src: '203.0.113.2', class: 'external' })), [
    'outer source 203.0.113.2, expected 10.244.1.1',
    'outer class external, expected node',
  ]);
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
  for (const shape of ['http', 'http-keepalive', 'dns'])
    t.ok(
      SCENARIOS.some((s) => s.request === shape),
      `request shape ${shape}`,
    );
  for (const kind of ['kube-proxy-nft', 'cni-masquerade-nft'])
    t.ok(
      SCENARIOS.some((s) => s.rules.some((r) => r.kind === kind)),
      `native nftables rule ${kind}`,
    );
  const v6 = SCENARIOS.filter((s) => s.ipv6);
  t.ok(v6.length > 0, 'an IPv6 scenario');
  for (const s of v6) t.equal(clientAddress(s), ADDR6.clientTunnel, `${s.name}: IPv6 client`);
  t.end();
});

void t.test('a dual-stack inventory lists every IPv6 address of nodes and pods', (t) => {
  const inv = labInventory(true, true);
  t.ok(inv.nodes['backend-node']?.includes(ADDR6.backendNodeBridge), 'backend node bridge');
  t.ok(inv.nodes['vpn-node']?.includes(ADDR6.vpnNodeUplink), 'VPN node uplink');
  t.same(inv.pods[`backend@${ADDR6.backendPod}`], {
    ip: ADDR6.backendPod,
    node: 'backend-node',
    role: 'backend',
  });
  t.equal(inv.pods[`proxy@${ADDR6.proxyPod}`]?.role, 'proxy');
  t.same(labInventory(true, false), {
    nodes: {
      'vpn-node': ['192.168.50.1', '10.244.1.1'],
      'backend-node': ['192.168.50.2', '10.244.2.1'],
    },
    pods: {
      vpn: { ip: '10.244.1.10', node: 'vpn-node', role: 'vpn' },
      backend: { ip: '10.244.2.5', node: 'backend-node', role: 'backend' },
      proxy: { ip: '10.244.2.9', node: 'backend-node', role: 'proxy' },
    },
  });
  t.end();
});

void t.test("a tunnel through the VPN Service adds the Service address to the VPN node's", (t) => {
  for (const via of ['service-cluster', 'service-local'] as const)
    t.same(labInventory(false, false, via).nodes['vpn-node'], [
      '192.168.50.1',
      '10.244.1.1',
      '203.0.113.1',
    ]);
  const outer = SCENARIOS.filter((s) => s.outerVia !== 'direct');
  t.same(
    outer.map((s) => [s.name, s.outerVia, s.expect.outerSrc, s.expect.outerClass]),
    [
      ['outer-cluster', 'service-cluster', '10.244.1.1', 'node'],
      ['outer-local', 'service-local', '203.0.113.2', 'external'],
    ],
  );
  t.end();
});

void t.test('IPv6 endpoints joined to a port without brackets are found', (t) => {
  const verdict = {
    layer: 'kube-proxy',
    rewrittenBetween: ['egress', 'backend'] as [string, string],
    observed: {
      decap: { src: 'fd00:10:90::42', sport: 40000, dst: 'fd00:10:96::a', dport: 80 },
    },
    evidence: [
      { point: 'decap', detail: 'first new TCP connection fd00:10:90::42:40000>fd00:10:96::a:80' },
      { point: 'egress', detail: 'seen as [fd00:10:90::42]:40000 -> [fd00:10:96::a]:80' },
    ],
    hint: 'tunnel range around fd00:10:90::42',
  };
  t.same(ipv6EndpointsWithoutBrackets(verdict), [
    'decap: fd00:10:90::42:40000',
    'decap: fd00:10:96::a:80',
  ]);
  t.end();
});

void t.test('DNS wire: a query carrying the marker as one label, and its response', (t) => {
  const name = 'hoptrace-probe-0123456789ab.lab.';
  const q = encodeQuery(0xbeef, name);
  t.ok(q.includes(Buffer.from('\x1bhoptrace-probe-0123456789ab\x03lab\x00', 'latin1')), 'labels');
  const pq = parseMessage(q);
  t.same(
    [pq.id, pq.response, pq.opcode, pq.questions],
    [0xbeef, false, 0, [{ name, qtype: 1, qclass: 1 }]],
  );
  const r = encodeResponse(q, pq, 0, '10.244.2.5');
  const pr = parseMessage(r);
  t.same(
    [pr.id, pr.response, pr.rcode, pr.answerCount, pr.questions],
    [0xbeef, true, 0, 1, pq.questions],
  );
  t.equal(r.readUInt16BE(2), 0x8500, "QR, AA and the query's RD");
  t.same([...r.subarray(pr.questionsEnd)], [0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 10, 244, 2, 5]);
  t.equal(parseMessage(encodeResponse(q, pq, 0, null)).answerCount, 0, 'no answer');
  t.throws(() => encodeName(`${'a'.repeat(64)}.lab.`), /not 1\.\.63 bytes/);
  t.throws(() => encodeName('lab'), /not absolute/);
  t.throws(() => parseMessage(Buffer.alloc(5)), /shorter than a DNS header/);
  t.throws(() => parseMessage(q.subarray(0, q.length - 2)), /no type and class/);
  t.end();
});

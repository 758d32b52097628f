// The pure core of `hoptrace repro`: following the workload, one verdict per probe (found by its
// source port), and the reschedule summary. Table-driven; no agents, no clock.
import t from 'tap';
import type { AgentInfo } from '../../collector/hub-types';
import {
  analyzeProbe,
  lossesInFlight,
  MAX_LOSSES_IN_FLIGHT,
  inCidr,
  matchWorkload,
  planAttachment,
  renderTimeline,
  summarizeRepro,
  instanceKey,
  type LossSpan,
  type ProbeInput,
  type ProbeReport,
  type ServedBy,
  type TaggedEvent,
  type TimelineRow,
} from '../../core/repro/repro-core';
import { parseReproRequest } from '../../collector/repro-requests';
import { globMatches } from '../../common/glob';
import { addLossSpan, MAX_REPRO_LOSS_SPANS } from '../../core/repro/loss-spans';
import { isHoptraceError } from '../../common/errors';
import { CLIENT, DIRECT, INVENTORY, MS, exchange } from './fixtures-events';

function agent(node: string, namespaces: { path: string; addresses: string[] }[]): AgentInfo {
  return {
    agentId: `${node}-a`,
    node,
    identity: { method: 'shared-token', subject: 'shared token' },
    connected: true,
    connectedAtMs: 0,
    lastSeenMs: 0,
    unknownMessages: 0,
    hello: {
      agentId: `${node}-a`,
      node,
      version: 'test',
      nodeAddresses: [],
      spoolFirstSeq: 1,
      namespaces: namespaces.map((n, i) => ({ ...n, inode: i + 1, interfaces: [] })),
    },
  };
}

void t.test('workload selector: name glob, pod IP by CIDR, new incarnation', (t) => {
  t.ok(globMatches('ht1-vpn-pod*', 'ht1-vpn-pod-r1'));
  t.notOk(globMatches('ht1-vpn-pod*', 'ht1-be-pod'));
  t.notOk(globMatches('a.b', 'axb'), 'dots are literal');
  t.ok(inCidr('10.244.1.11', '10.244.0.0/16'));
  t.notOk(inCidr('172.31.255.1', '10.244.0.0/16'));
  const old = { path: '/v/ht1-vpn-pod', addresses: ['172.31.255.1', '10.90.0.1', '10.244.1.10'] };
  const repl = {
    path: '/v/ht1-vpn-pod-r1',
    addresses: ['172.31.255.1', '10.90.0.1', '10.244.1.11'],
  };
  const sel = { netns: 'ht1-vpn-pod*', podCidr: '10.244.0.0/16' };
  const before = matchWorkload(
    [agent('vpn-node', [old, { path: '/v/ht1-be', addresses: ['10.244.2.5'] }])],
    sel,
  );
  t.same(
    before.map((i) => [i.name, i.ip]),
    [['ht1-vpn-pod', '10.244.1.10']],
    'the pod IP, not the underlay',
  );
  const cur = before[0] ?? null;
  if (cur === null) throw new Error('no match');
  const retired = new Set([instanceKey(cur)]);
  t.same(planAttachment(cur, before, retired), { kind: 'keep' });
  // Deleted: the hello no longer lists it; the replacement is not reported yet.
  const gone = planAttachment(cur, [], retired);
  t.equal(gone.kind, 'detach');
  t.same(planAttachment(null, [], retired), { kind: 'wait' });
  t.same(
    planAttachment(null, before, retired),
    { kind: 'wait' },
    'a retired incarnation is never re-attached',
  );
  const after = matchWorkload([agent('vpn-node', [repl])], sel);
  const plan = planAttachment(null, after, retired);
  t.equal(plan.kind === 'attach' ? plan.to.ip : null, '10.244.1.11', 'attaches to the new IP');
  // Rescheduled to another node: followed too.
  const moved = matchWorkload([agent('other-node', [repl])], sel);
  t.equal(moved[0]?.node, 'other-node');
  t.end();
});

void t.test(
  'request parsing: a Kubernetes selector is accepted (the manager refuses it), an empty one is not',
  (t) => {
    const spec = parseReproRequest({
      workload: { kubernetes: { namespace: 'vpn', labelSelector: 'app=vpn' } },
      decapIface: 'tun0',
      egressIface: 'eth0',
      backend: { target: '10.244.2.5', iface: 'eth0' },
      client: CLIENT,
    });
    t.same(spec.workload.kubernetes, { namespace: 'vpn', labelSelector: 'app=vpn' });
    try {
      parseReproRequest({
        workload: {},
        decapIface: 'x',
        egressIface: 'y',
        backend: {},
        client: CLIENT,
      });
      t.fail('should throw');
    } catch (e) {
      t.ok(
        isHoptraceError(e) && e.code === 'API_BAD_REQUEST',
        'an empty selector is a bad request',
      );
    }
    t.end();
  },
);

// A namespace name as containerd writes it: the name the adversarial globs below run against.
const CNI = 'cni-5f0e7a1c-9d8b-4c5e-b1a2-3f4e5d6c7b8a';

void t.test('workload globs: `*` any run, `?` one character, the rest literal, whole name', (t) => {
  const cases: [string, string, boolean][] = [
    ['', '', true],
    ['', 'a', false],
    ['*', '', true],
    ['*', 'anything at all', true],
    ['?', '', false],
    ['?', 'a', true],
    ['?', 'ab', false],
    ['ht1-vpn-pod', 'ht1-vpn-pod', true],
    ['ht1-vpn-pod', 'ht1-vpn-pod-r1', false],
    ['ht1-vpn-pod*', 'ht1-vpn-pod', true],
    ['*-pod', 'ht1-vpn-pod', true],
    ['*-pod', 'ht1-vpn-pod-r1', false],
    ['ht?-vpn-*', 'ht1-vpn-pod-r1', true],
    ['ht?-vpn-*', 'ht12-vpn-pod', false],
    ['*pod*r?', 'ht1-vpn-pod-r1', true],
    ['*a*b', 'aXbXaXb', true],
    ['*a*b', 'aXbXaX', false],
    ['a*a*a', 'aa', false],
    ['a*a*a', 'aaa', true],
    ['**?**', 'x', true],
    ['a.b', 'a.b', true],
    ['a.b', 'axb', false],
    ['a+b', 'aab', false],
    ['(x)|[y]^$\\', '(x)|[y]^$\\', true],
    ['cni-*', CNI, true],
    ['cni-????????-*-3f4e5d6c7b8a', CNI, true],
    // Adversarial: a RegExp of these backtracked for seconds (16, 18 characters) on CNI.
    ['*?*?*?*?*?*?*?*!', CNI, false],
    ['*?*?*?*?*?*?*?*?*!', CNI, false],
    ['*?*?*?*?*?*?*?*a', CNI, true],
    [`${'*?'.repeat(127)}!`, CNI, false],
    [`${'*a'.repeat(127)}!`, 'a'.repeat(255), false],
    [`${'*a'.repeat(127)}*`, 'a'.repeat(255), true],
    ['?'.repeat(40), CNI, true],
    ['?'.repeat(41), CNI, false],
  ];
  for (const [glob, name, want] of cases)
    t.equal(globMatches(glob, name), want, `${JSON.stringify(glob)} ~ ${JSON.stringify(name)}`);
  // Through the workload selector, as a hello or a create runs it. The RegExp took 274 s with 12
  // `*?` and each more is ~3.5 times as long: 13 hang past tap's timeout (600 s).
  const ns = [{ path: `/run/netns/${CNI}`, addresses: ['10.244.1.10'] }];
  t.same(matchWorkload([agent('n', ns)], { netns: `${'*?'.repeat(13)}!` }), []);
  t.same(
    matchWorkload([agent('n', ns)], { netns: '*?*?*?*?*?*?*?*?*a' }).map((i) => i.name),
    [CNI],
  );
  t.end();
});

void t.test('request parsing: a workload glob longer than a file name is refused', (t) => {
  const body = (netns: string): unknown => ({
    workload: { netns },
    decapIface: 'tun0',
    egressIface: 'eth0',
    backend: { target: '10.244.2.5', iface: 'eth0' },
    client: CLIENT,
  });
  t.equal(parseReproRequest(body('*'.repeat(255))).workload.netns, '*'.repeat(255));
  t.throws(() => parseReproRequest(body(`${'*?'.repeat(128)}!`)), {
    code: 'API_BAD_REQUEST',
    where: 'workload.netns',
    detail: 'at most 255 characters (this one has 257)',
  });
  t.end();
});

void t.test('request parsing: every field is checked as a capture point checks it', (t) => {
  const ok = {
    workload: { netns: 'cni-*', podCidr: '10.244.0.0/16' },
    decapIface: 'tun0',
    egressIface: 'eth0',
    backend: { target: '10.244.2.5', iface: 'eth0', node: 'backend-node' },
    client: CLIENT,
  };
  t.equal(parseReproRequest(ok).client, CLIENT, 'a valid request');
  // A first version took any non-empty string for each (found by a review).
  for (const [where, body] of [
    ['body.client', { ...ok, client: 'not-an-address' }],
    ['body.client', { ...ok, client: '10.90.0.0/24' }],
    ['body.decapIface', { ...ok, decapIface: 'tun0; reboot' }],
    ['body.egressIface', { ...ok, egressIface: 'x'.repeat(16) }],
    ['backend.iface', { ...ok, backend: { ...ok.backend, iface: 'eth/0' } }],
    ['backend.target', { ...ok, backend: { ...ok.backend, target: '../../etc' } }],
    ['backend.node', { ...ok, backend: { ...ok.backend, node: 'Node With Spaces' } }],
    ['workload.podCidr', { ...ok, workload: { netns: 'cni-*', podCidr: '10.244.0.0/99' } }],
  ] as const)
    t.throws(() => parseReproRequest(body), { code: 'API_BAD_REQUEST', where }, where);
  t.end();
});

const POD1: ServedBy = { epoch: 1, name: 'vpn-pod', ip: '10.244.1.10', node: 'vpn-node' };
const POD2: ServedBy = { epoch: 2, name: 'vpn-pod-r1', ip: '10.244.1.11', node: 'vpn-node' };
const epochs = new Map([
  [1, POD1],
  [2, POD2],
]);
const tag = (
  epoch: number,
  evs: readonly import('../../common/event').PacketEvent[],
): TaggedEvent[] => evs.map((event) => ({ epoch, event }));

function probe(sport: number, ok: boolean, atMs: number): ProbeReport {
  return {
    probeId: `p${sport}`,
    sport,
    startedAtMs: atMs,
    endedAtMs: atMs + 100,
    ok,
    httpCode: ok ? '200' : null,
    error: ok ? null : 'curl exit 7: Failed to connect',
  };
}

/** Probe a: preserved through pod 1. Probe b: through pod 2, the reply never returns (no-return). */
function twoProbes(): ProbeInput['points'] {
  const a = { ...DIRECT, sport: 40001 };
  const b = { ...DIRECT, sport: 40002 };
  return [
    {
      name: 'decap',
      events: [
        ...tag(1, exchange('decap', a)),
        ...tag(
          2,
          exchange('decap', b, { isn: 77, at: 3000n * MS, phase: 'syn-only', synRetransmits: 1 }),
        ),
      ],
    },
    {
      name: 'egress',
      events: [
        ...tag(1, exchange('egress', a, { at: MS })),
        ...tag(
          2,
          exchange('egress', b, { isn: 77, at: 3001n * MS, phase: 'syn-only', synRetransmits: 1 }),
        ),
      ],
    },
    {
      name: 'backend',
      events: [
        ...tag(0, exchange('backend', a, { at: 2n * MS })),
        ...tag(
          0,
          exchange('backend', b, {
            isn: 77,
            at: 3002n * MS,
            phase: 'syn-synack',
            synRetransmits: 1,
          }),
        ),
      ],
    },
  ];
}

void t.test('one verdict per probe, found by source port, with the pod that served it', (t) => {
  const points = twoProbes();
  const base = { client: CLIENT, points, epochs, inventory: INVENTORY, startMs: 0 };
  const ra = analyzeProbe({ ...base, probe: probe(40001, true, 0) });
  t.equal(ra.verdict, 'preserved');
  t.same(ra.servedBy, POD1);
  t.equal(ra.backendSrc, CLIENT);
  const rb = analyzeProbe({ ...base, probe: probe(40002, false, 3000) });
  t.equal(rb.verdict, 'no-return', rb.detail);
  t.same(rb.servedBy, POD2);
  const rc = analyzeProbe({ ...base, probe: probe(40003, false, 2000) });
  t.equal(rc.verdict, 'failed-to-connect', 'nothing reached decap and the prober failed');
  t.equal(rc.servedBy, null);
  const rd = analyzeProbe({ ...base, probe: probe(40004, true, 2500) });
  t.equal(rd.verdict, 'not-captured', 'it worked but decap saw nothing: not attached');
  // Egress re-attached after the SYN passed decap: not a no-return.
  const late = [
    points[0] ?? { name: 'decap', events: [] },
    {
      name: 'egress',
      events: tag(2, exchange('egress', { ...DIRECT, sport: 40002 }, { isn: 77, at: 9000n * MS })),
    },
    points[2] ?? { name: 'backend', events: [] },
  ];
  const re = analyzeProbe({ ...base, points: late, probe: probe(40002, true, 3000) });
  t.equal(re.verdict, 'not-captured', re.detail);
  t.match(re.detail, /egress was not capturing yet/);
  t.end();
});

void t.test(
  'losses in flight: only a verdict that rests on a missing packet, only its captures',
  (t) => {
    const points = twoProbes();
    const span = (
      capture: string,
      epoch: number,
      fromMs: number,
      toMs: number,
      kernelDrops: number,
      lost = 0,
    ): LossSpan => ({ capture, epoch, fromMs, toMs, kernelDrops, queueDrops: 0, lost });
    const losses = [
      span('backend', 0, 2500, 3500, 37), // during probe b (3000–3100)
      span('decap (pod-1)', 1, 2900, 3050, 5), // another pod's capture
      span('egress (pod-2)', 2, 4000, 4100, 0, 3), // within the slack after b ended
      span('backend', 0, 5200, 6200, 9), // past the slack
      span('backend', 0, -1500, -900, 4), // before probe a, within its slack
    ];
    const base = { client: CLIENT, points, epochs, inventory: INVENTORY, startMs: 0, losses };
    const rb = analyzeProbe({ ...base, probe: probe(40002, false, 3000) });
    t.equal(rb.verdict, 'no-return');
    t.same(rb.lossesInFlight, [
      'capture backend lost 37 in the kernel between 1970-01-01T00:00:02.500Z and 1970-01-01T00:00:03.500Z',
      'capture egress (pod-2) lost 3 events on the way to the collector between 1970-01-01T00:00:04.000Z and 1970-01-01T00:00:04.100Z',
    ]);
    // Probe a found its packets (preserved): a loss then proves nothing against it.
    const ra = analyzeProbe({ ...base, probe: probe(40001, true, 0) });
    t.equal(ra.verdict, 'preserved');
    t.same(ra.lossesInFlight, []);
    // Nothing reached decap and no pod served it: every capture's losses around it count —
    // unless curl could not even connect (exit 7), which needs no capture to be certain.
    t.same(analyzeProbe({ ...base, probe: probe(40003, false, 2000) }).lossesInFlight, []);
    const timedOut = { ...probe(40003, false, 2000), error: 'curl exit 28: Operation timed out' };
    const rc = analyzeProbe({ ...base, probe: timedOut });
    t.equal(rc.verdict, 'failed-to-connect');
    t.same(rc.lossesInFlight, [
      'capture backend lost 37 in the kernel between 1970-01-01T00:00:02.500Z and 1970-01-01T00:00:03.500Z',
      'capture decap (pod-1) lost 5 in the kernel between 1970-01-01T00:00:02.900Z and 1970-01-01T00:00:03.050Z',
    ]);
    t.same(
      lossesInFlight(
        { verdict: 'dropped', servedBy: POD1 },
        { startedAtMs: 0, endedAtMs: 100, error: null },
        losses,
      ),
      [
        'capture backend lost 4 in the kernel between 1969-12-31T23:59:58.500Z and 1969-12-31T23:59:59.100Z',
      ],
    );
    t.same(
      analyzeProbe({ ...base, losses: [], probe: probe(40002, false, 3000) }).lossesInFlight,
      [],
    );
    t.end();
  },
);

void t.test(
  'loss spans: touching ones merge, a repro keeps at most 1,000, counts stay exact',
  (t) => {
    const span = (capture: string, fromMs: number, toMs: number, lost: number): LossSpan => ({
      capture,
      epoch: capture === 'backend' ? 0 : 1,
      fromMs,
      toMs,
      kernelDrops: 0,
      queueDrops: 0,
      lost,
    });
    // `lost` messages between two statuses all start at the last status: one span, summed.
    const lost: LossSpan[] = [];
    for (let i = 1; i <= 20_000; i++) addLossSpan(lost, span('decap (pod-1)', 1000, 1000 + i, 1));
    t.same(lost, [span('decap (pod-1)', 1000, 21_000, 20_000)]);
    // Statuses that each count drops touch end to end; another capture's are apart.
    const touching: LossSpan[] = [];
    addLossSpan(touching, span('backend', 0, 1000, 2));
    addLossSpan(touching, span('decap (pod-1)', 500, 1500, 7));
    addLossSpan(touching, span('backend', 1000, 2000, 3));
    addLossSpan(touching, span('backend', 3000, 4000, 4)); // a clean status between: apart
    t.same(touching, [
      span('backend', 0, 2000, 5),
      span('decap (pod-1)', 500, 1500, 7),
      span('backend', 3000, 4000, 4),
    ]);
    // Losses every other status for long: past the bound the capture's last span widens.
    const apart: LossSpan[] = [];
    for (let i = 0; i < 3000; i++)
      addLossSpan(apart, span('backend', i * 2000, i * 2000 + 1000, 1));
    addLossSpan(apart, span('decap (pod-1)', 5, 6, 9)); // a capture with none yet: its first
    addLossSpan(apart, span('decap (pod-1)', 8, 9, 1)); // and then its last, widened
    t.equal(apart.length, MAX_REPRO_LOSS_SPANS + 1);
    t.equal(
      apart.reduce((n, l) => n + l.lost, 0),
      3010,
      'every packet lost is still counted',
    );
    t.same(
      apart.at(-2),
      span('backend', (MAX_REPRO_LOSS_SPANS - 1) * 2000, 2999 * 2000 + 1000, 2001),
    );
    t.same(apart.at(-1), span('decap (pod-1)', 5, 9, 10));
    t.end();
  },
);

void t.test('losses in flight: a probe names 10 at most, the rest summed in one line', (t) => {
  const spans: LossSpan[] = Array.from({ length: 25 }, (_, i) => ({
    capture: i % 2 === 0 ? 'backend' : 'decap (vpn-pod)',
    epoch: i % 2 === 0 ? 0 : 1,
    fromMs: i * 100,
    toMs: i * 100 + 50,
    kernelDrops: 1,
    queueDrops: 0,
    lost: 2,
  }));
  const lines = lossesInFlight(
    { verdict: 'dropped', servedBy: POD1 },
    { startedAtMs: 0, endedAtMs: 2500, error: null },
    spans,
  );
  t.equal(lines.length, MAX_LOSSES_IN_FLIGHT);
  t.equal(
    lines.at(-1),
    '16 more losses: captures decap (vpn-pod), backend lost 16 in the kernel, 32 events on the way to the collector between 1970-01-01T00:00:00.900Z and 1970-01-01T00:00:02.450Z',
  );
  t.equal(
    lines[0],
    'capture backend lost 1 in the kernel, 2 events on the way to the collector between 1970-01-01T00:00:00.000Z and 1970-01-01T00:00:00.050Z',
  );
  t.end();
});

function row(
  n: number,
  atMs: number,
  verdict: TimelineRow['verdict'],
  ok: boolean,
  servedBy: ServedBy | null,
): TimelineRow {
  return {
    probeId: `p${n}`,
    sport: n,
    startedAtMs: atMs,
    offsetMs: atMs,
    servedBy,
    verdict,
    ok,
    backendSrc: null,
    detail: '',
    lossesInFlight: [],
  };
}

const attachments = [
  { served: POD1, addresses: ['10.244.1.10'], attachedAtMs: 0 },
  { served: POD2, addresses: ['10.244.1.11'], attachedAtMs: 4000 },
];
const marks = [
  { kind: 'deleted' as const, atMs: 1600, detail: 'vpn-pod deleted' },
  { kind: 'replacement-ready' as const, atMs: 3800, detail: 'vpn-pod-r1 up' },
];

void t.test('summary: a route pinned to the deleted pod never comes back, and says why', (t) => {
  const rows = [
    row(1, 0, 'preserved', true, POD1),
    row(2, 1000, 'preserved', true, POD1),
    row(3, 2000, 'failed-to-connect', false, null),
    row(4, 5000, 'no-return', false, POD2),
    row(5, 6000, 'no-return', false, POD2),
  ];
  const s = summarizeRepro({
    rows,
    marks,
    attachments,
    routes: [{ node: 'vpn-node', dst: '10.90.0.0/24', via: '10.244.1.10', dev: 'cni0' }],
    endMs: 7000,
  });
  t.equal(s.recovered, false);
  t.equal(s.brokenMs, null);
  t.equal(s.brokenForAtLeastMs, 7000 - 1600);
  t.equal(s.okBefore, 2);
  t.equal(s.failedAfter, 3);
  t.same(s.deletedPod, POD1);
  t.same(s.replacement, POD2);
  t.match(
    s.why,
    /return route on node vpn-node .*still points at 10\.244\.1\.10, the deleted pod vpn-pod's address/,
  );
  const text = renderTimeline(rows, marks, s).join('\n');
  t.match(text, /deleted: vpn-pod deleted/);
  t.match(text, /p4 +vpn-pod-r1 10\.244\.1\.11 +no-return/);
  t.match(text, /NOT recovered/);
  // Issue 16: a time a person reads is UTC ISO-8601 with its date and Z, to the ms it was taken in.
  const lines = renderTimeline(rows, marks, s);
  t.match(lines[0], /^time \(UTC, ms\) +offset +probe/, 'the header says UTC and ms');
  const timed = lines.slice(1, rows.length + marks.length + 1);
  t.equal(timed.length, rows.length + marks.length);
  for (const l of timed)
    t.match(l, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  \+ *\d+\.\ds  /, `ISO-8601 UTC: ${l}`);
  t.end();
});

void t.test('summary: a stable gateway or SNAT recovers, with how long it was broken', (t) => {
  const rows = [
    row(1, 0, 'preserved', true, POD1),
    row(2, 1000, 'preserved', true, POD1),
    row(3, 2000, 'failed-to-connect', false, null),
    row(4, 5000, 'preserved', true, POD2),
  ];
  const vip = summarizeRepro({
    rows,
    marks,
    attachments: attachments.map((a) => ({ ...a, addresses: [...a.addresses, '10.244.1.100'] })),
    routes: [{ node: 'vpn-node', dst: '10.90.0.0/24', via: '10.244.1.100', dev: null }],
    endMs: 6000,
  });
  t.equal(vip.recovered, true);
  t.equal(vip.brokenMs, 4000, 'from the last good probe before to the first good one after');
  t.match(vip.why, /via 10\.244\.1\.100\) points at an address the replacement vpn-pod-r1/);
  const snatRows = rows.map((r) =>
    r.verdict === 'preserved' ? { ...r, verdict: 'vpn-pod' as const } : r,
  );
  const snat = summarizeRepro({ rows: snatRows, marks, attachments, routes: [], endMs: 6000 });
  t.equal(snat.recovered, true);
  t.match(snat.why, /masquerades \(vpn-pod\).*no return route is needed/);
  t.end();
});

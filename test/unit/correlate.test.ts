import t from 'tap';
import type { PacketEvent } from '../../common/event';
import {
  Correlator,
  StringPool,
  correlateRequest,
  findRequests,
} from '../../core/correlate/correlate';
import {
  ACK,
  ADDR,
  CLIENT,
  DIRECT,
  ISN,
  MS,
  PROBE_REQUEST,
  SERVER_ISN,
  SYN,
  T0,
  exchange,
  pt,
  rev,
  tcp,
  type Ep,
} from './fixtures-events';

const other: Ep = { src: '10.90.0.7', sport: 41000, dst: ADDR.backendPod, dport: 8080 };
const SEC = 1_000_000_000n;

void t.test(
  'selection: first SYN from the client at the first point, narrowed by dst/dport',
  (t) => {
    const decap = pt('decap', [
      ...exchange('decap', other, { isn: 1 }),
      ...exchange('decap', { ...DIRECT, dport: 9090 }, { isn: 2, at: 10n }),
      ...exchange('decap', DIRECT, { isn: 3, at: 20n }),
    ]);
    t.equal(findRequests(decap, {})[0]?.isn, 1, 'no selector: the first SYN at all');
    t.equal(findRequests(decap, { client: CLIENT })[0]?.isn, 2, 'client');
    t.equal(findRequests(decap, { client: CLIENT, dport: 8080 })[0]?.isn, 3, 'client + dport');
    t.equal(findRequests(decap, { dst: '10.1.1.1' }).length, 0, 'dst narrows to nothing');
    const id = findRequests(decap, { client: CLIENT, dport: 8080 })[0];
    t.same(id?.data, {
      seq: 4,
      payloadLength: 78,
      probeMarker: 'abc123',
      payloadHash: 0x11111111,
      requestLineHash: 0x22222222,
      dnsId: null,
      dnsQuestion: null,
      frame: 4,
    });
    t.equal(id?.tsVal, 777000);
    t.equal(id?.ipId, 4242);
    // A SYN-ACK is never a request.
    t.equal(
      findRequests(
        pt('x', [tcp('x', rev(DIRECT), { flags: SYN | ACK, seq: 9, ack: 1, ts: T0 })]),
        {},
      ).length,
      0,
    );
    t.end();
  },
);

void t.test('no request: request is null and the reason names the selector', (t) => {
  const j = correlateRequest([pt('decap', exchange('decap', other)), pt('backend', [])], {
    client: CLIENT,
    dport: 80,
  });
  t.equal(j.request, null);
  t.match(j.reason ?? '', /client 10\.90\.0\.42, dport 80 among 7 events at decap/);
  t.equal(j.points[1]?.status, 'no-capture');
  t.end();
});

void t.test('retransmitted SYN: one request, retransmits counted at every point', (t) => {
  const j = correlateRequest(
    [
      pt('decap', exchange('decap', DIRECT, { synRetransmits: 2 })),
      pt('backend', exchange('backend', DIRECT, { synRetransmits: 2, at: 5n })),
    ],
    { client: CLIENT },
  );
  t.equal(j.points[0]?.retransmits, 2);
  t.equal(j.points[1]?.retransmits, 2);
  t.equal(j.points[1]?.requestPackets, 6);
  t.same(j.points[1]?.matchedBy, [
    'tcp-isn',
    'tcp-seq',
    'tsval',
    'ip-id',
    'probe-marker',
    'request-line',
    'payload-hash',
  ]);
  t.same(j.points[1]?.replyMatchedBy, ['syn-ack', 'reverse-tuple']);
  t.equal(j.points[1]?.firstTsNs, T0 + 5n);
  t.end();
});

void t.test(
  '--random-fully: new address and port, matched by ISN and TSval; reply direction follows',
  (t) => {
    const natted: Ep = {
      src: ADDR.backendNodeBridge,
      sport: 61234,
      dst: ADDR.backendPod,
      dport: 8080,
    };
    const j = correlateRequest(
      [
        pt('decap', exchange('decap', DIRECT)),
        pt('backend', exchange('backend', natted, { at: 3n })),
      ],
      {},
    );
    const b = j.points[1];
    t.equal(b?.status, 'matched');
    t.same(b?.observed, natted);
    t.ok(b?.matchedBy.includes('tcp-isn') && b.matchedBy.includes('tsval'));
    t.equal(b?.seenSyn, true);
    t.equal(b?.seenReply, true);
    t.equal(b?.replyPackets, 3);
    t.match(b?.detail ?? '', /SYN seq 4263588410 seen at decap and at backend/);
    t.end();
  },
);

void t.test(
  'time window: a SYN with the same ISN 11 s later is outside the default 10 s, matched there and said so',
  (t) => {
    const points = [
      pt('decap', exchange('decap', DIRECT)),
      pt('backend', exchange('backend', DIRECT, { at: 11n * SEC })),
    ];
    const far = correlateRequest(points, {}).points[1];
    t.equal(far?.status, 'matched', 'its ISN finds the request outside the window');
    t.equal(far?.outsideWindowNs, 11n * SEC, 'how far, on that point’s clock');
    t.match(
      far?.detail ?? '',
      /SYN was found \+11\.0 s from its time at decap, outside the ±10\.0 s window/,
    );
    const wide = correlateRequest(points, {}, { windowNs: 20n * SEC }).points[1];
    t.equal(wide?.status, 'matched');
    t.equal(wide?.outsideWindowNs, undefined, 'within a 20 s window: nothing to say');
    // Another connection there 11 s later (another ISN) is not the request.
    const other = [
      pt('decap', exchange('decap', DIRECT)),
      pt('backend', exchange('backend', DIRECT, { at: 11n * SEC, isn: 12345 })),
    ];
    t.equal(correlateRequest(other, {}).points[1]?.status, 'not-seen');
    // Another connection's SYN with the same ISN, far away (another host's TSval and IPv4 ID):
    // not the request, so the point stays not-seen (32 bits of ISN alone would match one in
    // a hundred hour-long captures).
    const sameIsn = [
      pt('decap', exchange('decap', DIRECT)),
      pt(
        'backend',
        exchange('backend', { ...DIRECT, sport: 45555 }, { at: 3600n * SEC, tsVal: 99, ipId: 7 }),
      ),
    ];
    t.equal(correlateRequest(sameIsn, {}).points[1]?.status, 'not-seen', 'same ISN, other SYN');
    // The same SYN at the same instant on two tuples far away: ambiguous there (as it is within
    // the window), an unknown, not a drop.
    const twice = [
      pt('decap', exchange('decap', DIRECT)),
      pt('backend', [
        ...exchange('backend', DIRECT, { at: 30n * SEC }),
        ...exchange('backend', { ...DIRECT, src: '10.1.0.2', sport: 6000 }, { at: 30n * SEC }),
      ]),
    ];
    const amb = correlateRequest(twice, {}).points[1];
    t.equal(amb?.status, 'ambiguous', 'two copies outside the window: ambiguous');
    t.equal(amb?.outsideWindowNs, 30n * SEC);
    // Earlier on that clock: the same.
    const before = [
      pt('decap', exchange('decap', DIRECT, { at: 30n * SEC })),
      pt('backend', exchange('backend', DIRECT)),
    ];
    t.equal(correlateRequest(before, {}).points[1]?.outsideWindowNs, -30n * SEC);
    t.end();
  },
);

void t.test('SYN not captured at a point: later segments match by seq, TSval and payload', (t) => {
  const backend = exchange('backend', DIRECT, { at: 2n }).filter((e) => e.keys.tcpFlags !== SYN);
  const b = correlateRequest([pt('decap', exchange('decap', DIRECT)), pt('backend', backend)], {})
    .points[1];
  t.equal(b?.status, 'matched');
  t.equal(b?.seenSyn, false);
  t.equal(b?.seenRequest, true);
  t.same(b?.matchedBy, [
    'tcp-seq',
    'tsval',
    'ip-id',
    'probe-marker',
    'request-line',
    'payload-hash',
  ]);
  t.end();
});

void t.test('only the reply captured: a SYN-ACK acknowledging ISN+1 names the connection', (t) => {
  const synAck = tcp('egress', rev(DIRECT), {
    flags: SYN | ACK,
    seq: SERVER_ISN,
    ack: (ISN + 1) >>> 0,
    ts: T0 + MS,
  });
  const e = correlateRequest([pt('decap', exchange('decap', DIRECT)), pt('egress', [synAck])], {})
    .points[1];
  t.equal(e?.status, 'matched');
  t.same(e?.matchedBy, ['syn-ack']);
  t.equal(e?.seenRequest, false);
  t.equal(e?.seenReply, true);
  t.same(e?.observed, DIRECT);
  t.end();
});

void t.test(
  'one capture holding the same packet before and after a translation uses the later copy',
  (t) => {
    const post: Ep = { ...DIRECT, src: ADDR.vpnNodeUplink };
    const b = correlateRequest(
      [
        pt('decap', exchange('decap', DIRECT)),
        pt('uplink', [
          ...exchange('uplink', DIRECT, { at: 1n }),
          ...exchange('uplink', post, { at: 2n }),
        ]),
      ],
      {},
    ).points[1];
    t.equal(b?.status, 'matched');
    t.same(b?.observed, post);
    t.same(b?.candidates, [DIRECT]);
    t.match(b?.detail ?? '', /same packet appears earlier in this capture/);
    t.end();
  },
);

void t.test('a terminating proxy: a new connection with the same probe marker is proxied', (t) => {
  const fromProxy: Ep = { src: ADDR.proxyPod, sport: 51000, dst: ADDR.backendPod, dport: 8080 };
  const j = correlateRequest(
    [
      pt('decap', exchange('decap', DIRECT)),
      pt(
        'backend',
        exchange('backend', fromProxy, {
          isn: 99999,
          tsVal: 5,
          ipId: 5,
          at: 4n * MS,
          request: { probeMarker: 'abc123', payloadHash: 7 },
        }),
      ),
    ],
    {},
  );
  const b = j.points[1];
  t.equal(b?.proxied, true);
  t.equal(b?.isn, 99999);
  t.same(b?.matchedBy, ['probe-marker']);
  t.same(b?.observed, fromProxy);
  t.equal(b?.seenSyn, true);
  t.equal(b?.seenReply, true);
  t.match(
    b?.detail ?? '',
    /new connection 10\.244\.2\.9:51000 -> 10\.244\.2\.5:8080 \(ISN 99999, not 4263588410\)/,
  );
  t.end();
});

void t.test(
  'Correlator: add/expire emits each journey once after its window, prunes, counts drops',
  (t) => {
    const c = new Correlator({
      points: ['decap', 'backend'],
      windowNs: 10n * SEC,
      maxEventsPerPoint: 50,
    });
    const now = 1000n * SEC;
    for (const e of exchange('decap', DIRECT)) c.add(e, now);
    for (const e of exchange('backend', DIRECT, { at: 2n })) c.add(e, now + MS);
    t.equal(
      c.add(tcp('elsewhere', DIRECT, { flags: SYN, seq: 1, ts: T0 }), now),
      false,
      'unknown point refused',
    );
    t.equal(c.journeys().length, 1, 'readable before the window closes');
    t.equal(c.expire(now + 5n * SEC).length, 0, 'window still open');
    const done = c.expire(now + 10n * SEC);
    t.equal(done.length, 1);
    t.equal(done[0]?.points[1]?.status, 'matched');
    t.equal(c.expire(now + 11n * SEC).length, 0, 'emitted once');
    t.equal(c.stats().buffered, 14);
    c.expire(now + 21n * SEC);
    t.equal(c.stats().buffered, 0, 'pruned after two windows');
    for (let i = 0; i < 60; i++) c.add(tcp('decap', other, { flags: ACK, seq: i, ts: T0 }), now);
    t.same(c.stats(), { buffered: 50, dropped: 10, unknownPoint: 1, emitted: 1 });
    t.end();
  },
);

void t.test('Correlator: expire() gives what correlateRequest gives on the same events', (t) => {
  const NAT = { src: '10.244.1.10', sport: 33000, dst: ADDR.backendPod, dport: 8080 };
  const PROXIED = { src: ADDR.proxyPod, sport: 51000, dst: ADDR.backendPod, dport: 8080 };
  const noise = (point: string, n: number): ReturnType<typeof exchange> =>
    Array.from({ length: n }, (_, i) =>
      exchange(
        point,
        { src: '10.244.7.1', sport: 20000 + i, dst: '10.244.8.1', dport: 443 },
        { isn: 1000 + i * 7919, at: BigInt(i), request: {} },
      ),
    ).flat();
  const points = [
    pt('decap', [...noise('decap', 10), ...exchange('decap', DIRECT)]),
    pt('egress', [...exchange('egress', NAT, { at: 1n }), ...noise('egress', 10)]),
    pt('backend', [
      ...noise('backend', 10),
      ...exchange('backend', PROXIED, { at: 2n, isn: 99, request: PROBE_REQUEST }),
    ]),
  ];
  const want = correlateRequest(points, { client: CLIENT });
  for (const order of ['in order', 'arrivals out of order']) {
    const c = new Correlator({
      points: ['decap', 'egress', 'backend'],
      selector: { client: CLIENT },
    });
    const now = 1000n * SEC;
    let k = 0;
    for (const p of points)
      for (const e of p.events) c.add(e, order === 'in order' ? now : now + BigInt(k++ % 3) * MS);
    t.equal(c.expire(now + 5n * SEC).length, 0);
    const done = c.expire(now + 11n * SEC);
    t.same(done, [want], order);
    t.same(c.journeys(), [want], `${order}: journeys()`);
  }
  t.end();
});

void t.test('Correlator: times beyond 64 bits, in and out of order, stay exact', (t) => {
  const NAT: Ep = { src: '10.244.1.10', sport: 33000, dst: ADDR.backendPod, dport: 8080 };
  // Far beyond int64 either way, and straddling its top (some events in range, some beyond).
  for (const base of [2n ** 70n, -(2n ** 65n), 2n ** 63n - 3n * MS]) {
    const shift = (e: PacketEvent): PacketEvent => ({ ...e, tsNs: e.tsNs - T0 + base });
    const points = [
      pt('decap', exchange('decap', DIRECT).map(shift)),
      pt('backend', exchange('backend', NAT, { at: 2n }).map(shift)),
    ];
    const want = correlateRequest(points, { client: CLIENT });
    t.equal(want.points[1]?.status, 'matched');
    for (const order of ['in order', 'arrivals out of order']) {
      const c = new Correlator({ points: ['decap', 'backend'], selector: { client: CLIENT } });
      let k = 0;
      for (const p of points)
        for (const e of p.events)
          c.add(e, order === 'in order' ? base : base + BigInt(k++ % 3) * MS);
      t.same(c.journeys(), [want], `${base}, ${order}: journeys()`);
      t.same(c.expire(base + 11n * SEC), [want], `${base}, ${order}: expire()`);
      t.equal(c.stats().buffered, 14);
      c.expire(base + 21n * SEC);
      t.equal(c.stats().buffered, 0, 'pruned after two windows');
    }
  }
  t.end();
});

void t.test('Correlator: a wrapped buffer grows without reordering its events', (t) => {
  const c = new Correlator({ points: ['decap', 'backend'], selector: { client: CLIENT } });
  const noise = (i: number): PacketEvent =>
    tcp(
      'decap',
      { src: '10.244.7.1', sport: 20000 + (i % 500), dst: '10.244.8.1', dport: 443 },
      { flags: ACK, seq: i, ts: T0 + BigInt(i) * MS, frame: i },
    );
  // 800 events, then forgotten: the next ones start at slot 800 of 1024, so the request's events
  // wrap to the start of the buffer, and it grows while wrapped.
  let now = 1000n * SEC;
  for (let i = 0; i < 800; i++) c.add(noise(i), now);
  now += 30n * SEC;
  c.expire(now);
  t.equal(c.stats().buffered, 0);
  const before = Array.from({ length: 224 }, (_, i) => noise(i));
  const after = Array.from({ length: 2776 }, (_, i) => noise(224 + i));
  const points = [
    pt('decap', [...before, ...exchange('decap', DIRECT), ...after]),
    pt('backend', exchange('backend', DIRECT, { at: 2n })),
  ];
  for (const p of points) for (const e of p.events) c.add(e, now);
  t.equal(c.stats().buffered, 3014);
  t.same(c.journeys(), [correlateRequest(points, { client: CLIENT })]);
  t.end();
});

void t.test('StringPool: equal strings back under cache collisions, Map bounded', (t) => {
  const pool = new StringPool(1000);
  // 3000 addresses over a 1024-entry cache collide often; odd lengths and an empty string too.
  const addrs = [
    ...Array.from({ length: 3000 }, (_, i) => `10.${i >> 8}.${i & 255}.${i % 7}`),
    ...['', '1', '::1', 'fe80::1', '2001:db8::8a2e:370:7334'],
  ];
  let wrong = 0;
  for (let round = 0; round < 3; round++) {
    for (const a of addrs) {
      const copy = ` ${a}`.slice(1); // the same text in another string object, as a decoder builds
      if (pool.addr(copy) !== a || pool.of(copy) !== a) wrong++;
      if (pool.size > 1000) wrong++;
    }
  }
  t.equal(wrong, 0);
  t.ok(pool.size > 0 && pool.size <= 1000, `${pool.size} strings kept`);
  t.end();
});

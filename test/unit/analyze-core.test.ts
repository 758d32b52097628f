import t from 'tap';
import { analyzeEventStreams, analyzeEvents } from '../../core/report/analyze';
import type { PacketEvent } from '../../common/event';
import { isHoptraceError } from '../../common/errors';
import {
  ADDR,
  CLIENT,
  DIRECT,
  INVENTORY,
  PROBE_REQUEST,
  T0,
  exchange,
  pt,
} from './fixtures-events';

const points = [
  pt('decap', exchange('decap', DIRECT, { synRetransmits: 1 })),
  pt('egress', exchange('egress', DIRECT, { at: 1n, synRetransmits: 1 })),
  pt('backend', exchange('backend', DIRECT, { at: 2n, synRetransmits: 1 })),
];

void t.test('analyzeEvents: verdict plus JSON-safe point summaries', (t) => {
  const r = analyzeEvents({ points, inventory: INVENTORY, selector: { client: CLIENT } });
  t.equal(r.verdict.layer, 'preserved');
  t.equal(r.points.length, 3);
  const b = r.points[2];
  t.equal(b?.name, 'backend');
  t.equal(b?.firstTsNs, (T0 + 2n).toString());
  t.equal(typeof b?.lastTsNs, 'string');
  t.equal(b?.packets, 8);
  t.equal(b?.retransmits, 1);
  t.equal(b?.seenRequest, true);
  t.equal(b?.seenReply, true);
  t.same(b?.observed, DIRECT);
  t.doesNotThrow(() => JSON.stringify(r));
  t.end();
});

void t.test('analyzeEvents: no request at the first point throws CLI_NO_REQUEST', (t) => {
  try {
    analyzeEvents({ points, inventory: INVENTORY, selector: { client: '10.1.2.3' } });
    t.fail('should throw');
  } catch (e: unknown) {
    t.ok(isHoptraceError(e));
    if (isHoptraceError(e)) {
      t.equal(e.code, 'CLI_NO_REQUEST');
      t.match(
        e.message,
        /^CLI_NO_REQUEST: decap: no new TCP connection .* from client 10\.1\.2\.3/,
      );
    }
  }
  t.throws(() => analyzeEvents({ points: [], inventory: INVENTORY, selector: {} }), {
    code: 'CLI_NO_REQUEST',
  });
  t.end();
});

void t.test('analyzeEvents: windowNs is honoured', (t) => {
  const late = [
    pt('decap', exchange('decap', DIRECT)),
    pt('backend', exchange('backend', DIRECT, { at: 3_000_000_000n })),
  ];
  // Outside a 1 s window the request's SYN is still found by its ISN, never called dropped: the
  // verdict follows it, and a caution says how far it was.
  const narrow = analyzeEvents({
    points: late,
    inventory: INVENTORY,
    selector: {},
    windowNs: 1_000_000_000n,
  });
  t.equal(narrow.verdict.layer, 'preserved');
  t.equal(narrow.points[1]?.outsideWindowNs, '3000000000');
  t.match(
    narrow.caveats?.[0] ?? '',
    /^backend: the request's SYN was found \+3\.0 s from its time at decap, outside the ±1\.0 s window/,
  );
  const wide = analyzeEvents({ points: late, inventory: INVENTORY, selector: {} });
  t.equal(wide.verdict.layer, 'preserved');
  t.equal(wide.caveats, undefined, 'within the default window: no caution');
  t.end();
});

void t.test('analyzeEventStreams: same result as analyzeEvents, keeping only what matters', (t) => {
  const PROXIED = { src: ADDR.proxyPod, sport: 51000, dst: ADDR.backendPod, dport: 8080 };
  const NAT = { src: '10.244.1.10', sport: 33000, dst: ADDR.backendPod, dport: 8080 };
  const noise = (point: string, n: number, at: bigint): PacketEvent[] => {
    const out: PacketEvent[] = [];
    for (let i = 0; i < n; i++) {
      const ep = { src: '10.244.7.1', sport: 20000 + i, dst: '10.244.8.1', dport: 443 };
      out.push(...exchange(point, ep, { isn: 1000 + i * 7919, at: at + BigInt(i), request: {} }));
    }
    return out;
  };
  const cases: { name: string; points: { name: string; events: PacketEvent[] }[] }[] = [
    { name: 'direct', points },
    {
      name: 'nat + proxy + noise',
      points: [
        pt('decap', [...noise('decap', 20, 0n), ...exchange('decap', DIRECT)]),
        pt('egress', [...exchange('egress', NAT, { at: 1n }), ...noise('egress', 20, 5n)]),
        pt('backend', [
          ...noise('backend', 20, 0n),
          ...exchange('backend', PROXIED, { at: 2n, isn: 99, request: PROBE_REQUEST }),
        ]),
      ],
    },
    {
      name: 'nothing TCP within the window at the backend',
      points: [
        pt('decap', exchange('decap', DIRECT)),
        pt('backend', noise('backend', 5, 60_000_000_000n)),
      ],
    },
    { name: 'empty later point', points: [pt('decap', exchange('decap', DIRECT)), pt('b', [])] },
  ];
  for (const c of cases) {
    for (const selector of [{}, { client: CLIENT }, { client: '10.1.2.3' }]) {
      const run = (f: () => unknown): unknown => {
        try {
          return f();
        } catch (e: unknown) {
          return isHoptraceError(e) ? e.message : String(e);
        }
      };
      const want = run(() => analyzeEvents({ points: c.points, inventory: INVENTORY, selector }));
      const got = run(() =>
        analyzeEventStreams({
          points: c.points.map((p) => ({ name: p.name, events: () => p.events })),
          inventory: INVENTORY,
          selector,
        }),
      );
      t.same(got, want, `${c.name} ${JSON.stringify(selector)}`);
    }
  }
  t.end();
});

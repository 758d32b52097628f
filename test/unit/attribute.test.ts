import t from 'tap';
import type { Inventory } from '../../common/inventory';
import type { PacketEvent } from '../../common/event';
import { attributeSourceRewrite, type Layer } from '../../core/attribute/attribute';
import { correlateRequest, type MatchKey } from '../../core/correlate/correlate';
import {
  ADDR,
  CLIENT,
  DIRECT,
  INVENTORY,
  ISN,
  PROBE_REQUEST,
  exchange,
  pt,
  tcp,
  SYN,
  T0,
  type Ep,
  type Pt,
} from './fixtures-events';

const toService: Ep = { src: CLIENT, sport: 40000, dst: ADDR.clusterIp, dport: 80 };
const toProxy: Ep = { src: CLIENT, sport: 40000, dst: ADDR.proxyPod, dport: 8080 };
const fromProxy: Ep = { src: ADDR.proxyPod, sport: 51000, dst: ADDR.backendPod, dport: 8080 };
const from = (src: string, base: Ep = DIRECT, sport = base.sport): Ep => ({ ...base, src, sport });

/** decap, egress, backend with the given tuples; `null` = no packet of the request there. */
function three(decap: Ep, egress: Ep, backend: Ep | null): Pt[] {
  return [
    pt('decap', exchange('decap', decap)),
    pt('egress', exchange('egress', egress, { at: 1n })),
    pt('backend', backend === null ? [] : exchange('backend', backend, { at: 2n })),
  ];
}

interface Row {
  name: string;
  points: Pt[];
  inventory?: Inventory;
  layer: Layer;
  between: [string, string] | null;
  /** Source the backend point observed (null: not seen). */
  backendSrc: string | null;
  backendMatchedBy?: MatchKey[];
  node?: string;
  reason?: RegExp;
  secondary?: Layer[];
}

/** The request direction of `events` only: a capture filtered on the client's packets. */
const requestOnly = (events: PacketEvent[], ep: Ep): PacketEvent[] =>
  events.filter((e) => e.inner?.src === ep.src && e.inner.sport === ep.sport);

const unrelated = exchange(
  'backend',
  { src: '10.244.2.77', sport: 1234, dst: ADDR.backendPod, dport: 8080 },
  { isn: 42, tsVal: 1, ipId: 1 },
);

const ROWS: Row[] = [
  {
    name: 'preserved',
    points: three(DIRECT, DIRECT, DIRECT),
    layer: 'preserved',
    between: null,
    backendSrc: CLIENT,
    backendMatchedBy: [
      'tcp-isn',
      'tcp-seq',
      'tsval',
      'ip-id',
      'probe-marker',
      'request-line',
      'payload-hash',
    ],
  },
  {
    name: 'vpn-pod: the pod masquerades before its egress',
    points: three(DIRECT, from(ADDR.vpnPod), from(ADDR.vpnPod)),
    layer: 'vpn-pod',
    between: ['decap', 'egress'],
    backendSrc: ADDR.vpnPod,
    node: 'vpn-node',
  },
  {
    name: 'cni-masquerade: egress still has the tunnel address, backend sees the VPN node uplink',
    points: three(DIRECT, DIRECT, from(ADDR.vpnNodeUplink)),
    layer: 'cni-masquerade',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeUplink,
    backendMatchedBy: [
      'tcp-isn',
      'tcp-seq',
      'tsval',
      'ip-id',
      'probe-marker',
      'request-line',
      'payload-hash',
    ],
    node: 'vpn-node',
  },
  {
    name: 'kube-proxy: ClusterIP DNATed to the pod, source masqueraded to the backend node bridge',
    points: three(toService, toService, {
      src: ADDR.backendNodeBridge,
      sport: 40000,
      dst: ADDR.backendPod,
      dport: 8080,
    }),
    layer: 'kube-proxy',
    between: ['egress', 'backend'],
    backendSrc: ADDR.backendNodeBridge,
    node: 'backend-node',
    reason: /DNATed 10\.96\.0\.10:80 -> 10\.244\.2\.5:8080/,
  },
  {
    name: 'kube-proxy --random-fully: the port changes too; ISN and TSval still match',
    points: three(toService, toService, {
      src: ADDR.backendNodeBridge,
      sport: 61234,
      dst: ADDR.backendPod,
      dport: 8080,
    }),
    layer: 'kube-proxy',
    between: ['egress', 'backend'],
    backendSrc: ADDR.backendNodeBridge,
    backendMatchedBy: [
      'tcp-isn',
      'tcp-seq',
      'tsval',
      'ip-id',
      'probe-marker',
      'request-line',
      'payload-hash',
    ],
  },
  {
    name: 'proxy matched by probe marker: new ISN, ports and source',
    points: [
      pt('decap', exchange('decap', toProxy)),
      pt('egress', exchange('egress', toProxy, { at: 1n })),
      pt(
        'backend',
        exchange('backend', fromProxy, {
          at: 5n,
          isn: 99999,
          tsVal: 31337,
          ipId: 7,
          request: { ...PROBE_REQUEST, payloadHash: 0x99999999, length: 140 },
        }),
      ),
    ],
    layer: 'proxy',
    between: ['egress', 'backend'],
    backendSrc: ADDR.proxyPod,
    backendMatchedBy: ['probe-marker', 'request-line'],
    node: 'backend-node',
    reason: /ISN 99999, not 4263588410.*proxy pod proxy-0/,
  },
  {
    name: 'proxy matched by request line (HTTP/1.1 in, HTTP/1.0 out: first bytes differ)',
    points: [
      pt(
        'decap',
        exchange('decap', toProxy, {
          request: { payloadHash: 0x1, requestLineHash: 0xabc, length: 78 },
        }),
      ),
      pt(
        'egress',
        exchange('egress', toProxy, {
          at: 1n,
          request: { payloadHash: 0x1, requestLineHash: 0xabc, length: 78 },
        }),
      ),
      pt(
        'backend',
        exchange('backend', fromProxy, {
          at: 5n,
          isn: 99999,
          tsVal: 31337,
          request: { payloadHash: 0x2, requestLineHash: 0xabc, length: 120 },
        }),
      ),
    ],
    layer: 'proxy',
    between: ['egress', 'backend'],
    backendSrc: ADDR.proxyPod,
    backendMatchedBy: ['request-line'],
  },
  {
    name: 'no-return: backend sees the client address and answers, the SYN-ACK never reaches egress',
    points: [
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 2 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only', synRetransmits: 2 })),
      pt(
        'backend',
        exchange('backend', DIRECT, { at: 2n, phase: 'syn-synack', synRetransmits: 2 }),
      ),
    ],
    layer: 'no-return',
    between: null,
    backendSrc: CLIENT,
    backendMatchedBy: ['tcp-isn', 'tsval', 'ip-id'],
    node: 'backend-node',
    reason: /reply was seen at backend and never came back to egress/,
  },
  {
    name: 'preserved: captures of the request direction only, the client ACKed the SYN-ACK: no no-return',
    points: [
      pt('decap', requestOnly(exchange('decap', DIRECT), DIRECT)),
      pt('egress', requestOnly(exchange('egress', DIRECT, { at: 1n }), DIRECT)),
      pt('backend', requestOnly(exchange('backend', DIRECT, { at: 2n }), DIRECT)),
    ],
    layer: 'preserved',
    between: null,
    backendSrc: CLIENT,
    reason:
      /^(?!.*reply came back).*the client acknowledged an answer \(its ACK at decap, frame 3\), though no point captured the reply itself/,
    secondary: ['unknown'],
  },
  {
    name: 'no-return: the reply reached egress and never decap (the client re-sent its SYN): not the backend node',
    points: [
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 1 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-synack', synRetransmits: 1 })),
      pt(
        'backend',
        exchange('backend', DIRECT, { at: 2n, phase: 'syn-synack', synRetransmits: 1 }),
      ),
    ],
    layer: 'no-return',
    between: null,
    backendSrc: CLIENT,
    reason: /the reply was seen at egress and backend and never came back to decap/,
  },
  {
    name: 'preserved: decap saw the reply come back, egress captured none of it',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', requestOnly(exchange('egress', DIRECT, { at: 1n }), DIRECT)),
      pt('backend', exchange('backend', DIRECT, { at: 2n })),
    ],
    layer: 'preserved',
    between: null,
    backendSrc: CLIENT,
    reason: /, and the reply came back$/,
    secondary: ['unknown'],
  },
  {
    name: 'rewritten AND no reply: the rewrite stays primary, no-return is secondary',
    points: [
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only' })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only' })),
      pt('backend', exchange('backend', from(ADDR.vpnNodeUplink), { at: 2n, phase: 'syn-synack' })),
    ],
    layer: 'cni-masquerade',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeUplink,
    secondary: ['no-return'],
  },
  {
    name: 'dropped: seen at decap and egress, the backend capture has only other traffic',
    points: [
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 1 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only', synRetransmits: 1 })),
      pt('backend', unrelated),
    ],
    layer: 'dropped',
    between: null,
    backendSrc: null,
    reason: /never at backend \(last seen at egress/,
  },
  {
    name: 'dropped: an empty backend capture after a full path reads as a drop, with a caveat',
    points: three(DIRECT, DIRECT, null),
    layer: 'dropped',
    between: null,
    backendSrc: null,
    reason: /holds no packets at all/,
  },
  {
    name: 'unknown: a missing point (nothing captured at egress)',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', []),
      pt('backend', exchange('backend', from(ADDR.vpnNodeUplink), { at: 2n })),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: ADDR.vpnNodeUplink,
    reason: /no events at all were captured at egress/,
  },
  {
    name: 'unknown: a point whose frames hoptrace cannot read is said as such, not as one that saw nothing',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      { ...pt('egress', []), capturedFrames: 2000 },
      pt('backend', exchange('backend', from(ADDR.vpnNodeUplink), { at: 2n })),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: ADDR.vpnNodeUplink,
    reason:
      /^(?!.*(saw nothing|no events at all)).*the egress capture holds 2000 frames, none a TCP segment.*so the path cannot be followed through it/,
  },
  {
    name: 'unknown: one point empty and one unreadable, each said as it is',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      { ...pt('egress', []), capturedFrames: 1 },
      pt('proxy', []),
      pt('backend', exchange('backend', from(ADDR.vpnNodeUplink), { at: 2n })),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: ADDR.vpnNodeUplink,
    reason:
      /no events at all were captured at proxy: the capture there did not run or saw nothing; the egress capture holds 1 frame, none/,
  },
  {
    name: 'unknown: rewritten to an address the inventory does not know',
    points: three(DIRECT, DIRECT, from('172.16.9.9')),
    layer: 'unknown',
    between: ['egress', 'backend'],
    backendSrc: '172.16.9.9',
    reason:
      /between egress and backend from 10\.90\.0\.42 to 172\.16\.9\.9, an address the inventory does not know/,
  },
  {
    name: 'unknown: empty inventory never guesses a layer',
    points: three(DIRECT, DIRECT, from(ADDR.vpnNodeUplink)),
    inventory: { nodes: {}, pods: {} },
    layer: 'unknown',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeUplink,
    // Said as such, not as "an address the inventory does not know (the inventory names no VPN pod…)".
    reason:
      /^(?!.*inventory does not know).*to 192\.168\.50\.1; no inventory was given \(or it names no node and no pod\)/,
  },
  {
    name: 'unknown: VPN pod and backend share a node and the Service was DNATed',
    points: three(toService, toService, {
      src: ADDR.vpnNodeBridge,
      sport: 40000,
      dst: '10.244.1.20',
      dport: 8080,
    }),
    inventory: {
      nodes: INVENTORY.nodes,
      pods: {
        'vpn-0': { ip: ADDR.vpnPod, node: 'vpn-node', role: 'vpn' },
        web: { ip: '10.244.1.20', node: 'vpn-node', role: 'backend' },
      },
    },
    layer: 'unknown',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeBridge,
    reason: /hosts both the VPN pod and the backend/,
  },
  {
    // A first version said "an address of node vpn-node, which hosts both the VPN pod and the
    // backend" although the inventory put the backend on backend-node.
    name: 'unknown: the address listed under both nodes (not one node hosting both), Service DNATed',
    points: three(toService, toService, {
      src: ADDR.vpnNodeUplink,
      sport: 40000,
      dst: '10.244.2.5',
      dport: 8080,
    }),
    inventory: {
      nodes: {
        ...INVENTORY.nodes,
        'backend-node': [...(INVENTORY.nodes['backend-node'] ?? []), ADDR.vpnNodeUplink],
      },
      pods: INVENTORY.pods,
    },
    layer: 'unknown',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeUplink,
    reason:
      /^(?!.*hosts both).*an address the inventory lists under both the VPN pod's node vpn-node and the backend's node backend-node/,
  },
  {
    name: 'unknown: two different connections at the backend share the ISN, nothing else decides',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', exchange('egress', DIRECT, { at: 1n })),
      pt('backend', [
        ...exchange('backend', from(ADDR.vpnNodeUplink), { at: 2n, tsVal: 1, ipId: 9 }),
        ...exchange('backend', from(ADDR.backendNodeBridge, DIRECT, 50000), {
          at: 3n,
          tsVal: 5,
          ipId: 99,
        }),
      ]),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: null,
    reason: /ambiguous match at backend.*candidates: /,
  },
  {
    name: 'unknown: two proxied connections carry the same request line',
    points: [
      pt(
        'decap',
        exchange('decap', toProxy, { request: { payloadHash: 0x1, requestLineHash: 0xabc } }),
      ),
      pt(
        'egress',
        exchange('egress', toProxy, {
          at: 1n,
          request: { payloadHash: 0x1, requestLineHash: 0xabc },
        }),
      ),
      pt('backend', [
        ...exchange('backend', fromProxy, {
          at: 5n,
          isn: 99999,
          request: { payloadHash: 0x2, requestLineHash: 0xabc },
        }),
        ...exchange(
          'backend',
          { ...fromProxy, sport: 51001 },
          { at: 6n, isn: 88888, request: { payloadHash: 0x3, requestLineHash: 0xabc } },
        ),
      ]),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: null,
    reason:
      /ambiguous match at backend: 2 different connections .*request-line.*10\.244\.2\.9:51000.*10\.244\.2\.9:51001/,
  },
  {
    name: 'retransmitted SYN: still one request, preserved',
    points: [
      pt('decap', exchange('decap', DIRECT, { synRetransmits: 2 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, synRetransmits: 2 })),
      pt('backend', exchange('backend', DIRECT, { at: 2n, synRetransmits: 2 })),
    ],
    layer: 'preserved',
    between: null,
    backendSrc: CLIENT,
  },
  {
    name: 'four points: the VPN node uplink capture pins the CNI masquerade to egress -> uplink',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', exchange('egress', DIRECT, { at: 1n })),
      pt('uplink', exchange('uplink', from(ADDR.vpnNodeUplink), { at: 2n })),
      pt('backend', exchange('backend', from(ADDR.vpnNodeUplink), { at: 3n })),
    ],
    layer: 'cni-masquerade',
    between: ['egress', 'uplink'],
    backendSrc: ADDR.vpnNodeUplink,
    node: 'vpn-node',
  },
  {
    name: 'cni-masquerade towards a Service: kube-proxy on the VPN node is named as the alternative',
    points: three(toService, toService, {
      src: ADDR.vpnNodeUplink,
      sport: 40000,
      dst: ADDR.backendPod,
      dport: 8080,
    }),
    layer: 'cni-masquerade',
    between: ['egress', 'backend'],
    backendSrc: ADDR.vpnNodeUplink,
    secondary: ['kube-proxy'],
  },
  {
    name: 'no backend point: unchanged from decap to egress is unknown, never preserved',
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', exchange('egress', DIRECT, { at: 1n })),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: null,
    reason:
      /^the source is unchanged from decap to egress \(10\.90\.0\.42\); the backend was not captured, so nothing is known of the path after egress/,
  },
  {
    name: "no backend point: the VPN pod's own rewrite is still named (a hop between captured points)",
    points: [
      pt('decap', exchange('decap', DIRECT)),
      pt('egress', exchange('egress', from(ADDR.vpnPod), { at: 1n })),
    ],
    layer: 'vpn-pod',
    between: ['decap', 'egress'],
    backendSrc: null,
    node: 'vpn-node',
    reason: /inside the VPN pod.*; the backend was not captured$/,
  },
  {
    name: 'no backend point: not seen at egress is unknown, never dropped',
    points: [
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only' })),
      pt(
        'egress',
        exchange(
          'egress',
          { src: '10.244.1.77', sport: 999, dst: ADDR.backendPod, dport: 8080 },
          { isn: 7, tsVal: 1, ipId: 1, phase: 'syn-only' },
        ),
      ),
    ],
    layer: 'unknown',
    between: null,
    backendSrc: null,
    reason: /^the request was seen at decap but not at egress; the backend was not captured/,
  },
];

for (const row of ROWS) {
  void t.test(row.name, (t) => {
    const journey = correlateRequest(row.points, { client: CLIENT });
    const v = attributeSourceRewrite(journey, row.inventory ?? INVENTORY, { clientIp: CLIENT });
    t.equal(v.layer, row.layer, `layer (reason: ${v.reason ?? '-'})`);
    t.same(v.rewrittenBetween, row.between, 'rewrittenBetween');
    t.equal(v.observed['backend']?.src ?? null, row.backendSrc, 'backend source');
    t.same(v.client, journey.request?.tuple ?? null, 'client tuple');
    if (row.backendMatchedBy !== undefined) {
      t.same(
        v.evidence.find((e) => e.point === 'backend')?.matchedBy,
        row.backendMatchedBy,
        'backend matchedBy',
      );
    }
    if (row.node !== undefined) t.equal(v.node, row.node, 'node');
    if (row.reason !== undefined) t.match(v.reason ?? '', row.reason, 'reason');
    if (row.secondary !== undefined)
      t.same(
        v.secondary?.map((s) => s.layer).filter((l) => row.secondary?.includes(l)),
        row.secondary,
        'secondary',
      );
    t.ok(v.hint.length > 20, 'has a hint');
    t.same(
      Object.keys(v).slice(0, 6),
      ['layer', 'rewrittenBetween', 'client', 'observed', 'evidence', 'hint'],
      'verdict keys',
    );
    t.doesNotThrow(() => JSON.stringify(v), 'JSON-safe');
    t.end();
  });
}

void t.test('hints carry the seed advice', (t) => {
  const hint = (points: Pt[]): string =>
    attributeSourceRewrite(correlateRequest(points, { client: CLIENT }), INVENTORY).hint;
  const noReturn = [
    pt('decap', exchange('decap', DIRECT, { phase: 'syn-only' })),
    pt('egress', exchange('egress', DIRECT, { phase: 'syn-only' })),
    pt('backend', exchange('backend', DIRECT, { phase: 'syn-synack' })),
  ];
  t.match(hint(noReturn), /10\.90\.0\.0\/24.*rp_filter=2/);
  const vpnDrop = [
    pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 1 })),
    pt('egress', exchange('egress', DIRECT, { phase: 'syn-synack', synRetransmits: 1 })),
    pt('backend', exchange('backend', DIRECT, { phase: 'syn-synack', synRetransmits: 1 })),
  ];
  t.match(
    hint(vpnDrop),
    /came back as far as egress and never reached decap, so the route from the backend toward egress works.*AllowedIPs/,
    'a reply lost inside the VPN pod: its route and accepted addresses, not the backend node',
  );
  t.equal(
    attributeSourceRewrite(correlateRequest(vpnDrop, { client: CLIENT }), INVENTORY).node,
    undefined,
    'and no backend node named as where it was lost',
  );
  t.match(hint(three(DIRECT, DIRECT, from(ADDR.vpnNodeUplink))), /non-masquerade CIDRs/);
  t.match(hint(three(DIRECT, DIRECT, DIRECT)), /denied.*delete the VPN pod/s);
  t.match(
    attributeSourceRewrite(
      correlateRequest(three(DIRECT, DIRECT, from(ADDR.vpnNodeUplink)), { client: CLIENT }),
      { nodes: {}, pods: {} },
    ).hint,
    /^give an inventory \(`--inventory inventory\.json`/,
    'no inventory: the hint asks for one, not for a missing point',
  );
  t.end();
});

void t.test('the first packet of the proxy case names the proxy pod', (t) => {
  const row = ROWS.find((r) => r.layer === 'proxy');
  const v = attributeSourceRewrite(
    correlateRequest(row?.points ?? [], { client: CLIENT }),
    INVENTORY,
  );
  t.match(v.reason ?? '', /proxy pod proxy-0 \(10\.244\.2\.9/);
  t.match(v.hint, /proxy-0.*X-Forwarded-For/);
  t.same(v.after, fromProxy);
  t.end();
});

// Property: attribution is total. Random journeys (some structurally broken) never throw.
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let r = Math.imul(a ^ (a >>> 15), 1 | a);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

void t.test(
  'attributeSourceRewrite never throws (random events, random journeys, broken input)',
  (t) => {
    const rnd = mulberry32(20261129);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const addrs = [
      CLIENT,
      ADDR.vpnPod,
      ADDR.vpnNodeUplink,
      ADDR.backendNodeBridge,
      ADDR.backendPod,
      ADDR.proxyPod,
      '172.16.9.9',
    ];
    const layers = new Set<Layer>([
      'preserved',
      'vpn-pod',
      'cni-masquerade',
      'kube-proxy',
      'proxy',
      'no-return',
      'dropped',
      'unknown',
    ]);
    const invs: Inventory[] = [
      INVENTORY,
      { nodes: {}, pods: {} },
      { nodes: INVENTORY.nodes, pods: {} },
    ];
    let throws = 0;
    for (let i = 0; i < 400; i++) {
      const names = ['decap', 'egress', 'uplink', 'backend'].slice(0, 1 + Math.floor(rnd() * 4));
      const points = names.map((name) => {
        const n = Math.floor(rnd() * 8);
        const events = Array.from({ length: n }, (_, k) =>
          tcp(
            name,
            {
              src: pick(addrs),
              sport: pick([40000, 50000]),
              dst: pick(addrs),
              dport: pick([80, 8080]),
            },
            {
              flags: pick([SYN, SYN | 0x10, 0x10, 0x18, 0x11]),
              seq: pick([ISN, (ISN + 1) >>> 0, 5]),
              ack: pick([(ISN + 1) >>> 0, 7]),
              tsVal: pick([777000, 1]),
              ts: T0 + BigInt(k) * 1_000_000n,
              payloadLength: pick([0, 78]),
              probeMarker: pick(['abc123', 'zzz']),
              requestLineHash: pick([1, 2]),
            },
          ),
        );
        return pt(name, events);
      });
      try {
        const v = attributeSourceRewrite(correlateRequest(points, {}), pick(invs), {
          clientIp: pick([undefined, CLIENT]),
        });
        if (!layers.has(v.layer)) throws++;
        JSON.stringify(v);
      } catch {
        throws++;
      }
    }
    const broken: unknown[] = [
      null,
      {},
      { points: 5 },
      { request: {}, points: [{}] },
      {
        request: { tuple: DIRECT },
        points: [null, { point: 'x', status: 'matched', observed: 3 }],
      },
    ];
    for (const j of broken) {
      try {
        const v = attributeSourceRewrite(
          j as Parameters<typeof attributeSourceRewrite>[0],
          null as unknown as Inventory,
        );
        if (v.layer !== 'unknown') throws++;
      } catch {
        throws++;
      }
    }
    t.equal(throws, 0);
    t.end();
  },
);

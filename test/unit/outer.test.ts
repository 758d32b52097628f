/**
 * The outer connection (issue 15): the tunnel packet that carried the request to the VPN pod, as
 * the VPN pod's egress capture saw it, and what its source says of the VPN's public Service — a
 * node address (masqueraded: externalTrafficPolicy: Cluster) or the peer's own (Local). A VXLAN
 * packet with the request inside is found by its inner tuple; a WireGuard one (opaque) as the
 * tunnel packet captured last before the request. Both analyze paths must agree (shape-fixtures).
 */
import t from 'tap';
import { renderReportMarkdown, renderVerdictText } from '../../core/report/report';
import { tcp, udp, vxlan, wireguardData, type Pkt, type Seg } from './frames';
import { analyze, BACKEND, CLIENT, files, MS, point, T0, US, VPN_POD } from './shape-fixtures';

const NODE_BRIDGE = '10.244.1.1';
const PEER = '203.0.113.2';

const c: Seg = {
  src: CLIENT,
  sport: 41000,
  dst: BACKEND,
  dport: 8080,
  seq: 0x5000,
  flags: 0x02,
  ipId: 11,
};
const s: Seg = {
  src: BACKEND,
  sport: 8080,
  dst: CLIENT,
  dport: 41000,
  seq: 0x9000,
  ack: 0x5001,
  flags: 0x12,
  ipId: 12,
};

/** The client's SYN and the SYN-ACK at `t0`, as a point outside any tunnel sees them. */
const plain = (t0: bigint): Pkt[] => [tcp(t0, c), tcp(t0 + 300n * US, s)];

/** The VPN pod's eth0: the SYN arriving inside VXLAN from `outerSrc`, then forwarded, and the SYN-ACK. */
const egressVxlan = (outerSrc: string): Pkt[] => [
  vxlan(T0 - 20n * US, outerSrc, 47000, VPN_POD, 42, tcp(T0 - 20n * US, c)),
  ...plain(T0 + 10n * US),
];

const SEL = { client: CLIENT, dst: BACKEND };

void t.test(
  'VXLAN from a node address (the Service masqueraded the peer): outer class node',
  (t) => {
    const r = analyze(t, files(plain(T0), egressVxlan(NODE_BRIDGE), plain(T0 + 50n * US)), SEL);
    if (r === null) return t.end();
    t.equal(r.verdict.layer, 'preserved', 'the request itself is untouched');
    const o = r.verdict.outer;
    t.equal(o?.class, 'node');
    t.equal(o?.node, 'vpn-node');
    t.equal(o?.src, NODE_BRIDGE);
    t.equal(o?.dport, 4789);
    t.equal(o?.by, 'inner-tuple');
    t.equal(o?.point, 'egress');
    t.match(o?.detail ?? '', /externalTrafficPolicy: Cluster/);
    t.equal(point(r, 'egress').retransmits, 0, "the tunnel's copy is no retransmission");
    t.match(renderVerdictText(r), /outer: {2}node: /);
    t.match(
      renderReportMarkdown(r, { generatedAt: '1970-01-01T00:00:00Z', inputs: [] }),
      /- outer connection \(node\): /,
    );
    t.end();
  },
);

void t.test("VXLAN from the peer's own address: outer class external", (t) => {
  const r = analyze(t, files(plain(T0), egressVxlan(PEER), plain(T0 + 50n * US)), SEL);
  t.equal(r?.verdict.outer?.class, 'external');
  t.match(r?.verdict.outer?.detail ?? '', /externalTrafficPolicy: Local/);
  t.end();
});

void t.test(
  'WireGuard (opaque): the tunnel packet captured last before the request, peers counted',
  (t) => {
    const egress = [
      wireguardData(T0 - 500n * MS, '198.51.100.7', 51820, VPN_POD, 51820, 80),
      wireguardData(T0 - 40n * US, PEER, 51820, VPN_POD, 51820, 96),
      // After the request: not what carried it.
      wireguardData(T0 + 1n * MS, '198.51.100.9', 51820, VPN_POD, 51820, 96),
      ...plain(T0 + 10n * US),
    ];
    const r = analyze(t, files(plain(T0), egress, plain(T0 + 50n * US)), SEL);
    const o = r?.verdict.outer;
    t.equal(o?.tunnel, 'wireguard');
    t.equal(o?.src, PEER);
    t.equal(o?.by, 'nearest');
    t.equal(o?.class, 'external');
    t.match(o?.detail ?? '', /2 tunnel flows seen in that second/);
    t.end();
  },
);

void t.test('no tunnel packet captured: no outer finding', (t) => {
  const r = analyze(t, files(plain(T0), plain(T0), plain(T0)), SEL);
  t.equal(r?.verdict.outer, undefined);
  t.end();
});

void t.test('ESP in UDP (NAT-T, opaque): found the same way', (t) => {
  const esp = (ts: bigint, src: string): Pkt =>
    udp(ts, { src, sport: 4500, dst: VPN_POD, dport: 4500, payload: Buffer.alloc(88, 7) });
  const egress = [
    esp(T0 - 300n * MS, '198.51.100.7'),
    esp(T0 - 30n * US, NODE_BRIDGE),
    ...plain(T0 + 10n * US),
  ];
  const r = analyze(t, files(plain(T0), egress, plain(T0 + 50n * US)), SEL);
  t.equal(r?.verdict.outer?.tunnel, 'esp');
  t.equal(r?.verdict.outer?.class, 'node');
  t.end();
});

void t.test(
  'a WireGuard packet before the SYN at the first point (an `any` capture) is found on the fast path too',
  (t) => {
    const decap = [wireguardData(T0 - 25n * US, PEER, 51820, VPN_POD, 51820, 96), ...plain(T0)];
    const r = analyze(t, files(decap, plain(T0 + 10n * US), plain(T0 + 50n * US)), SEL);
    t.equal(r?.verdict.outer?.point, 'decap');
    t.equal(r?.verdict.outer?.src, PEER);
    t.end();
  },
);

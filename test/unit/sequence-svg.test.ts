// The sequence picture: one lane per point, the request's packets as arrows between consecutive
// lanes (requests left to right, replies right to left), the rewritten field highlighted at the
// hop that rewrote it, where the request or reply stopped, notes next to their hop, and markup
// that is well-formed, escaped and self-contained.
import t from 'tap';
import { renderSequenceSvg } from '../../core/report/sequence-svg';
import { buildTraces, selectTraces } from '../../core/report/sequence-traces';
import { esc } from '../../core/report/markup';
import { utcMicros } from '../../core/report/times';
import { withConntrackEvidence } from '../../core/attribute/conntrack-evidence';
import { parseConntrackOutput } from '../../core/doctor/conntrack';
import type { PacketEvent } from '../../common/event';
import { ADDR, DIRECT, exchange, pt } from './fixtures-events';
import { SCENARIOS, analyze, three, type ScenarioName } from './fixtures-scenarios';
import { attrOf, count, markupErrors } from './markup-check';

/** Arrows per direction, highlighted hops, stops: what each scenario must draw. */
const EXPECT: Record<
  ScenarioName,
  { request: number; reply: number; changed: string[]; stops: string[]; text?: RegExp[] }
> = {
  // 7 packets (SYN, SYN-ACK, ACK, request, ACK, response, FIN), each across both hops.
  preserved: { request: 8, reply: 6, changed: [], stops: [] },
  'cni-masquerade': {
    request: 8,
    reply: 6,
    changed: ['egress→backend src request', 'egress→backend dst reply'],
    stops: [],
    text: [
      /src 10\.90\.0\.42:40000 → 192\.168\.50\.1:61000/,
      /dst 192\.168\.50\.1:61000 → 10\.90\.0\.42:40000/,
    ],
  },
  'kube-proxy': {
    request: 8,
    reply: 6,
    changed: [
      'egress→backend src request',
      'egress→backend dst request',
      'egress→backend src reply',
      'egress→backend dst reply',
    ],
    stops: [],
    text: [
      /src 10\.90\.0\.42:40000 → 10\.244\.2\.1:40000/,
      /dst 10\.96\.0\.10:80 → 10\.244\.2\.5:8080/,
    ],
  },
  // The client's connection ends at the proxy: only decap → egress crossings; the backend's
  // connection is drawn from the proxy (stubs), never as the same packets.
  proxy: { request: 4, reply: 3, changed: [], stops: [] },
  // SYN and its retransmission reach egress and go no further.
  dropped: {
    request: 2,
    reply: 0,
    changed: [],
    stops: ['egress', 'egress'],
    text: [/request not seen at backend/, /no reply seen at any point/],
  },
  // Three SYNs all the way; the backend's SYN-ACK never reaches egress.
  'no-return': {
    request: 6,
    reply: 0,
    changed: [],
    stops: ['backend'],
    text: [/no reply seen past backend/],
  },
};

for (const name of Object.keys(EXPECT) as ScenarioName[]) {
  void t.test(`${name}: lanes, arrows, highlight, stops, well-formed`, (t) => {
    const r = SCENARIOS[name]();
    t.equal(r.verdict.layer, name);
    const svg = renderSequenceSvg(r);
    const e = EXPECT[name];
    t.strictSame(markupErrors(svg), [], 'well-formed');
    t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" [^>]*viewBox="0 0 \d+ \d+"/);
    t.match(svg, /<title id="hoptrace-seq-title">[^<]+<\/title><desc id="hoptrace-seq-desc">/);
    t.equal(count(svg, 'class="lane"'), r.points.length, 'one lane per point');
    t.strictSame(attrOf(svg, 'class="lane"', 'data-point'), ['decap', 'egress', 'backend']);
    t.equal(count(svg, 'class="arrow request"'), e.request, 'request arrows');
    t.equal(count(svg, 'class="arrow reply"'), e.reply, 'reply arrows');
    const hops = attrOf(svg, 'class="changed"', 'data-hop');
    const fields = attrOf(svg, 'class="changed"', 'data-field');
    const dirs = attrOf(svg, 'class="changed"', 'data-dir');
    t.strictSame(
      hops.map((h, i) => `${h} ${fields[i] ?? ''} ${dirs[i] ?? ''}`),
      e.changed,
      'highlighted at the hop that rewrote',
    );
    t.strictSame(attrOf(svg, 'class="stop"', 'data-point'), e.stops, 'stop marks');
    for (const re of e.text ?? []) t.match(svg, re);
    t.equal(count(svg, 'class="latency"'), r.points.length - 1, 'a latency per hop');
    t.notMatch(svg, /<script/i);
    t.notMatch(svg.replace('xmlns="http://www.w3.org/2000/svg"', ''), /https?:/);
    t.notMatch(svg, /\s(?:href|src|xlink:href)=/);
    const t0 = r.points[0]?.flow[0]?.tsNs ?? '';
    t.ok(svg.includes(utcMicros(t0)), 'the first packet in UTC');
    t.end();
  });
}

void t.test('packets in time order: the handshake first, labelled by flags', (t) => {
  const svg = renderSequenceSvg(SCENARIOS.preserved());
  const labels = [
    ...svg.matchAll(
      /<g class="arrow (?:request|reply)" data-from="(?:decap|egress)" data-to="(?:egress|decap)"[^>]*>.*?<tspan[^>]*>([^<]+)<\/tspan>/g,
    ),
  ].map((m) => m[1]);
  t.strictSame(labels, [
    'SYN',
    'SYN-ACK',
    'ACK',
    'PSH-ACK 78 B',
    'ACK',
    'PSH-ACK 120 B',
    'FIN-ACK',
  ]);
  const order = ['decap', 'egress', 'backend'];
  const to = attrOf(svg, 'class="arrow reply"', 'data-to');
  t.ok(
    attrOf(svg, 'class="arrow reply"', 'data-from').every(
      (f, i) => order.indexOf(f) === order.indexOf(to[i] ?? '') + 1,
    ),
    'replies travel right to left',
  );
  const rto = attrOf(svg, 'class="arrow request"', 'data-to');
  t.ok(
    attrOf(svg, 'class="arrow request"', 'data-from').every(
      (f, i) => order.indexOf(f) + 1 === order.indexOf(rto[i] ?? ''),
    ),
    'requests left to right',
  );
  t.end();
});

void t.test('rows follow the first point’s clock, not a skewed backend clock', (t) => {
  // The backend's clock runs 2.3 s behind: by raw times its SYN-ACK precedes the decap SYN.
  const skew = -2_345_678_901n;
  const backend = exchange(
    'backend',
    { ...DIRECT, src: ADDR.vpnNodeUplink, sport: 61000 },
    {
      at: 200_000n,
    },
  ).map((e): PacketEvent => {
    const reply = e.inner?.src === ADDR.backendPod;
    return { ...e, tsNs: e.tsNs + skew - (reply ? 900_000n : 0n) };
  });
  const r = analyze([pt('decap', exchange('decap', DIRECT)), pt('backend', backend)]);
  t.equal(r.clock?.[1]?.status, 'bounded');
  const traces = buildTraces(r);
  t.equal(traces[0]?.dir, 'request');
  t.equal(traces[0]?.sightings.length, 2, 'the SYN at decap and at backend is one packet');
  t.equal(traces[1]?.dir, 'reply');
  t.ok(traces.every((x, i) => i === 0 || (traces[i - 1]?.startNs ?? 0n) <= x.startNs));
  t.end();
});

void t.test(
  'more packets than drawn: the handshake, FIN/RST and first data kept, "+N more"',
  (t) => {
    const r = SCENARIOS.preserved();
    const { shown, omitted } = selectTraces(buildTraces(r), 5);
    t.equal(omitted, 2);
    t.strictSame(
      shown.map((x) => x.sightings[0].packet.flags),
      [0x02, 0x12, 0x18, 0x18, 0x11],
      'pure ACKs go first',
    );
    const svg = renderSequenceSvg(r, { maxPackets: 5 });
    t.match(svg, /\+2 more packets of the connection not drawn/);
    t.equal(count(svg, 'class="arrow request"'), 6);
    t.strictSame(markupErrors(svg), []);
    t.end();
  },
);

void t.test('lane labels, findings and conntrack entries next to the hop they concern', (t) => {
  const r = SCENARIOS['cni-masquerade']();
  const [entry] = parseConntrackOutput(
    'tcp      6 117 TIME_WAIT src=10.90.0.42 dst=10.244.2.5 sport=40000 dport=8080 src=10.244.2.5 dst=192.168.50.1 sport=8080 dport=61000 [ASSURED] mark=0 use=1\n',
    { name: 'vpn-node', netns: '/run/netns/x', node: 'vpn-node' },
  );
  if (entry === undefined) throw new Error('no entry');
  const withCt = { ...r, verdict: withConntrackEvidence(r.verdict, [entry]) };
  const svg = renderSequenceSvg(withCt, {
    lanes: [{ point: 'decap', namespace: 'vpn/wg-0', iface: 'wg0', node: 'node-a' }],
    notes: [
      { hop: { from: 'egress', to: 'backend' }, text: 'nat POSTROUTING masquerades 10.90.0.0/24' },
      { point: 'backend', text: 'rp_filter=1 on eth0' },
      { hop: { from: 'decap', to: 'backend' }, text: 'not a hop' },
    ],
  });
  t.strictSame(markupErrors(svg), []);
  t.match(svg, /netns vpn\/wg-0/);
  t.match(svg, /iface wg0/);
  t.match(svg, /node node-a/);
  t.strictSame(attrOf(svg, 'class="note finding"', 'data-hop'), ['egress→backend']);
  t.strictSame(attrOf(svg, 'class="note finding"', 'data-point'), ['backend']);
  t.strictSame(attrOf(svg, 'class="note conntrack"', 'data-hop'), ['egress→backend']);
  t.match(svg, /conntrack vpn-node on vpn-node: orig 10\.90\.0\.42:40000/);
  t.match(svg, /decap → backend: not a hop/, 'a note on no hop goes to the footer');
  t.match(svg, /conntrack confirms/);
  t.end();
});

void t.test('hostile names render as text', (t) => {
  const evil = '<script>alert("x")</script>&amp;';
  const r = analyze(
    three(DIRECT, DIRECT, { ...DIRECT, src: ADDR.vpnNodeUplink }, ['decap', evil, 'backend']),
  );
  const svg = renderSequenceSvg(r, {
    lanes: [{ point: evil, namespace: '<b>ns</b>', iface: 'eth0" onload="x' }],
    notes: [{ point: evil, text: '</text><script>bad()</script>' }],
  });
  t.strictSame(markupErrors(svg), []);
  t.notMatch(svg, /<script/i);
  t.notMatch(svg, /<b>/);
  t.notMatch(svg, /onload="/);
  t.ok(svg.includes(esc(evil)), 'the name as escaped text');
  t.ok(svg.includes(`data-point="${esc(evil)}"`));
  t.end();
});

void t.test('escaping: markup, quotes and characters XML forbids', (t) => {
  t.equal(esc(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  t.equal(esc('a\u0000b\u001bc\ud800d\tok'), 'a\ufffdb\ufffdc\ufffdd\tok');
  t.equal(esc('😀'), '😀', 'a surrogate pair stays');
  t.end();
});

void t.test('a point that saw nothing, and no points at all', (t) => {
  const r = analyze([
    pt('decap', exchange('decap', DIRECT)),
    pt('egress', []),
    pt('backend', exchange('backend', { ...DIRECT, src: ADDR.vpnNodeUplink }, { at: 2n })),
  ]);
  const svg = renderSequenceSvg(r);
  t.strictSame(markupErrors(svg), []);
  t.match(svg, /captured nothing/);
  t.ok(count(svg, 'class="missed"') > 0, 'crossings skip the lane that captured nothing');
  const empty = renderSequenceSvg({ ...r, points: [], hops: [], clock: [] });
  t.strictSame(markupErrors(empty), []);
  t.equal(count(empty, 'class="lane"'), 0);
  t.end();
});

import t from 'tap';
import { analyzeEvents } from '../../core/report/analyze';
import {
  formatEndpoint,
  renderReportJson,
  renderReportMarkdown,
  renderVerdictText,
} from '../../core/report/report';
import { ADDR, CLIENT, DIRECT, INVENTORY, exchange, pt } from './fixtures-events';

const cni = analyzeEvents({
  points: [
    pt('decap', exchange('decap', DIRECT)),
    pt('egress', exchange('egress', DIRECT, { at: 1n })),
    pt(
      'backend',
      exchange('backend', { ...DIRECT, src: ADDR.vpnNodeUplink, sport: 61000 }, { at: 2n }),
    ),
  ],
  inventory: INVENTORY,
  selector: { client: CLIENT },
});

void t.test('text: layer in words, where, before => after, proof, hint', (t) => {
  const text = renderVerdictText(cni);
  t.match(text, /^verdict: cni-masquerade — source rewritten by the VPN node's CNI masquerade\n/);
  t.match(text, /where: {2}between egress and backend on node vpn-node/);
  t.match(
    text,
    /source: 10\.90\.0\.42:40000 -> 10\.244\.2\.5:8080 {2}=> {2}192\.168\.50\.1:61000 -> 10\.244\.2\.5:8080/,
  );
  t.match(text, /proof: {2}decap: selector; egress: tcp-isn\+.*; backend: tcp-isn\+/);
  t.match(
    text,
    /hint: {3}the VPN node's masquerade rule does not exclude the tunnel range; exclude 10\.90\.0\.0\/24/,
  );
  t.end();
});

void t.test('markdown: verdict, one table row per point, evidence, reproduce command', (t) => {
  const md = renderReportMarkdown(cni, {
    generatedAt: '2026-11-29T10:00:00.000Z',
    inputs: [
      { name: 'decap', file: '/caps/decap.pcap' },
      { name: 'egress', file: '/caps/my egress.pcap' },
      { name: 'backend', file: '/caps/backend.pcap' },
    ],
    inventory: 'inv.json',
    selector: { client: CLIENT, dst: ADDR.backendPod, dport: 8080 },
  });
  t.match(md, /^# hoptrace: cni-masquerade\n/);
  t.match(md, /- generated: 2026-11-29T10:00:00\.000Z/);
  const rows = md.split('\n').filter((l) => /^\| (decap|egress|backend) \|/.test(l));
  t.equal(rows.length, 3);
  t.match(
    rows[2] ?? '',
    /\| backend \| matched \| yes \| yes \| `192\.168\.50\.1:61000 -> 10\.244\.2\.5:8080` \| 1700000000000000002 \|/,
  );
  t.match(md, /- \*\*backend\*\* \(tcp-isn, .*\): SYN seq 4263588410 seen at decap and at backend/);
  t.match(
    md,
    "hoptrace analyze --point decap=/caps/decap.pcap --point 'egress=/caps/my egress.pcap' --point backend=/caps/backend.pcap --inventory inv.json --client 10.90.0.42 --dst 10.244.2.5:8080",
  );
  t.match(md, /delete it/);
  t.end();
});

void t.test('markdown cells escape pipes', (t) => {
  const r = structuredClone(cni);
  const p = r.points[0];
  if (p !== undefined) p.name = 'a|b';
  t.match(renderReportMarkdown(r, { generatedAt: 'x', inputs: [] }), /\| a\\\|b \|/);
  t.end();
});

void t.test('json: round-trips, no bigint', (t) => {
  const json = renderReportJson(cni);
  t.ok(json.endsWith('\n'));
  t.same(JSON.parse(json), JSON.parse(JSON.stringify(cni)));
  t.equal(
    formatEndpoint({ src: 'fd00::1', sport: 1, dst: 'fd00::2', dport: 2 }),
    '[fd00::1]:1 -> [fd00::2]:2',
  );
  t.equal(formatEndpoint(null), '(not seen)');
  t.end();
});

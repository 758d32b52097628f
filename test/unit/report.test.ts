import t from 'tap';
import {
  formatEndpoint,
  renderReportJson,
  renderReportMarkdown,
  renderVerdictText,
} from '../../core/report/report';
import { ADDR, CLIENT } from './fixtures-events';
import { cni } from './live-report-fixtures';
import { reportSchemaErrors } from './report-schema';

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
    /hint: {3}the VPN node's masquerade rule does not exclude the tunnel range; exclude it \(e\.g\. 10\.90\.0\.0\/24\)/,
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
  const table = md.split('## Capture points (in path order)')[1]?.split('\n\n')[1] ?? '';
  const rows = table.split('\n').filter((l) => /^\| (decap|egress|backend) \|/.test(l));
  t.equal(rows.length, 3);
  // People read UTC with microseconds (the nanoseconds stay in JSON).
  t.match(
    rows[2] ?? '',
    /\| backend \| matched \| yes \| yes \| `192\.168\.50\.1:61000 -> 10\.244\.2\.5:8080` \| 2023-11-14T22:13:20\.000000Z \|/,
  );
  t.match(md, /## Timing\n/);
  t.match(md, /## What to change\n\nIn short: the VPN node's masquerade rule/);
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

void t.test('json: the analysis beside its evidence, round-trips, no bigint', (t) => {
  const meta = {
    generatedAt: '2026-11-29T10:00:00.000Z',
    inputs: [
      { name: 'decap', file: '/caps/decap.pcap' },
      { name: 'egress', file: '/caps/egress.pcap' },
    ],
  };
  const json = renderReportJson(cni, meta);
  t.ok(json.endsWith('\n'));
  const doc = JSON.parse(json) as Record<string, unknown>;
  // The analysis's members at the top, as `analyze --json` prints them: readers of either agree.
  for (const [k, v] of Object.entries(JSON.parse(JSON.stringify(cni)) as Record<string, unknown>))
    t.same(doc[k], v, k);
  t.match(doc, {
    schemaVersion: 1,
    generatedAt: '2026-11-29T10:00:00.000Z',
    source: 'files',
    doctor: { status: 'not-run' },
    whatToChange: { layer: 'cni-masquerade' },
    reproduce: { command: /^hoptrace analyze --point decap=\/caps\/decap\.pcap/ },
  });
  t.strictSame(reportSchemaErrors(doc), [], 'valid against proto/report.schema.json');
  t.equal(
    formatEndpoint({ src: 'fd00::1', sport: 1, dst: 'fd00::2', dport: 2 }),
    '[fd00::1]:1 -> [fd00::2]:2',
  );
  t.equal(formatEndpoint(null), '(not seen)');
  t.end();
});

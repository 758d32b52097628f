// The HTML report: one self-contained page that says what report.md says, with the sequence
// picture inline; well-formed, escaped, no script, nothing fetched, UTC times.
import t from 'tap';

import { renderReportHtml } from '../../core/report/report-html';
import { renderReportMarkdown, type ReportMeta } from '../../core/report/report';
import { withCaptureHealth } from '../../core/report/capture-health';
import { esc } from '../../core/report/markup';
import { utcMicros } from '../../core/report/times';
import { withConntrackEvidence } from '../../core/attribute/conntrack-evidence';
import { parseConntrackOutput } from '../../core/doctor/conntrack';
import { ADDR, CLIENT, DIRECT } from './fixtures-events';
import { cni, liveMeta } from './live-report-fixtures';
import { SCENARIOS, analyze, three, type ScenarioName } from './fixtures-scenarios';
import { count, markupErrors } from './markup-check';

const META: ReportMeta = {
  generatedAt: '2026-12-02T10:00:00.000Z',
  inputs: [
    { name: 'decap', file: '/caps/decap.pcap' },
    { name: 'egress', file: "/caps/it's <egress>.pcap" },
    { name: 'backend', file: '/caps/backend.pcap' },
  ],
  inventory: 'inv.json',
  selector: { client: CLIENT, dst: ADDR.backendPod, dport: 8080 },
};

type Tap = typeof t;

/** Everything a page may not hold: a script, a handler, a reference to load. */
function selfContained(t: Pick<Tap, 'notMatch'>, html: string): void {
  // Text is escaped, so every `<` starts a tag: attributes are looked for in tags only.
  const tags = [...html.matchAll(/<[^>]*>/g)].map((m) => m[0]).join('\n');
  t.notMatch(html, /<script/i, 'no script');
  t.notMatch(tags, /\son[a-z]+=/i, 'no event handler');
  t.notMatch(tags, /\s(?:src|href|xlink:href|action|formaction)=/i, 'nothing referenced');
  t.notMatch(tags, /<(?:link|iframe|object|embed|img|image|use|foreignObject)\b/i);
  t.notMatch(html, /@import|url\(/i, 'no CSS fetch');
  t.notMatch(html.replaceAll('xmlns="http://www.w3.org/2000/svg"', ''), /https?:/, 'no URL');
}

for (const name of Object.keys(SCENARIOS) as ScenarioName[]) {
  void t.test(`${name}: a well-formed, self-contained page with the picture inline`, (t) => {
    const r = SCENARIOS[name]();
    const html = renderReportHtml(r, META);
    t.strictSame(markupErrors(html, true), [], 'well-formed');
    t.match(html, /^<!DOCTYPE html>\n<html lang="en">/);
    t.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none';/);
    selfContained(t, html);
    t.equal(count(html, '<svg xmlns="http://www.w3.org/2000/svg"'), 1, 'the picture, inline');
    t.equal(count(html, 'class="lane"'), r.points.length);
    t.match(html, new RegExp(`<h1>hoptrace: ${name}</h1>`));
    for (const h of [
      'Capture points (in path order)',
      'Clocks and hops',
      'Evidence',
      'What to do',
      'Reproduce',
    ])
      t.ok(html.includes(`<h2>${h}</h2>`), h);
    t.ok(html.includes(esc(r.verdict.hint)), 'what to do');
    for (const p of r.points) {
      if (p.firstTsNs !== null) t.ok(html.includes(utcMicros(p.firstTsNs)), `${p.name} in UTC`);
      for (const e of r.verdict.evidence) t.ok(html.includes(esc(e.detail)));
    }
    if (r.verdict.reason !== undefined) t.ok(html.includes(esc(r.verdict.reason)), 'why');
    t.end();
  });
}

void t.test('what report.md says: where, before → after, the same reproduce command', (t) => {
  const r = SCENARIOS['cni-masquerade']();
  const html = renderReportHtml(r, META);
  const md = renderReportMarkdown(r, META);
  t.match(html, /<dt>where<\/dt><dd>between egress and backend on node vpn-node<\/dd>/);
  t.match(
    html,
    /<dt>source<\/dt><dd><code>10\.90\.0\.42:40000 -&gt; 10\.244\.2\.5:8080<\/code> → <code>192\.168\.50\.1:61000 -&gt; 10\.244\.2\.5:8080<\/code><\/dd>/,
  );
  const command = /```sh\n(.*)\n```/.exec(md)?.[1] ?? 'missing';
  t.match(command, /^hoptrace analyze --point decap=/);
  t.ok(html.includes(`<pre class="command"><code>${esc(command)}</code></pre>`));
  t.ok(html.includes(`<code>${esc("/caps/it's <egress>.pcap")}</code>`), 'inputs, escaped');
  t.match(html, /delete it/);
  t.equal(
    count(html, '<tr><td>'),
    r.points.length + (r.clock?.length ?? 0) + (r.hops?.length ?? 0) + 3,
    'points, clocks, hops and the three questions of what to change',
  );
  t.match(html, /<h2>What to change<\/h2>/);
  t.match(html, /nonMasqueradeCIDRs/, 'the CNI knobs, as in report.md');
  t.notMatch(html, /Packets \(evidence\.pcapng\)/, 'no packets section without an evidence file');
  const withPackets = renderReportHtml(r, {
    ...META,
    evidence: {
      file: 'evidence.pcapng',
      packets: 12,
      headersOnly: true,
      interfaces: [{ point: 'decap', name: 'decap@file/decap.pcap', packets: 4 }],
      problems: [{ point: 'backend', code: 'EVIDENCE_FILE_CHANGED', detail: 'frame 3 <differs>' }],
      note: 'times on the first point’s clock',
    },
  });
  t.match(
    withPackets,
    /<code>evidence\.pcapng<\/code>: 12 packets of the matched connection, headers only/,
  );
  t.match(withPackets, /EVIDENCE_FILE_CHANGED: frame 3 &lt;differs&gt;/);
  t.end();
});

void t.test('capture health, cautions and conntrack when the analysis has them', (t) => {
  const r = SCENARIOS.dropped();
  const health = withCaptureHealth(r, [
    {
      point: 'decap',
      node: 'vpn-node',
      iface: 'wg0',
      state: 'capturing',
      confirmed: true,
      packets: 10,
      kernelDrops: 0,
      queueDrops: 0,
      lost: 0,
    },
    {
      point: 'egress',
      node: 'vpn-node',
      iface: 'eth0',
      state: 'capturing',
      confirmed: true,
      packets: 10,
      kernelDrops: 0,
      queueDrops: 0,
      lost: 0,
    },
    {
      point: 'backend',
      node: 'backend-node',
      iface: 'eth0',
      state: 'capturing',
      confirmed: true,
      packets: 7,
      kernelDrops: 3,
      queueDrops: 0,
      lost: 0,
    },
  ]);
  t.ok((health.caveats ?? []).length > 0);
  const [entry] = parseConntrackOutput(
    'tcp      6 119 SYN_SENT src=10.90.0.42 dst=10.244.2.5 sport=40000 dport=8080 [UNREPLIED] src=10.244.2.5 dst=10.90.0.42 sport=8080 dport=40000 mark=0 use=1\n',
    { name: 'vpn-node', netns: '/n', node: 'vpn-node' },
  );
  const withCt = {
    ...health,
    verdict: withConntrackEvidence(health.verdict, entry === undefined ? [] : [entry]),
  };
  const html = renderReportHtml(withCt, META);
  t.strictSame(markupErrors(html, true), []);
  t.ok(html.includes('<h2>Capture health</h2>'));
  t.match(
    html,
    /<td>backend<\/td><td>backend-node<\/td><td>eth0<\/td><td>capturing<\/td><td>7<\/td><td>3<\/td>/,
  );
  for (const c of health.caveats ?? [])
    t.ok(html.includes(`<li><strong>caution</strong>: ${esc(c)}</li>`));
  t.ok(html.includes('<h2>Conntrack</h2>'));
  t.match(html, /<td>vpn-node<\/td><td>vpn-node<\/td><td>SYN_SENT<\/td>/);
  t.match(html, /request not seen at backend/, 'the picture marks where it stopped');
  t.end();
});

void t.test('capture files: the file table', (t) => {
  const r = withCaptureHealth(SCENARIOS.preserved(), [
    {
      point: 'decap',
      node: null,
      iface: '/caps/decap.pcap',
      state: 'file',
      confirmed: true,
      packets: 7,
      kernelDrops: null,
      queueDrops: 0,
      lost: 0,
      file: 'pcap',
    },
  ]);
  const html = renderReportHtml(r, META);
  t.strictSame(markupErrors(html, true), []);
  t.match(
    html,
    /<td>decap<\/td><td><code>\/caps\/decap\.pcap<\/code><\/td><td>pcap<\/td><td>7<\/td><td>not recorded<\/td>/,
  );
  t.end();
});

void t.test('hostile names and details render as text', (t) => {
  const evil = '<script>alert(1)</script>';
  const r = analyze(
    three(DIRECT, DIRECT, { ...DIRECT, src: ADDR.vpnNodeUplink }, ['decap', evil, 'backend']),
  );
  const html = renderReportHtml(
    { ...r, caveats: [`${evil} & more`] },
    {
      generatedAt: '<now>',
      inputs: [{ name: evil, file: '"><img src=x onerror=alert(1)>' }],
      command: `hoptrace analyze --point '${evil}'`,
    },
    { notes: [{ point: evil, text: evil }] },
  );
  t.strictSame(markupErrors(html, true), []);
  selfContained(t, html);
  t.ok(html.includes(esc(evil)));
  t.ok(html.includes('&lt;now&gt;'));
  t.end();
});

void t.test('a live capture: the inputs list what report.md lists, item by item', (t) => {
  const meta = liveMeta();
  const html = renderReportHtml(cni, meta);
  const md = renderReportMarkdown(cni, meta);
  const items = [
    ...(/<ul class="inputs">(.*?)<\/ul>/s.exec(html)?.[1] ?? '').matchAll(/<li>(.*?)<\/li>/g),
  ].map((m) => m[1] ?? '');
  t.match(
    items[0],
    /^decap: <code>live vpn-node:10\.244\.1\.10 tun0 \(capture c-0001\)<\/code> — agent agent-vpn \(0\.1\.0\) on node vpn-node, 10\.244\.1\.10 tun0, filter <code>tcp<\/code>; 4 events received from it and stored$/,
  );
  t.match(
    items[2],
    /^backend: .* — agent agent-backend on node backend-node, fd00::5 eth0, filter none; 4 events received from it and stored$/,
  );
  t.match(
    items[3],
    /^evidence frames: none were in hand when this report was written .*: no evidence\.pcapng with it$/,
  );
  t.match(items[4], /^capture c-0001 on http:\/\/127\.0\.0\.1:7070: resolved \(conclusive\)$/);
  t.match(
    items[5],
    /^inventory as used: 2 node\(s\), 3 pod\(s\); in report\.json <code>inventory<\/code>$/,
  );
  // The same facts as report.md's list: its items with code spans as the page sets them.
  const mdItems = (/\nInputs[^\n]*:\n\n((?:- [^\n]*\n)+)/.exec(md)?.[1] ?? '')
    .trimEnd()
    .split('\n')
    .map((l) => esc(l.slice(2)).replace(/`([^`]*)`/g, '<code>$1</code>'));
  t.strictSame(items, mdItems, 'report.html and report.md list the same inputs');
  t.equal(items.length, 6, 'three points, the evidence frames, the capture, the inventory');
  t.end();
});

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

/** A line without its code spans (CommonMark §6.1: a run of N backticks closes at the next run of N). */
function withoutCodeSpans(line: string): string {
  let out = '';
  let i = 0;
  while (i < line.length) {
    const open = /`+/.exec(line.slice(i));
    if (open === null) break;
    const start = i + open.index;
    const fence = open[0];
    const close = new RegExp(`(?<!\`)${fence}(?!\`)`, 'g');
    close.lastIndex = start + fence.length;
    const m = close.exec(line);
    out += line.slice(i, start);
    if (m === null) return out + line.slice(start);
    i = m.index + fence.length;
  }
  return out + line.slice(i);
}

/** The text of Markdown lines outside fenced code blocks and code spans (CommonMark §4.5). */
function outsideCode(lines: readonly string[]): string {
  const out: string[] = [];
  let fence: string | null = null;
  for (const l of lines) {
    const f = /^ {0,3}(`{3,})/.exec(l)?.[1];
    if (fence === null && f !== undefined) fence = f;
    else if (fence !== null && f !== undefined && f.length >= fence.length) fence = null;
    else if (fence === null) out.push(withoutCodeSpans(l));
  }
  return out.join('\n');
}

/** The unescaped `|` of a Markdown line (GFM: `\\|` is a pipe inside the cell). */
const pipes = (line: string): number => (line.replace(/\\./g, '').match(/\|/g) ?? []).length;

void t.test(
  'markdown: names from outside cannot break a code span, a list item or a table',
  (t) => {
    const r = structuredClone(cni);
    const html = '/caps/a|b <i>x&amp;.pcap';
    const ticks = '/caps/e`g``ress\n- injected.pcap';
    const node = 'vpn|node <b>x</b>';
    r.verdict.node = node;
    r.captureHealth = [html, ticks, '/caps/backend.pcap'].map((iface, i) => ({
      point: ['decap', 'egress', 'backend'][i] ?? '',
      node: null,
      iface,
      state: 'read',
      confirmed: true,
      packets: 4,
      kernelDrops: null,
      queueDrops: 0,
      lost: 0,
      file: 'pcap',
    }));
    for (const c of r.clock ?? []) c.node = node;
    const md = renderReportMarkdown(r, {
      generatedAt: '2026-11-29T10:00:00.000Z',
      inputs: [
        { name: 'decap', file: html, sha256: 'a'.repeat(64), bytes: 10 },
        { name: 'egress', file: ticks, sha256: null, bytes: null },
        { name: 'backend', file: '/caps/backend.pcap', sha256: null, bytes: null },
      ],
      inventoryUsed: { nodes: { [node]: ['192.168.50.1'] }, pods: {} },
      evidence: {
        file: 'evidence.pcapng',
        packets: 2,
        headersOnly: true,
        interfaces: [{ point: 'decap', name: `decap@file/${html}`, packets: 2 }],
        problems: [],
        note: 'n',
      },
      doctor: {
        status: 'given',
        source: '/caps/doctor.json',
        result: {
          tunnelRange: '10.90.0.0/24',
          client: CLIENT,
          findings: [
            {
              severity: 'error',
              check: 'masquerade',
              node,
              namespace: 'ns\nx',
              subject: 'a ``b` c',
              detail: 'd|e <script>',
              fix: 'ip route replace 10.90.0.0/24 via <next hop>',
            },
          ],
          summary: { errors: 1, warnings: 0, ok: 0 },
        },
      },
    });
    const lines = md.split('\n');
    // The inputs: each path a code span that holds it whole, on one line.
    t.ok(lines.includes(`- decap: \`${html}\` — 10 bytes, SHA-256 \`${'a'.repeat(64)}\``), md);
    t.ok(lines.includes('- egress: ```/caps/e`g``ress\u2424- injected.pcap``` (not hashed)'));
    // Only the shell command (a fenced block, where a quoted newline is the shell's) breaks a line.
    t.same(
      lines.filter((l) => l.startsWith('- injected')),
      ["- injected.pcap' --point backend=/caps/backend.pcap"],
      'a newline starts no list item',
    );
    t.match(
      md,
      /\n```sh\nhoptrace analyze .*'egress=\/caps\/e`g``ress\n- injected\.pcap' .*\n```\n/,
    );
    // Every table row has its header's cells; a name's `|` is escaped, its HTML shown as text.
    for (const [i, l] of lines.entries())
      if (l.startsWith('| ') && !(lines[i - 1] ?? '').startsWith('|'))
        for (let j = i + 1; (lines[j] ?? '').startsWith('|'); j++)
          t.equal(pipes(lines[j] ?? ''), pipes(l), `table row ${lines[j]}`);
    t.match(md, '| decap | /caps/a\\|b &lt;i&gt;x&amp;amp;.pcap | pcap |');
    t.match(md, '| decap | decap@file//caps/a\\|b &lt;i&gt;x&amp;amp;.pcap | 2 |');
    t.match(md, '| ERROR | masquerade | vpn\\|node &lt;b&gt;x&lt;/b&gt; | ns\u2424x |');
    t.match(md, '- where: between egress and backend on node vpn\\|node &lt;b&gt;x&lt;/b&gt;');
    t.match(
      md,
      '**ERROR masquerade** on node vpn\\|node &lt;b&gt;x&lt;/b&gt; (ns\u2424x): ```a ``b` c```',
    );
    t.match(md, 'fix: `ip route replace 10.90.0.0/24 via <next hop>`');
    // A node name inside hoptrace's own sentences (What to change) is escaped too, its code kept.
    t.match(md, 'On vpn\\|node &lt;b&gt;x&lt;/b&gt; the route on to the VPN pod');
    t.match(md, '(`hoptrace repro`)');
    // HTML from a name appears only inside code spans (the inputs' and doctor's fix), never as markup.
    t.notMatch(outsideCode(lines), /<\/?(i|b|script)>/, "no name's HTML outside code");
    t.end();
  },
);

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

/**
 * `hoptrace analyze --report-dir` as a user runs it, on three capture files built here: report.json
 * is evidence (schema-valid, SHA-256 of every input, the inventory as used, the version), the
 * Reproduce line run again in a shell gives the same verdict — also where it takes `--inventory`
 * and `--client` to get `cni-masquerade` instead of `unknown` — times are UTC with a Timing section,
 * "What to change" follows the three questions and takes doctor's findings (or says there are none),
 * and identity headers in the request are named with whether the client could have set them.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ReportDocument } from '../../core/report/report-document';
import type { DoctorResult } from '../../core/doctor/checks';
import { reportSchemaErrors } from './report-schema';
import { CLIENT, INVENTORY, VPN_NODE, writePointFiles } from './report-pcaps';
import { tsharkFields } from './tshark';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');
const base = mkdtempSync(join(tmpdir(), 'ht-bundle-'));
t.teardown(() => {
  rmSync(base, { recursive: true, force: true });
});

function hoptrace(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

type Asserts = Pick<typeof t, 'strictSame'>;

interface Verdictish {
  verdict: { layer: string };
}

/** analyze --json's verdict layer. */
const layerOf = (args: string[]): string => {
  const r = hoptrace('analyze', ...args, '--json');
  // 0 a conclusive verdict, 3 an inconclusive one (unknown): both print the verdict.
  return r.code === 0 || r.code === 3
    ? (JSON.parse(r.stdout) as Verdictish).verdict.layer
    : `exit ${r.code}`;
};

const pointArgs = (files: [string, string][]): string[] =>
  files.flatMap(([name, file]) => ['--point', `${name}=${file}`]);

/** Reads `dir`'s report: report.json (schema-checked) and report.md. */
function readReport(t: Asserts, dir: string): { doc: ReportDocument; md: string } {
  const raw = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as unknown;
  t.strictSame(reportSchemaErrors(raw), [], `${dir}/report.json is valid against the schema`);
  return { doc: raw as ReportDocument, md: readFileSync(join(dir, 'report.md'), 'utf8') };
}

const sha256 = (file: string): string =>
  createHash('sha256').update(readFileSync(file)).digest('hex');

const DOCTOR: DoctorResult = {
  tunnelRange: '10.90.0.0/24',
  client: CLIENT,
  findings: [
    {
      severity: 'error',
      check: 'masquerade',
      node: 'vpn-node',
      namespace: 'vpn-node (/run/netns/b)',
      subject: '-A IP-MASQ-AGENT -j MASQUERADE',
      detail:
        '-A IP-MASQ-AGENT -j MASQUERADE masquerades every packet from 10.90.0.0/24 leaving by up0',
      fix: "exclude 10.90.0.0/24 from masquerade in the CNI's own configuration",
    },
    {
      severity: 'error',
      check: 'return-route',
      node: 'backend-node',
      namespace: 'backend-node (/run/netns/c)',
      subject: '10.90.0.0/24 via 10.244.1.99 dev up0',
      detail:
        'the return route on node backend-node still points at 10.244.1.99, a pod address that no namespace holds any more',
      fix: 'ip route replace 10.90.0.0/24 via <a stable next hop>',
    },
    {
      severity: 'ok',
      check: 'rp-filter',
      node: 'backend-node',
      namespace: 'backend-node (/run/netns/c)',
      subject: 'up0=2',
      detail: 'reverse path filtering is loose (2) or off (0) on the path interfaces',
      fix: '',
    },
  ],
  summary: { errors: 2, warnings: 0, ok: 1 },
};

void t.test('the Reproduce line reproduces, --inventory and --client included', (t) => {
  // A directory whose name needs quoting in a shell.
  const caps = join(base, "caps o'clock");
  mkdirSync(caps);
  const files = writePointFiles(caps, { rewriteTo: VPN_NODE, decoy: true });
  const inv = join(caps, 'given inventory.json');
  writeFileSync(inv, JSON.stringify(INVENTORY));
  const doctor = join(caps, 'doctor.json');
  writeFileSync(doctor, JSON.stringify(DOCTOR));
  const points = pointArgs(files);
  // Both flags are needed: the decoy from another client comes first, and without the inventory
  // the rewritten address is nobody's.
  t.not(layerOf(points), 'cni-masquerade', 'no flags: the decoy request');
  t.equal(layerOf([...points, '--client', CLIENT]), 'unknown', '--client alone: unknown');
  t.equal(hoptrace('analyze', ...points, '--client', CLIENT).code, 3, 'unknown exits 3');
  t.not(layerOf([...points, '--inventory', inv]), 'cni-masquerade', '--inventory alone');

  const out = join(base, 'out one');
  const flags = ['--inventory', inv, '--client', CLIENT, '--drops', 'backend=0'];
  const r = hoptrace('analyze', ...points, ...flags, '--doctor', doctor, '--report-dir', out);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^verdict: cni-masquerade/);
  t.match(r.stdout, /doctor: doctor findings from .*doctor\.json .*2 error\(s\)/);
  const { doc, md } = readReport(t, out);
  t.equal(doc.verdict.layer, 'cni-masquerade');

  // The printed command is report.json's; it names the bundle's copies of the inventory as used
  // and of doctor's file by their names in the bundle, the captures by their absolute paths.
  const printed = /## Reproduce\n\n```sh\n(.*)\n```/.exec(md)?.[1];
  t.equal(printed, doc.reproduce.command, 'report.md prints report.json reproduce.command');
  t.same(doc.reproduce.argv.slice(0, 2), ['hoptrace', 'analyze']);
  for (const [name, file] of files) t.ok(doc.reproduce.argv.includes(`${name}=${file}`));
  const argv = doc.reproduce.argv.join('\n');
  t.match(argv, '--inventory\ninventory.json\n');
  t.match(argv, `--client\n${CLIENT}`);
  t.match(argv, '--drops\nbackend=0');
  t.match(argv, /--doctor\ndoctor\.json$/);
  t.notMatch(argv, out, 'no path into the bundle: it still runs once moved');
  t.match(doc.reproduce.notes, [
    /^run it in the bundle's directory: inventory\.json and doctor\.json/,
  ]);
  t.match(md, /\n- run it in the bundle's directory: /);
  t.same(JSON.parse(readFileSync(join(out, 'inventory.json'), 'utf8')), INVENTORY);

  // Which hoptrace and Node made it: `hoptrace` of the command may not be on PATH.
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  const native = existsSync(
    join(root, 'native', 'pcap-batch', 'build', 'Release', 'pcap_batch.node'),
  );
  const platform = `${process.platform} ${process.arch}`;
  t.same(doc.runtime, {
    analyzedBy: 'analyze',
    node: process.version,
    platform,
    nativeDecoder: native ? 'loaded' : 'not-loaded',
  });
  t.match(
    md,
    `\`\`\`\n\nMade with hoptrace ${pkg.version} on Node ${process.version} (${platform}), the native decoder ${native ? 'loaded' : 'not loaded'}`,
  );

  // Doctor's file is an input: hashed, copied byte for byte; the inventory's digest is the file's
  // as given (the bundle's inventory.json is re-serialised).
  t.same(doc.givenFiles, {
    inventory: {
      file: inv,
      sha256: sha256(inv),
      bytes: readFileSync(inv).length,
      copy: 'inventory.json',
      verbatim: false,
    },
    doctor: {
      file: doctor,
      sha256: sha256(doctor),
      bytes: readFileSync(doctor).length,
      copy: 'doctor.json',
      verbatim: true,
    },
  });
  t.ok(
    readFileSync(join(out, 'doctor.json')).equals(readFileSync(doctor)),
    'doctor.json: as given',
  );
  t.not(sha256(join(out, 'inventory.json')), sha256(inv), 'inventory.json hashes differently');
  t.match(
    md,
    `- doctor: \`${doctor}\` — ${readFileSync(doctor).length} bytes, SHA-256 \`${sha256(doctor)}\`; copied byte for byte as the bundle's \`doctor.json\``,
  );
  t.match(
    md,
    `, from \`${inv}\` — ${readFileSync(inv).length} bytes, SHA-256 \`${sha256(inv)}\`; the bundle's \`inventory.json\` holds it as parsed and re-serialised`,
  );

  // Run it as printed (a shell reads the quoting) in the bundle moved elsewhere, without the
  // original inventory, and with doctor's file changed: the same verdict and the same answers.
  rmSync(inv);
  writeFileSync(doctor, JSON.stringify({ ...DOCTOR, findings: [] }));
  const moved = join(base, 'attached to the incident');
  renameSync(out, moved);
  const again = spawnSync(
    '/bin/sh',
    ['-c', `${printed?.replace(/^hoptrace /, `'${process.execPath}' '${bin}' `) ?? ''} --json`],
    { encoding: 'utf8', timeout: 60_000, cwd: moved },
  );
  t.equal(again.status, 0, again.stderr);
  const rerun = JSON.parse(again.stdout) as ReportDocument;
  t.same(rerun.verdict, doc.verdict, 'the same verdict');
  t.same(rerun.points, doc.points, 'the same points');
  t.match(
    rerun.doctor,
    { status: 'given', result: DOCTOR },
    "the bundle's doctor.json, not the file",
  );
  t.end();
});

void t.test('report.json is evidence: digests, version, inventory, selector', (t) => {
  const caps = join(base, 'evidence');
  mkdirSync(caps);
  const files = writePointFiles(caps, { rewriteTo: VPN_NODE });
  const inv = join(caps, 'inv.json');
  writeFileSync(inv, JSON.stringify(INVENTORY));
  const out = join(base, 'out-evidence');
  const r = hoptrace(
    'analyze',
    ...pointArgs(files),
    '--inventory',
    inv,
    '--dst',
    '10.244.2.5:8080',
    '--report-dir',
    out,
  );
  t.equal(r.code, 0, r.stderr);
  const { doc, md } = readReport(t, out);
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  t.equal(doc.schemaVersion, 1);
  t.equal(doc.hoptraceVersion, pkg.version);
  t.equal(doc.source, 'files');
  t.equal(doc.capture, null);
  t.same(
    doc.inputs,
    files.map(([name, file]) => ({
      name,
      file,
      sha256: sha256(file),
      bytes: readFileSync(file).length,
    })),
  );
  t.same(doc.inventory, INVENTORY);
  t.equal(doc.inventoryFile, inv);
  t.same(doc.selector, { client: null, dst: '10.244.2.5', dport: 8080 });
  t.match(doc.reproduce.command, / --dst 10\.244\.2\.5:8080$/);
  t.equal(doc.doctor.status, 'not-run');
  t.match(md, new RegExp(`SHA-256 \`${sha256(files[0]?.[1] ?? '')}\``));
  t.match(md, /Doctor was not run \(no --doctor FILE\): nothing about return routes/);

  // Honest times: UTC with µs for people, nanoseconds kept in JSON, and a Timing section.
  t.equal(doc.points[0]?.firstTsNs, '1800000000000000000');
  const rows = md.split('## Capture points')[1]?.split('\n\n')[1] ?? '';
  t.match(rows, /\| decap \| matched \|.*\| 2027-01-15T08:00:00\.000000Z \|/);
  t.notMatch(rows, /1800000000000000000/, 'no raw epoch nanoseconds in the table');
  t.match(md, /## Timing\n\nEach point's timestamps come from the clock of the machine/);
  t.match(md, /different machines' clocks/);
  t.match(md, /\| backend \| unknown \| θ = \+5\.000 ms ± 200\.0 µs from request frame 1 at decap/);
  t.match(md, /\| decap → egress \| 30\.0 µs \(between 0 ns and 60\.0 µs/);
  t.match(r.stdout, /\n {2}seen: {3}decap 2027-01-15T08:00:00\.000000Z \(UTC/);
  t.match(r.stdout, /\n {2}clock: {2}backend against decap: θ = \+5\.000 ms ± 200\.0 µs/);
  t.end();
});

void t.test('what to change: the three questions in order, doctor findings in', (t) => {
  const caps = join(base, 'change');
  mkdirSync(caps);
  const files = writePointFiles(caps, { rewriteTo: VPN_NODE });
  const inv = join(caps, 'inv.json');
  writeFileSync(inv, JSON.stringify(INVENTORY));
  const doctor = join(caps, 'doctor.json');
  writeFileSync(doctor, JSON.stringify(DOCTOR));
  const out = join(base, 'out-change');
  const args = [...pointArgs(files), '--inventory', inv, '--client', CLIENT];
  t.equal(hoptrace('analyze', ...args, '--doctor', doctor, '--report-dir', out).code, 0);
  const { doc, md } = readReport(t, out);
  // Doctor's findings in the picture, next to the hop or lane they concern.
  const svg = readFileSync(join(out, 'sequence.svg'), 'utf8');
  t.match(
    svg,
    /class="note finding" data-hop="egress→backend"><text[^>]*>• doctor masquerade on vpn-node/,
  );
  t.match(
    svg,
    /class="note finding" data-point="backend"><text[^>]*>• doctor return-route on backend-node/,
  );
  const w = doc.whatToChange;
  t.same(
    w.questions.map((q) => [q.id, q.answer]),
    [
      ['per-client-policy', 'owner'],
      ['return-route', 'no'],
      ['forwarder-or-proxy', 'forwarder'],
    ],
  );
  t.match(w.questions[1]?.findings, [{ check: 'return-route', severity: 'error' }]);
  const q = md.indexOf('### 1. Does the backend enforce policy per client?');
  const q2 = md.indexOf('### 2. Can the cluster route 10.90.0.0/24 back to a stable gateway? — no');
  const q3 = md.indexOf('### 3. Is the workload a forwarder or a proxy? — a forwarder');
  t.ok(q > 0 && q < q2 && q2 < q3, 'the questions in the guide order');
  t.ok(md.indexOf('### Preserve mode') > q3 && md.indexOf('### SNAT mode') > q3);
  // Preserve mode: a stable next hop (the VPN node's address from the inventory), never a pod
  // IP or a ClusterIP; rp_filter=2; the knob of each CNI; kube-proxy's detectLocalMode.
  t.match(md, 'ip route replace 10.90.0.0/24 via 192.168.50.1');
  t.match(md, /never a pod IP, which moves, nor a ClusterIP/);
  t.notMatch(md, /Service VIP/);
  t.match(md, 'sysctl -w net.ipv4.conf.<iface>.rp_filter=2');
  t.match(md, /ip-masq-agent: `nonMasqueradeCIDRs`/);
  t.match(md, /Calico: IP pools \/ `natOutgoing`/);
  t.match(md, /Cilium: `ipv4-native-routing-cidr`/);
  t.match(md, /Flannel: `--ip-masq`/);
  t.match(md, /kube-proxy: `detectLocalMode` \/ `clusterCIDR`/);
  t.match(md, /the rule doctor found is ip-masq-agent's/);
  // SNAT mode: what it costs and what carries the identity, as a runbook paragraph.
  t.match(md, /> 10\.244\.2\.5:8080 sees 192\.168\.50\.1 for every VPN client; .*What it costs/);
  t.match(md, /a PROXY protocol line written by a proxy we control&gt; — trusted only because/);
  // Doctor's findings reach the report, ok ones included (they were read).
  t.match(md, /### Doctor\n\nDoctor findings from .*doctor\.json \(tunnel range 10\.90\.0\.0\/24/);
  t.match(md, /\| ERROR \| return-route \| backend-node \|/);
  t.match(md, /\| ok \| rp-filter \| backend-node \|/);

  // A doctor file that cannot be read is said so, never taken for "no problems".
  const bad = join(caps, 'bad.json');
  writeFileSync(bad, '{"findings": 3}');
  const outBad = join(base, 'out-bad');
  t.equal(hoptrace('analyze', ...args, '--doctor', bad, '--report-dir', outBad).code, 0);
  const b = readReport(t, outBad);
  t.match(b.doc.doctor, { status: 'unreadable', source: bad });
  t.match(
    b.md,
    /Could not read .*bad\.json: not what `hoptrace doctor --json` prints: tunnelRange/,
  );
  t.equal(b.doc.whatToChange.questions[1]?.answer, 'unknown', 'nothing read: not known');
  const gone = hoptrace('analyze', ...args, '--doctor', join(caps, 'missing.json'));
  t.match(gone.stdout, /doctor: could not read .*missing\.json: ENOENT/);
  t.end();
});

void t.test('SHA256SUMS: every other file of the bundle, as sha256sum -c checks it', (t) => {
  const caps = join(base, 'sums');
  mkdirSync(caps);
  const files = writePointFiles(caps, { rewriteTo: VPN_NODE });
  const doctor = join(caps, 'doctor.json');
  writeFileSync(doctor, JSON.stringify(DOCTOR));
  const out = join(base, 'out-sums');
  const args = [...pointArgs(files), '--client', CLIENT, '--report-dir', out];
  t.equal(hoptrace('analyze', ...args, '--doctor', doctor).code, 3);
  const { doc, md } = readReport(t, out);
  t.equal(doc.manifest, 'SHA256SUMS');
  const ev = join(out, 'evidence.pcapng');
  t.same(
    [doc.evidence?.sha256, doc.evidence?.bytes],
    [sha256(ev), readFileSync(ev).length],
    "report.json names evidence.pcapng's digest as written",
  );
  const listed = (): string[] =>
    readFileSync(join(out, 'SHA256SUMS'), 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => /^[0-9a-f]{64} {2}(\S+)$/.exec(l)?.[1] ?? `bad line: ${l}`)
      .sort();
  const others = (): string[] =>
    readdirSync(out)
      .filter((f) => f !== 'SHA256SUMS')
      .sort();
  t.same(listed(), others(), 'every other file of the bundle, and only those');
  t.ok(others().includes('doctor.json'));
  const check = (): { status: number | null; stdout: string } =>
    spawnSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: out, encoding: 'utf8' });
  t.equal(check().status, 0, 'sha256sum -c: every file as written');
  t.match(
    md,
    /\n- `SHA256SUMS`: the SHA-256 of every other file of this bundle, written last; check them with `sha256sum -c SHA256SUMS`/,
  );
  writeFileSync(join(out, 'report.md'), md.replace('# hoptrace: unknown', '# hoptrace: preserved'));
  const altered = check();
  t.not(altered.status, 0, 'an altered file is found');
  t.match(altered.stdout, 'report.md: FAILED');

  // Again into the same directory, with a --doctor file that cannot be read: the earlier run's
  // doctor.json goes (the manifest covers the whole directory again), nothing is copied, and the
  // command names the file given.
  const missing = join(caps, 'missing.json');
  t.equal(hoptrace('analyze', ...args, '--doctor', missing).code, 3);
  t.notOk(existsSync(join(out, 'doctor.json')), "the earlier run's doctor.json is removed");
  t.same(listed(), others());
  t.equal(check().status, 0);
  const again = readReport(t, out).doc;
  t.same(again.givenFiles?.doctor, {
    file: missing,
    sha256: null,
    bytes: null,
    copy: null,
    verbatim: true,
  });
  t.match(again.reproduce.argv.join('\n'), `--doctor\n${missing}`);
  t.end();
});

void t.test('identity headers: named, and whether the client could have set them', (t) => {
  const caps = join(base, 'headers');
  mkdirSync(caps);
  const inv = join(caps, 'inv.json');
  writeFileSync(inv, JSON.stringify(INVENTORY));
  const proxyAdded = writePointFiles(caps, {
    headers: { backend: 'X-Forwarded-For: 10.90.0.42\r\n' },
    names: { decap: 'a-decap.pcap', egress: 'a-egress.pcap', backend: 'a-backend.pcap' },
  });
  const out = join(base, 'out-headers');
  const args = ['--inventory', inv, '--client', CLIENT, '--report-dir'];
  t.equal(hoptrace('analyze', ...pointArgs(proxyAdded), ...args, out).code, 0);
  const { doc, md } = readReport(t, out);
  t.equal(doc.verdict.layer, 'preserved');
  t.same(doc.identityHeaders, {
    scanned: ['decap', 'egress', 'backend'],
    notScanned: [],
    seen: [{ point: 'backend', frame: 4, kind: 'x-forwarded-for', value: '10.90.0.42' }],
    cut: [],
    continued: [],
  });
  t.match(md, /x-forwarded-for `10\.90\.0\.42` at backend \(frame 4\); not at the first point/);

  const clientSent = writePointFiles(caps, {
    headers: {
      decap: 'X-Forwarded-For: 203.0.113.7\r\n',
      egress: 'X-Forwarded-For: 203.0.113.7\r\n',
      backend: 'X-Forwarded-For: 203.0.113.7\r\n',
    },
    names: { decap: 'b-decap.pcap', egress: 'b-egress.pcap', backend: 'b-backend.pcap' },
  });
  const out2 = join(base, 'out-headers-2');
  t.equal(hoptrace('analyze', ...pointArgs(clientSent), ...args, out2).code, 0);
  const c = readReport(t, out2);
  t.match(c.md, /already there at decap, so the client sent it: it cannot be trusted/);

  const none = join(base, 'out-headers-3');
  const plain = writePointFiles(caps, {
    names: { decap: 'c-decap.pcap', egress: 'c-egress.pcap', backend: 'c-backend.pcap' },
  });
  t.equal(hoptrace('analyze', ...pointArgs(plain), ...args, none).code, 0);
  t.match(
    readReport(t, none).md,
    /no X-Forwarded-For, Forwarded, X-Real-IP or PROXY protocol header in the request's headers at decap, egress, backend/,
  );
  t.end();
});

void t.test('other verdicts are valid report.json too: no-return, unknown', (t) => {
  const caps = join(base, 'others');
  mkdirSync(caps);
  const noReturn = writePointFiles(caps, {
    noReturn: true,
    names: { decap: 'n-decap.pcap', egress: 'n-egress.pcap', backend: 'n-backend.pcap' },
  });
  const out = join(base, 'out-no-return');
  t.equal(hoptrace('analyze', ...pointArgs(noReturn), '--report-dir', out).code, 0);
  const n = readReport(t, out);
  t.equal(n.doc.verdict.layer, 'no-return');
  t.equal(n.doc.whatToChange.questions[1]?.answer, 'no');
  t.equal(n.doc.inventory?.nodes && Object.keys(n.doc.inventory.nodes).length, 0);
  t.match(n.doc.reproduce.command, / --inventory inventory\.json$/);
  const rewritten = writePointFiles(caps, { rewriteTo: VPN_NODE });
  const out2 = join(base, 'out-unknown');
  t.equal(
    hoptrace('analyze', ...pointArgs(rewritten), '--client', CLIENT, '--report-dir', out2).code,
    3,
    'unknown: the inconclusive exit code, as capture (issue 17); the bundle is still written',
  );
  t.equal(readReport(t, out2).doc.verdict.layer, 'unknown');
  t.end();
});

void t.test(
  'the whole bundle: report.html with its picture, sequence.svg, evidence.pcapng read by tshark',
  (t) => {
    const caps = join(base, 'bundle-forms');
    mkdirSync(caps);
    const files = writePointFiles(caps, { rewriteTo: VPN_NODE });
    const inv = join(caps, 'inventory.json');
    writeFileSync(inv, JSON.stringify(INVENTORY));
    const out = join(caps, 'out');
    const r = hoptrace(
      'analyze',
      ...pointArgs(files),
      '--inventory',
      inv,
      '--client',
      CLIENT,
      '--report-dir',
      out,
    );
    t.equal(r.code, 0, r.stderr);
    t.match(
      r.stdout,
      /bundle written to .*report\.html, sequence\.svg, evidence\.pcapng, inventory\.json/,
    );
    const { doc, md } = readReport(t, out);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    const svg = readFileSync(join(out, 'sequence.svg'), 'utf8');
    const lanes = (s: string): number => (s.match(/class="lane"/g) ?? []).length;
    t.equal(lanes(html), doc.points.length, 'the HTML carries the picture: one lane per point');
    t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/, 'sequence.svg stands alone');
    t.equal(lanes(svg), doc.points.length);
    t.notMatch(
      html,
      /<script|https?:\/\/(?!www\.w3\.org)/,
      'self-contained: no script, nothing fetched',
    );
    // evidence.pcapng: what the report says it holds, and what tshark reads in it.
    const ev = doc.evidence;
    t.equal(ev?.file, 'evidence.pcapng');
    t.equal(ev?.headersOnly, true, 'headers only by default');
    t.match(md, /## Packets \(evidence\.pcapng\)/);
    const flowPackets = doc.points.reduce((n, p) => n + p.flow.length, 0);
    t.equal(ev?.packets, flowPackets, 'every packet of the matched connection at every point');
    const rows = tsharkFields(join(out, 'evidence.pcapng'), [
      'frame.interface_name',
      'ip.src',
      'frame.comment',
    ]);
    t.equal(rows.length, flowPackets, 'tshark counts the same packets');
    t.same(
      [...new Set(rows.map((x) => (x[0] ?? '').split('@')[0]))].sort(),
      doc.points.map((p) => p.name).sort(),
      'one interface per point, named point@…',
    );
    t.ok(
      rows.every((x) => /frame \d+: (request|reply)/.test(x[2] ?? '')),
      'each packet says its point and frame',
    );
    t.ok(
      rows.some((x) => x[1] === VPN_NODE),
      "the rewritten source is in the backend's packets",
    );
    t.end();
  },
);

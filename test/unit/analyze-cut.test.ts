/**
 * `analyze` on a capture file cut inside its last record (a capture still being written, a full
 * disk): the verdict is the one the frames before the cut give — the same as from the file cut
 * cleanly before that record — on both paths (shape-fixtures.ts `analyze`: the native fast path
 * and the JS reader agree), for classic pcap and pcapng, at the first point (read twice) and at the
 * backend; and the report says so: the point's capture health carries the byte offset and what
 * was cut, a caution names the file and the offset, in the text, Markdown and JSON reports and
 * through the command. Fails (never skips) without the addon.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { PointFile } from '../../cli/analyze';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { renderReportMarkdown, renderVerdictText } from '../../core/report/report';
import type { Pkt } from './frames';
import { epb, idb, shb } from './pcapng-writer';
import {
  analyze,
  background,
  established,
  files,
  INV,
  MASQ,
  MS,
  REQ,
  SEL,
  sorted,
  T0,
  US,
  X,
  type Exchange,
} from './shape-fixtures';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');

/** Where each record (pcap) or block (pcapng) of a file starts, and where the file ends. */
function recordStarts(bytes: Buffer): number[] {
  const starts: number[] = [];
  if (bytes.readUInt32LE(0) === 0x0a0d0d0a) {
    // pcapng (little-endian, as written here): packet blocks after the SHB and IDB.
    for (let at = 0; at < bytes.length; at += bytes.readUInt32LE(at + 4)) {
      if (bytes.readUInt32LE(at) === 6) starts.push(at);
    }
  } else {
    for (let at = 24; at < bytes.length; at += 16 + bytes.readUInt32LE(at + 8)) starts.push(at);
  }
  return starts;
}

/** The same frames as a pcapng file (ns resolution), beside the pcap. */
function asPcapng(path: string, pkts: Pkt[]): string {
  const le = true;
  const parts = [shb(le), idb(le, 1, null, 9), ...pkts.map((p) => epb(le, 0, p.ts, p.data))];
  const ng = path.replace(/\.pcap$/, '.pcapng');
  writeFileSync(ng, Buffer.concat(parts));
  return ng;
}

/** `file` cut `into` bytes into its last record, and cut cleanly before that record. */
function cutLast(file: string, into: number): { cut: string; clean: string; at: number } {
  const bytes = readFileSync(file);
  const at = recordStarts(bytes).at(-1) ?? 0;
  const cut = file.replace(/(\.pcapng|\.pcap)$/, `.cut${into}$1`);
  const clean = file.replace(/(\.pcapng|\.pcap)$/, `.clean$1`);
  writeFileSync(cut, bytes.subarray(0, at + into));
  writeFileSync(clean, bytes.subarray(0, at));
  return { cut, clean, at };
}

/** The request on an open connection through kube-proxy's masquerade (request-shapes.test.ts). */
function kubeProxy(backendOnly?: Exchange['only']): { points: PointFile[]; pkts: Pkt[][] } {
  const decap = established(REQ, T0, X);
  const egress = established(REQ, T0 + 50n * US, X);
  const backend = established(
    MASQ,
    T0 + 200n * US,
    backendOnly === undefined ? X : { ...X, only: backendOnly },
  );
  const points = files(decap, egress, backend);
  // files() adds the same background traffic to every point.
  const pkts = [decap, egress, backend].map((p) => sorted([...p, ...background(T0 - 2n * MS)]));
  return { points, pkts };
}

type Asserts = Parameters<typeof analyze>[0] & Pick<typeof t, 'not' | 'notOk'>;

/**
 * Analyses `points` with point `which` cut `into` bytes into its last record: the result is the
 * one of the file cut cleanly before that record, apart from what the cut adds to the capture
 * health and the cautions, which name the file and the byte offset. Returns the cut run's result.
 */
function checkCut(
  t: Asserts,
  points: PointFile[],
  which: number,
  into: number,
): AnalysisResult | null {
  const p = points[which];
  if (p === undefined) throw new Error(`no point ${which}`);
  const { cut, clean, at } = cutLast(p.file, into);
  const with_ = (file: string): PointFile[] =>
    points.map((q, i) => (i === which ? { ...q, file } : q));
  const got = analyze(t, with_(cut), SEL);
  const want = analyze(t, with_(clean), SEL);
  if (got === null || want === null) return null;
  t.same(got.verdict, want.verdict, 'the verdict of the frames before the cut');
  t.same(got.points, want.points, 'the same view of the request at every point');
  const health = got.captureHealth?.find((h) => h.point === p.name);
  const cleanHealth = want.captureHealth?.find((h) => h.point === p.name);
  t.equal(health?.packets, cleanHealth?.packets, 'the frames before the cut are counted');
  t.equal(health?.truncated?.offset, at, 'capture health: the byte offset of the cut record');
  const record = p.file.endsWith('.pcapng')
    ? into < 8
      ? `block header cut after ${into} bytes at offset ${at}`
      : `block at offset ${at} needs`
    : into < 16
      ? `header cut after ${into} bytes at offset ${at}`
      : `at offset ${at} needs`;
  t.match(health?.truncated?.detail, record, 'capture health: what was cut');
  t.notOk(cleanHealth !== undefined && 'truncated' in cleanHealth, 'a whole file is not cut');
  const caution = (got.caveats ?? []).find((c) => c.includes('ends inside a record'));
  t.match(
    caution,
    `${p.name}: ${cut} ends inside a record (`,
    'a caution names the point and the file',
  );
  t.match(caution, `offset ${at}`, 'and the byte offset');
  t.match(caution, `the verdict uses the ${String(health?.packets)} frames before it`);
  t.same(
    (got.caveats ?? []).filter((c) => c !== caution),
    want.caveats ?? [],
    'no other caution changes',
  );
  t.match(renderVerdictText(got), `caution: ${caution ?? '?'}`, 'the text report says it');
  const md = renderReportMarkdown(got, { generatedAt: '1970-01-01T00:00:00Z', inputs: [] });
  t.match(md, `the file ends inside a record at byte ${at}`, 'the Markdown capture health says it');
  return got;
}

for (const format of ['pcap', 'pcapng'] as const) {
  void t.test(`${format}: the backend cut inside its last record`, (t) => {
    const { points, pkts } = kubeProxy();
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    // Inside the record's header, and inside its data.
    for (const into of [5, 30]) {
      const r = checkCut(t, ps, 2, into);
      t.equal(r?.verdict.layer, 'kube-proxy', `cut ${into} bytes in: kube-proxy`);
    }
    t.end();
  });

  void t.test(`${format}: the first point (read twice) cut inside its last record`, (t) => {
    const { points, pkts } = kubeProxy();
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    const r = checkCut(t, ps, 0, 40);
    t.equal(r?.verdict.layer, 'kube-proxy');
    t.end();
  });

  void t.test(`${format}: the cut takes the reply away: the view of what is left`, (t) => {
    // The backend's last record is the reply: the part of the file that held it is gone.
    const { points, pkts } = kubeProxy(['req', 'reply']);
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    const whole = analyze(t, ps, SEL);
    t.equal(whole?.points[2]?.seenReply, true, 'the whole file holds the reply');
    const r = checkCut(t, ps, 2, 50);
    t.equal(r?.points[2]?.seenReply, false, 'the reply was in the part cut off');
    t.equal(r?.verdict.layer, 'kube-proxy', 'the source was rewritten all the same');
    t.end();
  });
}

void t.test('hoptrace analyze: exit 0, the verdict, and the cut in the report', (t) => {
  const { points } = kubeProxy();
  const backend = points[2];
  if (backend === undefined) throw new Error('no backend');
  const { cut, at } = cutLast(backend.file, 30);
  const inventory = backend.file.replace(/\.pcap$/, '.inventory.json');
  writeFileSync(inventory, JSON.stringify(INV));
  const args = [
    'analyze',
    ...points.flatMap((p) => ['--point', `${p.name}=${p.name === 'backend' ? cut : p.file}`]),
    '--inventory',
    inventory,
    '--client',
    SEL.client ?? '',
    '--dst',
    SEL.dst ?? '',
  ];
  const text = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
  t.equal(text.status, 0, text.stderr);
  t.match(text.stdout, /^verdict: kube-proxy/);
  t.match(text.stdout, `caution: backend: ${cut} ends inside a record (record `);
  t.match(text.stdout, `at offset ${at} needs`);
  const json = spawnSync(process.execPath, [bin, ...args, '--json'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(json.status, 0, json.stderr);
  const r = JSON.parse(json.stdout) as AnalysisResult;
  t.match(r.captureHealth?.[2], { point: 'backend', iface: cut, truncated: { offset: at } });
  t.end();
});

/**
 * `file`'s record (pcap) or packet block (pcapng) number `nth` (from 1; -1 the last) given a
 * length no writer gives: a pcap caplen above libpcap's maximum (FILE_BAD_RECORD), a pcapng block
 * length that is not a multiple of 4 (FILE_BAD_BLOCK). Also the file cut cleanly before it.
 */
function damage(file: string, nth: number): { bad: string; clean: string; at: number } {
  const bytes = Buffer.from(readFileSync(file));
  const starts = recordStarts(bytes);
  const at = (nth < 0 ? starts.at(nth) : starts[nth - 1]) ?? 0;
  if (file.endsWith('.pcapng')) bytes.writeUInt32LE(bytes.readUInt32LE(at + 4) + 2, at + 4);
  else bytes.writeUInt32LE(0x7fff_fff0, at + 8);
  const bad = file.replace(/(\.pcapng|\.pcap)$/, `.bad${nth}$1`);
  const clean = file.replace(/(\.pcapng|\.pcap)$/, `.before${nth}$1`);
  writeFileSync(bad, bytes);
  writeFileSync(clean, bytes.subarray(0, at));
  return { bad, clean, at };
}

// A record or block damaged after good frames is read as a cut there (no reader can find the
// next record past a damaged length; tcpdump and tshark stop there too): the verdict of the frames
// before it, the damage in the capture health and a caution. A first version threw the file's
// error and gave no verdict at all, however many good frames came before.
for (const format of ['pcap', 'pcapng'] as const) {
  const code = format === 'pcap' ? 'FILE_BAD_RECORD' : 'FILE_BAD_BLOCK';
  void t.test(`${format}: damaged after good frames: the verdict of the frames before it`, (t) => {
    const { points, pkts } = kubeProxy(['req', 'reply']);
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    for (const which of [0, 2]) {
      const p = ps[which];
      if (p === undefined) throw new Error('no point');
      const { bad, clean, at } = damage(p.file, -1);
      const with_ = (file: string): PointFile[] =>
        ps.map((q, i) => (i === which ? { ...q, file } : q));
      const got = analyze(t, with_(bad), SEL);
      const want = analyze(t, with_(clean), SEL);
      t.same(got?.verdict, want?.verdict, `${p.name}: the verdict of the frames before it`);
      t.same(got?.points, want?.points, `${p.name}: the same view at every point`);
      const h = got?.captureHealth?.[which];
      t.match(h, { point: p.name, iface: bad, damaged: { offset: at, code } });
      t.notOk(h !== undefined && 'truncated' in h, 'damaged, not cut');
      t.equal(h?.packets, want?.captureHealth?.[which]?.packets, 'the frames before it counted');
      const caution = (got?.caveats ?? []).find((c) => c.includes('is damaged at byte'));
      t.match(caution, `${p.name}: ${bad} is damaged at byte ${at} (${code}: `);
      t.match(caution, `the verdict uses the ${String(h?.packets)} frames before it`);
      const md = got === null ? '' : renderReportMarkdown(got, { generatedAt: 'x', inputs: [] });
      t.match(md, `(then damaged at byte ${at}: ${code}; not read past)`);
    }
    t.end();
  });

  void t.test(`${format}: damaged in the middle: what came after is not claimed`, (t) => {
    // The backend's reply lies after the damaged record: unread, so not seen — and the report
    // says the file was not read past the damage.
    const { points, pkts } = kubeProxy(['req', 'reply']);
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    const backend = ps[2];
    if (backend === undefined) throw new Error('no backend');
    const whole = analyze(t, ps, SEL);
    t.equal(whole?.points[2]?.seenReply, true, 'the whole file holds the reply');
    const { bad } = damage(backend.file, -2);
    const r = analyze(
      t,
      ps.map((q, i) => (i === 2 ? { ...q, file: bad } : q)),
      SEL,
    );
    t.equal(r?.points[2]?.seenReply, false, 'the reply was after the damage');
    t.ok((r?.caveats ?? []).some((c) => c.includes('nothing after them was read')));
    t.end();
  });

  void t.test(`${format}: damaged at the first frame: the file's error, no verdict`, (t) => {
    const { points, pkts } = kubeProxy();
    const ps =
      format === 'pcap'
        ? points
        : points.map((p, i) => ({ ...p, file: asPcapng(p.file, pkts[i] ?? []) }));
    const backend = ps[2];
    if (backend === undefined) throw new Error('no backend');
    const { bad } = damage(backend.file, 1);
    const args = [
      'analyze',
      ...ps.flatMap((p) => ['--point', `${p.name}=${p.name === 'backend' ? bad : p.file}`]),
    ];
    const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
    t.not(r.status, 0, 'not a verdict');
    t.match(r.stderr, code);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    t.end();
  });
}

void t.test(
  'hoptrace analyze --report-dir: exit 0, the damage in report.md, evidence written',
  (t) => {
    const { points } = kubeProxy(['req', 'reply']);
    const backend = points[2];
    if (backend === undefined) throw new Error('no backend');
    const { bad, at } = damage(backend.file, -1);
    const out = backend.file.replace(/\.pcap$/, '.damaged-out');
    const inventory = backend.file.replace(/\.pcap$/, '.damaged.inventory.json');
    writeFileSync(inventory, JSON.stringify(INV));
    const args = [
      'analyze',
      ...points.flatMap((p) => ['--point', `${p.name}=${p.name === 'backend' ? bad : p.file}`]),
      '--inventory',
      inventory,
      '--client',
      SEL.client ?? '',
      '--dst',
      SEL.dst ?? '',
      '--report-dir',
      out,
    ];
    const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
    t.equal(r.status, 0, r.stderr + r.stdout);
    t.match(r.stdout, /^verdict: kube-proxy/);
    t.match(r.stdout, `caution: backend: ${bad} is damaged at byte ${at} (FILE_BAD_RECORD: `);
    t.match(readFileSync(join(out, 'report.md'), 'utf8'), `then damaged at byte ${at}`);
    t.ok(readFileSync(join(out, 'evidence.pcapng')).length > 0, 'evidence.pcapng written');
    t.notMatch(readFileSync(join(out, 'report.md'), 'utf8'), /EVIDENCE_FILE_CHANGED/);
    t.end();
  },
);

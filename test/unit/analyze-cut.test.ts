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

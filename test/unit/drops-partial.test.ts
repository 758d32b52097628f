/**
 * Drop counts a pcapng file records for some of its interfaces only. A two-interface file whose
 * Interface Statistics Block covered interface 0 alone was reported as "0 dropped" (one
 * interface's count made the drops known, the others added 0), which suppressed the "drops not
 * recorded" caution. Drops are known only when every interface that carried packets has a block
 * with isb_ifdrop/isb_osdrop; otherwise the capture health names the interfaces that recorded none
 * and the caution stays. The same on the JS reader and the fast path (where the addon's runs
 * mark the interfaces they walk in its table).
 *
 *   SHB | IDB eth0 | IDB eth1 | EPB 0, EPB 1 … | ISB 0 [isb_ifdrop] (no ISB 1)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { loadNativeAddon } from '../../native/loader';
import { openCaptureFile, type CaptureFileStats } from '../../offline/pcap-file';
import { openSummaryPcap } from '../../offline/summary-file';
import { analyzeFiles, type AnalyzeFilesOptions } from '../../offline/analyze-files';
import { runAnalyze } from '../../cli/analyze';
import type { Inventory } from '../../common/inventory';
import type { ReportDocument } from '../../core/report/report-document';
import { epb, idb, isb, shb } from './pcapng-writer';
import { reportSchemaErrors } from './report-schema';

const load = loadNativeAddon();
if (!load.ok) {
  t.fail(`the native addon is required for this test: ${load.reason}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'ht-drops-partial-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The frames (data, µs time) of a classic LE µs pcap. */
function framesOf(pcap: Buffer): { us: bigint; data: Buffer }[] {
  const out: { us: bigint; data: Buffer }[] = [];
  for (let at = 24; at + 16 <= pcap.length; at += 16 + pcap.readUInt32LE(at + 8)) {
    const us = BigInt(pcap.readUInt32LE(at)) * 1_000_000n + BigInt(pcap.readUInt32LE(at + 4));
    out.push({ us, data: pcap.subarray(at + 16, at + 16 + pcap.readUInt32LE(at + 8)) });
  }
  return out;
}

const bench = (() => {
  const path = join(dir, 'bench.pcap');
  writeBenchPcap(path, 2000, 'drops01');
  return framesOf(readFileSync(path));
})();

/**
 * Two Ethernet interfaces, eth0 and eth1, carrying runs of 100 frames in turn (the addon's runs
 * take them), then `tail` blocks (statistics).
 */
function twoInterfaces(name: string, tail: Buffer[], eth1Frames = true): string {
  const path = join(dir, name);
  const parts = [shb(true), idb(true, 1, 'eth0', null), idb(true, 1, 'eth1', null)];
  bench.forEach((f, i) => {
    const id = eth1Frames && Math.floor(i / 100) % 2 === 1 ? 1 : 0;
    parts.push(epb(true, id, f.us, f.data));
  });
  writeFileSync(path, Buffer.concat([...parts, ...tail]));
  return path;
}

/** stats() after reading every frame: the JS reader, and the fast path at a chunk size. */
function statsOf(
  path: string,
  chunkSize?: number,
): { js: CaptureFileStats; fast: CaptureFileStats; inRuns: number } {
  const r = openCaptureFile(path);
  let frames = 0;
  for (const f of r.frames()) frames = f.index;
  if (frames !== r.stats().frames) throw new Error('frames out of order');
  const s = openSummaryPcap(path, chunkSize === undefined ? {} : { chunkSize });
  if (s === null) throw new Error('the fast path did not take the file');
  let inRuns = 0;
  for (let b = s.next(); b !== null; b = s.next()) if (b.count > 1) inRuns += b.count;
  return { js: r.stats(), fast: s.stats(), inRuns };
}

void t.test('which interfaces recorded drops: the JS reader and the fast path agree', (t) => {
  const cases: { name: string; path: string; want: Partial<CaptureFileStats> }[] = [
    {
      name: 'a statistics block for interface 0 only',
      path: twoInterfaces('isb0.pcapng', [isb(true, 0, { ifdrop: 0n })]),
      want: {
        dropped: null,
        dropsPartial: { recorded: 0, unrecorded: ['interface 1 (eth1)'], count: 1 },
      },
    },
    {
      name: 'interface 0 only, with drops',
      path: twoInterfaces('isb0-drops.pcapng', [isb(true, 0, { ifdrop: 4n, osdrop: 3n })]),
      want: {
        dropped: null,
        dropsPartial: { recorded: 7, unrecorded: ['interface 1 (eth1)'], count: 1 },
      },
    },
    {
      name: 'a block for interface 1 without a drop option',
      path: twoInterfaces('isb1-nodrop.pcapng', [
        isb(true, 0, { ifdrop: 2n }),
        isb(true, 1, { ifrecv: 1000n }),
      ]),
      want: {
        dropped: null,
        dropsPartial: { recorded: 2, unrecorded: ['interface 1 (eth1)'], count: 1 },
      },
    },
    {
      name: 'both interfaces',
      path: twoInterfaces('isb01.pcapng', [
        isb(true, 0, { ifdrop: 2n }),
        isb(true, 1, { osdrop: 5n }),
      ]),
      want: { dropped: 7 },
    },
    {
      name: 'interface 1 carried no packets: it needs no count',
      path: twoInterfaces('isb0-idle1.pcapng', [isb(true, 0, { ifdrop: 0n })], false),
      want: { dropped: 0 },
    },
    { name: 'no block at all', path: twoInterfaces('none.pcapng', []), want: { dropped: null } },
  ];
  // A second section whose interface 0 carried packets and recorded nothing.
  {
    const path = join(dir, 'sections.pcapng');
    const frames = bench.slice(0, 300).map((f) => epb(true, 0, f.us, f.data));
    writeFileSync(
      path,
      Buffer.concat([
        shb(true),
        idb(true, 1, 'a', null),
        ...frames,
        isb(true, 0, { ifdrop: 1n }),
        shb(true),
        idb(true, 1, 'b', null),
        ...frames,
      ]),
    );
    cases.push({
      name: 'a second section without a count',
      path,
      want: {
        dropped: null,
        dropsPartial: { recorded: 1, unrecorded: ['interface 0 (b) of section 2'], count: 1 },
      },
    });
  }
  // Eleven interfaces with packets, one with a count: eight named, ten counted.
  {
    const path = join(dir, 'eleven.pcapng');
    const parts = [shb(true)];
    for (let k = 0; k < 11; k++) parts.push(idb(true, 1, k === 3 ? null : `if${k}`, null));
    bench
      .slice(0, 1100)
      .forEach((f, i) => parts.push(epb(true, Math.floor(i / 100), f.us, f.data)));
    parts.push(isb(true, 0, { ifdrop: 9n }));
    writeFileSync(path, Buffer.concat(parts));
    cases.push({
      name: 'eleven interfaces',
      path,
      want: {
        dropped: null,
        dropsPartial: {
          recorded: 9,
          unrecorded: [1, 2, 3, 4, 5, 6, 7, 8].map((k) =>
            k === 3 ? 'interface 3' : `interface ${k} (if${k})`,
          ),
          count: 10,
        },
      },
    });
  }
  for (const c of cases) {
    const { js, fast, inRuns } = statsOf(c.path);
    t.match(js, c.want, c.name);
    t.same(
      Object.keys(js).includes('dropsPartial'),
      'dropsPartial' in c.want,
      `${c.name}: partial`,
    );
    t.same(fast, js, `${c.name}: the fast path`);
    t.ok(inRuns > js.frames / 2, `${c.name}: most frames in the addon's runs`);
    // Small chunks cut blocks: more of them through the JS parser, the same counts.
    for (const chunk of [100, 1500])
      t.same(statsOf(c.path, chunk).fast, js, `${c.name}: the fast path, chunk ${chunk}`);
  }
  t.end();
});

const EMPTY: Inventory = { nodes: {}, pods: {} };

/**
 * decap and egress classic pcap with the request; backend a two-interface pcapng without it (the
 * request never got there), its statistics block for eth0 only, with no drops.
 */
function points(): { name: string; file: string }[] {
  return (['decap', 'egress', 'backend'] as const).map((name) => {
    const pcap = join(dir, `${name}.pcap`);
    const probeAt = name === 'backend' ? 10_000 : 1500;
    writeBenchPcap(pcap, 2000, 'drops02', 'pcap', BENCH_POINTS[name], probeAt);
    if (name !== 'backend') return { name, file: pcap };
    const frames = framesOf(readFileSync(pcap));
    const file = join(dir, 'backend.pcapng');
    writeFileSync(
      file,
      Buffer.concat([
        shb(true),
        idb(true, 1, 'eth0', null),
        idb(true, 1, 'eth1', null),
        ...frames.map((f, i) => epb(true, Math.floor(i / 100) % 2, f.us, f.data)),
        isb(true, 0, { ifdrop: 0n, osdrop: 0n }),
      ]),
    );
    return { name, file };
  });
}

const CAUTION =
  /^backend did not see the request, and its capture recorded drops for some interfaces only: not recorded for interface 1 \(eth1\) \(no Interface Statistics Block with isb_ifdrop\/isb_osdrop for it; 0 dropped on the others\): the request may be among them/m;

const WAYS: { name: string; opts: AnalyzeFilesOptions }[] = [
  { name: 'native fast path', opts: {} },
  { name: 'later points on a worker thread', opts: { parallel: true } },
  { name: 'JS reader and decoder', opts: { fast: false } },
];

for (const way of WAYS) {
  void t.test(`analyze: eth1 recorded no drops, so the caution stays (${way.name})`, (t) => {
    const r = analyzeFiles({ points: points(), inventory: EMPTY, selector: {} }, way.opts);
    t.equal(r.verdict.layer, 'dropped');
    const h = r.captureHealth?.[2];
    t.equal(h?.kernelDrops, null, 'not "0 dropped"');
    t.same(h?.dropsPartial, { recorded: 0, unrecorded: ['interface 1 (eth1)'], count: 1 });
    t.match(r.caveats?.join('\n') ?? '', CAUTION);
    t.end();
  });
}

void t.test('the bundle says it: report.md, report.html, report.json (schema)', async (t) => {
  const rd = join(dir, 'rd');
  const argv = points().flatMap((p) => ['--point', `${p.name}=${p.file}`]);
  await runAnalyze([...argv, '--report-dir', rd], () => undefined);
  const md = readFileSync(join(rd, 'report.md'), 'utf8');
  t.match(
    md,
    /\| backend \| [^|]*backend\.pcapng \| pcapng \| 2,?000 \| not recorded for interface 1 \(eth1\); 0 on the others \|/,
  );
  t.match(md, /not recorded for interface 1 \(eth1\)/);
  t.match(
    readFileSync(join(rd, 'report.html'), 'utf8'),
    /not recorded for interface 1 \(eth1\); 0 on the others/,
  );
  const doc = JSON.parse(readFileSync(join(rd, 'report.json'), 'utf8')) as ReportDocument;
  t.same(reportSchemaErrors(doc), [], 'report.json is valid against proto/report.schema.json');
  t.same(doc.captureHealth?.[2]?.dropsPartial?.unrecorded, ['interface 1 (eth1)']);
  t.match(doc.caveats?.join('\n') ?? '', CAUTION);
});

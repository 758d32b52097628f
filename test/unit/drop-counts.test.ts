/**
 * Drop counts a pcapng file records (Interface Statistics Blocks: isb_ifdrop, isb_osdrop, u64)
 * are carried as every count is (common/counters.ts): exact up to 2^53 − 1 and saturated there,
 * and a saturated count is written `≥ 9007199254740991`. They were `hi * 2^32 + lo` doubles, so
 * 2^53 + 1 drops were reported as exactly 9007199254740992, and two options of 2^64 − 1 as
 * 36893488147419103000.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { countText, u64Count } from '../../common/counters';
import { openCaptureFile } from '../../offline/pcap-file';
import { runAnalyze } from '../../cli/analyze';
import { epb, idb, isb, shb } from './pcapng-writer';
import { PCAPS } from './corpus';

const MAX = Number.MAX_SAFE_INTEGER;
const dir = mkdtempSync(join(tmpdir(), 'ht-drop-counts-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

void t.test('u64Count is exact up to 2^53 − 1, then saturates; countText says so', (t) => {
  t.equal(u64Count(0, 7), 7);
  t.equal(u64Count(1, 3), 2 ** 32 + 3);
  t.equal(u64Count(0x1fffff, 0xffffffff), MAX, '2^53 − 1, exact');
  t.equal(u64Count(0x200000, 1), MAX, '2^53 + 1');
  t.equal(u64Count(0xffffffff, 0xffffffff), MAX, '2^64 − 1');
  t.equal(countText(MAX - 1), '9007199254740990');
  t.equal(countText(MAX), '≥ 9007199254740991');
  t.end();
});

/** zeek_http-get.pcap's frames as pcapng, then `stats` blocks. */
function pcapngWith(name: string, le: boolean, stats: Buffer[]): string {
  const frames: Buffer[] = [];
  for (const f of openCaptureFile(join(PCAPS, 'zeek_http-get.pcap')).frames())
    frames.push(epb(le, 0, f.tsNs / 1000n, Buffer.from(f.data)));
  const path = join(dir, name);
  writeFileSync(path, Buffer.concat([shb(le), idb(le, 1, 'eth0', null), ...frames, ...stats]));
  return path;
}

function dropped(path: string): number | null {
  const r = openCaptureFile(path);
  let frames = 0;
  for (const f of r.frames()) frames += f.index > 0 ? 1 : 0;
  return frames === 0 ? null : r.stats().dropped;
}

for (const le of [true, false]) {
  void t.test(`pcapng ${le ? 'LE' : 'BE'}: counts past 2^53 saturate, never round`, (t) => {
    const cases: [string, Buffer[], number][] = [
      ['2^53 − 2', [isb(le, 0, { ifdrop: 2n ** 53n - 2n })], MAX - 1],
      ['2^53 + 1', [isb(le, 0, { ifdrop: 2n ** 53n + 1n })], MAX],
      ['2^64 − 1 twice', [isb(le, 0, { ifdrop: 2n ** 64n - 1n, osdrop: 2n ** 64n - 1n })], MAX],
      [
        'two sections of 2^53 − 1',
        [isb(le, 0, { ifdrop: 2n ** 53n - 1n }), shb(le), idb(le, 1, null, null)].concat(
          isb(le, 0, { osdrop: 2n ** 53n - 1n }),
        ),
        MAX,
      ],
    ];
    for (const [what, stats, want] of cases)
      t.equal(dropped(pcapngWith(`${what}-${String(le)}.pcapng`, le, stats)), want, what);
    t.end();
  });
}

void t.test('the report never writes a saturated count as an exact number', async (t) => {
  const backend = pcapngWith('backend.pcapng', true, [isb(true, 0, { ifdrop: 2n ** 53n + 1n })]);
  const rd = join(dir, 'rd');
  const lines: string[] = [];
  const argv = ['--point', `decap=${join(PCAPS, 'zeek_http-get.pcap')}`, '--point'];
  argv.push(`backend=${backend}`, '--json', '--report-dir', rd);
  await runAnalyze(argv, (l) => lines.push(l));
  const out = JSON.parse(lines.join('\n')) as { captureHealth: { kernelDrops: number | null }[] };
  t.equal(out.captureHealth[1]?.kernelDrops, MAX, 'JSON: 2^53 − 1, the saturated count');
  for (const f of ['report.md', 'report.html']) {
    const text = readFileSync(join(rd, f), 'utf8');
    t.match(text, '≥ 9007199254740991', `${f}: at least`);
    t.notMatch(text, /9007199254740992/, `${f}: no rounded count`);
  }
});

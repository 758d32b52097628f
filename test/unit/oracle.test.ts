/**
 * Our inner tuple against the tshark oracle (test/pcaps/FILE.tshark.ndjson) for every frame
 * whose oracle inner protocol is tcp or udp, plus the files a reader must refuse or survive.
 *
 * Oracle quirks we accept (disagreements that are tshark's, not ours):
 * - tcpdump_bigtcp-ipv4-vxlan-ipv4.pcap #1: the outer IPv4 total length is 0 (BIG TCP / TSO
 *   super-packet). tshark stops after the outer UDP header, tcpdump prints "bad-len 0"; we use the
 *   captured length as the kernel does, decode the VXLAN payload and report the inner TCP tuple.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import type { Tuple } from '../../common/event';
import { openCaptureFile } from '../../offline/pcap-file';
import { decodeFrame } from '../../core/decode/frame';
import { PCAPS } from './corpus';

const pcaps = PCAPS;

interface OracleLine {
  frame?: number;
  inner?: { src: string; dst: string; proto?: string; sport?: number; dport?: number };
  error?: string;
}

const ACCEPTED_QUIRKS = new Set(['tcpdump_bigtcp-ipv4-vxlan-ipv4.pcap#1']);

function oracleOf(file: string): OracleLine[] {
  const p = join(pcaps, `${file}.tshark.ndjson`);
  if (!existsSync(p)) return [];
  return readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as OracleLine);
}

function decodeAll(file: string): (Tuple | null)[] {
  const out: (Tuple | null)[] = [];
  for (const f of openCaptureFile(join(pcaps, file)).frames())
    out.push(decodeFrame(f.linktype, f.data).inner);
  return out;
}

const files = readdirSync(pcaps)
  .filter((f) => /\.(pcap|pcapng)$/.test(f))
  .sort();

void t.test('corpus is present', (t) => {
  t.ok(files.length >= 70, `${files.length} capture files in ${pcaps}`);
  t.end();
});

void t.test('inner tuple agrees with tshark on tcp/udp frames', (t) => {
  let compared = 0;
  let matched = 0;
  const unexpected: string[] = [];
  for (const file of files) {
    const oracle = oracleOf(file).filter(
      (o) => o.inner?.proto === 'tcp' || o.inner?.proto === 'udp',
    );
    if (oracle.length === 0) continue;
    const ours = decodeAll(file);
    const disagreements: string[] = [];
    for (const o of oracle) {
      const want = o.inner;
      if (want === undefined || o.frame === undefined) continue;
      compared++;
      const got = ours[o.frame - 1] ?? null;
      const same =
        got !== null &&
        got.proto === want.proto &&
        got.src === want.src &&
        got.dst === want.dst &&
        got.sport === want.sport &&
        got.dport === want.dport;
      if (same) {
        matched++;
        continue;
      }
      const key = `${file}#${o.frame}`;
      disagreements.push(`#${o.frame} oracle ${JSON.stringify(want)} ours ${JSON.stringify(got)}`);
      if (!ACCEPTED_QUIRKS.has(key)) unexpected.push(key);
    }
    if (disagreements.length > 0) t.comment(`${file}: ${disagreements.join('; ')}`);
  }
  const pct = (100 * matched) / compared;
  t.comment(`oracle agreement: ${matched}/${compared} frames = ${pct.toFixed(2)} %`);
  t.ok(compared >= 200, `compared ${compared} frames`);
  t.ok(pct >= 99, `agreement ${pct.toFixed(2)} % >= 99 %`);
  t.same(unexpected, [], 'no disagreement beyond the documented oracle quirks');
  t.end();
});

function refusal(file: string): string {
  try {
    for (const f of openCaptureFile(join(pcaps, file)).frames()) decodeFrame(f.linktype, f.data);
  } catch (e) {
    return isHoptraceError(e) ? e.code : `non-hoptrace error ${String(e)}`;
  }
  return 'accepted';
}

void t.test('invalid libpcap test files are refused with the right code', (t) => {
  t.equal(refusal('libpcap_pcap-invalid-version-1.pcap'), 'FILE_BAD_VERSION');
  t.equal(refusal('libpcap_linktype-reserved-field-not-zero.pcap'), 'FILE_BAD_LINKTYPE_FIELD');
  t.equal(refusal('libpcap_shb-option-too-long.pcapng'), 'FILE_BAD_BLOCK');
  t.end();
});

void t.test('fuzzer outputs decode without crashing; zeek_empty has zero frames', (t) => {
  for (const f of files.filter((f) =>
    /heapoverflow|asan|invalid_|bogus|trunc|too-small|bad-version/.test(f),
  )) {
    t.equal(refusal(f), 'accepted', f);
  }
  t.same(decodeAll('zeek_empty.pcap'), []);
  t.end();
});

/**
 * `hoptrace analyze`'s command line (cli/analyze-args.ts): every flag is checked before anything
 * is created, so a usage error leaves no report directory behind, and an empty --report-dir (which
 * would write the bundle into the current directory) is refused.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import { parseAnalyzeArgs } from '../../cli/analyze-args';
import { runAnalyze } from '../../cli/analyze';
import { PCAPS } from './corpus';

const dir = mkdtempSync(join(tmpdir(), 'ht-analyze-args-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
const two = [
  '--point',
  `decap=${join(PCAPS, 'zeek_http-get.pcap')}`,
  '--point',
  `backend=${join(PCAPS, 'tcpdump_LINKTYPE_IPV4.pcap')}`,
];

/** The code of the HoptraceError `fn` throws (or rejects with), else what happened. */
async function codeOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return 'no error';
  } catch (e) {
    return isHoptraceError(e) ? e.code : `not a HoptraceError: ${String(e)}`;
  }
}

void t.test('--report-dir "" is refused (it would write into the current directory)', async (t) => {
  t.equal(await codeOf(() => parseAnalyzeArgs([...two, '--report-dir', ''])), 'CLI_USAGE');
  t.equal(parseAnalyzeArgs([...two, '--report-dir', 'out']).reportDir, 'out');
  t.equal(parseAnalyzeArgs(two).reportDir, undefined);
});

void t.test('--evidence-payload without --report-dir is a usage error naming both', (t) => {
  let err: unknown;
  try {
    parseAnalyzeArgs([...two, '--evidence-payload']);
  } catch (e) {
    err = e;
  }
  t.ok(isHoptraceError(err), 'a HoptraceError, not a silent no-op');
  if (!isHoptraceError(err)) return t.end();
  t.equal(err.code, 'CLI_USAGE');
  t.match(err.message, /--evidence-payload/);
  t.match(err.message, /--report-dir/);
  t.notMatch(err.message, /\n/, 'one line');
  t.equal(parseAnalyzeArgs([...two, '--report-dir', 'out', '--evidence-payload']).payload, true);
  t.equal(parseAnalyzeArgs(two).payload, false);
  t.end();
});

void t.test('a usage error leaves no report directory behind', async (t) => {
  const cases: [string, string[], string][] = [
    ['--parallel bogus', ['--parallel', 'bogus'], 'CLI_USAGE'],
    ['--drops of no point', ['--drops', 'egress=1'], 'CLI_BAD_POINT'],
    ['--client not an address', ['--client', 'x'], 'CLI_USAGE'],
    ['--inventory missing', ['--inventory', join(dir, 'none.json')], 'CLI_BAD_INVENTORY'],
  ];
  for (const [what, extra, code] of cases) {
    const rd = join(dir, what.replace(/\W+/g, '-'), 'a', 'b');
    const lines: string[] = [];
    const got = await codeOf(() =>
      runAnalyze([...two, ...extra, '--report-dir', rd], (l) => lines.push(l)),
    );
    t.equal(got, code, `${what}: ${code}`);
    t.notOk(existsSync(join(dir, what.replace(/\W+/g, '-'))), `${what}: nothing created`);
    t.same(lines, [], `${what}: nothing printed`);
  }
});

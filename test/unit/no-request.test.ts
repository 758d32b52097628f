/**
 * No request at the first point, offline: README "Exit codes" promises exit 3 with the verdict
 * `unknown` and any --report-dir bundle still written. `hoptrace analyze` exited 1 with
 * CLI_NO_REQUEST instead, and left the report directory empty. Live, the collector keeps waiting
 * for the request, so analyzeEvents still throws by default (analyze-core.test.ts).
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { analyzeEventStreams, analyzeEvents } from '../../core/report/analyze';
import { NO_REQUEST_HINT } from '../../core/report/no-request';
import { runAnalyze } from '../../cli/analyze';
import { EXIT } from '../../cli/exit-codes';
import { DIRECT, INVENTORY, exchange, pt } from './fixtures-events';
import { PCAPS } from './corpus';

const points = [
  pt('decap', exchange('decap', DIRECT)),
  pt('backend', exchange('backend', DIRECT, { at: 2n })),
];
const selector = { client: '10.1.2.3' };

void t.test("noRequest: 'verdict' gives the verdict unknown, saying why and what to do", (t) => {
  const r = analyzeEvents({ points, inventory: INVENTORY, selector, noRequest: 'verdict' });
  t.equal(r.verdict.layer, 'unknown');
  t.match(r.verdict.reason, /^no new TCP connection .* from client 10\.1\.2\.3 among \d+ events/);
  t.equal(r.verdict.hint, NO_REQUEST_HINT);
  t.same(
    r.points.map((p) => [p.name, p.status]),
    [
      ['decap', 'not-seen'],
      ['backend', 'not-seen'],
    ],
  );
  t.end();
});

void t.test('streaming: the later points, never read, say so', (t) => {
  let read = 0;
  const r = analyzeEventStreams({
    points: points.map((p, i) => ({
      name: p.name,
      events: () => {
        if (i > 0) read++;
        return p.events;
      },
    })),
    inventory: INVENTORY,
    selector,
    noRequest: 'verdict',
  });
  t.equal(read, 0, 'the backend was not read');
  t.equal(r.verdict.layer, 'unknown');
  t.match(r.points[1], {
    status: 'not-seen',
    detail: 'not read: no request was selected at decap',
  });
  t.match(r.verdict.evidence[1], { detail: 'not read: no request was selected at decap' });
  t.end();
});

void t.test('analyze: no request is exit 3 with the verdict and the bundle', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-no-request-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const backend = join(dir, 'backend.pcap');
  copyFileSync(join(PCAPS, 'zeek_http-get.pcap'), backend);
  const rd = join(dir, 'rd');
  const lines: string[] = [];
  const code = await runAnalyze(
    [
      '--point',
      `decap=${join(PCAPS, 'zeek_http-get.pcap')}`,
      '--point',
      `backend=${backend}`,
      '--client',
      '10.1.2.3',
      '--report-dir',
      rd,
    ],
    (l) => lines.push(l),
  );
  t.equal(code, EXIT.inconclusive);
  const text = lines.join('\n');
  t.match(text, /^verdict: unknown/);
  t.match(text, /from client 10\.1\.2\.3/);
  t.match(text, /bundle written to /);
  for (const f of ['report.md', 'report.json', 'report.html', 'sequence.svg', 'evidence.pcapng'])
    t.ok(existsSync(join(rd, f)), f);
  const doc = JSON.parse(readFileSync(join(rd, 'report.json'), 'utf8')) as {
    verdict: { layer: string; hint: string };
  };
  t.equal(doc.verdict.layer, 'unknown');
  t.equal(doc.verdict.hint, NO_REQUEST_HINT);
});

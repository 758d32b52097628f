/**
 * `analyze --doctor FILE --json`: what became of the doctor file is in the JSON as in report.json
 * (`doctor`: given with its findings, or unreadable with why). It was left out, so a file that
 * could not be read vanished from JSON output while the text said "doctor: could not read".
 */
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runAnalyze } from '../../cli/analyze';
import { PCAPS } from './corpus';

const dir = mkdtempSync(join(tmpdir(), 'ht-doctor-json-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
const backend = join(dir, 'backend.pcap');
copyFileSync(join(PCAPS, 'zeek_http-get.pcap'), backend);
const points = ['--point', `decap=${join(PCAPS, 'zeek_http-get.pcap')}`, '--point'];
points.push(`backend=${backend}`, '--client', '141.142.228.5', '--json');

async function json(extra: string[]): Promise<Record<string, unknown>> {
  const lines: string[] = [];
  await runAnalyze([...points, ...extra], (l) => lines.push(l));
  return JSON.parse(lines.join('\n')) as Record<string, unknown>;
}

void t.test('an unreadable or invalid doctor file is in the JSON, saying why', async (t) => {
  const missing = join(dir, 'missing.json');
  t.match((await json(['--doctor', missing])).doctor, {
    status: 'unreadable',
    source: missing,
    detail: /ENOENT/,
  });
  const notDoctor = join(dir, 'not-doctor.json');
  writeFileSync(notDoctor, '{}');
  t.match((await json(['--doctor', notDoctor])).doctor, {
    status: 'unreadable',
    detail: /not what `hoptrace doctor --json` prints/,
  });
});

void t.test(
  "a doctor file read is in the JSON with its findings; none given, no 'doctor'",
  async (t) => {
    const good = join(dir, 'doctor.json');
    const finding = {
      severity: 'error',
      check: 'return-route',
      node: 'backend-node',
      namespace: 'backend',
      subject: '10.90.0.0/24',
      detail: 'no route back to the tunnel range',
      fix: 'ip route replace 10.90.0.0/24 via 192.168.50.1',
    };
    writeFileSync(
      good,
      JSON.stringify({ tunnelRange: '10.90.0.0/24', client: '10.90.0.42', findings: [finding] }),
    );
    t.match((await json(['--doctor', good])).doctor, {
      status: 'given',
      result: { findings: [finding], summary: { errors: 1 } },
    });
    t.notOk('doctor' in (await json([])), 'without --doctor, as the text');
  },
);

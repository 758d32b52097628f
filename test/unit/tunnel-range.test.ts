/**
 * The tunnel range "what to change" names: doctor's when it holds this request's client, else the
 * client's /24 marked assumed — never presented as read from anything — and doctor findings for a
 * range that does not hold the client are another path's, said so and not used.
 */
import t from 'tap';
import { renderReportMarkdown } from '../../core/report/report';
import type { ReportMeta } from '../../core/report/report-document';
import { whatToChange, type DoctorEvidence } from '../../core/report/what-to-change';
import { CLIENT, INVENTORY } from './fixtures-events';
import { DOCTOR, cni } from './live-report-fixtures';

const META: ReportMeta = {
  generatedAt: '2026-12-01T10:00:00.000Z',
  inputs: [],
  selector: { client: CLIENT },
  hoptraceVersion: '0.1.0',
  source: 'files',
  inventoryUsed: INVENTORY,
};

const given = (tunnelRange: string): DoctorEvidence => ({
  status: 'given',
  source: '/caps/doctor.json',
  result: { ...DOCTOR, tunnelRange },
});

void t.test('no doctor: the client /24, marked assumed, and the hint says e.g.', (t) => {
  const w = whatToChange(cni, undefined, INVENTORY);
  t.equal(w.tunnelRange, '10.90.0.0/24');
  t.equal(w.tunnelRangeSource, 'assumed');
  const md = renderReportMarkdown(cni, META);
  t.match(md, /Tunnel range 10\.90\.0\.0\/24: assumed — the client address's \/24, an example/);
  t.match(cni.verdict.hint, /exclude it \(e\.g\. 10\.90\.0\.0\/24\)/);
  t.end();
});

void t.test("doctor's range holding the client: named as doctor's", (t) => {
  const w = whatToChange(cni, given('10.90.0.0/16'), INVENTORY);
  t.equal(w.tunnelRange, '10.90.0.0/16');
  t.equal(w.tunnelRangeSource, 'doctor');
  t.match(
    renderReportMarkdown(cni, { ...META, doctor: given('10.90.0.0/16') }),
    /Tunnel range 10\.90\.0\.0\/16: doctor's --tunnel-range/,
  );
  t.ok(
    w.preserve.steps.some((s) => (s.findings ?? []).length > 0),
    "doctor's findings are used",
  );
  t.end();
});

void t.test("doctor for another range: its findings are another path's, not used", (t) => {
  const w = whatToChange(cni, given('172.31.0.0/16'), INVENTORY);
  t.equal(w.tunnelRange, '10.90.0.0/24', 'the range is not the other path’s');
  t.equal(w.tunnelRangeSource, 'assumed');
  t.match(
    w.doctor.text,
    /outside that tunnel range: the findings are about another path and are not used here/,
  );
  t.notOk(
    w.preserve.steps.some((s) => (s.findings ?? []).length > 0 || s.basis === 'doctor'),
    'no step rests on them',
  );
  t.notOk(
    w.questions.some((q) => q.findings.length > 0),
    'no question rests on them',
  );
  t.end();
});

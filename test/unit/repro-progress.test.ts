import t from 'tap';
import { ReproProgress, reproEndLines } from '../../core/repro/repro-progress';
import { TIMELINE_HEADER, type ReproMark, type TimelineRow } from '../../core/repro/repro-core';

const row = (n: number, verdict: TimelineRow['verdict'], served = 'wg-0'): TimelineRow => ({
  probeId: `rabcn0${n}`,
  sport: 41000 + n,
  startedAtMs: 1_796_000_000_000 + n * 500,
  offsetMs: n * 500,
  servedBy: { name: served, ip: '10.244.1.10', epoch: 1 } as TimelineRow['servedBy'],
  verdict,
  ok: verdict === 'preserved',
  backendSrc: null,
  detail: '',
  lossesInFlight: [],
});

void t.test('rows as probes settle, marks in between, changes and the summary at the end', (t) => {
  const p = new ReproProgress();
  const marks: ReproMark[] = [];
  const rows = [row(1, 'preserved'), row(2, 'preserved')];
  t.same(
    p.update({ timeline: rows.slice(0, 1), marks }, 0),
    [TIMELINE_HEADER],
    'the header first, no row before the probe settled',
  );
  const l1 = p.update({ timeline: rows, marks }, 1);
  t.equal(l1.length, 1);
  t.match(l1[0], /rabcn01 .*wg-0 10\.244\.1\.10 .*preserved .*HTTP 200/);
  marks.push({
    kind: 'deleted',
    atMs: (rows[1]?.startedAtMs ?? 0) + 10,
    detail: 'pod vpn/wg-0 deleted',
  });
  rows.push(row(3, 'not-captured'), row(4, 'no-return'));
  const l2 = p.update({ timeline: rows, marks }, 3);
  t.equal(l2.length, 3, 'probe 2, the deletion, probe 3');
  t.match(l2[1], /── deleted: pod vpn\/wg-0 deleted/);
  t.same(p.update({ timeline: rows, marks }, 3), [], 'nothing twice');
  // Late events: probe 3 was judged before its packets arrived.
  const final = [...rows.slice(0, 2), row(3, 'no-return'), row(4, 'no-return')];
  const end = reproEndLines(p, {
    timeline: final,
    marks,
    summary: {
      recovered: false,
      deletedAtMs: marks[0]?.atMs ?? 0,
      brokenMs: null,
      brokenForAtLeastMs: 1000,
      why: 'the path did not come back',
    } as never,
    lossText: ['', 'capture backend dropped 3 packets'],
  });
  t.match(end[0], /rabcn04 .*no-return/);
  t.match(
    end[1],
    /note: probe rabcn03 printed as not-captured via wg-0; .* it is no-return via wg-0/,
  );
  t.match(end.join('\n'), /summary: NOT recovered; broken for at least 1000 ms/);
  t.equal(end.at(-1), 'capture backend dropped 3 packets');
  t.end();
});

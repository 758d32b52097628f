// The repro timeline picture and page: each probe a mark at its time by verdict, the broken
// window shaded between the last good probe before the deletion and the first good one after
// (or to the end when the path did not come back), the deletion and the replacement marked.
import t from 'tap';
import {
  summarizeRepro,
  type ProbeVerdict,
  type ReproMark,
  type ServedBy,
  type TimelineRow,
} from '../../core/repro/repro-core';
import { brokenWindow, renderReproSvg } from '../../core/report/repro-svg';
import { renderReproHtml } from '../../core/report/report-html';
import { esc } from '../../core/report/markup';
import { attrOf, count, markupErrors } from './markup-check';

const T = 1_796_147_323_000;
const OLD: ServedBy = { epoch: 1, name: 'vpn/wg-0', ip: '10.244.1.10', node: 'node-a' };
const NEW: ServedBy = { epoch: 2, name: 'vpn/wg-1', ip: '10.244.3.17', node: 'node-b' };

function row(i: number, verdict: ProbeVerdict, servedBy: ServedBy | null): TimelineRow {
  const ok = ['preserved', 'cni-masquerade'].includes(verdict);
  return {
    probeId: `p${String(i).padStart(2, '0')}`,
    sport: 41000 + i,
    startedAtMs: T + i * 1000,
    offsetMs: i * 1000,
    servedBy,
    verdict,
    ok,
    backendSrc: ok ? '10.90.0.42' : null,
    detail: i === 7 ? '<script>alert(1)</script>' : '',
    lossesInFlight: [],
  };
}

/** 0–5 good through the old pod, deleted at +5.5 s, 6–9 broken, 10–14 good through the new one. */
const RECOVERED: TimelineRow[] = [
  ...[0, 1, 2, 3, 4, 5].map((i) => row(i, 'preserved', OLD)),
  row(6, 'no-return', OLD),
  row(7, 'failed-to-connect', null),
  row(8, 'failed-to-connect', null),
  row(9, 'dropped', NEW),
  ...[10, 11, 12, 13, 14].map((i) => row(i, 'preserved', NEW)),
];
const MARKS: ReproMark[] = [
  { kind: 'deleted', atMs: T + 5500, detail: 'deleted vpn/wg-0 <b>now</b>' },
  { kind: 'replacement-ready', atMs: T + 9200, detail: 'vpn/wg-1 Running' },
];
const ATTACHMENTS = [
  { served: OLD, addresses: [OLD.ip], attachedAtMs: T - 1000 },
  { served: NEW, addresses: [NEW.ip, '10.244.9.9'], attachedAtMs: T + 9300 },
];

const cxOf = (svg: string, probe: string): number =>
  Number(
    new RegExp(`data-probe="${probe}"[^>]*>(?:<title>[^<]*</title>)?<circle cx="([\\d.]+)"`).exec(
      svg,
    )?.[1],
  );

void t.test('recovered: probes by verdict, the window between the good probes, both marks', (t) => {
  const summary = summarizeRepro({
    rows: RECOVERED,
    marks: MARKS,
    attachments: ATTACHMENTS,
    routes: [],
    endMs: T + 15000,
  });
  t.ok(summary.recovered);
  const svg = renderReproSvg({ rows: RECOVERED, marks: MARKS, summary, endMs: T + 15000 });
  t.strictSame(markupErrors(svg), []);
  t.equal(count(svg, '<g class="probe '), RECOVERED.length);
  t.strictSame(
    attrOf(svg, 'class="probe ', 'data-verdict'),
    RECOVERED.map((r) => r.verdict),
  );
  t.equal(count(svg, 'class="broken-window"'), 1);
  const x = Number(attrOf(svg, 'class="broken-window"', 'x')[0]);
  const w = Number(attrOf(svg, 'class="broken-window"', 'width')[0]);
  t.ok(Math.abs(x - cxOf(svg, 'p05')) < 0.2, 'from the last good probe before the deletion');
  t.ok(Math.abs(x + w - cxOf(svg, 'p10')) < 0.2, 'to the first good one after');
  t.match(svg, /broken 5\.0 s/);
  t.equal(count(svg, 'class="mark deleted"'), 1);
  t.equal(count(svg, 'class="mark replacement-ready"'), 1);
  t.strictSame(
    attrOf(svg, 'class="pod-row"', 'data-row'),
    ['1', '2', 'none'],
    'a row per pod, then none',
  );
  t.match(svg, /from 2026-12-01T17:48:43\.000Z/, 'the start in UTC');
  t.notMatch(svg, /<script|<b>/);
  t.ok(svg.includes(esc('<script>alert(1)</script>')));
  t.notMatch(svg.replace('xmlns="http://www.w3.org/2000/svg"', ''), /https?:/);
  t.end();
});

void t.test('not recovered: the window runs to the end of the run', (t) => {
  const rows = [
    ...[0, 1, 2].map((i) => row(i, 'preserved', OLD)),
    ...[3, 4, 5, 6].map((i) => row(i, 'dropped', NEW)),
  ];
  const marks: ReproMark[] = [{ kind: 'deleted', atMs: T + 2500, detail: 'deleted' }];
  const summary = summarizeRepro({
    rows,
    marks,
    attachments: ATTACHMENTS.slice(0, 1),
    routes: [],
    endMs: T + 8000,
  });
  t.notOk(summary.recovered);
  const win = brokenWindow({ rows, marks, summary }, T + 8000);
  t.strictSame(win, {
    fromMs: T + 2000,
    toMs: T + 8000,
    recovered: false,
    text: 'broken for at least 5.5 s (not recovered)',
  });
  const svg = renderReproSvg({ rows, marks, summary, endMs: T + 8000 });
  t.strictSame(markupErrors(svg), []);
  t.match(svg, /NOT recovered/);
  t.match(svg, /data-recovered="false"/);
  t.equal(count(svg, 'class="mark replacement-ready"'), 0);
  t.end();
});

void t.test('no deletion: no window; no probes at all: still a picture', (t) => {
  const rows = [0, 1].map((i) => row(i, 'preserved', OLD));
  const svg = renderReproSvg({ rows, marks: [], summary: null });
  t.strictSame(markupErrors(svg), []);
  t.equal(count(svg, 'class="broken-window"'), 0);
  const empty = renderReproSvg({ rows: [], marks: [], summary: null });
  t.strictSame(markupErrors(empty), []);
  t.equal(count(empty, '<g class="probe '), 0);
  t.end();
});

void t.test('the repro page: outcome, picture, one row per probe, marks, cautions', (t) => {
  const summary = summarizeRepro({
    rows: RECOVERED,
    marks: MARKS,
    attachments: ATTACHMENTS,
    routes: [],
    endMs: T + 15000,
  });
  const html = renderReproHtml({
    rows: RECOVERED,
    marks: MARKS,
    summary,
    endMs: T + 15000,
    generatedAt: '2026-12-02T10:00:00.000Z',
    id: 'r<1>',
    state: 'finished',
    cautions: [
      'capture backend lost 3 in the kernel between 2026-12-01T17:48:44.000Z and 2026-12-01T17:48:45.000Z',
    ],
  });
  t.strictSame(markupErrors(html, true), []);
  t.match(html, /<h1>hoptrace repro: recovered<\/h1>/);
  t.ok(html.includes(esc(summary.why)));
  t.equal(count(html, '<svg xmlns='), 1);
  t.equal(count(html, '<tr><td><time'), RECOVERED.length, 'one row per probe');
  t.match(html, /<time datetime="2026-12-01T17:48:43\.000Z">/);
  t.match(html, /<strong>deleted<\/strong>: deleted vpn\/wg-0 &lt;b&gt;now&lt;\/b&gt;/);
  t.match(html, /capture backend lost 3 in the kernel/);
  t.match(html, /<dt>repro<\/dt><dd>r&lt;1&gt;<\/dd>/);
  t.notMatch(html, /<script|<b>/);
  t.end();
});

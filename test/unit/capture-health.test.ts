/**
 * Capture health next to the verdict: a point that did not see the request (or the reply) while
 * its capture lost packets gets a caution in the text, Markdown and JSON reports; points whose
 * captures lost nothing, or that saw what they should, get none.
 */
import t from 'tap';
import { analyzeEvents } from '../../core/report/analyze';
import {
  healthCaveats,
  withCaptureHealth,
  type CaptureHealth,
} from '../../core/report/capture-health';
import {
  renderReportJson,
  renderReportMarkdown,
  renderVerdictText,
} from '../../core/report/report';
import { CLIENT, DIRECT, INVENTORY, exchange, pt } from './fixtures-events';

/** The request at decap and egress only: the backend never saw it. */
const dropped = analyzeEvents({
  points: [
    pt('decap', exchange('decap', DIRECT, { phase: 'syn-only' })),
    pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only' })),
    pt('backend', []),
  ],
  inventory: INVENTORY,
  selector: { client: CLIENT },
});

/** The backend answered; the reply never came back to egress or decap. */
const noReturn = analyzeEvents({
  points: [
    pt('decap', exchange('decap', DIRECT, { phase: 'syn-only' })),
    pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only' })),
    pt('backend', exchange('backend', DIRECT, { at: 2n, phase: 'syn-synack' })),
  ],
  inventory: INVENTORY,
  selector: { client: CLIENT },
});

function health(point: string, o: Partial<CaptureHealth> = {}): CaptureHealth {
  return {
    point,
    node: 'n1',
    iface: 'eth0',
    state: 'stopped',
    confirmed: true,
    packets: 100,
    kernelDrops: 0,
    queueDrops: 0,
    lost: 0,
    ...o,
  };
}

const clean = ['decap', 'egress', 'backend'].map((p) => health(p));

void t.test('fixtures: the verdicts the cautions are about', (t) => {
  t.equal(dropped.verdict.layer, 'dropped');
  t.equal(noReturn.verdict.layer, 'no-return');
  t.end();
});

void t.test('no caution when no capture lost anything', (t) => {
  t.same(healthCaveats(dropped.points, clean), []);
  t.same(healthCaveats(noReturn.points, clean), []);
  t.same(healthCaveats(dropped.points, []), [], 'no statuses (a file analysis): none');
  t.end();
});

void t.test('the point that missed the request lost packets: a caution names it', (t) => {
  const h = [
    health('decap'),
    health('egress'),
    health('backend', { kernelDrops: 12, queueDrops: 3, lost: 7 }),
  ];
  const c = healthCaveats(dropped.points, h);
  t.equal(c.length, 1);
  t.match(
    c[0],
    /^backend did not see the request, and its capture lost 12 in the kernel, 3 in the agent, 7 events on the way to the collector: the request may be among them/,
  );
  // Losses at points that saw the request do not cast doubt on the verdict.
  const upstream = [health('decap', { kernelDrops: 5 }), health('egress'), health('backend')];
  t.same(healthCaveats(dropped.points, upstream), [], 'decap saw the request: no caution');
  t.end();
});

void t.test('a capture that cannot count its drops is named too', (t) => {
  const h = [health('decap'), health('egress'), health('backend', { kernelDrops: null })];
  t.match(healthCaveats(dropped.points, h), [
    /backend did not see the request.*cannot count its kernel drops/,
  ]);
  t.end();
});

void t.test('files: recorded drops, drops given with --drops, none recorded', (t) => {
  const file = (o: Partial<CaptureHealth>): CaptureHealth[] => [
    health('decap', { file: 'pcap', kernelDrops: 0, dropsGiven: true }),
    health('egress', { file: 'pcap', ...o }),
    health('backend', { file: 'pcapng', kernelDrops: 0 }),
  ];
  // The reply never came back to egress: its file decides whether that is proven.
  t.match(healthCaveats(noReturn.points, file({ kernelDrops: 2, dropsGiven: true })), [
    /^egress saw the request but not the reply, and its capture dropped 2 packets \(--drops\): the reply may be among them/,
  ]);
  t.same(healthCaveats(noReturn.points, file({ kernelDrops: 0, dropsGiven: true })), []);
  t.match(healthCaveats(noReturn.points, file({ kernelDrops: 2 })), [
    /egress .* recorded 2 packets dropped/,
  ]);
  t.match(healthCaveats(noReturn.points, file({ kernelDrops: null })), [
    /egress .* is a classic pcap file, which records no drop counts .*give that count with --drops/,
  ]);
  t.end();
});

void t.test('a point whose capture never confirmed it ran: said so, not taken for cap', (t) => {
  const h = [
    health('decap'),
    health('egress'),
    health('backend', { confirmed: false, state: 'failed', kernelDrops: null }),
  ];
  t.match(healthCaveats(dropped.points, h), [
    /^backend did not see the request, and its capture never reported that it was capturing \(state failed\)/,
  ]);
  t.end();
});

void t.test('a pod target taken from an old list: a caution where the request was missed', (t) => {
  const note = 'reading web/web-1 from the API failed (connect ECONNREFUSED): as listed 37 s ago';
  const h = [
    health('decap', { targetNote: note }), // saw the request: the target was right
    health('egress'),
    health('backend', { targetNote: note }),
  ];
  t.same(healthCaveats(dropped.points, h), [
    `backend did not see the request, and its target was taken from an old pod list (${note}): ` +
      'if the pod was recreated since, the capture ran elsewhere; capture again once the ' +
      'Kubernetes API answers',
  ]);
  t.end();
});

void t.test('missing reply: a caution only once the backend saw the request', (t) => {
  const h = [health('decap'), health('egress', { queueDrops: 4 }), health('backend')];
  t.match(healthCaveats(noReturn.points, h), [
    /^egress saw the request but not the reply, and its capture lost 4 in the agent: the reply may be among them/,
  ]);
  // In the dropped case no reply was due: egress's losses are not a reason to doubt anything.
  t.same(healthCaveats(dropped.points, h), []);
  t.end();
});

void t.test('reports: the caution and a capture health table in text, Markdown and JSON', (t) => {
  const h = [
    health('decap', { kernelDrops: null, node: 'vpn-node', iface: 'tun0' }),
    health('egress', { node: 'vpn-node' }),
    health('backend', { kernelDrops: 12, node: 'backend-node', packets: 4242 }),
  ];
  const r = withCaptureHealth(dropped, h);
  t.match(
    renderVerdictText(r),
    /\n {2}caution: backend did not see the request, and its capture lost 12 in the kernel/,
  );
  const md = renderReportMarkdown(r, { generatedAt: '2026-11-30T00:00:00.000Z', inputs: [] });
  t.match(md, /- \*\*caution\*\*: backend did not see the request/);
  t.match(md, /## Capture health/);
  t.match(md, /\| decap \| vpn-node \| tun0 \| stopped \| 100 \| unknown \| 0 \| 0 \|/);
  t.match(md, /\| backend \| backend-node \| eth0 \| stopped \| 4242 \| 12 \| 0 \| 0 \|/);
  const json = JSON.parse(
    renderReportJson(r, { generatedAt: '2026-11-30T00:00:00.000Z', inputs: [] }),
  ) as { caveats: string[]; captureHealth: unknown[] };
  t.equal(json.caveats.length, 1);
  t.equal(json.captureHealth.length, 3);
  // A file analysis (no statuses) has neither.
  const plain = renderReportMarkdown(dropped, { generatedAt: 'x', inputs: [] });
  t.notMatch(plain, /Capture health|caution/);
  t.notMatch(renderVerdictText(dropped), /caution/);
  t.end();
});

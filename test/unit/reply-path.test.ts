/**
 * How far back the reply came (core/attribute/reply-path.ts), and what the verdict, the cautions
 * and "what to change" say from it: a client's ACK after its SYN proves an answer reached it even
 * where every capture holds the request direction only; a reply that reached egress and not decap
 * was lost after the backend's route back worked, not for the want of one.
 */
import t from 'tap';
import type { PacketEvent } from '../../common/event';
import { clientAck, replyPath, type ReplyPoint } from '../../core/attribute/reply-path';
import { analyzeEvents } from '../../core/report/analyze';
import { healthCaveats, type CaptureHealth } from '../../core/report/capture-health';
import { whatToChange } from '../../core/report/what-to-change';
import { CLIENT, DIRECT, INVENTORY, exchange, pt, type Ep } from './fixtures-events';

const SYN = 0x02;
const ACK = 0x10;

function point(name: string, o: Partial<ReplyPoint> = {}): ReplyPoint {
  return { name, seen: true, seenReply: false, seenSyn: true, flow: [], ...o };
}
const synOnly = [{ dir: 'request' as const, flags: SYN, frame: 1 }];
const acked = [...synOnly, { dir: 'request' as const, flags: ACK, frame: 3 }];

void t.test('replyPath: where the reply got to, from the client side', (t) => {
  t.same(
    replyPath([point('decap', { seenReply: true }), point('egress'), point('backend')]),
    { kind: 'seen', at: 'decap', notCapturedAt: ['egress', 'backend'] },
    'seen nearest the client: it came back, whatever the others captured',
  );
  t.same(
    replyPath([point('decap', { flow: acked }), point('egress'), point('backend')]),
    {
      kind: 'acked',
      ack: { point: 'decap', frame: 3 },
      notCapturedAt: ['decap', 'egress', 'backend'],
    },
    'no reply captured, but the client ACKed after its SYN',
  );
  t.same(
    replyPath([
      point('decap', { flow: synOnly }),
      point('egress', { seenReply: true }),
      point('backend', { seenReply: true }),
    ]),
    { kind: 'missing', missingAt: 'decap', lastSeenAt: 'egress' },
  );
  t.same(
    replyPath([point('decap'), point('egress'), point('backend', { seenReply: true })]),
    { kind: 'missing', missingAt: 'egress', lastSeenAt: 'backend' },
    'lost between the backend and the next point back',
  );
  t.same(replyPath([point('decap'), point('backend')]), {
    kind: 'missing',
    missingAt: 'decap',
    lastSeenAt: null,
  });
  t.same(
    replyPath([
      point('decap', { seen: false, seenReply: false }),
      point('backend', { seenReply: true }),
    ]),
    { kind: 'seen', at: 'backend', notCapturedAt: [] },
    'a point that did not see the request says nothing about its reply',
  );
  t.equal(replyPath([point('decap', { seen: false })]), null);
  t.equal(
    clientAck([
      point('decap', { seenSyn: false, flow: [{ dir: 'request', flags: ACK, frame: 1 }] }),
    ]),
    null,
    'an ACK with no SYN before it (an established connection) proves nothing about this request',
  );
  t.equal(
    clientAck([point('decap', { flow: [{ dir: 'request', flags: SYN | ACK, frame: 1 }] })]),
    null,
    'a SYN-ACK in the request direction is no ACK after a SYN',
  );
  t.end();
});

/** The request direction of `events` only: a capture filtered on the client's packets. */
const requestOnly = (events: PacketEvent[], ep: Ep): PacketEvent[] =>
  events.filter((e) => e.inner?.src === ep.src && e.inner.sport === ep.sport);

/** A classic pcap file's health: it records no drop counts. */
function pcapHealth(point: string): CaptureHealth {
  return {
    point,
    node: null,
    iface: `${point}.pcap`,
    state: 'stopped',
    confirmed: true,
    packets: 10,
    kernelDrops: null,
    queueDrops: 0,
    lost: 0,
    file: 'pcap',
  };
}

void t.test('request direction only: preserved, no "never came back" anywhere', (t) => {
  const r = analyzeEvents({
    points: ['decap', 'egress', 'backend'].map((name, i) =>
      pt(name, requestOnly(exchange(name, DIRECT, { at: BigInt(i) }), DIRECT)),
    ),
    inventory: INVENTORY,
    selector: { client: CLIENT },
  });
  t.equal(r.verdict.layer, 'preserved', r.verdict.reason ?? '');
  t.match(r.verdict.reason, /the client acknowledged an answer \(its ACK at decap/);
  t.match(r.verdict.secondary, [{ layer: 'unknown', detail: /request direction only/ }]);
  const health = ['decap', 'egress', 'backend'].map(pcapHealth);
  t.notMatch(
    healthCaveats(r.points, health).join('\n'),
    /never came back/,
    'no caution to capture again before concluding the reply never came back',
  );
  const q2 = whatToChange(r, undefined).questions.find((q) => q.id === 'return-route');
  t.equal(q2?.answer, 'yes');
  t.end();
});

void t.test(
  'the reply reached egress, never decap: what to change looks inside the VPN pod',
  (t) => {
    const r = analyzeEvents({
      points: [
        pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 1 })),
        pt(
          'egress',
          exchange('egress', DIRECT, { at: 1n, phase: 'syn-synack', synRetransmits: 1 }),
        ),
        pt(
          'backend',
          exchange('backend', DIRECT, { at: 2n, phase: 'syn-synack', synRetransmits: 1 }),
        ),
      ],
      inventory: INVENTORY,
      selector: { client: CLIENT },
    });
    t.equal(r.verdict.layer, 'no-return');
    t.match(r.verdict.reason, /seen at egress and backend and never came back to decap/);
    const w = whatToChange(r, undefined);
    const q2 = w.questions.find((q) => q.id === 'return-route');
    t.equal(q2?.answer, 'no');
    t.match(q2?.detail, /the route from the backend toward egress works/);
    t.notMatch(q2?.detail, /there is no working route back/);
    const steps = w.preserve.steps;
    t.match(steps[0], {
      basis: 'verdict',
      command: /ip route get 10\.90\.0\.42 .*inside the VPN pod/,
    });
    t.match(
      steps.find((s) => /route .* back via a stable next hop/.test(s.text)),
      { basis: 'guide' },
      "the backend nodes' return route is the guide's advice here, not the verdict's",
    );
    const lost = healthCaveats(r.points, ['decap', 'egress', 'backend'].map(pcapHealth));
    t.match(lost.join('\n'), /decap saw the request but not the reply/, 'the caution stays');
    t.end();
  },
);

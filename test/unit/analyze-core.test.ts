import t from 'tap';
import { analyzeEvents } from '../../collector/analyze';
import { isHoptraceError } from '../../common/errors';
import { CLIENT, DIRECT, INVENTORY, T0, exchange, pt } from './fixtures-events';

const points = [
  pt('decap', exchange('decap', DIRECT, { synRetransmits: 1 })),
  pt('egress', exchange('egress', DIRECT, { at: 1n, synRetransmits: 1 })),
  pt('backend', exchange('backend', DIRECT, { at: 2n, synRetransmits: 1 })),
];

void t.test('analyzeEvents: verdict plus JSON-safe point summaries', (t) => {
  const r = analyzeEvents({ points, inventory: INVENTORY, selector: { client: CLIENT } });
  t.equal(r.verdict.layer, 'preserved');
  t.equal(r.points.length, 3);
  const b = r.points[2];
  t.equal(b?.name, 'backend');
  t.equal(b?.firstTsNs, (T0 + 2n).toString());
  t.equal(typeof b?.lastTsNs, 'string');
  t.equal(b?.packets, 8);
  t.equal(b?.retransmits, 1);
  t.equal(b?.seenRequest, true);
  t.equal(b?.seenReply, true);
  t.same(b?.observed, DIRECT);
  t.doesNotThrow(() => JSON.stringify(r));
  t.end();
});

void t.test('analyzeEvents: no request at the first point throws CLI_NO_REQUEST', (t) => {
  try {
    analyzeEvents({ points, inventory: INVENTORY, selector: { client: '10.1.2.3' } });
    t.fail('should throw');
  } catch (e: unknown) {
    t.ok(isHoptraceError(e));
    if (isHoptraceError(e)) {
      t.equal(e.code, 'CLI_NO_REQUEST');
      t.match(
        e.message,
        /^CLI_NO_REQUEST: decap: no new TCP connection .* from client 10\.1\.2\.3/,
      );
    }
  }
  t.throws(() => analyzeEvents({ points: [], inventory: INVENTORY, selector: {} }), {
    code: 'CLI_NO_REQUEST',
  });
  t.end();
});

void t.test('analyzeEvents: windowNs is honoured', (t) => {
  const late = [
    pt('decap', exchange('decap', DIRECT)),
    pt('backend', exchange('backend', DIRECT, { at: 3_000_000_000n })),
  ];
  t.equal(
    analyzeEvents({ points: late, inventory: INVENTORY, selector: {}, windowNs: 1_000_000_000n })
      .verdict.layer,
    'dropped',
  );
  t.equal(
    analyzeEvents({ points: late, inventory: INVENTORY, selector: {} }).verdict.layer,
    'preserved',
  );
  t.end();
});

import t from 'tap';
import { analyzeEvents } from '../../core/report/analyze';
import {
  durationText,
  estimateClockOffsets,
  hopLatencies,
  utcMicros,
  utcPacketTime,
} from '../../core/report/times';
import type { PacketEvent } from '../../common/event';
import { ADDR, CLIENT, DIRECT, INVENTORY, MS, exchange, pt } from './fixtures-events';

void t.test('UTC with microseconds, from nanoseconds (string or bigint)', (t) => {
  t.equal(utcMicros(1796147323319472123n), '2026-12-01T17:48:43.319472Z');
  t.equal(utcMicros('1796147323319472999'), '2026-12-01T17:48:43.319472Z');
  t.equal(utcMicros(0n), '1970-01-01T00:00:00.000000Z');
  t.equal(durationText(1_234_567n), '1.235 ms');
  t.equal(durationText(-12_000n), '−12.0 µs');
  t.equal(durationText(3_500_000_000n), '3.500 s');
  // A damaged time never throws or loses its seconds (a first version cut every time to 19
  // characters, and threw beyond the Date range).
  const year54578 = (52_609n * 365n * 86_400n + 3_600n) * 1_000_000_000n;
  t.match(utcMicros(year54578), /^\+05\d{4}-\d\d-\d\dT\d\d:00:00\.000000Z$/, 'expanded year');
  t.equal(utcMicros(1n << 80n), `${1n << 80n} ns since 1970 (no date)`, 'beyond any date');
  t.equal(utcPacketTime((1n << 80n) + 7n), `${(1n << 80n) + 7n} ns since 1970 (no date)`);
  t.end();
});

const BACKEND_EP = { ...DIRECT, src: ADDR.vpnNodeUplink, sport: 61000 };

/** The backend's packets as its own clock stamped them: the true times plus `shift`. */
function shiftedBackend(shift: bigint): PacketEvent[] {
  // True times: SYN reaches the backend 0.2 ms after the decap point saw it; the SYN-ACK leaves
  // the backend 0.1 ms later and reaches the decap point 0.7 ms after that (exchange() stamps the
  // decap point's SYN-ACK at +1 ms).
  return exchange('backend', BACKEND_EP, { at: 200_000n }).map((e) => {
    const reply = e.inner?.src === ADDR.backendPod;
    return { ...e, tsNs: e.tsNs + shift - (reply ? 900_000n : 0n) };
  });
}

for (const shift of [0n, 5_000n * MS, -2_345_678_901n]) {
  void t.test(`clock offset brackets a backend clock shifted by ${shift} ns`, (t) => {
    const r = analyzeEvents({
      points: [pt('decap', exchange('decap', DIRECT)), pt('backend', shiftedBackend(shift))],
      inventory: INVENTORY,
      selector: { client: CLIENT },
    });
    const [ref, be] = r.clock ?? [];
    t.equal(ref?.status, 'reference');
    t.equal(be?.status, 'bounded', be?.detail ?? '');
    const low = BigInt(be?.lowNs ?? 'x');
    const high = BigInt(be?.highNs ?? 'x');
    t.ok(low <= shift && shift <= high, `${low} <= ${shift} <= ${high}`);
    // The bounds' width is the round trip minus the backend's turn-around: 0.9 ms.
    t.equal(high - low, 900_000n);
    const hop = r.hops?.[0];
    t.equal(hop?.from, 'decap');
    t.equal(hop?.to, 'backend');
    // The true one-way time is 0.2 ms: inside the corrected bounds, whatever the shift.
    t.ok(BigInt(hop?.lowNs ?? 'x') <= 200_000n && 200_000n <= BigInt(hop?.highNs ?? 'x'));
    t.end();
  });
}

void t.test(
  'same node: one clock; no reply at both: only an upper bound; proxy: unbounded',
  (t) => {
    const r = analyzeEvents({
      points: [
        pt('decap', exchange('decap', DIRECT)),
        pt('egress', exchange('egress', DIRECT, { at: 1n })),
        pt('backend', exchange('backend', BACKEND_EP, { at: 2n, phase: 'syn-only' })),
      ],
      inventory: INVENTORY,
      selector: { client: CLIENT },
    });
    const nodes = new Map([
      ['decap', 'vpn-node'],
      ['egress', 'vpn-node'],
      ['backend', 'web-node'],
    ]);
    const c = estimateClockOffsets(r.points, nodes);
    t.equal(c[1]?.status, 'same-clock');
    t.equal(c[1]?.offsetNs, '0');
    t.equal(c[2]?.status, 'upper-bound');
    t.equal(c[2]?.highNs, '2');
    t.equal(c[2]?.offsetNs, null);
    const hops = hopLatencies(r.points, c);
    t.equal(hops[0]?.latencyNs, '1');
    t.match(hops[0]?.detail, /one clock/);
    t.equal(hops[1]?.latencyNs, null);
    t.match(hops[1]?.detail, /not bounded/);
    const proxied = estimateClockOffsets(
      [r.points[0]!, { ...r.points[2]!, proxied: true }],
      new Map(),
    );
    t.equal(proxied[1]?.status, 'unbounded');
    t.equal(proxied[1]?.offsetNs, null);
    t.end();
  },
);

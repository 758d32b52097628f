/** The session state machine with a fake clock: when a capture ends, and what its verdict says. */
import t from 'tap';
import type { PacketEvent } from '../../common/event';
import {
  CaptureSession,
  DEFAULT_SETTLE_MS,
  type CaptureSpec,
  type SessionState,
} from '../../collector/session';
import { status } from './collector-fixtures';
import { ADDR, DIRECT, INVENTORY, exchange } from './fixtures-events';

const POINTS = ['decap', 'egress', 'backend'];

function spec(o: Partial<CaptureSpec> = {}): CaptureSpec {
  return {
    points: POINTS.map((name) => ({ name, target: '/run/netns/x', iface: 'eth0' })),
    timeoutMs: 30_000,
    stopOnFirstMatch: true,
    settleMs: DEFAULT_SETTLE_MS,
    ...o,
  };
}

/** A session whose three points are armed and confirmed capturing at t=0. */
function armed(o: Partial<CaptureSpec> = {}, capturing = POINTS): CaptureSession {
  const s = CaptureSession.create('c-test-00000000', spec(o), 0);
  for (const p of POINTS) s.markArmed(p, `agent-${p}`, `${p}-node`, 0);
  for (const p of capturing) s.applyStatus(status(s.id, p, 'capturing'), 0);
  return s;
}

function step(s: CaptureSession, now: number): ReturnType<CaptureSession['evaluate']> {
  s.analyze(now, INVENTORY);
  return s.evaluate(now);
}

const masq = { ...DIRECT, src: ADDR.vpnPod, sport: 51000 };

interface Case {
  name: string;
  spec?: Partial<CaptureSpec>;
  capturing?: string[];
  events: Partial<Record<string, PacketEvent[]>>;
  failed?: Record<string, string>;
  /** Times at which the test evaluates (ms); the first 'finish' wins. */
  at: number[];
  state: SessionState | 'continue';
  finishedAt?: number;
  layer?: string;
  reason?: RegExp;
}

const CASES: Case[] = [
  {
    name: 'preserved with the reply back at the first point → resolved at once',
    events: Object.fromEntries(POINTS.map((p, i) => [p, exchange(p, DIRECT, { at: BigInt(i) })])),
    at: [10],
    state: 'resolved',
    finishedAt: 10,
    layer: 'preserved',
  },
  {
    name: 'a rewrite inside the VPN pod is conclusive → resolved',
    events: {
      decap: exchange('decap', DIRECT),
      egress: exchange('egress', masq),
      backend: exchange('backend', masq),
    },
    at: [10],
    state: 'resolved',
    layer: 'vpn-pod',
  },
  {
    name: 'the request reaches the backend, no reply back: settles → no-return',
    events: {
      decap: exchange('decap', DIRECT, { phase: 'syn-only' }),
      egress: exchange('egress', DIRECT, { phase: 'syn-only' }),
      backend: exchange('backend', DIRECT, { phase: 'syn-synack' }),
    },
    at: [10, 1000, 2009, 2010],
    state: 'resolved',
    finishedAt: 2010,
    layer: 'no-return',
    reason: /settled/,
  },
  {
    name: 'no settling without stopOnFirstMatch: runs until the timeout',
    spec: { stopOnFirstMatch: false, timeoutMs: 5000 },
    events: Object.fromEntries(POINTS.map((p) => [p, exchange(p, DIRECT)])),
    at: [10, 3000, 4999, 5000],
    state: 'timeout',
    finishedAt: 5000,
    layer: 'preserved',
  },
  {
    name: 'timeout with a backend that never reported: the verdict names it',
    spec: { timeoutMs: 5000, settleMs: 60_000 },
    capturing: ['decap', 'egress'],
    events: {
      decap: exchange('decap', DIRECT, { phase: 'syn-only' }),
      egress: exchange('egress', DIRECT, { phase: 'syn-only' }),
    },
    at: [10, 4999, 5000],
    state: 'timeout',
    finishedAt: 5000,
    layer: 'unknown',
    reason: /backend.*agent-backend never reported/,
  },
  {
    name: 'a failed backend capture is never called a drop',
    events: {
      decap: exchange('decap', DIRECT, { phase: 'syn-only' }),
      egress: exchange('egress', DIRECT, { phase: 'syn-only' }),
    },
    failed: { backend: 'CAPTURE_NO_INTERFACE' },
    at: [10, 2010],
    state: 'resolved',
    layer: 'unknown',
    reason: /backend: CAPTURE_NO_INTERFACE/,
  },
  {
    name: 'a backend that captured and saw nothing: dropped',
    events: {
      decap: exchange('decap', DIRECT, { phase: 'syn-only' }),
      egress: exchange('egress', DIRECT, { phase: 'syn-only' }),
    },
    at: [10, 2010],
    state: 'resolved',
    layer: 'dropped',
  },
  {
    name: 'the first point failed → failed at once',
    events: {},
    failed: { decap: 'TARGET_NOT_FOUND' },
    at: [0],
    state: 'failed',
    finishedAt: 0,
    layer: 'unknown',
    reason: /decap failed \(TARGET_NOT_FOUND/,
  },
  {
    name: 'no request at the first point until the timeout',
    spec: { timeoutMs: 1000 },
    events: {},
    at: [500, 1000],
    state: 'timeout',
    layer: 'unknown',
    reason: /no new TCP connection/,
  },
  {
    name: 'still waiting',
    events: {},
    at: [10, 29_999],
    state: 'continue',
  },
];

for (const c of CASES) {
  void t.test(c.name, (t) => {
    const s = armed(c.spec, c.capturing);
    for (const [p, code] of Object.entries(c.failed ?? {}))
      s.markFailed(p, { code, message: 'test failure' }, 0);
    for (const [p, evs] of Object.entries(c.events)) s.addEvents(p, evs ?? [], 5);
    let done: { state: SessionState; at: number; reason: string } | null = null;
    for (const now of c.at) {
      const d = step(s, now);
      if (d.kind === 'finish') {
        done = { state: d.state, at: now, reason: d.reason };
        break;
      }
    }
    if (c.state === 'continue') {
      t.equal(done, null, 'not finished');
      t.equal(s.record.state, 'capturing');
      t.end();
      return;
    }
    t.ok(done, 'finished');
    if (!done) return t.end();
    t.equal(done.state, c.state);
    if (c.finishedAt !== undefined) t.equal(done.at, c.finishedAt, 'finished at');
    const r = s.finish(done.state as 'resolved', done.reason, done.at, INVENTORY);
    t.equal(s.record.state, c.state);
    t.equal(r.verdict.layer, c.layer);
    t.same(s.record.verdict, r.verdict);
    if (c.reason)
      t.match(
        `${done.reason} ${r.verdict.reason ?? ''} ${JSON.stringify(r.verdict.evidence)}`,
        c.reason,
      );
    t.notOk(s.record.points.some((p) => p.state === 'capturing' || p.state === 'arming'));
    t.end();
  });
}

void t.test('settle counts from the last change, not from the last event', (t) => {
  const s = armed();
  s.addEvents('decap', exchange('decap', DIRECT, { phase: 'syn-only' }), 0);
  t.equal(step(s, 0).kind, 'continue');
  t.equal(s.nextDeadlineMs(), DEFAULT_SETTLE_MS);
  // The same SYN again (a retransmission) changes nothing the verdict depends on.
  s.addEvents('decap', exchange('decap', DIRECT, { phase: 'syn-only' }), 1500);
  t.equal(step(s, 1500).kind, 'continue');
  // Progress: the egress sees it → the settle deadline moves.
  s.addEvents('egress', exchange('egress', DIRECT, { phase: 'syn-only' }), 1900);
  t.equal(step(s, 1900).kind, 'continue');
  t.equal(s.nextDeadlineMs(), 1900 + DEFAULT_SETTLE_MS);
  t.equal(step(s, 3899).kind, 'continue');
  t.equal(step(s, 3900).kind, 'finish');
  t.end();
});

void t.test('cancel stops every point and keeps what was seen', (t) => {
  const s = armed();
  s.addEvents('decap', exchange('decap', DIRECT, { phase: 'syn-only' }), 5);
  step(s, 10);
  const r = s.finish('cancelled', 'cancelled by the user', 20, INVENTORY);
  t.equal(s.record.state, 'cancelled');
  t.ok(s.isFinal());
  t.equal(r.points[0]?.seenRequest, true);
  t.same(
    s.record.points.map((p) => p.state),
    ['stopped', 'stopped', 'stopped'],
  );
  t.same(step(s, 30), { kind: 'continue' }, 'a final session decides nothing more');
  t.end();
});

void t.test('status counters: packets, drops unknown (null), lost; arming → capturing', (t) => {
  const s = CaptureSession.create('c-test-00000001', spec(), 0);
  s.markArmed('decap', 'a1', 'n1', 0);
  t.equal(s.record.state, 'arming');
  s.applyStatus(status(s.id, 'decap', 'capturing', { packets: 42, queueDrops: 3 }), 1);
  s.applyLost({ captureId: s.id, point: 'decap', count: 7, reason: 'spool full' }, 2);
  t.equal(s.record.state, 'capturing');
  const p = s.point('decap');
  t.equal(p?.packets, 42);
  t.equal(p?.kernelDrops, null);
  t.equal(p?.queueDrops, 3);
  t.equal(p?.lost, 7);
  s.applyError(
    { captureId: s.id, point: 'decap', code: 'CAPTURE_NAMESPACE_GONE', message: 'gone' },
    3,
  );
  t.equal(s.point('decap')?.state, 'failed');
  t.equal(s.point('decap')?.error?.code, 'CAPTURE_NAMESPACE_GONE');
  t.end();
});

void t.test('an agent error message that already carries its code is not prefixed twice', (t) => {
  const s = armed(undefined, undefined);
  s.markFailed(
    'decap',
    { code: 'TARGET_NOT_FOUND', message: 'TARGET_NOT_FOUND: no namespace holds 10.244.2.5' },
    0,
  );
  const d = step(s, 0);
  t.equal(d.kind, 'finish');
  if (d.kind === 'finish') {
    t.match(d.reason, /decap failed \(TARGET_NOT_FOUND: no namespace holds 10\.244\.2\.5\)/);
    t.notMatch(d.reason, /TARGET_NOT_FOUND: TARGET_NOT_FOUND/);
  }
  t.end();
});

void t.test('lost counts stay exact integers whatever a peer reports (issue 17)', (t) => {
  const s = CaptureSession.create('c-test-00000009', spec(), 0);
  s.markArmed('decap', 'a1', 'n1', 0);
  const huge = 2 ** 53 - 1;
  s.applyLost({ captureId: s.id, point: 'decap', count: huge, reason: 'x' }, 1);
  s.applyLost({ captureId: s.id, point: 'decap', count: huge, reason: 'x' }, 2);
  s.applyLost({ captureId: s.id, point: 'decap', count: 2 ** 64, reason: 'x' }, 3);
  const lost = s.point('decap')?.lost;
  t.equal(lost, Number.MAX_SAFE_INTEGER, 'saturates at 2^53 - 1');
  t.ok(Number.isSafeInteger(lost), 'an exact integer, not 18014398509481982');
  s.applyLost({ captureId: s.id, point: 'decap', count: -5, reason: 'x' }, 4);
  t.equal(s.point('decap')?.lost, Number.MAX_SAFE_INTEGER, 'a negative count adds nothing');
  t.end();
});

void t.test("the live result keeps the analysis's clock offsets and per-hop latency", (t) => {
  const s = armed();
  POINTS.forEach((p, i) => {
    s.addEvents(p, exchange(p, DIRECT, { at: BigInt(i) * 1000n }), 1, Infinity);
  });
  const r = s.analyze(5, INVENTORY);
  t.equal(r?.clock?.length, POINTS.length, 'one clock entry per point');
  t.equal(r?.hops?.length, POINTS.length - 1, 'one latency per hop');
  t.end();
});

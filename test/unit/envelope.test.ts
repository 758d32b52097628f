import t from 'tap';
import { COMMAND_LIMITS } from '../../common/command-limits';
import { MAX_SEQ, decodeEnvelope, encodeEnvelope, refusedEnvelopeOf } from '../../common/envelope';
import { isHoptraceError } from '../../common/errors';
import type { CaptureCommand, Envelope } from '../../common/wire';
import { batch, decodeFailure, hello } from './transport-fixtures';

// Well beyond 32 bits, exact in a JS number, and at most MAX_SEQ (2^52), the largest seq accepted.
const BIG = 2 ** 52 - 7;

const CASES: Envelope[] = [
  {
    seq: 0,
    kind: 'hello',
    hello: {
      ...hello('agent-1'),
      namespaces: [
        {
          path: '/proc/4242/ns/net',
          inode: 4026532281,
          addresses: ['10.244.1.10', 'fe80::1'],
          interfaces: ['eth0', 'lo'],
        },
      ],
      spoolFirstSeq: BIG,
    },
  },
  { seq: 0, kind: 'helloAck', helloAck: { collectorId: 'c1', lastSeq: BIG } },
  {
    seq: 0,
    kind: 'capture',
    capture: {
      captureId: 'cap1',
      point: 'decap',
      target: '10.244.1.10',
      iface: 'eth0',
      filter: 'tcp port 80',
      snaplen: 262144,
      deadlineUnixMs: 1_764_452_477_123,
    },
  },
  {
    seq: 0,
    kind: 'capture',
    capture: {
      captureId: 'cap2',
      point: 'backend',
      target: '10.244.2.5',
      iface: 'eth0',
      filter: '',
      snaplen: 65535,
      deadlineUnixMs: 1_764_452_477_123,
      retainSnaplen: 65535,
      retainPayload: true, // evidencePayload: whole frames retained
      foldFlows: true, // this collector reads flow counters
    },
  },
  { seq: 0, kind: 'stop', stop: { captureId: 'cap1', point: '' } },
  { seq: BIG, kind: 'events', events: batch(1, 3) },
  { seq: 1, kind: 'events', events: { captureId: 'c', point: 'p', events: [] } },
  {
    seq: 5,
    kind: 'status',
    status: {
      captureId: 'cap1',
      point: 'egress',
      state: 'failed',
      packets: 12,
      kernelDrops: 0, // a real zero stays a zero …
      ifaceDrops: null, // … and unknown stays unknown
      queueDrops: 3,
      errorCode: 'CAPTURE_NO_INTERFACE',
      message: 'eth9 does not exist',
      netns: '/run/netns/x',
      netnsAddresses: ['10.244.1.10'],
      iface: 'eth9',
      linkType: 'ethernet',
    },
  },
  {
    seq: 6,
    kind: 'lost',
    lost: { captureId: 'cap1', point: 'decap', count: 9, reason: 'spool overflow' },
  },
  {
    seq: 7,
    kind: 'error',
    error: { code: 'TARGET_NOT_FOUND', message: 'no namespace', captureId: 'cap1', point: 'x' },
  },
  { seq: 0, kind: 'heartbeat', heartbeat: { unixMs: 1_764_452_477_123 } },
  { seq: 0, kind: 'ack', ack: { seq: BIG } },
];

void t.test('every Envelope kind survives the round trip exactly', (t) => {
  for (const env of CASES) {
    const back = decodeEnvelope(encodeEnvelope(env));
    t.same(back, env, env.kind);
  }
  t.end();
});

void t.test('PacketEvents inside a batch keep their 64-bit timestamps', (t) => {
  const env: Envelope = { seq: 3, kind: 'events', events: batch(100, 2) };
  const back = decodeEnvelope(encodeEnvelope(env));
  t.equal(back.kind, 'events');
  if (back.kind !== 'events') return t.end();
  t.equal(back.events.events[1]?.tsNs, 1_764_452_477_123_456_789n + 101n);
  t.equal(typeof back.events.events[0]?.tsNs, 'bigint');
  t.end();
});

void t.test('malformed bytes throw WIRE_MALFORMED, never anything else', (t) => {
  t.equal(decodeFailure(new Uint8Array(0)), 'WIRE_MALFORMED', 'empty');
  t.equal(decodeFailure(Buffer.from('hello world')), 'WIRE_MALFORMED', 'text');
  t.equal(decodeFailure(Buffer.from([0xff, 0xff, 0xff])), 'WIRE_MALFORMED', 'bad varint');
  t.equal(decodeFailure(Buffer.from([0x08, 0x01])), 'WIRE_MALFORMED', 'seq without body');
  // Envelope.seq = 2^63 (beyond exact JS numbers) with an ack body.
  const seq2p63 = [0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
  t.equal(decodeFailure(Buffer.from([...seq2p63, 0x9a, 0x01, 0x00])), 'WIRE_MALFORMED', 'seq 2^63');
  // status with state = 9 (no such CaptureState).
  t.equal(
    decodeFailure(Buffer.from([0x7a, 0x02, 0x18, 0x09])),
    'WIRE_MALFORMED',
    'unknown capture state',
  );
  t.end();
});

void t.test(
  'every prefix and every single-byte corruption either decodes or throws WIRE_MALFORMED',
  (t) => {
    const good = encodeEnvelope(CASES[4] as Envelope);
    let odd = 0;
    const check = (bytes: Uint8Array): void => {
      try {
        decodeEnvelope(bytes);
      } catch (e) {
        if (!isHoptraceError(e) || e.code !== 'WIRE_MALFORMED') odd++;
      }
    };
    for (let n = 0; n < good.length; n++) check(good.subarray(0, n));
    for (let i = 0; i < good.length; i++) {
      for (const v of [0x00, 0xff, 0x80, 0x0a]) {
        const b = Buffer.from(good);
        b[i] = v;
        check(b);
      }
    }
    t.equal(odd, 0, 'no other exception escaped');
    t.end();
  },
);

void t.test('every seq field beyond 2^52 is refused, on both decoders (issue 17 #3)', (t) => {
  const over = MAX_SEQ + 1;
  const cases: Envelope[] = [
    { seq: over, kind: 'events', events: batch(1, 1) },
    { seq: over, kind: 'lost', lost: { captureId: 'c', point: 'p', count: 1, reason: 'x' } },
    { seq: 0, kind: 'ack', ack: { seq: over } },
    { seq: 0, kind: 'helloAck', helloAck: { collectorId: 'c1', lastSeq: over } },
  ];
  for (const env of cases) t.equal(decodeFailure(encodeEnvelope(env)), 'WIRE_MALFORMED', env.kind);
  t.end();
});

void t.test(
  'collector → agent bodies are bounded at decode: refused whole, saying which capture or request',
  (t) => {
    const L = COMMAND_LIMITS;
    const capture = (over: Partial<CaptureCommand>): Envelope => ({
      seq: 0,
      kind: 'capture',
      capture: {
        captureId: 'c1',
        point: 'decap',
        target: '10.244.1.10',
        iface: 'eth0',
        filter: '',
        snaplen: 0,
        deadlineUnixMs: 0,
        ...over,
      },
    });
    const refusal = (env: Envelope): { code: string; detail: string; about: unknown } => {
      try {
        decodeEnvelope(encodeEnvelope(env));
        return { code: 'decoded', detail: '', about: undefined };
      } catch (e) {
        return {
          code: isHoptraceError(e) ? e.code : String(e),
          detail: isHoptraceError(e) ? e.detail : '',
          about: refusedEnvelopeOf(e),
        };
      }
    };
    // At the bounds: taken.
    t.equal(
      refusal(capture({ filter: 'x'.repeat(L.filter), target: '/'.repeat(L.target) })).code,
      'decoded',
    );
    // The reviewer's 40 MiB filter (fakecoll.js big), here just past the bound.
    t.match(refusal(capture({ filter: 'x'.repeat(L.filter + 1) })), {
      code: 'WIRE_MALFORMED',
      detail: /capture body's filter is 16385 long \(at most 16384\)/,
      about: { kind: 'capture', captureId: 'c1', point: 'decap' },
    });
    t.match(refusal(capture({ iface: 'e'.repeat(L.iface + 1) })), { detail: /iface/ });
    t.match(refusal(capture({ captureId: 'c'.repeat(L.name + 1) })), {
      detail: /captureId/,
      about: { kind: 'capture', point: 'decap' },
    });
    t.notOk(
      (refusal(capture({ captureId: 'c'.repeat(L.name + 1) })).about as { captureId?: string })
        .captureId,
      'an over-long capture id is not echoed',
    );
    const target = (routeTo: string[]) => ({ name: 'vpn', target: '', routeTo });
    const doctor = (targets: ReturnType<typeof target>[]): Envelope => ({
      seq: 0,
      kind: 'doctorRequest',
      doctorRequest: { requestId: 'q-1', targets, family: 4 },
    });
    t.equal(
      refusal(doctor(Array.from({ length: L.targets }, () => target(['10.0.0.1'])))).code,
      'decoded',
    );
    t.match(refusal(doctor(Array.from({ length: L.targets + 1 }, () => target([])))), {
      code: 'WIRE_MALFORMED',
      detail: /targets is 17 long \(at most 16\)/,
      about: { kind: 'doctorRequest', requestId: 'q-1' },
    });
    t.match(refusal(doctor([target(Array.from({ length: L.routeTo + 1 }, () => '10.0.0.1'))])), {
      detail: /routeTo is 17 long/,
    });
    t.match(refusal(doctor([target(['1'.repeat(L.address + 1)])])), { detail: /routeTo address/ });
    const tuple = { src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2 };
    const conntrack = (tuples: (typeof tuple)[]): Envelope => ({
      seq: 0,
      kind: 'conntrackQuery',
      conntrackQuery: { requestId: 'q-2', captureId: 'c1', targets: [target([])], tuples },
    });
    t.equal(refusal(conntrack(Array.from({ length: L.tuples }, () => tuple))).code, 'decoded');
    t.match(refusal(conntrack(Array.from({ length: L.tuples + 1 }, () => tuple))), {
      detail: /tuples is 257 long/,
    });
    t.match(refusal(conntrack([{ ...tuple, dst: 'x'.repeat(L.address + 1) }])), {
      detail: /tuple address/,
    });
    t.match(
      refusal({ seq: 0, kind: 'stop', stop: { captureId: 'c1', point: 'p'.repeat(L.name + 1) } }),
      { code: 'WIRE_MALFORMED', detail: /point/ },
    );
    t.end();
  },
);

void t.test('a body kind of a newer peer is told apart from no body (fakecoll.js unknown)', (t) => {
  // Envelope{ field 26 (a body kind this version lacks) = empty message }
  const unknown = Buffer.from([0xd2, 0x01, 0x00]);
  let err: unknown;
  try {
    decodeEnvelope(unknown);
  } catch (e) {
    err = e;
  }
  t.equal(
    isHoptraceError(err) ? err.code : '',
    'WIRE_MALFORMED',
    'not decoded: the receiver tells it apart by what the error is about',
  );
  t.same(refusedEnvelopeOf(err), { unknownField: 26, seq: 0 });
  // With a seq before it: the receiver acknowledges a spooled one (collector/hub.ts).
  t.same(
    refusedEnvelopeOf(catchOf(() => decodeEnvelope(Buffer.from([0x08, 0x05, 0xfa, 0x01, 0x00])))),
    { unknownField: 31, seq: 5 },
  );
  // A seq and nothing else is no body at all, not an unknown one.
  t.equal(refusedEnvelopeOf(catchOf(() => decodeEnvelope(Buffer.from([0x08, 0x01])))), undefined);
  t.end();
});

function catchOf(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return undefined;
}

void t.test(
  'a command or request whose body does not decode says which it was, beyond bounds too',
  (t) => {
    // A doctor request of an address family that is neither 4 nor 6.
    const doctor = encodeEnvelope({
      seq: 0,
      kind: 'doctorRequest',
      doctorRequest: { requestId: 'q-1', targets: [], family: 4 },
    });
    // Envelope.doctor_request (field 20) { request_id "q-1", family 5 }, by hand.
    const family5 = Buffer.from([0xa2, 0x01, 0x07, 0x0a, 0x03, 0x71, 0x2d, 0x31, 0x18, 0x05]);
    t.same(decodeEnvelope(Buffer.from(doctor)).kind, 'doctorRequest', 'the family 4 one decodes');
    const e = catchOf(() => decodeEnvelope(family5));
    t.match(e, { code: 'WIRE_MALFORMED', detail: /address family 5/ });
    t.match(refusedEnvelopeOf(e), { kind: 'doctorRequest', requestId: 'q-1' });
    // A frames request beyond its own bounds keeps its code (FRAMES_MALFORMED) and hint.
    const frames = catchOf(() =>
      decodeEnvelope(
        encodeEnvelope({
          seq: 0,
          kind: 'framesRequest',
          framesRequest: {
            requestId: 'q-2',
            captureId: 'c1',
            point: 'decap',
            frames: Array.from({ length: 257 }, (_, i) => i + 1),
            release: false,
          },
        }),
      ),
    );
    t.match(frames, { code: 'FRAMES_MALFORMED', hint: /same hoptrace version/ });
    t.same(refusedEnvelopeOf(frames), {
      kind: 'framesRequest',
      requestId: 'q-2',
      captureId: 'c1',
      point: 'decap',
    });
    t.end();
  },
);

/** An Envelope through both ends of the wire. */
const round = (env: Envelope): Envelope => decodeEnvelope(encodeEnvelope(env));

void t.test("a report's refusal crosses the wire; a report without one has none", (t) => {
  const refusal = { errorCode: 'DOCTOR_BAD_REQUEST', message: 'DOCTOR_BAD_REQUEST: n1: why' };
  const d = round({
    seq: 0,
    kind: 'doctorReport',
    doctorReport: { requestId: 'q', agentId: 'a1', node: 'n1', facts: [], ...refusal },
  });
  t.match(d, { kind: 'doctorReport', doctorReport: refusal });
  const c = round({
    seq: 0,
    kind: 'conntrackReport',
    conntrackReport: {
      requestId: 'q',
      captureId: 'c',
      agentId: 'a1',
      entries: [],
      errors: [],
      ...refusal,
    },
  });
  t.match(c, { kind: 'conntrackReport', conntrackReport: refusal });
  const plain = round({
    seq: 0,
    kind: 'doctorReport',
    doctorReport: { requestId: 'q', agentId: 'a1', node: 'n1', facts: [] },
  });
  t.notOk(plain.kind === 'doctorReport' && 'errorCode' in plain.doctorReport, 'not refused');
  t.end();
});

void t.test("a hello's max captures cross the wire; an older agent's hello has none", (t) => {
  const h = round({ seq: 0, kind: 'hello', hello: { ...hello('a1'), maxCaptures: 6 } });
  t.equal(h.kind === 'hello' ? h.hello.maxCaptures : -1, 6);
  const old = round({ seq: 0, kind: 'hello', hello: hello('a1') });
  t.notOk(old.kind === 'hello' && 'maxCaptures' in old.hello, 'an older agent says nothing');
  t.end();
});

void t.test(
  "an agent's status, error and lost text is cut at decoding: messages, codes, namespaces, addresses",
  (t) => {
    const long = (c: string, n: number): string => c.repeat(n);
    const cut = (c: string, keep: number, n: number): string =>
      `${long(c, keep)}… (cut: ${n} characters)`;
    const base = CASES.find((e) => e.kind === 'status');
    if (base?.kind !== 'status') throw new Error('no status case');
    const addresses = [
      long('9', 65), // longer than any address: not one, dropped
      ...Array.from({ length: 300 }, (_, i) => `10.0.${i >> 8}.${i & 255}`),
    ];
    const status = decodeEnvelope(
      encodeEnvelope({
        ...base,
        status: {
          ...base.status,
          errorCode: long('C', 100_000),
          message: long('m', 1_000_000),
          netns: long('n', 100_000),
          netnsAddresses: addresses,
          iface: long('i', 1000),
          linkType: long('l', 1000),
        },
      }),
    );
    if (status.kind !== 'status') throw new Error('not a status');
    t.equal(status.status.errorCode, cut('C', 64, 100_000));
    t.equal(status.status.message, cut('m', 2000, 1_000_000));
    t.equal(status.status.netns, cut('n', 512, 100_000));
    t.equal(status.status.iface, cut('i', 64, 1000));
    t.equal(status.status.linkType, cut('l', 64, 1000));
    t.same(status.status.netnsAddresses, addresses.slice(1, 257), 'the first 256 addresses');
    t.equal(status.status.packets, 12, 'the counts are kept whole');

    const lost = decodeEnvelope(
      encodeEnvelope({
        seq: 6,
        kind: 'lost',
        lost: { captureId: 'cap1', point: 'decap', count: 9, reason: long('r', 50_000) },
      }),
    );
    t.match(lost, { kind: 'lost', lost: { count: 9, reason: cut('r', 2000, 50_000) } });

    const error = decodeEnvelope(
      encodeEnvelope({
        seq: 7,
        kind: 'error',
        error: {
          code: long('E', 5000),
          message: long('x', 3000),
          captureId: 'cap1',
          point: 'x',
        },
      }),
    );
    t.match(error, {
      kind: 'error',
      error: { code: cut('E', 64, 5000), message: cut('x', 2000, 3000), captureId: 'cap1' },
    });
    // At the bound nothing is cut.
    const exact = decodeEnvelope(
      encodeEnvelope({
        seq: 7,
        kind: 'error',
        error: { code: long('E', 64), message: long('x', 2000), captureId: 'c', point: 'p' },
      }),
    );
    t.match(exact, { error: { code: long('E', 64), message: long('x', 2000) } });
    t.end();
  },
);

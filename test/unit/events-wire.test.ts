/**
 * The hand-written events codec (common/events-wire.ts) against protobufjs reflection
 * (encodeEnvelopeReflect / decodeEnvelopeReflect): each direction decodes what the other encodes to
 * the same Envelope, for generated events that vary every optional field and for edge values;
 * corrupt bytes give WIRE_MALFORMED from both.
 */
import t from 'tap';
import {
  decodeEnvelope,
  decodeEnvelopeReflect,
  encodeEnvelope,
  encodeEnvelopeReflect,
} from '../../common/envelope';
import { TRANSPORT_NAMES, TUNNEL_KINDS, type PacketEvent, type Tuple } from '../../common/event';
import {
  decodeEventsEnvelope,
  encodeEventsEnvelope,
  Out,
  writeEvent,
} from '../../common/events-wire';
import type { Envelope } from '../../common/wire';
import { decodeFailure } from './transport-fixtures';
import { encodeEventRecords, parseEventFile } from '../../collector/event-file';
import { DIRECT, exchange } from './fixtures-events';
import { xorshift32 } from './xorshift';

const rnd = xorshift32(0x2545f491);
const maybe = <T>(v: T): T | undefined => (rnd(2) === 0 ? v : undefined);

function tuple(): Tuple {
  const v6 = rnd(3) === 0;
  const t: Tuple = {
    proto: TRANSPORT_NAMES[rnd(TRANSPORT_NAMES.length)] ?? 'tcp',
    ipProto: rnd(4) === 0 ? 0 : rnd(256),
    src: v6 ? `fd00::${rnd(65536).toString(16)}` : `10.${rnd(256)}.${rnd(256)}.${rnd(256)}`,
    dst: rnd(8) === 0 ? '' : v6 ? '2001:db8::1' : `192.168.${rnd(256)}.1`,
  };
  const sport = maybe(rnd(3) === 0 ? 0 : rnd(65536));
  const dport = maybe(rnd(65536));
  if (sport !== undefined) t.sport = sport;
  if (dport !== undefined) t.dport = dport;
  return t;
}

function event(i: number): PacketEvent {
  const keys: PacketEvent['keys'] = { payloadLength: rnd(3) === 0 ? 0 : rnd(70000) };
  const u32 = (): number => (rnd(4) === 0 ? 0 : rnd(2) === 0 ? 0xffffffff : rnd(2 ** 31) * 2);
  for (const k of [
    'ipId',
    'tcpSeq',
    'tcpAck',
    'tcpFlags',
    'tcpWindow',
    'tsVal',
    'tsEcr',
  ] as const) {
    const v = maybe(u32());
    if (v !== undefined) keys[k] = v;
  }
  const ph = maybe(u32());
  if (ph !== undefined) keys.payloadHash = ph;
  const rh = maybe(u32());
  if (rh !== undefined) keys.requestLineHash = rh;
  if (rnd(5) === 0) keys.probeMarker = rnd(2) === 0 ? `p${i}` : '';
  if (rnd(4) === 0) {
    keys.icmpType = rnd(256);
    keys.icmpCode = rnd(256);
    if (rnd(2) === 0) {
      keys.icmpId = rnd(65536);
      keys.icmpSeq = rnd(65536);
    }
  }
  if (rnd(4) === 0) {
    // Fields 16 and 17: two-byte tags.
    keys.dnsId = rnd(65536);
    if (rnd(2) === 0) keys.dnsQuestion = u32();
  }
  const ev: PacketEvent = {
    point: ['decap', 'egress', 'backend', '', 'pünkt'][rnd(5)] ?? 'decap',
    node: `node-${rnd(3)}`,
    iface: rnd(5) === 0 ? '' : 'eth0',
    linktype: ['ethernet', 'raw', 'linux-sll2', 'other'][rnd(4)] ?? 'ethernet',
    tsNs:
      rnd(10) === 0 ? 0n : rnd(10) === 0 ? 2n ** 64n - 1n : 1_764_452_477_000_000_000n + BigInt(i),
    frame: rnd(10) === 0 ? 0 : rnd(10) === 0 ? 2 ** 53 - 1 : i,
    outer: rnd(2) === 0 ? null : tuple(),
    inner: rnd(8) === 0 ? null : tuple(),
    tunnels: [],
    keys,
    truncated: rnd(4) === 0,
    wireLength: rnd(5) === 0 ? 0 : rnd(70000),
  };
  for (let n = rnd(4); n > 0; n--) {
    const tun: PacketEvent['tunnels'][number] = {
      kind: TUNNEL_KINDS[rnd(TUNNEL_KINDS.length)] ?? 'vxlan',
    };
    const id = maybe(rnd(2) === 0 ? 0 : rnd(2 ** 24));
    if (id !== undefined) tun.id = id;
    if (rnd(4) === 0) tun.messageType = rnd(5);
    ev.tunnels.push(tun);
  }
  if (rnd(6) === 0) ev.related = tuple();
  if (rnd(6) === 0) ev.error = 'DECODE_TRUNCATED';
  return ev;
}

function envelopes(): Envelope[] {
  const out: Envelope[] = [];
  for (let b = 0; b < 60; b++) {
    const events: PacketEvent[] = [];
    for (let i = 0; i < rnd(40); i++) events.push(event(b * 100 + i));
    out.push({
      seq: b === 0 ? 0 : b === 1 ? 2 ** 52 : b, // 2^52: the largest seq accepted (MAX_SEQ)
      kind: 'events',
      events: { captureId: b % 7 === 0 ? '' : `cap-${b}`, point: 'backend', events },
    });
  }
  return out;
}

void t.test('hand-written and reflection codecs read each other exactly', (t) => {
  for (const env of envelopes()) {
    const fast = encodeEventsEnvelope(
      env.seq,
      env.kind === 'events' ? env.events : { captureId: '', point: '', events: [] },
    );
    const slow = encodeEnvelopeReflect(env);
    t.same(decodeEnvelopeReflect(fast), env, 'fast bytes, reflection decoder');
    t.same(decodeEventsEnvelope(slow), env, 'reflection bytes, fast decoder');
    t.same(decodeEnvelope(encodeEnvelope(env)), env, 'the default path');
    // Key order too: the store and reports write these objects as JSON.
    const json = (v: unknown): string =>
      JSON.stringify(v, (_k, val: unknown) => (typeof val === 'bigint' ? val.toString() : val));
    t.equal(json(decodeEventsEnvelope(slow)), json(decodeEnvelopeReflect(slow)));
  }
  t.end();
});

void t.test('pre-encoded events: sent after the objects, decoded as ordinary events', (t) => {
  for (const env of envelopes()) {
    if (env.kind !== 'events') continue;
    const all = env.events.events;
    const cut = Math.floor(all.length / 2);
    const o = new Out();
    for (const e of all.slice(cut)) writeEvent(o, e);
    const split = encodeEnvelope({
      seq: env.seq,
      kind: 'events',
      events: {
        captureId: env.events.captureId,
        point: env.events.point,
        events: all.slice(0, cut),
        encoded: { bytes: Uint8Array.from(o.buf.subarray(0, o.at)), count: all.length - cut },
      },
    });
    t.same(Buffer.from(split), Buffer.from(encodeEnvelope(env)), 'the same bytes as one batch');
    t.same(decodeEnvelopeReflect(split), env, 'reflection reads them');
  }
  t.throws(
    () =>
      encodeEnvelopeReflect({
        seq: 1,
        kind: 'events',
        events: {
          captureId: 'c',
          point: 'p',
          events: [],
          encoded: { bytes: new Uint8Array(0), count: 0 },
        },
      }),
    /pre-encoded/,
    'the reflection encoder refuses what it would drop',
  );
  t.end();
});

void t.test('only pure events Envelopes take the fast decoder', (t) => {
  const ack = encodeEnvelopeReflect({ seq: 0, kind: 'ack', ack: { seq: 3 } });
  t.equal(decodeEventsEnvelope(ack), null, 'another body: reflection decodes it');
  t.same(decodeEnvelope(ack), { seq: 0, kind: 'ack', ack: { seq: 3 } });
  // An unknown top-level field: handed to reflection (which skips it).
  const env = envelopes()[3] as Envelope;
  const bytes = Buffer.concat([Buffer.from(encodeEnvelope(env)), Buffer.from([0xf8, 0x07, 0x01])]);
  t.equal(decodeEventsEnvelope(bytes), null);
  t.same(decodeEnvelope(bytes), env);
  t.end();
});

void t.test('every prefix and corruption: decoded or WIRE_MALFORMED, like reflection', (t) => {
  const env = envelopes().find((e) => e.kind === 'events' && e.events.events.length > 5);
  if (env === undefined) throw new Error('no envelope with events');
  const good = Buffer.from(encodeEnvelope(env));
  let other = 0;
  for (let n = 0; n < good.length; n++) {
    const r = decodeFailure(good.subarray(0, n));
    if (r !== 'decoded' && r !== 'WIRE_MALFORMED') other++;
  }
  for (let i = 0; i < good.length; i++) {
    const g = good[i] ?? 0;
    for (const v of [0x00, 0xff, g ^ 0x80, g ^ 0x07]) {
      const bad = Buffer.from(good);
      bad[i] = v;
      const r = decodeFailure(bad);
      if (r !== 'decoded' && r !== 'WIRE_MALFORMED') {
        other++;
        if (other < 5) t.fail(`byte ${i} = ${v}: ${r}`);
      }
    }
  }
  t.equal(other, 0);
  // A varint that does not end, and a wrong wire type for a known field.
  t.equal(decodeFailure(Buffer.from([0x72, 0x05, 0x1a, 0x03, 0x0a, 0x81, 0x81])), 'WIRE_MALFORMED');
  t.equal(decodeFailure(Buffer.from([0x72, 0x03, 0x1a, 0x01, 0x0d])), 'WIRE_MALFORMED');
  t.end();
});

void t.test('large batches: lengths beyond three bytes', (t) => {
  const events: PacketEvent[] = [];
  for (let i = 0; i < 30_000; i++) events.push(event(i));
  const env: Envelope = { seq: 9, kind: 'events', events: { captureId: 'c', point: 'p', events } };
  const bytes = encodeEnvelope(env);
  t.ok(bytes.length > 0x200000, `${bytes.length} bytes`);
  t.same(decodeEnvelopeReflect(bytes), env);
  t.same(decodeEnvelope(bytes), env);
  t.end();
});

void t.test(
  'the collector stores the events as they arrived: raw views, not encoded again',
  (t) => {
    const events = exchange('decap', DIRECT);
    const bytes = encodeEnvelope({
      seq: 9,
      kind: 'events',
      events: { captureId: 'c', point: 'decap', events },
    });
    const env = decodeEventsEnvelope(bytes);
    if (env?.kind !== 'events') throw new Error('not an events envelope');
    const raw = env.events.raw ?? [];
    t.equal(raw.length, events.length, 'one view per event');
    t.notOk(Object.keys(env.events).includes('raw'), 'not enumerable: never compared or cloned');
    const stored = parseEventFile(encodeEventRecords(env.events.events, 9, raw));
    const reencoded = parseEventFile(encodeEventRecords(env.events.events, 9));
    t.same(stored.events, reencoded.events, 'the stored raw bytes read back as the same events');
    t.same(stored.events, events);
    t.end();
  },
);

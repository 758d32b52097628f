/** The hand-written Ack Envelope codec (common/ack-wire.ts) against protobufjs's reflection. */
import t from 'tap';
import { decodeAckEnvelope, encodeAckEnvelope } from '../../common/ack-wire';
import {
  decodeEnvelope,
  decodeEnvelopeReflect,
  encodeEnvelope,
  encodeEnvelopeReflect,
} from '../../common/envelope';
import type { HoptraceError } from '../../common/errors';

const SEQS = [0, 1, 127, 128, 300, 2 ** 32 - 1, 2 ** 32, 1_764_740_000_000_000, 2 ** 52];
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

void t.test('the same bytes as reflection, decoded to the same Envelope', (t) => {
  for (const seq of [0, 5, 2 ** 40])
    for (const ackSeq of SEQS) {
      const env = { seq, kind: 'ack' as const, ack: { seq: ackSeq } };
      const reflect = encodeEnvelopeReflect(env);
      t.equal(hex(encodeAckEnvelope(seq, ackSeq)), hex(reflect), `encode ${seq}/${ackSeq}`);
      t.equal(hex(encodeEnvelope(env)), hex(reflect), 'encodeEnvelope takes it');
      t.same(decodeAckEnvelope(reflect), decodeEnvelopeReflect(reflect), `decode ${ackSeq}`);
      t.same(decodeEnvelope(reflect), env);
    }
  t.end();
});

void t.test('what protobuf also allows — zero fields left out — decodes alike', (t) => {
  // Envelope{ack{}}: 9a 01 00; Envelope{ack{seq 7}} without the envelope's seq: 9a 01 02 08 07.
  for (const h of ['9a0100', '9a01020807', '08009a0100']) {
    const b = Buffer.from(h, 'hex');
    t.same(decodeAckEnvelope(b), decodeEnvelopeReflect(b), h);
  }
  t.end();
});

void t.test('anything else is left to reflection (null), never misread', (t) => {
  const good = encodeEnvelopeReflect({ seq: 0, kind: 'ack', ack: { seq: 300 } });
  // Every prefix: null (reflection then refuses the truncated ones itself).
  for (let n = 0; n < good.length; n++) t.equal(decodeAckEnvelope(good.subarray(0, n)), null);
  const other = [
    // an unknown field in the Ack: 9a 01 04 08 01 10 02
    '9a0104080110 02',
    // a second body after the ack
    '08009a010208019a010208 02',
    // the ack seq as another wire type (fixed64)
    '9a0109' + '09' + '0100000000000000',
    // a 9-byte varint
    '9a010a08ffffffffffffffff01',
    // a length past the end
    '9a01050801',
    // a heartbeat (field 18)
    '0800920100',
  ];
  for (const h of other)
    t.equal(decodeAckEnvelope(Buffer.from(h.replace(/ /g, ''), 'hex')), null, h);
  t.equal(
    decodeAckEnvelope(encodeEnvelope({ seq: 9, kind: 'heartbeat', heartbeat: { unixMs: 1 } })),
    null,
    'a real heartbeat',
  );
  const batch = encodeEnvelope({
    seq: 9,
    kind: 'events',
    events: { captureId: 'c', point: 'p', events: [] },
  });
  t.equal(decodeAckEnvelope(batch), null, 'an event batch');
  t.end();
});

void t.test('a seq past 2^52 is refused as reflection refuses it', (t) => {
  const b = encodeEnvelopeReflect({ seq: 0, kind: 'ack', ack: { seq: 2 ** 52 + 2 } });
  t.not(decodeAckEnvelope(b), null, 'the fast path reads it');
  const code = (f: () => unknown): string | undefined => {
    try {
      f();
      return undefined;
    } catch (e) {
      return (e as HoptraceError).code;
    }
  };
  t.equal(
    code(() => decodeEnvelope(b)),
    'WIRE_MALFORMED',
  );
  t.equal(
    code(() => decodeEnvelopeReflect(b)),
    'WIRE_MALFORMED',
  );
  t.end();
});

/**
 * The evidence-frame messages on the wire (common/frames-wire.ts): FramesRequest and FramesReply
 * survive the Envelope round trip exactly; anything beyond their bounds — frame numbers that are
 * not positive integers below 2^53, more than 256 frames, a frame above 262144 bytes or longer than
 * its wire length, more than 8 MiB in one reply, a reason that is not a code — is refused whole
 * with FRAMES_MALFORMED, and the hub closes an agent that sends one. The collector's stored file
 * goes through the same checks.
 */
import t from 'tap';
import { CLOSE_CODES, decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import {
  FRAMES_LIMITS,
  decodeStoredFrames,
  encodeStoredFrames,
  type StoredFrames,
} from '../../common/frames-wire';
import type { Envelope, FrameRecord, FramesReply } from '../../common/wire';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import { RawAgent, TOKEN, closeServer, decodeFailure, hello, listen } from './transport-fixtures';

function record(frame: number, bytes: number, origLen = bytes): FrameRecord {
  return {
    frame,
    tsNs: 1_764_452_477_123_456_789n + BigInt(frame),
    origLen,
    data: Buffer.alloc(bytes, frame & 0xff),
  };
}

function reply(o: Partial<FramesReply> = {}): FramesReply {
  return {
    requestId: 'q-0123456789ab',
    captureId: 'c-mhk2x-0a1b2c3d',
    point: 'decap',
    linkType: 1,
    snaplen: 256,
    records: [record(1, 74), record(2, 256, 1514)],
    missing: [{ frame: 9, reason: 'RETENTION_FULL' }],
    retained: 8,
    retentionDropped: 3,
    errorCode: '',
    message: '',
    ...o,
  };
}

const env = (framesReply: FramesReply): Envelope => ({ seq: 0, kind: 'framesReply', framesReply });

void t.test('FramesRequest and FramesReply round-trip exactly', (t) => {
  const cases: Envelope[] = [
    {
      seq: 0,
      kind: 'framesRequest',
      framesRequest: {
        requestId: 'q-1',
        captureId: 'c-mhk2x-0a1b2c3d',
        point: 'backend',
        frames: [1, 2, 2 ** 53 - 1],
        release: true,
      },
    },
    env(reply()),
    // Nothing retained: no link type (LINKTYPE 0 would be a real one, BSD loopback).
    env(reply({ linkType: null, snaplen: 0, records: [], errorCode: 'RETENTION_OFF' })),
    env(reply({ linkType: 0 })),
  ];
  for (const c of cases) {
    const back = decodeEnvelope(encodeEnvelope(c));
    if (back.kind === 'framesReply')
      back.framesReply.records = back.framesReply.records.map((r) => ({
        ...r,
        data: Buffer.from(r.data),
      }));
    t.same(back, c, c.kind);
  }
  t.end();
});

void t.test('frames messages beyond their bounds are refused with FRAMES_MALFORMED', (t) => {
  const req = (frames: number[]): Uint8Array =>
    encodeEnvelope({
      seq: 0,
      kind: 'framesRequest',
      framesRequest: { requestId: 'q', captureId: 'c', point: 'p', frames, release: false },
    });
  const many = Array.from({ length: FRAMES_LIMITS.frames }, (_, i) => record(i + 1, 1));
  const cases: [string, Uint8Array][] = [
    ['frame 0', req([0])],
    ['frame 2^53', req([2 ** 53])],
    ['257 frames asked', req(Array.from({ length: 257 }, (_, i) => i + 1))],
    ['a record for frame 0', encodeEnvelope(env(reply({ records: [record(0, 10)] })))],
    [
      'a frame above 262144 bytes',
      encodeEnvelope(env(reply({ records: [record(1, 262145, 262145)] }))),
    ],
    ['bytes beyond the wire length', encodeEnvelope(env(reply({ records: [record(1, 100, 60)] })))],
    [
      'more than 8 MiB in one reply',
      encodeEnvelope(
        env(reply({ records: Array.from({ length: 33 }, (_, i) => record(i + 1, 262144)) })),
      ),
    ],
    ['257 records', encodeEnvelope(env(reply({ records: [...many, record(257, 1)] })))],
    [
      'a reason that is not a code',
      encodeEnvelope(env(reply({ missing: [{ frame: 3, reason: 'rm -rf /' }] }))),
    ],
    ['an error code that is not one', encodeEnvelope(env(reply({ errorCode: 'nope' })))],
    ['a snaplen above 262144', encodeEnvelope(env(reply({ snaplen: 262145 })))],
    ['a capture id of 65 characters', encodeEnvelope(env(reply({ captureId: 'c'.repeat(65) })))],
    ['a message of 1025 characters', encodeEnvelope(env(reply({ message: 'm'.repeat(1025) })))],
  ];
  for (const [what, bytes] of cases) t.equal(decodeFailure(bytes), 'FRAMES_MALFORMED', what);
  t.equal(
    decodeFailure(encodeEnvelope(env(reply({ records: many })))),
    'decoded',
    '256 records fit',
  );
  t.end();
});

void t.test('the hub closes an agent that sends a malformed frames reply (4400)', async (t) => {
  const { server, port } = await listen();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  const replies: unknown[] = [];
  hub.onReply?.((r) => replies.push(r));
  t.teardown(async () => {
    await hub.close();
    await closeServer(server);
  });
  const a = RawAgent.connect(port, TOKEN);
  await a.opened;
  a.send({ seq: 0, kind: 'hello', hello: hello('a1') });
  await a.next((e) => e.kind === 'helloAck');
  a.send(env(reply()));
  a.send(env(reply({ missing: [{ frame: 0, reason: 'RETENTION_FULL' }] })));
  await a.closed;
  t.equal(a.closeCode, CLOSE_CODES.MALFORMED);
  t.equal(a.closeReason, 'FRAMES_MALFORMED', 'the bound that was broken, by its code');
  t.equal(replies.length, 1, 'the good reply was handed on, the bad one not');
});

void t.test('the stored frames file round-trips and is read through the same checks', (t) => {
  const s: StoredFrames = {
    captureId: 'c-mhk2x-0a1b2c3d',
    point: 'egress',
    agentId: 'vpn-node-1a2b3c',
    linkType: 276,
    snaplen: 256,
    records: [record(3, 120), record(4, 256, 9000)],
    missing: [{ frame: 5, reason: 'RETENTION_CUT' }],
    fetchedUnixMs: 1_764_452_477_123,
    retained: 4,
    retentionDropped: 17,
  };
  const back = decodeStoredFrames(encodeStoredFrames(s));
  back.records = back.records.map((r) => ({ ...r, data: Buffer.from(r.data) }));
  t.same(back, s);
  t.same(decodeStoredFrames(encodeStoredFrames({ ...s, linkType: null })).linkType, null);
  t.throws(() => decodeStoredFrames(Buffer.from([0x32, 0xff, 0xff])), { code: 'FRAMES_MALFORMED' });
  t.throws(
    () => decodeStoredFrames(encodeStoredFrames({ ...s, records: [record(1, 300, 200)] })),
    { code: 'FRAMES_MALFORMED' },
    'a record longer than its frame',
  );
  t.end();
});

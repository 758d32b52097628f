import t from 'tap';
import { backoffDelay } from '../../agent/link/backoff';
import { CollectorLink } from '../../agent/link/collector-link';
import { Spool } from '../../agent/link/spool';
import { decodeEnvelope } from '../../common/envelope';
import type { EventBatch } from '../../common/wire';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import { TOKEN, batch, closeServer, hello, listen } from './transport-fixtures';

const lost = (s: Spool): number[] => {
  const out: number[] = [];
  for (let e = s.takeNext(); e; e = s.takeNext()) {
    const env = decodeEnvelope(e.bytes);
    if (env.kind === 'lost') out.push(env.lost.count);
  }
  s.rewind();
  return out;
};

void t.test('a full spool drops NEW batches, counts their events in one pending Lost', (t) => {
  const s = new Spool(2, 100);
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(1, 3) }), 100);
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(4, 3) }), 101);
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(7, 3) }), 0, 'dropped');
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(10, 4) }), 0, 'dropped');
  t.equal(s.droppedEvents, 7);
  t.equal(s.length, 3, 'two batches and one Lost');
  t.same(lost(s), [7], 'one Lost, updated in place while not yet sent');
  // Status messages are exempt from the limit.
  t.ok(
    s.add({ seq: 0, kind: 'lost', lost: { captureId: 'c', point: 'p', count: 1, reason: 'x' } }),
  );
  // Once the pending Lost is on the wire, later drops wait aside until it is acknowledged: one
  // Lost per point in flight, however many batches an overload drops.
  let lostSeq = 0;
  for (let e = s.takeNext(); e; e = s.takeNext())
    if (e.kind === 'lost' && lostSeq === 0) lostSeq = e.seq;
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(20, 2) }), 0);
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(22, 3) }), 0);
  t.equal(s.deferredLostEvents, 5, 'counted aside');
  s.rewind();
  t.same(lost(s), [7, 1], 'no new Lost while the first is unacknowledged');
  s.ackThrough(lostSeq);
  t.equal(s.deferredLostEvents, 0);
  t.same(lost(s), [1, 5], 'acked: the drops meanwhile become the next Lost');
  t.equal(s.droppedEvents, 12, 'every dropped event counted once');
  t.end();
});

void t.test('a dropped batch of pre-encoded events counts them in its Lost', (t) => {
  const s = new Spool(1, 100);
  t.equal(s.add({ seq: 0, kind: 'events', events: batch(1, 3) }), 100);
  const encoded = { bytes: new Uint8Array(0), count: 250 };
  const events = { captureId: 'c', point: 'p', events: [], encoded };
  t.equal(s.add({ seq: 0, kind: 'events', events }), 0, 'dropped');
  t.equal(s.droppedEvents, 250);
  t.same(lost(s), [250]);
  t.end();
});

void t.test('acks trim the spool from the front; the transmit cursor follows', (t) => {
  const s = new Spool(10, 1);
  for (let i = 0; i < 5; i++) s.add({ seq: 0, kind: 'events', events: batch(i, 1) });
  t.equal(s.takeNext()?.seq, 1);
  t.equal(s.takeNext()?.seq, 2);
  t.equal(s.takeNext()?.seq, 3);
  t.equal(s.ackThrough(2), 2);
  t.equal(s.firstSeq, 3);
  t.equal(s.takeNext()?.seq, 4, 'cursor kept its place');
  s.rewind();
  t.equal(s.takeNext()?.seq, 3, 'a reconnect resends everything unacknowledged');
  t.equal(s.ackThrough(99), 3);
  t.equal(s.length, 0);
  t.equal(s.bytes, 0);
  t.end();
});

void t.test('renumbering re-encodes every entry above a collector-held seq', (t) => {
  const s = new Spool(10, 1);
  const b1 = batch(1, 1);
  const b2 = batch(2, 1);
  s.add({ seq: 0, kind: 'events', events: b1 });
  s.add({ seq: 0, kind: 'events', events: b2 });
  s.add({ seq: 0, kind: 'lost', lost: { captureId: 'c', point: 'p', count: 3, reason: 'x' } });
  // Across varint lengths: 1-byte seqs become 3-byte ones and beyond 2^32.
  s.renumberFrom(2 ** 40);
  const [e1, e2, e3] = [s.takeNext(), s.takeNext(), s.takeNext()];
  const d1 = e1 ? decodeEnvelope(e1.bytes) : null;
  const d2 = e2 ? decodeEnvelope(e2.bytes) : null;
  t.same(
    [d1?.seq, d2?.seq, e3 ? decodeEnvelope(e3.bytes).seq : 0],
    [2 ** 40, 2 ** 40 + 1, 2 ** 40 + 2],
  );
  // The events themselves survive the rewrite byte for byte.
  t.same(d1?.kind === 'events' ? d1.events : null, b1);
  t.same(d2?.kind === 'events' ? d2.events : null, b2);
  t.equal(s.nextSeq, 2 ** 40 + 3);
  t.equal(s.bytes, (e1?.bytes.length ?? 0) + (e2?.bytes.length ?? 0) + (e3?.bytes.length ?? 0));
  t.end();
});

void t.test('a spooled event batch keeps its bytes, not its PacketEvent objects', (t) => {
  const s = new Spool(10, 7);
  s.add({ seq: 0, kind: 'events', events: batch(1, 50) });
  const e = s.takeNext();
  t.equal(e?.events, 50);
  t.same(e?.env.kind === 'events' ? e.env.events.events : null, [], 'objects let go');
  const d = e ? decodeEnvelope(e.bytes) : null;
  t.equal(d?.kind === 'events' ? d.events.events.length : 0, 50, 'all 50 in the bytes');
  t.end();
});

void t.test('backoff doubles from min, caps at max, jitters within the upper half', (t) => {
  const o = { minMs: 200, maxMs: 10_000 };
  t.equal(
    backoffDelay(0, o, () => 1),
    200,
  );
  t.equal(
    backoffDelay(0, o, () => 0),
    100,
  );
  t.equal(
    backoffDelay(3, o, () => 1),
    1600,
  );
  t.equal(
    backoffDelay(20, o, () => 1),
    10_000,
  );
  t.equal(
    backoffDelay(1000, o, () => 0),
    5_000,
  );
  t.end();
});

void t.test('the link says hello, receives commands, and reports its stats', async (t) => {
  const { server, port } = await listen();
  const store = memoryLastSeqStore();
  const hub = createAgentHub({ server, tokens: [TOKEN], collectorId: 'c1', lastSeqStore: store });
  hub.onMessage(() => Promise.resolve());
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    hello: () => hello('agent-7'),
    firstSeq: 1,
  });
  t.teardown(async () => {
    await link.close();
    await hub.close();
    await closeServer(server);
  });
  const ack = await new Promise((resolve) => {
    link.onConnected(resolve);
  });
  t.same(ack, { collectorId: 'c1', lastSeq: 0 });
  t.equal(hub.agents()[0]?.node, 'node-agent-7');
  const cmd = new Promise((resolve) => {
    link.onCommand(resolve);
  });
  t.ok(hub.send('agent-7', { kind: 'stop', stop: { captureId: 'cap1', point: 'decap' } }));
  t.same(await cmd, { seq: 0, kind: 'stop', stop: { captureId: 'cap1', point: 'decap' } });

  t.equal(link.send('events', batch(1, 2)), 1);
  t.equal(
    link.send('status', {
      captureId: 'cap1',
      point: 'decap',
      state: 'capturing',
      packets: 2,
      kernelDrops: null,
      ifaceDrops: null,
      queueDrops: 0,
      errorCode: '',
      message: '',
      netns: '',
      netnsAddresses: [],
      iface: 'eth0',
      linkType: 'ethernet',
    }),
    2,
  );
  await link.flush();
  t.equal(store.get('agent-7'), 2);
  t.match(link.stats(), {
    connected: true,
    spooled: 0,
    sent: 2,
    acked: 2,
    lostEvents: 0,
    reconnects: 0,
  });
});

void t.test(
  'backpressure: above the high-water mark the link waits for the socket to drain',
  async (t) => {
    const { server, port } = await listen();
    const store = memoryLastSeqStore();
    const hub = createAgentHub({ server, tokens: [TOKEN], collectorId: 'c1', lastSeqStore: store });
    const frames: number[] = [];
    hub.onMessage((msg) => {
      if (msg.kind === 'events') frames.push(...msg.batch.events.map((e) => e.frame));
      return Promise.resolve();
    });
    // A 1-byte high-water mark: every write blocks the pump until its callback says it left.
    const link = new CollectorLink({
      url: `ws://127.0.0.1:${port}/v1/agents`,
      token: TOKEN,
      hello: () => hello('agent-bp'),
      highWaterBytes: 1,
    });
    t.teardown(async () => {
      await link.close();
      await hub.close();
      await closeServer(server);
    });
    await new Promise((resolve) => {
      link.onConnected(resolve);
    });
    // Batches large enough (~0.3 MB each) to fill the loopback socket buffer.
    for (let i = 0; i < 20; i++) link.send('events', batch(i * 3000 + 1, 3000));
    t.ok(link.stats().sent < 20, 'send() returned before everything was written');
    await link.flush();
    t.equal(frames.length, 60_000);
    t.ok(
      frames.every((f, i) => f === i + 1),
      'in order',
    );
    t.equal(link.stats().sent, 20);
  },
);

void t.test('an acknowledged entry is released at once, not at a later compaction', async (t) => {
  // Regression: ackThrough only moved `head`, and the array was compacted after > 1024 acks, so
  // with large batches hundreds of MiB of acknowledged bytes stayed referenced.
  const { setFlagsFromString } = await import('node:v8');
  const { runInNewContext } = await import('node:vm');
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const s = new Spool(100, 1);
  const refs: WeakRef<Uint8Array>[] = [];
  for (let i = 0; i < 8; i++) {
    s.add({
      seq: 0,
      kind: 'events',
      events: {
        captureId: 'c',
        point: 'p',
        events: [],
        encoded: { bytes: new Uint8Array(1 << 20), count: 1 },
      },
    });
    const e = s.takeNext();
    if (e !== undefined) refs.push(new WeakRef(e.bytes));
  }
  t.equal(s.ackThrough(6), 6);
  // Collection happens between turns of the event loop for WeakRefs: let one pass.
  await new Promise((r) => setImmediate(r));
  gc();
  await new Promise((r) => setImmediate(r));
  gc();
  t.same(
    refs.map((r) => r.deref() === undefined),
    [true, true, true, true, true, true, false, false],
    'the six acknowledged batches are gone, the two waiting are kept',
  );
  t.equal(s.length, 2);
});

void t.test('the spool is bounded in bytes too: past maxBytes new batches are dropped', (t) => {
  const s = new Spool(1000, 1, 3 << 20);
  const big = (): EventBatch => ({
    captureId: 'c',
    point: 'p',
    events: [],
    encoded: { bytes: new Uint8Array(1 << 20), count: 10 },
  });
  const seqs = [1, 2, 3, 4, 5].map(() => s.add({ seq: 0, kind: 'events', events: big() }));
  t.same(
    seqs.map((q) => q > 0),
    [true, true, true, false, false],
    '3 MiB hold three batches',
  );
  t.equal(s.droppedEvents, 20);
  t.same(lost(s), [20], 'and the drops are one Lost');
  t.end();
});

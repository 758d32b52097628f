/**
 * A CollectorLink and a hub over loopback: the collector goes away mid-stream and a new one starts
 * on the same port with the same lastSeq store; every event arrives exactly once, in order.
 */
import type { Server } from 'node:http';
import t from 'tap';
import { CollectorLink } from '../../agent/link/collector-link';
import type { HoptraceError } from '../../common/errors';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import type { AgentHub, AgentMessage } from '../../collector/hub-types';
import { Signal, TOKEN, batch, closeServer, hello, listen } from './transport-fixtures';

const FAST = { backoff: { minMs: 10, maxMs: 50 }, heartbeatMs: 2_000 };

interface Delivered {
  frames: number[];
  lost: number;
  signal: Signal;
}

function collect(hub: AgentHub, d: Delivered, hold?: (msg: AgentMessage) => Promise<void>): void {
  hub.onMessage(async (msg) => {
    if (msg.kind === 'events') d.frames.push(...msg.batch.events.map((e) => e.frame));
    if (msg.kind === 'lost') d.lost += msg.lost.count;
    d.signal.notify();
    if (hold) await hold(msg);
  });
}

void t.test('a collector restart mid-stream loses and duplicates nothing', async (t) => {
  const first = await listen();
  const port = first.port;
  const store = memoryLastSeqStore();
  const d: Delivered = { frames: [], lost: 0, signal: new Signal() };
  const hub1 = createAgentHub({
    server: first.server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: store,
  });
  // The handler holds the third batch: the collector is "busy storing it" when it goes down.
  let release = (): void => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  collect(hub1, d, (msg) =>
    msg.kind === 'events' && msg.batch.events[0]?.frame === 21 ? held : Promise.resolve(),
  );

  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    hello: () => hello('agent-1'),
    ...FAST,
  });
  const errors: string[] = [];
  const errorSignal = new Signal();
  link.onError((e: HoptraceError) => {
    errors.push(e.code);
    errorSignal.notify();
  });
  const later: { server?: Server; hub?: AgentHub } = {};
  t.teardown(async () => {
    await link.close();
    if (later.hub) await later.hub.close();
    if (later.server) await closeServer(later.server);
  });

  // 10 batches of 10 events: frames 1..100.
  let frame = 1;
  const sendBatch = (): void => {
    link.send('events', batch(frame, 10));
    frame += 10;
  };
  for (let i = 0; i < 3; i++) sendBatch();
  await d.signal.wait(() => d.frames.includes(21));
  // Mid-stream: the collector shuts down while batch 3 is being stored; more keep coming.
  const closing = hub1.close();
  for (let i = 0; i < 2; i++) sendBatch();
  release();
  await closing;
  await closeServer(first.server);
  // Collector down: the link spools.
  for (let i = 0; i < 3; i++) sendBatch();
  t.ok(link.stats().spooled >= 3, 'spooled while the collector is down');
  await errorSignal.wait(() => errors.includes('LINK_UNREACHABLE'));
  t.equal(link.stats().connected, false, 'the outage is reported and seen');

  const second = await listen(port);
  later.server = second.server;
  const hub2 = createAgentHub({
    server: second.server,
    tokens: [TOKEN],
    collectorId: 'c2',
    lastSeqStore: store,
  });
  later.hub = hub2;
  collect(hub2, d);
  for (let i = 0; i < 2; i++) sendBatch();
  await d.signal.wait(() => d.frames.length >= 100);

  t.same(
    d.frames,
    Array.from({ length: 100 }, (_, i) => i + 1),
    'every event once, in order',
  );
  t.equal(d.lost, 0);
  t.ok(link.stats().reconnects >= 1, 'the link reconnected');
  await link.flush();
  t.equal(link.stats().spooled, 0, 'everything acknowledged');
  t.equal(link.stats().lostEvents, 0);
});

void t.test('spool overflow reaches the collector as a Lost with the exact count', async (t) => {
  // A server without the hub yet: the link's upgrades fail and it spools.
  const { server, port } = await listen();
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    hello: () => hello('agent-2'),
    spoolLimit: 5,
    ...FAST,
  });
  const unreachable = new Promise<void>((resolve) => {
    link.onError((e) => {
      if (e.code === 'LINK_UNREACHABLE') resolve();
    });
  });
  const later: { hub?: AgentHub } = {};
  t.teardown(async () => {
    await link.close();
    if (later.hub) await later.hub.close();
    await closeServer(server);
  });
  await unreachable;
  for (let i = 0; i < 8; i++) link.send('events', batch(i * 3 + 1, 3));
  t.equal(link.stats().lostEvents, 9, '3 batches of 3 events dropped');

  const d: Delivered = { frames: [], lost: 0, signal: new Signal() };
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  later.hub = hub;
  collect(hub, d);
  await d.signal.wait(() => d.lost > 0 && d.frames.length === 15);
  t.equal(d.lost, 9, 'Lost{count: 9}');
  t.same(
    d.frames,
    Array.from({ length: 15 }, (_, i) => i + 1),
    'the oldest 5 batches kept',
  );
});

void t.test('a wrong token: the link reports AUTH_REFUSED and delivers nothing', async (t) => {
  const { server, port } = await listen();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  const d: Delivered = { frames: [], lost: 0, signal: new Signal() };
  collect(hub, d);
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: 'not-the-token',
    hello: () => hello('agent-3'),
    ...FAST,
  });
  t.teardown(async () => {
    await link.close();
    await hub.close();
    await closeServer(server);
  });
  link.send('events', batch(1, 1));
  const err = await new Promise<HoptraceError>((resolve) => {
    link.onError(resolve);
  });
  t.equal(err.code, 'AUTH_REFUSED');
  t.match(err.message, /^AUTH_REFUSED: ws:\/\/127\.0\.0\.1:\d+\/v1\/agents: /);
  t.notMatch(err.message, /not-the-token/, 'the token is not in the message');
  t.equal(hub.counters().refusedUnauthenticated >= 1, true);
  t.equal(link.stats().connected, false);
  t.equal(link.stats().spooled, 1, 'the batch stays spooled');
  t.equal(d.frames.length, 0, 'nothing delivered');
});

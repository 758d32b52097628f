/**
 * The agent's link against a collector that misbehaves (the reviewer's fakecoll.js): a fake
 * collector on 127.0.0.1, port 0, speaking to the real CollectorLink. No capture involved.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  CollectorLink,
  type CollectorCommand,
  type CollectorLinkOptions,
} from '../../agent/link/collector-link';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import type { HoptraceError } from '../../common/errors';
import type { Envelope } from '../../common/wire';
import { Signal, hello } from './transport-fixtures';

/** What the fake collector does once a connection said hello. */
type Script = (ws: WebSocket, n: number) => void;

interface Fake {
  url: string;
  /** Connection times (ms, performance.now()). */
  conns: number[];
  /** Envelopes the agent sent (hello included). */
  got: Envelope[];
  signal: Signal;
  close: () => Promise<void>;
}

async function fakeCollector(script: Script): Promise<Fake> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  const signal = new Signal();
  const fake: Omit<Fake, 'url' | 'close'> = { conns: [], got: [], signal };
  wss.on('connection', (ws) => {
    fake.conns.push(performance.now());
    const n = fake.conns.length;
    signal.notify();
    ws.on('error', () => undefined);
    let first = true;
    ws.on('message', (data: Buffer) => {
      fake.got.push(decodeEnvelope(data));
      signal.notify();
      if (!first) return;
      first = false;
      ws.send(
        encodeEnvelope({ seq: 0, kind: 'helloAck', helloAck: { collectorId: 'c', lastSeq: 0 } }),
      );
      script(ws, n);
    });
  });
  await new Promise((r) => wss.once('listening', r));
  const port = (wss.address() as { port: number }).port;
  return {
    ...fake,
    url: `ws://127.0.0.1:${port}/v1/agents`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => {
          resolve();
        });
      }),
  };
}

/** A link to `fake` whose error log lines are kept (to count them). */
function linkTo(fake: Fake, over: Partial<CollectorLinkOptions> = {}) {
  type Line = { level: number; code?: string; msg: string; unknownField?: number };
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l !== '') lines.push(JSON.parse(l) as Line);
      cb();
    },
  });
  const errors: HoptraceError[] = [];
  const commands: CollectorCommand[] = [];
  const link = new CollectorLink({
    url: fake.url,
    token: 't',
    hello: () => hello('agent-f'),
    firstSeq: 1,
    backoff: { minMs: 10, maxMs: 20 },
    logger: pino({ level: 'debug' }, sink),
    ...over,
  });
  link.onError((e) => {
    errors.push(e);
    fake.signal.notify();
  });
  link.onCommand((c) => {
    commands.push(c);
    fake.signal.notify();
  });
  return { link, errors, commands, lines };
}

/** Waits for `pred`, failing after `ms` (the old code never gets there). */
async function within(fake: Fake, pred: () => boolean, ms = 3000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const ok = await Promise.race([
    fake.signal.wait(pred).then(() => true),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => {
        r(false);
      }, ms);
    }),
  ]);
  clearTimeout(timer);
  return ok;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const stop: Envelope = { seq: 0, kind: 'stop', stop: { captureId: 'c1', point: 'decap' } };

void t.test('an unknown body kind is ignored and counted: no reconnect storm', async (t) => {
  const fake = await fakeCollector((ws) => {
    // Envelope{ field 26 = {} }: a body kind a newer collector might send; then a known command.
    ws.send(Buffer.from([0xd2, 0x01, 0x00]));
    ws.send(Buffer.from([0xd2, 0x01, 0x00]));
    ws.send(encodeEnvelope(stop));
  });
  const l = linkTo(fake);
  t.teardown(async () => {
    await l.link.close();
    await fake.close();
  });
  t.ok(await within(fake, () => l.commands.length === 1), 'the command after it arrives');
  // The old link cut the connection and came back within its 10-20 ms backoff, ~6/s for ever.
  await sleep(150);
  t.equal(fake.conns.length, 1, 'one connection');
  t.match(l.link.stats(), { connected: true, reconnects: 0, unknownMessages: 2, malformed: 0 });
  t.same(l.errors, [], 'not a link failure');
  t.match(
    l.lines.filter((x) => x.code === 'WIRE_UNKNOWN_KIND'),
    [{ level: 40, unknownField: 26, msg: /Envelope field 26/ }],
    'logged once per kind, with the log key the collector uses for a newer agent',
  );
});

void t.test(
  'an undecodable message is reported (lastError) and ignored; a capture it broke is failed',
  async (t) => {
    const fake = await fakeCollector((ws) => {
      ws.send(Buffer.from([0xff, 0xff, 0xff])); // not protobuf
      // A capture whose filter is past the agent's bound (common/command-limits.ts).
      const filter = 'x'.repeat(20_000);
      const capture = { captureId: 'c1', point: 'decap', target: '/x', iface: 'eth0', filter };
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'capture',
          capture: { ...capture, snaplen: 0, deadlineUnixMs: 0 },
        }),
      );
      ws.send(encodeEnvelope(stop));
    });
    const l = linkTo(fake);
    t.teardown(async () => {
      await l.link.close();
      await fake.close();
    });
    t.ok(await within(fake, () => l.commands.length === 1), 'the stop after them arrives');
    t.same(
      l.commands.map((c) => c.kind),
      ['stop'],
      'the over-long capture never reaches the runtime',
    );
    t.ok(
      await within(fake, () => fake.got.some((e) => e.kind === 'error')),
      'the collector is told',
    );
    t.match(
      fake.got.find((e) => e.kind === 'error'),
      {
        kind: 'error',
        error: {
          code: 'WIRE_MALFORMED',
          captureId: 'c1',
          point: 'decap',
          message: /filter is 20000 long \(at most 16384\)/,
        },
      },
    );
    await sleep(100);
    t.equal(fake.conns.length, 1, 'the link stays');
    t.match(l.link.stats(), { connected: true, lastError: 'WIRE_MALFORMED', malformed: 2 });
    t.same(
      l.errors.map((e) => e.code),
      ['WIRE_MALFORMED'],
      'reported once per change of code',
    );
    t.equal(l.lines.filter((x) => x.level === 50).length, 1, 'one error line in the log');
  },
);

void t.test(
  'a doctor, conntrack or frames request that breaks a bound is answered at once, refused',
  async (t) => {
    const target = { name: 'vpn', target: '/'.repeat(5000), routeTo: [] };
    const tuple = { src: '10.0.0.1', dst: '10.0.0.2', sport: 1, dport: 2 };
    const fake = await fakeCollector((ws) => {
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'doctorRequest',
          doctorRequest: { requestId: 'q-d', targets: [target], family: 4 },
        }),
      );
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'conntrackQuery',
          conntrackQuery: {
            requestId: 'q-c',
            captureId: 'c1',
            targets: [],
            tuples: Array.from({ length: 257 }, () => tuple),
          },
        }),
      );
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'framesRequest',
          framesRequest: {
            requestId: 'q-f',
            captureId: 'c1',
            point: 'decap',
            frames: Array.from({ length: 300 }, (_, i) => i + 1),
            release: true,
          },
        }),
      );
      // One whose request id is itself past the bound: nothing to answer to.
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'doctorRequest',
          doctorRequest: { requestId: 'q'.repeat(300), targets: [], family: 4 },
        }),
      );
    });
    const l = linkTo(fake);
    const requests: unknown[] = [];
    l.link.onRequest((r) => requests.push(r));
    t.teardown(async () => {
      await l.link.close();
      await fake.close();
    });
    const replies = (): Envelope[] =>
      fake.got.filter((e) => ['doctorReport', 'conntrackReport', 'framesReply'].includes(e.kind));
    // The old link answered none of them: the collector waited out its 10 s.
    t.ok(await within(fake, () => replies().length === 3), 'three replies');
    t.match(replies(), [
      {
        kind: 'doctorReport',
        doctorReport: {
          requestId: 'q-d',
          agentId: 'agent-f',
          node: 'node-agent-f',
          facts: [],
          errorCode: 'DOCTOR_BAD_REQUEST',
          message:
            /^DOCTOR_BAD_REQUEST: node-agent-f: the doctorRequest was refused whole, nothing read: the doctorRequest body's target is 5000 long \(at most 4096\) \(the collector asked more/,
        },
      },
      {
        kind: 'conntrackReport',
        conntrackReport: {
          requestId: 'q-c',
          captureId: 'c1',
          entries: [],
          errorCode: 'DOCTOR_BAD_REQUEST',
          message: /tuples is 257 long \(at most 256\)/,
        },
      },
      {
        kind: 'framesReply',
        framesReply: {
          requestId: 'q-f',
          captureId: 'c1',
          point: 'decap',
          records: [],
          missing: [],
          errorCode: 'FRAMES_MALFORMED',
          message: /^FRAMES_MALFORMED: the frames request was refused: 300 frames \(at most 256\)/,
        },
      },
    ]);
    t.same(requests, [], 'none reached the request handlers');
    await sleep(100);
    t.equal(replies().length, 3, 'the one without a readable id is not answered');
    t.equal(fake.conns.length, 1, 'the link stays');
    t.match(l.link.stats(), { malformed: 4 });
  },
);

void t.test(
  'a message over 16 MiB closes the link as WIRE_TOO_LARGE (ws default: 100 MiB)',
  async (t) => {
    const fake = await fakeCollector((ws, n) => {
      if (n > 1) return;
      const filter = 'x'.repeat(17 * 1024 * 1024);
      const capture = { captureId: 'c1', point: 'decap', target: '/x', iface: 'eth0', filter };
      ws.send(
        encodeEnvelope({
          seq: 0,
          kind: 'capture',
          capture: { ...capture, snaplen: 0, deadlineUnixMs: 0 },
        }),
      );
    });
    const l = linkTo(fake, { backoff: { minMs: 50, maxMs: 100 } });
    t.teardown(async () => {
      await l.link.close();
      await fake.close();
    });
    t.ok(await within(fake, () => l.errors.length > 0), 'reported');
    t.equal(l.errors[0]?.code, 'WIRE_TOO_LARGE');
    t.equal(l.commands.length, 0, 'nothing of it was taken');
    t.ok(await within(fake, () => fake.conns.length === 2), 'and the link comes back');
  },
);

void t.test(
  'a collector that drops the link after every helloAck is retried ever more slowly',
  async (t) => {
    const fake = await fakeCollector((ws) => {
      ws.close(4400, 'WIRE_MALFORMED');
    });
    const l = linkTo(fake, { backoff: { minMs: 40, maxMs: 5000 } });
    t.teardown(async () => {
      await l.link.close();
      await fake.close();
    });
    t.ok(await within(fake, () => fake.conns.length >= 5, 5000), '5 connections');
    const c = fake.conns;
    const gap = (c[4] ?? 0) - (c[3] ?? 0);
    // Attempt 3 waits 160-320 ms; the old link started again from attempt 0 (20-40 ms) at every
    // helloAck, ~6 connections a second for ever.
    t.ok(gap >= 150, `the 5th came ${gap.toFixed(0)} ms after the 4th`);
    t.equal(l.link.stats().lastError, 'WIRE_MALFORMED', 'and the reason stays visible');
    t.same(
      l.errors.map((e) => e.code),
      ['WIRE_MALFORMED'],
      'said once',
    );
  },
);

void t.test('lastError clears once the connection stayed up healthyMs', async (t) => {
  const fake = await fakeCollector(() => undefined);
  let calls = 0;
  const l = linkTo(fake, {
    healthyMs: 100,
    token: () => {
      if (calls++ === 0) throw new Error('not yet');
      return 't';
    },
  });
  t.teardown(async () => {
    await l.link.close();
    await fake.close();
  });
  t.ok(await within(fake, () => fake.got.length > 0), 'connected after a failed token read');
  t.equal(l.link.stats().lastError, 'AUTH_NO_TOKEN', 'still the last problem just after');
  await sleep(200);
  t.equal(l.link.stats().lastError, null, 'cleared once healthy');
});

/** The agent runtime without root or sockets: commands in, statuses/events/errors out. */
import type { EncodedEvents } from '../../common/wire';
import t from 'tap';
import {
  AgentRuntime,
  COUNTS_INTERVAL_MS,
  DEFAULT_MAX_CAPTURES,
  FINISHED_KEPT,
  type AgentDeps,
  type RuntimeOptions,
} from '../../agent/runtime';
import { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import type { CaptureCommand, CaptureStatus } from '../../common/wire';

interface Sent {
  statuses: CaptureStatus[];
  events: PacketEvent[][];
  errors: { code: string; point: string }[];
}

function cmd(over: Partial<CaptureCommand> = {}): CaptureCommand {
  return {
    captureId: 'c1',
    point: 'decap',
    target: '10.244.1.10',
    iface: 'tun7',
    filter: '',
    snaplen: 0,
    deadlineUnixMs: 0,
    ...over,
  };
}

function ev(frame: number): PacketEvent {
  return {
    point: 'decap',
    node: 'n1',
    iface: 'tun7',
    linktype: 'raw',
    tsNs: 1n,
    frame,
    outer: null,
    inner: null,
    tunnels: [],
    keys: { payloadLength: 0 },
    truncated: false,
    wireLength: 40,
  };
}

function harness(
  opts: {
    resolveFails?: boolean;
    startFails?: HoptraceError;
    packets?: () => number;
    kernelDrops?: () => number | null;
    nowMs?: () => number;
  } = {},
) {
  const sent: Sent = { statuses: [], events: [], errors: [] };
  let onEvents: ((e: PacketEvent[]) => void) | undefined;
  let onEnd: ((e: HoptraceError | null) => void) | undefined;
  const specs: unknown[] = [];
  let stopped = 0;
  const deps: AgentDeps = {
    send: (kind: string, body: never) => {
      if (kind === 'status') sent.statuses.push(body);
      else if (kind === 'events') sent.events.push((body as { events: PacketEvent[] }).events);
      else sent.errors.push(body);
    },
    resolveTarget: (target) =>
      opts.resolveFails === true
        ? Promise.reject(new HoptraceError('TARGET_NOT_FOUND', `no namespace has ${target}`))
        : Promise.resolve({ path: '/run/netns/vpn', dev: 1, inode: 2, via: 'ip' } as never),
    namespaceAddresses: () => Promise.resolve({ addresses: ['10.244.1.10'] }),
    makeCapture: (spec) => {
      specs.push(spec);
      return {
        start: (ev, end) => {
          onEvents = ev;
          onEnd = end;
          return opts.startFails ? Promise.reject(opts.startFails) : Promise.resolve();
        },
        stop: () => {
          stopped++;
          onEnd?.(null);
          return Promise.resolve();
        },
        stats: () => ({
          packets: opts.packets?.() ?? 3,
          decodeErrors: 0,
          kernelDrops: opts.kernelDrops?.() ?? null,
          ifaceDrops: null,
          queueDrops: 0,
        }),
      };
    },
    nowMs: opts.nowMs ?? (() => 1000),
  };
  const rt = new AgentRuntime('n1', deps);
  return {
    rt,
    sent,
    specs,
    emit: (e: PacketEvent[]) => onEvents?.(e),
    end: (e: HoptraceError | null) => onEnd?.(e),
    stopped: () => stopped,
  };
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

void t.test(
  'fold_flows: the capture folds flows (the worker default) only when asked',
  async (t) => {
    const h = harness();
    h.rt.handle({ kind: 'capture', capture: cmd({ foldFlows: true }) });
    await settle();
    t.equal(h.specs.length, 1);
    t.equal(
      (h.specs[0] as { foldFirst?: number } | undefined)?.foldFirst,
      undefined,
      "asked: the worker's default (FOLD_FIRST)",
    );
  },
);

void t.test('a capture command arms, streams events and reports its namespace', async (t) => {
  const h = harness();
  h.rt.handle({ kind: 'capture', capture: cmd({ filter: 'tcp', snaplen: 256 }) });
  await settle();
  // A command without fold_flows (an older collector): every packet an event (foldFirst 0).
  t.same(h.specs, [
    { point: 'decap', node: 'n1', iface: 'tun7', filter: 'tcp', snaplen: 256, foldFirst: 0 },
  ]);
  t.same(
    h.sent.statuses.map((s) => s.state),
    ['arming', 'capturing'],
  );
  const capturing = h.sent.statuses[1]!;
  t.equal(capturing.netns, '/run/netns/vpn');
  t.same(capturing.netnsAddresses, ['10.244.1.10']);
  t.equal(capturing.kernelDrops, null, 'drops are unknown, not 0');
  h.emit([ev(1), ev(2)]);
  t.same(
    h.sent.events.map((b) => b.map((e) => e.frame)),
    [[1, 2]],
  );
  // The same command again (resent after a reconnect) is not a second capture.
  h.rt.handle({ kind: 'capture', capture: cmd() });
  await settle();
  t.equal(h.specs.length, 1);
  h.rt.handle({ kind: 'stop', stop: { captureId: 'c1', point: '' } });
  await settle();
  t.equal(h.stopped(), 1);
  t.equal(h.sent.statuses.at(-1)?.state, 'stopped');
  t.same(h.sent.errors, []);
});

void t.test('an unknown target fails the point with its code', async (t) => {
  const h = harness({ resolveFails: true });
  h.rt.handle({ kind: 'capture', capture: cmd() });
  await settle();
  t.equal(h.sent.statuses.at(-1)?.state, 'failed');
  t.equal(h.sent.statuses.at(-1)?.errorCode, 'TARGET_NOT_FOUND');
  t.same(
    h.sent.errors.map((e) => [e.code, e.point]),
    [['TARGET_NOT_FOUND', 'decap']],
  );
});

void t.test('a capture that cannot open reports the capture error', async (t) => {
  const h = harness({
    startFails: new HoptraceError('CAPTURE_NO_INTERFACE', 'no tun9 (have: eth0, tun7)'),
  });
  h.rt.handle({ kind: 'capture', capture: cmd({ iface: 'tun9' }) });
  await settle();
  t.equal(h.sent.statuses.at(-1)?.errorCode, 'CAPTURE_NO_INTERFACE');
  t.match(h.sent.statuses.at(-1)?.message ?? '', /have: eth0, tun7/);
});

void t.test('a namespace that vanishes mid-capture ends the point with the reason', async (t) => {
  const h = harness();
  h.rt.handle({ kind: 'capture', capture: cmd() });
  await settle();
  h.end(
    new HoptraceError('CAPTURE_NAMESPACE_GONE', 'network namespace /run/netns/vpn was deleted'),
  );
  t.equal(h.sent.statuses.at(-1)?.state, 'failed');
  t.equal(h.sent.statuses.at(-1)?.errorCode, 'CAPTURE_NAMESPACE_GONE');
  t.same(h.rt.active(), [], 'a failed capture is forgotten once its last status is sent');
});

void t.test(
  'a capture with encoded delivery: the runtime sends its chunks as they come',
  async (t) => {
    const batches: unknown[] = [];
    let onEncoded: ((c: EncodedEvents) => void) | undefined;
    let startCalls = 0;
    const rt = new AgentRuntime('n1', {
      send: (kind: string, body: never) => {
        if (kind === 'events') batches.push(body);
      },
      resolveTarget: () =>
        Promise.resolve({ path: '/run/netns/vpn', dev: 1, inode: 2, via: 'ip' } as never),
      namespaceAddresses: () => Promise.resolve({ addresses: [] }),
      makeCapture: () => ({
        start: () => {
          startCalls++;
          return Promise.resolve();
        },
        startEncoded: (enc) => {
          onEncoded = enc;
          return Promise.resolve();
        },
        stop: () => Promise.resolve(),
        stats: () => ({
          packets: 0,
          decodeErrors: 0,
          kernelDrops: 0,
          ifaceDrops: 0,
          queueDrops: 0,
        }),
      }),
      nowMs: () => 1000,
    });
    rt.handle({ kind: 'capture', capture: cmd() });
    await settle();
    t.equal(startCalls, 0, 'start() is not used when startEncoded() exists');
    const chunk = { bytes: Uint8Array.from([0x1a, 0x00]), count: 1 };
    onEncoded?.(chunk);
    t.same(batches, [{ captureId: 'c1', point: 'decap', events: [], encoded: chunk }]);
  },
);

void t.test('the status tick: news at once, running counts every 5 s, nothing idle', async (t) => {
  let packets = 3;
  let drops: number | null = 0;
  let now = 1000;
  const h = harness({ packets: () => packets, kernelDrops: () => drops, nowMs: () => now });
  const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 1100));
  h.rt.handle({ kind: 'capture', capture: cmd() });
  await settle();
  t.same(
    h.sent.statuses.map((s) => s.state),
    ['arming', 'capturing'],
  );
  await tick();
  t.equal(h.sent.statuses.length, 2, 'idle: no status');
  packets = 10;
  now += 1000;
  await tick();
  t.equal(h.sent.statuses.length, 2, 'new packets alone, 1 s after the last status: not yet');
  now += COUNTS_INTERVAL_MS;
  await tick();
  t.equal(h.sent.statuses.length, 3, `and ${COUNTS_INTERVAL_MS} ms after it: sent`);
  t.equal(h.sent.statuses.at(-1)?.packets, 10);
  drops = 7;
  now += 1000;
  await tick();
  t.equal(h.sent.statuses.length, 4, 'drops: sent at the next tick');
  t.equal(h.sent.statuses.at(-1)?.kernelDrops, 7);
  packets = 11;
  h.rt.handle({ kind: 'stop', stop: { captureId: 'c1', point: '' } });
  await settle();
  t.equal(h.sent.statuses.at(-1)?.state, 'stopped', 'the end is always sent');
  t.equal(h.sent.statuses.at(-1)?.packets, 11, 'with the final counts');
});

/**
 * A runtime whose captures are each their own fake (stop ends that one): what several captures at
 * once need. `startFails` makes every start reject; `resolve` replaces the target lookup.
 */
function fleet(
  opts: {
    startFails?: boolean;
    now?: () => number;
    resolve?: () => Promise<never>;
    runtime?: RuntimeOptions;
  } = {},
) {
  const out = {
    statuses: [] as CaptureStatus[],
    errors: [] as { code: string; captureId: string }[],
  };
  let made = 0;
  let stops = 0;
  const deps: AgentDeps = {
    send: (kind: string, body: never) => {
      if (kind === 'status') out.statuses.push(body);
      else if (kind === 'error') out.errors.push(body);
    },
    resolveTarget: () =>
      opts.resolve?.() ??
      Promise.resolve({ path: '/run/netns/vpn', dev: 1, inode: 2, via: 'ip' } as never),
    namespaceAddresses: () => Promise.resolve({ addresses: [] }),
    makeCapture: () => {
      made++;
      let end: ((e: HoptraceError | null) => void) | undefined;
      return {
        start: (_ev, onEnd) => {
          end = onEnd;
          return opts.startFails === true
            ? Promise.reject(new HoptraceError('CAPTURE_OPEN_FAILED', 'x'))
            : Promise.resolve();
        },
        stop: () => {
          stops++;
          end?.(null);
          return Promise.resolve();
        },
        stats: () => ({
          packets: 0,
          decodeErrors: 0,
          kernelDrops: null,
          ifaceDrops: null,
          queueDrops: 0,
        }),
      };
    },
    nowMs: opts.now ?? (() => 1000),
  };
  const rt = new AgentRuntime('n1', deps, undefined, opts.runtime);
  return { rt, out, made: () => made, stops: () => stops };
}

const capture = (captureId: string, over: Partial<CaptureCommand> = {}) =>
  ({ kind: 'capture', capture: cmd({ captureId, ...over }) }) as const;

void t.test(
  'finished captures are forgotten; a short history answers a resent command (rt.js)',
  async (t) => {
    // The reviewer's 200,000 failed captures stayed in `running` (+246 MiB of heap); 2,000 here.
    const f = fleet({ startFails: true });
    for (let i = 0; i < 2000; i++) {
      f.rt.handle(capture(`c${i}`));
      await settle(); // one after the other: at most 4 would be taken at once
    }
    t.equal(f.made(), 2000);
    t.same(f.rt.active(), [], 'none held once its failure was reported');
    const last = f.out.statuses.length;
    f.rt.handle(capture('c1999'));
    await settle();
    t.equal(f.made(), 2000, 'a resent command of a recent capture starts nothing');
    t.match(f.out.statuses.slice(last), [
      { captureId: 'c1999', state: 'failed', errorCode: 'CAPTURE_OPEN_FAILED' },
    ]);
    f.rt.handle(capture('c0'));
    await settle();
    t.equal(f.made(), 2001, `beyond the last ${FINISHED_KEPT}, a command is a new capture`);
  },
);

void t.test(
  `at most ${DEFAULT_MAX_CAPTURES} captures live; the next is refused AGENT_BUSY, nothing started`,
  async (t) => {
    const f = fleet();
    for (let i = 0; i <= DEFAULT_MAX_CAPTURES; i++) f.rt.handle(capture(`c${i}`));
    await settle();
    t.equal(f.made(), DEFAULT_MAX_CAPTURES, 'no worker for the one too many');
    t.equal(f.rt.active().length, DEFAULT_MAX_CAPTURES);
    const busy = `c${DEFAULT_MAX_CAPTURES}`;
    t.same(
      f.out.errors.map((e) => [e.captureId, e.code]),
      [[busy, 'AGENT_BUSY']],
    );
    t.match(
      f.out.statuses.filter((s) => s.captureId === busy),
      [{ state: 'failed', errorCode: 'AGENT_BUSY', message: /already runs 4 captures/ }],
    );
    // Once one ended there is room again.
    f.rt.handle({ kind: 'stop', stop: { captureId: 'c0', point: '' } });
    await settle();
    f.rt.handle(capture('c-next'));
    await settle();
    t.equal(f.made(), DEFAULT_MAX_CAPTURES + 1);
    t.equal(f.rt.active().at(-1)?.state, 'capturing');
    const two = fleet({ runtime: { maxCaptures: 1 } });
    two.rt.handle(capture('a'));
    two.rt.handle(capture('b'));
    await settle();
    t.equal(two.made(), 1, '--max-captures 1');
  },
);

void t.test('a capture stopped while its target resolves starts nothing', async (t) => {
  let resolve: (v: never) => void = () => undefined;
  const f = fleet({ resolve: () => new Promise<never>((r) => (resolve = r)) });
  f.rt.handle(capture('c1'));
  await settle();
  f.rt.handle({ kind: 'stop', stop: { captureId: 'c1', point: '' } });
  await settle();
  resolve({ path: '/run/netns/vpn', dev: 1, inode: 2, via: 'ip' } as never);
  await settle();
  await settle();
  t.equal(f.made(), 0, 'no capture worker left running with nobody to stop it');
  t.same(f.rt.active(), []);
});

void t.test(
  'deadlines: absurd ones and ones already past are refused and said (dl.js)',
  async (t) => {
    const now = 1_764_000_000_000;
    const f = fleet({ now: () => now });
    f.rt.handle(capture('thirty-days', { deadlineUnixMs: now + 30 * 86_400_000 }));
    f.rt.handle(capture('huge', { deadlineUnixMs: 9e15 }));
    f.rt.handle(capture('past', { deadlineUnixMs: now - 95_000 }));
    await settle();
    t.equal(f.made(), 0, 'nothing started');
    t.equal(f.stops(), 0);
    t.same(
      f.out.errors.map((e) => [e.captureId, e.code]),
      [
        ['thirty-days', 'CAPTURE_BAD_DEADLINE'],
        ['huge', 'CAPTURE_BAD_DEADLINE'],
        ['past', 'CAPTURE_BAD_DEADLINE'],
      ],
    );
    const msg = (id: string): string =>
      f.out.statuses.find((s) => s.captureId === id && s.state === 'failed')?.message ?? '';
    t.match(msg('thirty-days'), /30\.0 days after this agent's clock.*beyond the 7 days/);
    t.match(msg('huge'), /9000000000000000 ms after 1970/);
    t.match(msg('past'), /95\.0 s before this agent's clock.*clock is ahead of the collector's/);
  },
);

void t.test('a deadline is followed in steps, by the clock, not by one long timer', async (t) => {
  let now = 1_764_000_000_000;
  const f = fleet({ now: () => now, runtime: { deadlineStepMs: 5 } });
  f.rt.handle(capture('two-hours', { deadlineUnixMs: now + 2 * 3_600_000 }));
  await settle();
  await new Promise((r) => setTimeout(r, 40));
  t.equal(f.stops(), 0, 'running while the deadline is ahead');
  t.equal(f.rt.active()[0]?.state, 'capturing');
  now += 2 * 3_600_000; // the clock reaches the deadline (or NTP stepped it there)
  await new Promise((r) => setTimeout(r, 40));
  t.equal(f.stops(), 1, 'stopped within a step of the deadline');
  t.equal(f.out.statuses.at(-1)?.state, 'stopped');
});

// One contract, every capture source (hono style): file replay, live native and cap on loopback,
// and the namespace worker (native by default, cap forced). Live parts need root and fail with the reason otherwise (never skip). Live
// traffic stays on loopback or inside namespaces this test creates.
import { createSocket } from 'node:dgram';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { CapSource } from '../../agent/capture/cap-source';
import { FileSource } from '../../agent/capture/file-source';
import { PcapParserSource } from '../../agent/capture/pcap-parser-source';
import { loadNativeAddon } from '../../native/loader';
import { NativeSource } from '../../agent/capture/native-source';
import { NsCapture } from '../../agent/capture/ns-capture';
import type { CaptureSource, CaptureSpec } from '../../agent/capture/source';
import {
  encodeControlFrame,
  encodeEventFrame,
  EventBatchEncoder,
  WorkerFrameParser,
  type WorkerFrame,
} from '../../agent/capture/worker-frames';
import { replayCaptureFile } from '../../offline/replay';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import { isHoptraceError, type ErrorCode, type HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import { Netns } from '../../lab/netns';
import { A_IP, buildPair, sendUdp } from '../lab/fixtures/capture-pair';
import { PCAPS } from './corpus';

const pcaps = PCAPS;
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

type Kind = 'good' | 'bad-iface' | 'bad-filter';

interface Expect {
  /** Live sources: traffic is sent after start() and timestamps fall in the run's window. */
  live: boolean;
  /** Events the good run delivers. */
  count: number;
  label: { point: string; node: string; iface: string };
  badIfaceCode: ErrorCode;
  badFilterCode: ErrorCode;
  /** File sources: the file's own timestamps, in order. */
  fileTs?: bigint[];
  /** 'number': exact kernel drop counts (libpcap's ps_drop); 'null': the source cannot know. */
  kernelDrops: 'null' | 'number';
  /** Live timestamps come from the kernel in ns (not taken in JS at delivery). */
  kernelTs?: boolean;
}

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

function hasBytes(v: unknown): boolean {
  if (v instanceof Uint8Array || ArrayBuffer.isView(v)) return true;
  if (v !== null && typeof v === 'object') return Object.values(v).some(hasBytes);
  return false;
}

async function rejection(p: Promise<void>): Promise<unknown> {
  return p.then(
    () => null,
    (e: unknown) => e,
  );
}

/** The shared suite. `makeTraffic` sends the good run's packets (live sources only). */
export function captureContract(
  name: string,
  makeSource: (kind: Kind) => CaptureSource,
  makeTraffic: () => Promise<void>,
  expect: Expect,
): void {
  void t.test(`${name}: a bad interface rejects start() with ${expect.badIfaceCode}`, async (t) => {
    const src = makeSource('bad-iface');
    const err = await rejection(
      src.start(
        () => undefined,
        () => undefined,
      ),
    );
    t.ok(isHoptraceError(err), String(err));
    t.equal((err as HoptraceError).code, expect.badIfaceCode, String(err));
    await src.stop();
  });

  void t.test(`${name}: a bad filter rejects start() with ${expect.badFilterCode}`, async (t) => {
    const src = makeSource('bad-filter');
    const err = await rejection(
      src.start(
        () => undefined,
        () => undefined,
      ),
    );
    t.ok(isHoptraceError(err), String(err));
    t.equal((err as HoptraceError).code, expect.badFilterCode, String(err));
    await src.stop();
  });

  void t.test(`${name}: delivers labelled, ordered events until stop()`, async (t) => {
    const src = makeSource('good');
    const events: PacketEvent[] = [];
    const delivered = new Map<number, bigint>();
    const ends: (HoptraceError | null)[] = [];
    let wake: () => void = () => undefined;
    const enough = new Promise<void>((r) => (wake = r));
    const t0 = nowNs();
    await src.start(
      (batch) => {
        t.ok(batch.length > 0 && batch.length <= 256, 'batches of 1..256');
        const at = nowNs() + 1_000_000n;
        for (const e of batch) delivered.set(e.frame, at);
        events.push(...batch);
        if (expect.live && events.length >= expect.count) wake();
      },
      (err) => {
        ends.push(err);
        wake();
      },
    );
    // start() resolved: the capture is open, so every packet sent from now on is seen.
    if (expect.live) await makeTraffic();
    const timer = setTimeout(wake, 10_000);
    await enough;
    clearTimeout(timer);
    if (expect.live) await src.stop();
    const t1 = nowNs();

    t.equal(events.length, expect.count, 'every packet, nothing else');
    t.equal(src.stats().packets, events.length, 'stats().packets = delivered');
    if (expect.kernelDrops === 'null') {
      t.equal(src.stats().kernelDrops, null, 'kernel drops unknown, never a made-up 0');
    } else {
      t.equal(typeof src.stats().kernelDrops, 'number', 'kernel drops counted (a number)');
    }
    for (const [i, e] of events.entries()) {
      t.match(e, expect.label);
      if (i > 0) t.ok(e.frame > (events[i - 1]?.frame ?? 0), 'frame numbers increase');
      if (hasBytes(e)) t.fail(`event ${e.frame} holds bytes`);
    }
    if (expect.live) {
      t.ok(
        events.every((e) => e.tsNs >= t0 - 1_000_000n && e.tsNs <= t1 + 1_000_000n),
        'timestamps within the run',
      );
    }
    if (expect.kernelTs === true) {
      // Kernel timestamps in ns (pcap_set_tstamp_precision nano: sub-microsecond digits), each
      // before the delivery of its packet (batching delays delivery, not the stamp).
      t.ok(
        events.some((e) => e.tsNs % 1000n !== 0n),
        'nanosecond timestamps from the kernel',
      );
      t.ok(
        events.every((e) => e.tsNs <= (delivered.get(e.frame) ?? 0n)),
        'stamped before delivery',
      );
    }
    if (!expect.live) {
      t.same(
        events.map((e) => e.tsNs),
        expect.fileTs,
        "the file's timestamps",
      );
    }

    // After stop: nothing more, onEnd once with null, stop() again is harmless.
    const before = events.length;
    if (expect.live) {
      await makeTraffic();
      await new Promise((r) => setTimeout(r, 200));
    }
    await src.stop();
    await src.stop();
    t.equal(events.length, before, 'no events after stop()');
    t.same(ends, [null], 'onEnd called once, without error');
  });
}

// --- File replay: our reader (the default) and pcap-parser (the fallback) ----------------------
{
  const file = join(pcaps, 'zeek_http-get.pcap');
  const label = { point: 'decap', node: 'n1', iface: 'file' };
  const fileTs = [...replayCaptureFile(file, label)].map((e) => e.tsNs);
  const fileSources: [string, (path: string, spec: CaptureSpec) => CaptureSource][] = [
    ['FileSource', (path, spec) => new FileSource(path, spec, { maxBatch: 5 })],
    ['PcapParserSource', (path, spec) => new PcapParserSource(path, spec, { maxBatch: 5 })],
  ];
  for (const [name, make] of fileSources)
    captureContract(
      name,
      (kind) =>
        kind === 'bad-iface'
          ? make(join(pcaps, 'no-such-file.pcap'), label)
          : make(file, kind === 'bad-filter' ? { ...label, filter: 'tcp' } : label),
      () => Promise.resolve(),
      {
        live: false,
        count: fileTs.length,
        label,
        badIfaceCode: 'FILE_NOT_FOUND',
        badFilterCode: 'CAPTURE_FILTER_UNSUPPORTED',
        fileTs,
        kernelDrops: 'null',
      },
    );

  void t.test(
    'PcapParserSource: the same events as the default reader; pcapng refused',
    async (t) => {
      const viaParser: PacketEvent[] = [];
      const src = new PcapParserSource(file, label);
      const done = new Promise<void>((resolve) => {
        void src.start(
          (b) => viaParser.push(...b),
          () => {
            resolve();
          },
        );
      });
      await done;
      t.same(viaParser, [...replayCaptureFile(file, label)], 'identical PacketEvents');
      const ng = new PcapParserSource(join(pcaps, 'zeek_snap-arp.pcapng'), label);
      const err = await rejection(
        ng.start(
          () => undefined,
          () => undefined,
        ),
      );
      t.equal((err as HoptraceError).code, 'FILE_BAD_MAGIC', 'pcapng is beyond pcap-parser');
    },
  );
}

// --- Live sources -----------------------------------------------------------------------------
if (!isRoot) {
  t.fail('live capture sources need root (run the suite as root, as CI does)');
} else {
  // CapSource and NativeSource in this process: loopback only, a random UDP port, exact filter.
  const port = 20000 + Math.floor(Math.random() * 20000);
  const label = { point: 'egress', node: 'n1', iface: 'lo' };
  const spec: CaptureSpec = { ...label, filter: `udp and dst port ${port}` };
  const specFor = (kind: Kind): CaptureSpec =>
    kind === 'bad-iface'
      ? { ...spec, iface: 'htnope0' }
      : kind === 'bad-filter'
        ? { ...spec, filter: 'udp and and' }
        : spec;
  const loTraffic = async (): Promise<void> => {
    const s = createSocket('udp4');
    for (let i = 0; i < 10; i++) {
      await new Promise<void>((r) => {
        s.send(`hoptrace-test-${i}`, port, '127.0.0.1', () => {
          r();
        });
      });
    }
    s.close();
  };
  const liveExpect = {
    live: true,
    count: 10,
    label,
    badIfaceCode: 'CAPTURE_NO_INTERFACE',
    badFilterCode: 'CAPTURE_BAD_FILTER',
  } as const;
  captureContract(
    'CapSource (lo)',
    (kind) => new CapSource(specFor(kind), { batch: { maxDelayMs: 10 } }),
    loTraffic,
    { ...liveExpect, kernelDrops: 'null' },
  );

  // The addon is built by npm test (scripts/setup.sh); not having it is a failure, not a skip.
  const native = loadNativeAddon();
  if (!native.ok) {
    t.fail(`the native capture addon is unavailable: ${native.reason}`);
  } else {
    captureContract(
      'NativeSource (lo)',
      (kind) => new NativeSource(specFor(kind), { batch: { maxDelayMs: 10 } }),
      loTraffic,
      { ...liveExpect, kernelDrops: 'number', kernelTs: true },
    );
  }

  // NsCapture: the worker in a namespace of this test, traffic between two namespaces.
  const lab = new Netns();
  const ready = buildPair(lab);
  const nsLabel = { point: 'backend', node: 'n2', iface: 'v0' };
  const nsSpec: CaptureSpec = { ...nsLabel, filter: 'udp and dst port 9999' };
  let source: (kind: Kind, spec?: CaptureSpec, ring?: boolean) => NsCapture = () => {
    throw new Error('lab not built');
  };
  t.before(async () => {
    await ready;
    const netnsPath = `/run/netns/${lab.full('a')}`;
    source = (kind, base = nsSpec, ring = true) =>
      new NsCapture(
        kind === 'bad-iface'
          ? { ...base, iface: 'nope0' }
          : kind === 'bad-filter'
            ? { ...base, filter: 'udp and and' }
            : base,
        { netnsPath, batch: { maxDelayMs: 10 }, ring },
      );
  });
  t.teardown(() => lab.destroy());
  const traffic = (): Promise<void> => sendUdp(lab, 'b', A_IP, 9999, 10);
  const nsExpect: Expect = {
    live: true,
    count: 10,
    label: nsLabel,
    badIfaceCode: 'CAPTURE_NO_INTERFACE',
    badFilterCode: 'CAPTURE_BAD_FILTER',
    // The worker runs the native source when the addon is built (else it falls back to cap).
    kernelDrops: native.ok ? 'number' : 'null',
    kernelTs: native.ok,
  };
  const capExpect: Expect = { ...nsExpect, kernelDrops: 'null', kernelTs: false };
  captureContract('NsCapture (worker in a namespace)', (kind) => source(kind), traffic, nsExpect);
  // The runtime's path: startEncoded, the chunks wrapped in an Envelope and decoded as the
  // collector decodes them, must keep the same contract.
  const viaWire = (cap: NsCapture): CaptureSource => ({
    start: (onEvents, onEnd) =>
      cap.startEncoded((encoded) => {
        const env = decodeEnvelope(
          encodeEnvelope({
            seq: 1,
            kind: 'events',
            events: { captureId: 'c', point: 'backend', events: [], encoded },
          }),
        );
        if (env.kind !== 'events') throw new Error(`decoded a ${env.kind} envelope`);
        t.equal(env.events.events.length, encoded.count, 'chunk count = events decoded');
        onEvents(env.events.events);
      }, onEnd),
    stop: () => cap.stop(),
    stats: () => cap.stats(),
  });
  captureContract(
    'NsCapture encoded (worker in a namespace, startEncoded → Envelope → collector decode)',
    (kind) => viaWire(source(kind)),
    traffic,
    nsExpect,
  );
  captureContract(
    'NsCapture encoded, no frame ring (batches through the worker stdout)',
    (kind) => viaWire(source(kind, nsSpec, false)),
    traffic,
    nsExpect,
  );
  /** Frame rings mapped into this process now (/proc/self/maps). */
  const mapped = (): number =>
    readFileSync('/proc/self/maps', 'utf8')
      .split('\n')
      .filter((l) => l.includes('hoptrace-frame-ring')).length;
  // Which way the batches went: through the shared ring by default, else the worker's stdout.
  for (const ring of [true, false]) {
    void t.test(
      `NsCapture with ring: ${String(ring)}: batches through the ${ring ? 'ring' : 'stdout'}`,
      async (t) => {
        const before = mapped();
        const cap = source('good', nsSpec, ring);
        const got: PacketEvent[] = [];
        await cap.start(
          (evs) => got.push(...evs),
          () => undefined,
        );
        await traffic();
        for (let i = 0; i < 100 && got.length < 10; i++)
          await new Promise((r) => setTimeout(r, 50));
        await cap.stop();
        t.equal(got.length, 10, 'every event delivered');
        if (ring) t.ok(cap.ringFrames > 0, `frames came through the ring (${cap.ringFrames})`);
        else t.equal(cap.ringFrames, 0, 'no frame came through a ring');
        t.same(cap.warnings, [], 'no warning (no fallback)');
        t.equal(mapped(), before, 'no ring left mapped once the worker is gone (not left to GC)');
      },
    );
  }
  void t.test(
    'a worker that cannot be spawned: start() rejects, does not throw, leaves no ring mapped',
    async (t) => {
      const before = mapped();
      // A NUL byte in an argument makes spawn() throw before any process exists.
      const cap = new NsCapture(nsSpec, { workerPath: 'no\u0000such-worker.js' });
      let started: Promise<void> | undefined;
      t.doesNotThrow(() => {
        started = cap.start(
          () => undefined,
          () => undefined,
        );
      }, 'start() returns a promise');
      await t.rejects(started ?? Promise.resolve(), {
        code: 'CAPTURE_WORKER_FAILED',
        message: /cannot start the capture worker/,
      });
      t.equal(mapped(), before, 'the ring is unmapped at once');
    },
  );
  void t.test(
    'the worker runs without the memory reducer and without NODE_EXTRA_CA_CERTS',
    async (t) => {
      const saved = process.env['NODE_EXTRA_CA_CERTS'];
      // A file Node would read and parse at every start (any PEM bundle; none is needed here).
      process.env['NODE_EXTRA_CA_CERTS'] = '/etc/ssl/certs/ca-certificates.crt';
      const cap = source('good');
      try {
        await cap.start(
          () => undefined,
          () => undefined,
        );
      } finally {
        if (saved === undefined) delete process.env['NODE_EXTRA_CA_CERTS'];
        else process.env['NODE_EXTRA_CA_CERTS'] = saved;
      }
      // nsenter execs node: the worker is this process's child, its command line node's.
      const child = readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .find((d) => {
          try {
            const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
            const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
            return ppid === process.pid && readFileSync(`/proc/${d}/cmdline`).includes('worker.js');
          } catch {
            return false;
          }
        });
      t.ok(child, 'the worker process');
      const argv = readFileSync(`/proc/${child ?? 0}/cmdline`, 'utf8').split('\u0000');
      t.ok(argv.includes('--no-memory-reducer'), argv.slice(0, 3).join(' '));
      const env = readFileSync(`/proc/${child ?? 0}/environ`, 'utf8').split('\u0000');
      t.notOk(
        env.some((e) => e.startsWith('NODE_EXTRA_CA_CERTS=')),
        'NODE_EXTRA_CA_CERTS not passed on',
      );
      t.ok(
        env.some((e) => e.startsWith('PATH=')),
        'the rest of the environment is',
      );
      await cap.stop();
    },
  );
  captureContract(
    'NsCapture encoded (cap forced)',
    (kind) => viaWire(source(kind, { ...nsSpec, source: 'cap' })),
    traffic,
    capExpect,
  );
  captureContract(
    'NsCapture (worker in a namespace, cap forced)',
    (kind) => source(kind, { ...nsSpec, source: 'cap' }),
    traffic,
    capExpect,
  );
}

// --- Worker framing ---------------------------------------------------------------------------
void t.test('worker frames parse incrementally, split anywhere', (t) => {
  const [ev] = [...replayCaptureFile(join(pcaps, 'zeek_http-get.pcap'), { point: 'p', node: 'n' })];
  if (ev === undefined) throw new Error('no frame');
  // length u32 | type u8 | body: one event, one JSON control message, one more event.
  const bytes = Buffer.concat([
    encodeEventFrame(ev),
    encodeControlFrame({ kind: 'ready', linktype: 'ETHERNET', pid: 1 }),
    encodeEventFrame({ ...ev, frame: 2 }),
  ]);
  for (const step of [1, 2, 3, 7, 64, bytes.length]) {
    const p = new WorkerFrameParser();
    const got: WorkerFrame[] = [];
    for (let i = 0; i < bytes.length; i += step) {
      got.push(...p.push(Buffer.from(bytes.subarray(i, i + step).toString('hex'), 'hex')));
    }
    t.equal(got.length, 3, `split every ${step} bytes`);
    t.same(got[0], { type: 'event', event: ev });
    t.same(got[1], { type: 'control', msg: { kind: 'ready', linktype: 'ETHERNET', pid: 1 } });
    t.match(got[2], { type: 'event', event: { frame: 2 } });
    t.equal(p.buffered, 0);
  }
  const p = new WorkerFrameParser();
  t.throws(() => p.push(Buffer.from('ffffffff01', 'hex')), /bad frame length/);
  t.throws(
    () => new WorkerFrameParser().push(Buffer.from('0000000109', 'hex')),
    /unknown frame type/,
  );
  t.end();
});

void t.test('event batch frames: every event of every sample pcap round-trips exactly', (t) => {
  const events: PacketEvent[] = [];
  for (const f of readdirSync(pcaps).filter((n) => /\.pcap(ng)?$/.test(n))) {
    try {
      for (const ev of replayCaptureFile(join(pcaps, f), { point: 'p', node: 'n' }))
        events.push(ev);
    } catch {
      // malformed samples end early: their events so far still count
    }
  }
  t.ok(events.length > 300, `${events.length} events from the sample pcaps`);
  const withShapes = {
    tunnels: events.some((e) => e.tunnels.length > 0),
    outer: events.some((e) => e.outer !== null),
    related: events.some((e) => e.related !== undefined),
    error: events.some((e) => e.error !== undefined),
  };
  t.comment(JSON.stringify(withShapes));
  const odd: PacketEvent = {
    ...(events[0] as PacketEvent),
    frame: 2 ** 40,
    tsNs: 2n ** 64n - 1n,
    keys: { payloadLength: 7, probeMarker: 'ü-42', tcpSeq: 2 ** 32 - 1, tsEcr: 0 },
    tunnels: [{ kind: 'wireguard', id: 7, messageType: 4 }, { kind: 'geneve' }],
    error: 'DECODE_TRUNCATED',
    truncated: true,
  };
  events.push(odd);
  // The ICMP keys, alone and beside the probe marker (their mask bits follow its bit).
  events.push({
    ...odd,
    keys: { payloadLength: 56, icmpType: 8, icmpCode: 0, icmpId: 65535, icmpSeq: 0 },
  });
  events.push({
    ...odd,
    keys: { payloadLength: 0, probeMarker: 'm', icmpType: 255, icmpCode: 255, ipId: 1 },
  });
  const enc = new EventBatchEncoder();
  // Several batches (the encoder splits large ones), a control frame between them.
  const frames = [
    ...enc.encode(events.slice(0, 100)),
    encodeControlFrame({ kind: 'end' }),
    ...enc.encode(events.slice(100)),
    ...enc.encode([]),
  ];
  const bytes = Buffer.concat(frames);
  for (const step of [1, 13, 4096, 65536, bytes.length]) {
    const p = new WorkerFrameParser();
    const got: WorkerFrame[] = [];
    for (let i = 0; i < bytes.length; i += step) got.push(...p.push(bytes.subarray(i, i + step)));
    const evs = got.flatMap((f) => (f.type === 'events' ? f.events : []));
    t.equal(evs.length, events.length, `split every ${step} bytes: every event`);
    t.strictSame(evs, events, 'identical events');
    t.same(
      got.filter((f) => f.type === 'control'),
      [{ type: 'control', msg: { kind: 'end' } }],
    );
    t.equal(p.buffered, 0);
  }
  t.end();
});

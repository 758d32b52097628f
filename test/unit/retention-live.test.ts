/**
 * Retention by the live sources (root; fails with the reason otherwise, never skips): the native
 * source writes through the addon (pcap-batch/src/retain.c), the cap source through the
 * TypeScript writer, and the namespace worker through the fd the agent passes it. Each file is
 * what the offline reader reads, record N = the event's frame N, cut to the retention snaplen,
 * with the kernel's timestamps; headers only (cut where the payload starts) unless the target
 * asks for the payload; the bound stops retention for good and is counted.
 */
import { createSocket } from 'node:dgram';
import { createServer, connect } from 'node:net';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type tap from 'tap';
import { CapSource } from '../../agent/capture/cap-source';
import { NativeSource } from '../../agent/capture/native-source';
import { NsCapture } from '../../agent/capture/ns-capture';
import type { RetentionTarget } from '../../agent/capture/retention';
import type { CaptureSource } from '../../agent/capture/source';
import type { PacketEvent } from '../../common/event';
import { Netns } from '../../lab/netns';
import { loadNativeAddon } from '../../native/loader';
import { payloadOffset } from '../../core/decode/frame';
import { openCaptureFile } from '../../offline/pcap-file';
import { A_IP, buildPair, sendUdp } from '../lab/fixtures/capture-pair';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** A retention file for one test (a path: the test reads it back by name). */
function retentionFile(
  t: { teardown(fn: () => void): void },
  snaplen: number,
  maxBytes = 1 << 20,
  payload = false,
): { path: string; target: RetentionTarget } {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-retention-live-'));
  const path = join(dir, 'r.pcap');
  const fd = openSync(path, 'w+');
  t.teardown(() => {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  });
  return { path, target: { fd, snaplen, maxBytes, ...(payload ? { payload } : {}) } };
}

/** Runs `src` while `traffic` sends 10 datagrams; the events once it stopped. */
async function run(
  src: CaptureSource,
  traffic: () => Promise<void>,
  n = 10,
): Promise<PacketEvent[]> {
  const events: PacketEvent[] = [];
  let wake = (): void => undefined;
  const enough = new Promise<void>((r) => (wake = r));
  await src.start(
    (evs) => {
      events.push(...evs);
      if (events.length >= n) wake();
    },
    () => undefined,
  );
  await traffic();
  const timer = setTimeout(wake, 10_000);
  await enough;
  clearTimeout(timer);
  await src.stop();
  return events;
}

function records(
  path: string,
): { index: number; linktype: number; tsNs: bigint; wireLength: number; data: Buffer }[] {
  return [...openCaptureFile(path).frames()].map((f) => ({
    index: f.index,
    linktype: f.linktype,
    tsNs: f.tsNs,
    wireLength: f.wireLength,
    data: Buffer.from(f.data),
  }));
}

if (!isRoot) {
  t.fail('live retention needs root (run the suite as root, as CI does)');
} else {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const spec = { point: 'egress', node: 'n1', iface: 'lo', filter: `udp and dst port ${port}` };
  const lo = async (): Promise<void> => {
    const s = createSocket('udp4');
    for (let i = 0; i < 10; i++)
      await new Promise<void>((r) => {
        s.send(`hoptrace-test-${i}`, port, '127.0.0.1', () => {
          r();
        });
      });
    s.close();
  };
  /** The file holds the events' frames, each record its frame, cut to `snaplen` (headers only:
   * at the payload, so no payload byte; with `payload` the payload where it fits). */
  const check = (
    t: Pick<typeof tap, 'same' | 'equal' | 'ok'>,
    path: string,
    events: PacketEvent[],
    snaplen: number,
    kernelTs: boolean,
    payload = false,
  ): void => {
    const got = records(path);
    t.same(
      got.map((r) => r.index),
      events.map((e) => e.frame),
      'record N = frame N',
    );
    for (const [i, r] of got.entries()) {
      const e = events[i];
      t.equal(r.wireLength, e?.wireLength, 'the wire length');
      if (kernelTs) t.equal(r.tsNs, e?.tsNs, 'the kernel timestamp, to the nanosecond');
      t.ok(r.data.length <= snaplen, 'cut to the retention snaplen');
      if (!payload) t.equal(r.data.length, payloadOffset(r.linktype, r.data), 'cut at the payload');
    }
    t.equal(
      got.some((r) => r.data.includes(Buffer.from('hoptrace-test-'))),
      payload,
      payload ? 'the real bytes, payload included where it fits' : 'no payload byte kept',
    );
  };

  const native = loadNativeAddon();
  if (!native.ok) t.fail(`the native capture addon is unavailable: ${native.reason}`);
  else {
    void t.test('NativeSource retains in C: every frame, record N = frame N', async (t) => {
      const { path, target } = retentionFile(t, 64);
      const src = new NativeSource(spec, { batch: { maxDelayMs: 10 }, retain: target });
      const events = await run(src, lo);
      check(t, path, events, 64, true);
      t.match(src.stats().retention, { state: 'on', retained: 10, dropped: 0, snaplen: 64 });
    });

    void t.test('NativeSource with payload: the whole frame where it fits', async (t) => {
      const { path, target } = retentionFile(t, 256, 1 << 20, true);
      const src = new NativeSource(spec, { batch: { maxDelayMs: 10 }, retain: target });
      const events = await run(src, lo);
      check(t, path, events, 256, true, true);
    });

    // A TCP request with headers a node must not keep unasked: cut after the TCP header (batch
    // mode, the addon's retainPorts) or kept whole with the payload.
    for (const payload of [false, true])
      void t.test(
        `NativeSource, a TCP request: ${payload ? 'whole with payload' : 'cut at the payload by default'}`,
        async (t) => {
          const { path, target } = retentionFile(t, 256, 1 << 20, payload);
          const server = createServer((s) => {
            s.on('data', () => s.end());
          });
          await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
          t.teardown(() => server.close());
          const addr = server.address();
          const tport = typeof addr === 'object' && addr !== null ? addr.port : 0;
          const src = new NativeSource(
            { ...spec, filter: `tcp and port ${tport}` },
            { batch: { maxDelayMs: 10 }, retain: target },
          );
          const REQ = 'GET /account HTTP/1.1\r\nHost: web\r\nAuthorization: Bearer s3cr3t\r\n\r\n';
          const events = await run(
            src,
            async () => {
              const c = connect(tport, '127.0.0.1');
              await new Promise<void>((r) => c.on('connect', r));
              c.write(REQ);
              await new Promise<void>((r) => c.on('close', r));
            },
            6,
          );
          const got = records(path);
          t.ok(got.length >= events.length && got.length >= 6, 'the connection retained');
          const req = got.find(
            (r) => r.wireLength > 100 && r.wireLength === 14 + 20 + 32 + REQ.length,
          );
          if (req === undefined) throw new Error('the request frame was not retained');
          if (payload) t.equal(req.data.length, req.wireLength, 'the whole frame');
          else {
            t.equal(req.data.length, 14 + 20 + 32, 'cut after the TCP header with its timestamps');
            t.notOk(req.data.includes(Buffer.from('Authorization')), 'no request header kept');
          }
          t.equal(
            got.every(
              (r) => r.data.length === (payloadOffset(r.linktype, r.data) ?? r.data.length),
            ),
            !payload,
            payload ? 'not cut' : 'every frame cut at its payload',
          );
        },
      );

    void t.test('NativeSource: the bound stops retention for good, counted', async (t) => {
      // 42 bytes of headers (the payload "hoptrace-test-N" is not kept) on lo: room for three.
      const { path, target } = retentionFile(t, 256, 24 + 3 * (16 + 42));
      const src = new NativeSource(spec, { batch: { maxDelayMs: 10 }, retain: target });
      const events = await run(src, lo);
      t.same(
        records(path).map((r) => r.index),
        [1, 2, 3],
      );
      t.match(src.stats().retention, { state: 'full', retained: 3, dropped: events.length - 3 });
    });
  }

  void t.test('CapSource retains through the TypeScript writer', async (t) => {
    const { path, target } = retentionFile(t, 64);
    const src = new CapSource(spec, { batch: { maxDelayMs: 10 }, retain: target });
    const events = await run(src, lo);
    check(t, path, events, 64, false);
    t.match(src.stats().retention, { state: 'on', retained: 10 });
  });

  void t.test('CapSource with payload: the whole frame where it fits', async (t) => {
    const { path, target } = retentionFile(t, 256, 1 << 20, true);
    const src = new CapSource(spec, { batch: { maxDelayMs: 10 }, retain: target });
    const events = await run(src, lo);
    check(t, path, events, 256, false, true);
  });

  // The worker inside a namespace writes through the fd the agent passed it.
  const lab = new Netns();
  const ready = buildPair(lab);
  t.teardown(() => lab.destroy());
  const nsSpec = { point: 'backend', node: 'n2', iface: 'v0', filter: 'udp and dst port 9999' };
  for (const [source, payload] of [
    ['native', false],
    ['native', true],
    ['cap', false],
  ] as const) {
    void t.test(
      `NsCapture (${source}${payload ? ', payload' : ''}) retains through the worker's inherited fd`,
      async (t) => {
        await ready;
        const { path, target } = retentionFile(t, 128, 1 << 20, payload);
        const cap = new NsCapture(
          { ...nsSpec, source },
          {
            netnsPath: `/run/netns/${lab.full('a')}`,
            batch: { maxDelayMs: 10 },
            retain: target,
            onWarning: () => undefined,
          },
        );
        const events = await run(cap, () => sendUdp(lab, 'b', A_IP, 9999, 10));
        // Native: summary mode, the cut from the summarizer's own walk.
        check(t, path, events, 128, source === 'native', payload);
        t.match(cap.stats().retention, { state: 'on', retained: 10, dropped: 0 });
        t.equal(cap.finalStats, true, "the worker's last word arrived: the counters are final");
      },
    );
  }
}

/**
 * Retention by the live sources (root; fails with the reason otherwise, never skips): the native
 * source writes through the addon (pcap-batch/src/retain.c), the cap source through the
 * TypeScript writer, and the namespace worker through the fd the agent passes it. Each file is
 * what the offline reader reads, record N = the event's frame N, cut to the retention snaplen,
 * with the kernel's timestamps; the bound stops retention for good and is counted.
 */
import { createSocket } from 'node:dgram';
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
import { openCaptureFile } from '../../offline/pcap-file';
import { A_IP, buildPair, sendUdp } from '../lab/fixtures/capture-pair';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** A retention file for one test (a path: the test reads it back by name). */
function retentionFile(
  t: { teardown(fn: () => void): void },
  snaplen: number,
  maxBytes = 1 << 20,
): { path: string; target: RetentionTarget } {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-retention-live-'));
  const path = join(dir, 'r.pcap');
  const fd = openSync(path, 'w+');
  t.teardown(() => {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  });
  return { path, target: { fd, snaplen, maxBytes } };
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
): { index: number; tsNs: bigint; wireLength: number; data: Buffer }[] {
  return [...openCaptureFile(path).frames()].map((f) => ({
    index: f.index,
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
  /** The file holds the events' frames, each record its frame, cut to `snaplen`. */
  const check = (
    t: Pick<typeof tap, 'same' | 'equal' | 'ok'>,
    path: string,
    events: PacketEvent[],
    snaplen: number,
    kernelTs: boolean,
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
    }
    t.ok(
      got.some((r) => r.data.includes(Buffer.from('hoptrace-test-'))),
      'the real bytes, payload included where it fits',
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

    void t.test('NativeSource: the bound stops retention for good, counted', async (t) => {
      // 42 bytes of headers + "hoptrace-test-N" (15) = 57-byte frames on lo: room for three.
      const { path, target } = retentionFile(t, 256, 24 + 3 * (16 + 57));
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

  // The worker inside a namespace writes through the fd the agent passed it.
  const lab = new Netns();
  const ready = buildPair(lab);
  t.teardown(() => lab.destroy());
  const nsSpec = { point: 'backend', node: 'n2', iface: 'v0', filter: 'udp and dst port 9999' };
  for (const source of ['native', 'cap'] as const) {
    void t.test(`NsCapture (${source}) retains through the worker's inherited fd`, async (t) => {
      await ready;
      const { path, target } = retentionFile(t, 128);
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
      check(t, path, events, 128, source === 'native');
      t.match(cap.stats().retention, { state: 'on', retained: 10, dropped: 0 });
      t.equal(cap.finalStats, true, "the worker's last word arrived: the counters are final");
    });
  }
}

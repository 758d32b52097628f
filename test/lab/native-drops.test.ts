// Exact kernel drop counts from the native capture source: a tiny ring, a burst of UDP from the
// peer namespace while the consumer is stuck for 300 ms in its first batch. libpcap's ps_drop must
// show the loss, and what was delivered plus what was dropped must account for what was received.
// Then the whole path under load (worker in a namespace → parent → a slow consumer, stopped while
// packets still arrive): every packet received is delivered or counted, never a silent loss.
// And the capture's interface taken down and up, under load (the worker then reads the ring on its
// busy-polling timer) and idle (it waits on the socket): the capture keeps going and delivers
// everything sent after. And on `any`, loopback's outgoing copies do not show up as losses.
// Needs root and the built addon; fails with the reason otherwise (never skips). Traffic stays
// inside this test's namespaces.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import t from 'tap';
import { loadNativeAddon } from '../../native/loader';
import { NsCapture, type NsCaptureOptions } from '../../agent/capture/ns-capture';
import { Netns } from '../../lab/netns';
import { A_IP, B_IP, buildPair } from './fixtures/capture-pair';
import type { ChildArgs, ChildResult } from './fixtures/native-capture-child';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const native = loadNativeAddon();
const BURST = 30_000;

/**
 * Sends `count` datagrams of `size` bytes to dst:9 from inside `ns` as fast as dgram allows;
 * resolves with how many were sent (the rest failed, e.g. while the link was down).
 */
async function burst(
  lab: Netns,
  ns: string,
  count: number,
  timeoutMs = 60_000,
  size = 18,
  dst = A_IP,
): Promise<number> {
  const script = `
    const s = require('node:dgram').createSocket('udp4');
    let queued = 0, done = 0, ok = 0;
    const payload = Buffer.alloc(${size}, 'hoptrace-drop-test');
    const pump = () => {
      for (let k = 0; k < 256 && queued < ${count}; k++, queued++) {
        s.send(payload, 9, '${dst}', (err) => { if (!err) ok++; if (++done === ${count}) { console.log(ok); s.close(); } });
      }
      if (queued < ${count}) setImmediate(pump);
    };
    pump();`;
  const { stdout } = await lab.exec(ns, process.execPath, ['-e', script], timeoutMs);
  return Number(stdout.trim());
}

/**
 * From inside `ns`: 40 datagrams to A_IP:9, then at once (same process, no scheduling gap)
 * `ip <ipArgs>`, as when a pod is deleted mid-request. Resolves with 'deleted'.
 */
async function sendThenDelete(lab: Netns, ns: string, ipArgs: string[]): Promise<string> {
  const script = `
    const s = require('node:dgram').createSocket('udp4');
    let done = 0;
    for (let i = 0; i < 40; i++) s.send('last words', 9, '${A_IP}', () => {
      if (++done === 40) {
        require('node:child_process').execFileSync('ip', ${JSON.stringify(ipArgs)});
        console.log('deleted');
        s.close();
      }
    });`;
  const { stdout } = await lab.exec(ns, process.execPath, ['-e', script], 30_000);
  return stdout.trim();
}

/**
 * native-capture-child.js in namespace `ns` with `args`, once it says the capture is open: the
 * process and its stdout lines (JSON, one per line).
 */
async function captureChild(
  t: { same(a: unknown, b: unknown, m: string): void; teardown(fn: () => void): void },
  lab: Netns,
  ns: string,
  args: ChildArgs,
): Promise<{ child: ChildProcessByStdio<Writable, Readable, null>; next: () => Promise<unknown> }> {
  const childPath = join(__dirname, 'fixtures', 'native-capture-child.js');
  const child = spawn(
    'ip',
    ['netns', 'exec', lab.full(ns), process.execPath, childPath, JSON.stringify(args)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  t.teardown(() => {
    child.kill();
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<unknown> => JSON.parse(String((await lines.next()).value));
  t.same(await next(), { ready: true }, 'capture open');
  return { child, next };
}

/** The native source in namespace `ns` on v0, for the datagrams burst() sends. */
function udpCapture(
  lab: Netns,
  ns: string,
  bufferBytes: number | undefined,
  opts: NsCaptureOptions,
): NsCapture {
  return new NsCapture(
    {
      point: 'backend',
      node: 'n1',
      iface: 'v0',
      filter: 'udp and dst port 9',
      source: 'native',
      // Every packet an event: these tests count events against the datagrams sent (one flow);
      // per-flow counters have their own tests (test/unit/fold.test.ts, fold-live.test.ts).
      foldFirst: 0,
      ...(bufferBytes !== undefined ? { bufferBytes } : {}),
    },
    { netnsPath: `/run/netns/${lab.full(ns)}`, statsIntervalMs: 100, ...opts },
  );
}

/** A started udpCapture on a new pair (ns, peer) counting what it delivers and how it ends. */
async function countingCapture(
  lab: Netns,
  ns: string,
  peer: string,
  opts: NsCaptureOptions = {},
): Promise<{ cap: NsCapture; delivered: () => number; ends: unknown[] }> {
  await buildPair(lab, ns, peer);
  const cap = udpCapture(lab, ns, undefined, opts);
  let delivered = 0;
  const ends: unknown[] = [];
  await cap.start(
    (events) => {
      delivered += events.length;
    },
    (err) => ends.push(err),
  );
  return { cap, delivered: () => delivered, ends };
}

/** Waits (≤ 5 s) for the capture to end; it must end with `code` after delivering all 40. */
async function endsAfterAll40(
  t: {
    match(a: unknown, b: unknown, m: string): void;
    equal(a: unknown, b: unknown, m: string): void;
  },
  c: { cap: NsCapture; delivered: () => number; ends: unknown[] },
  code: string,
): Promise<void> {
  for (let i = 0; i < 100 && c.ends.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  t.match(c.ends, [{ code }], `the capture ended: ${code}`);
  t.equal(c.delivered(), 40, 'every datagram captured before the deletion delivered');
  await c.cap.stop();
}

/** Takes the capture's interface (v0 in `ns`) down for 300 ms, then up again. */
async function flap(lab: Netns, ns: string): Promise<void> {
  await lab.ip(ns, 'link', 'set', 'v0', 'down');
  await new Promise((r) => setTimeout(r, 300));
  await lab.ip(ns, 'link', 'set', 'v0', 'up');
}

if (!isRoot) {
  t.fail('the drop test needs root (run the suite as root, as CI does)');
} else if (!native.ok) {
  t.fail(`the native capture addon is unavailable: ${native.reason}`);
} else {
  const lab = new Netns();
  t.teardown(() => lab.destroy());

  void t.test('a stuck consumer: kernel drops counted exactly', async (t) => {
    await buildPair(lab);
    const args: ChildArgs = {
      spec: {
        point: 'backend',
        node: 'n1',
        iface: 'v0',
        filter: 'udp and dst port 9',
        // libpcap's practical minimum: a few TPACKET_V3 blocks.
        bufferBytes: 64 * 1024,
      },
      source: 'native',
      blockFirstMs: 300,
    };
    const { child, next } = await captureChild(t, lab, 'a', args);

    const sent = await burst(lab, 'b', BURST);
    t.ok(sent > BURST * 0.99, `sender sent ${sent} of ${BURST}`);
    // Let the last ring block retire (timeout 50 ms) and be delivered, then stop.
    await new Promise((r) => setTimeout(r, 600));
    child.stdin.end();
    const res = (await next()) as ChildResult;
    t.comment(JSON.stringify({ sent, ...res }));

    t.ok(res.firstBatch > 0, 'the consumer was blocked in its first batch');
    t.type(res.kernelDrops, 'number', 'kernel drops are a number');
    t.ok((res.kernelDrops ?? 0) > 0, `the kernel dropped packets (${String(res.kernelDrops)})`);
    t.equal(res.kernelDrops, res.pcap?.drop, 'kernelDrops is ps_drop, as libpcap gives it');
    t.equal(res.queueDrops, 0, 'nothing dropped in user space');
    const recv = res.pcap?.recv ?? 0;
    t.equal(res.delivered + (res.kernelDrops ?? 0), recv, 'delivered + dropped = ps_recv');
    t.ok(Math.abs(recv - sent) <= sent * 0.01, `ps_recv ${recv} ≈ sent ${sent}`);
  });

  void t.test(
    'under load, stopped mid-flow: delivered + kernel + queue drops = received',
    async (t) => {
      await buildPair(lab, 'c', 'd');
      const cap = udpCapture(lab, 'c', 256 * 1024, {
        // A small parent queue in front of a slow consumer: queue drops, as an overloaded agent.
        batch: { maxBatch: 256, maxQueued: 2048 },
      });
      let delivered = 0;
      let batches = 0;
      const ends: unknown[] = [];
      await cap.start(
        (events) => {
          delivered += events.length;
          // The consumer is slow (2 ms per batch of ≤ 256): the parent queue overflows.
          if (++batches % 4 === 0) {
            const until = Date.now() + 8;
            while (Date.now() < until) {
              // busy
            }
          }
        },
        (err) => ends.push(err),
      );
      t.equal(cap.sourceKind, 'native', 'the worker runs the native source');
      // Stop while the sender is still sending: packets are in the ring, the pipe and the queue.
      const sending = burst(lab, 'd', 200_000, 120_000);
      await new Promise((r) => setTimeout(r, 1500));
      const live = cap.stats();
      t.comment(`while running: ${JSON.stringify(live)}`);
      await cap.stop();
      const sent = await sending;
      const s = cap.stats();
      t.comment(JSON.stringify({ sent, delivered, ...s }));
      t.same(ends, [null], 'onEnd once, without error');
      t.equal(s.packets, delivered, 'stats().packets = what the consumer got');
      t.type(s.kernelDrops, 'number', 'kernel drops are a number');
      t.type(s.received, 'number', 'the worker reported what it received (ps_recv)');
      const lost = (s.kernelDrops ?? 0) + s.queueDrops;
      t.ok(lost > 0, `the load caused loss, and it is counted (${lost})`);
      t.ok(delivered > 0, `and packets were delivered (${delivered})`);
      t.equal(
        s.packets + (s.kernelDrops ?? 0) + s.queueDrops,
        s.received,
        'delivered + kernelDrops + queueDrops = received',
      );
      t.ok((s.received ?? 0) <= sent, `received ${String(s.received)} ≤ sent ${sent}`);
    },
  );

  void t.test(
    'a parent that stops reading: the worker drops whole batches at its bound and counts them',
    async (t) => {
      await buildPair(lab, 'e', 'f');
      const cap = udpCapture(lab, 'e', undefined, {
        // The addon's frame writer drops a batch once 64 KiB are queued unread (after the kernel's
        // socket buffer is full).
        workerMaxQueuedBytes: 64 * 1024,
      });
      let delivered = 0;
      let stalled = false;
      const ends: unknown[] = [];
      await cap.start(
        (events) => {
          delivered += events.length;
          if (!stalled) {
            // This process does not read the worker's socket for 3 s while packets keep coming.
            stalled = true;
            const until = Date.now() + 3000;
            while (Date.now() < until) {
              // busy
            }
          }
        },
        (err) => ends.push(err),
      );
      t.equal(cap.sourceKind, 'native', 'the worker runs the native source');
      const sent = await burst(lab, 'f', 400_000, 120_000);
      await new Promise((r) => setTimeout(r, 500));
      await cap.stop();
      const s = cap.stats();
      t.comment(JSON.stringify({ sent, delivered, ...s }));
      t.same(ends, [null], 'onEnd once, without error');
      t.ok(s.queueDrops > 0, `the worker dropped batches and counted them (${s.queueDrops})`);
      t.equal(s.packets, delivered, 'stats().packets = what the consumer got');
      t.equal(
        s.packets + (s.kernelDrops ?? 0) + s.queueDrops,
        s.received,
        'delivered + kernelDrops + queueDrops = received',
      );
    },
  );

  void t.test(
    'the interface taken down and up under load: the capture keeps going, then delivers all',
    async (t) => {
      const { cap, delivered, ends } = await countingCapture(lab, 'g', 'h');
      t.equal(cap.sourceKind, 'native', 'the worker runs the native source');
      // ~1400-byte datagrams as fast as one sender goes: ring blocks retire a few ms apart, so the
      // worker reads the ring on its busy-polling timer when the link goes down.
      const sending = burst(lab, 'h', 150_000, 120_000, 1400);
      await new Promise((r) => setTimeout(r, 700));
      await flap(lab, 'g');
      await sending;
      // The baseline is taken once the first burst's tail has drained: no delivery for 300 ms
      // (≤ 10 s). A fixed wait was too short on a loaded machine (68 late datagrams of the first
      // burst were counted as the second's).
      for (let last = -1, i = 0; i < 34 && delivered() !== last; i++) {
        last = delivered();
        await new Promise((r) => setTimeout(r, 300));
      }
      t.same(ends, [], 'the capture did not end');
      const before = delivered();
      const N = 2000;
      const sent = await burst(lab, 'h', N);
      for (let i = 0; i < 200 && delivered() - before < sent; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      t.equal(sent, N, 'the link carries traffic again');
      t.equal(delivered() - before, sent, 'every datagram after the link came back delivered');
      await cap.stop();
      t.same(ends, [null], 'onEnd once, without error, at stop()');
    },
  );

  void t.test(
    'the interface deleted right after a burst: what the ring holds is delivered before the end',
    async (t) => {
      const { cap, delivered, ends } = await countingCapture(lab, 'o', 'p');
      // As when a pod is deleted mid-request: the last packets sit in the kernel ring (in a block
      // its 50 ms timeout has not retired yet) when the interface goes away.
      t.equal(
        await sendThenDelete(lab, 'p', ['-n', lab.full('o'), 'link', 'del', 'v0']),
        'deleted',
        'sent 40, then deleted the interface at once',
      );
      await endsAfterAll40(t, { cap, delivered, ends }, 'CAPTURE_INTERFACE_GONE');
    },
  );

  void t.test(
    'the namespace deleted right after a burst: the worker drains, then NAMESPACE_GONE',
    async (t) => {
      // Checked every 5 ms, the deletion is seen while the burst still sits in the kernel ring.
      const { cap, delivered, ends } = await countingCapture(lab, 's', 'u', {
        watchIntervalMs: 5,
      });
      t.equal(await sendThenDelete(lab, 'u', ['netns', 'del', lab.full('s')]), 'deleted');
      await endsAfterAll40(t, { cap, delivered, ends }, 'CAPTURE_NAMESPACE_GONE');
    },
  );

  void t.test(
    'the interface deleted inside the block timeout: the block is read before IFACE_GONE',
    async (t) => {
      // Deterministic: a 1 s block timeout, so the block holding the burst cannot have retired
      // when the interface goes (tens of ms later). Before, all of it was lost.
      await buildPair(lab, 'q', 'r');
      const args: ChildArgs = {
        spec: { point: 'backend', node: 'n1', iface: 'v0', filter: 'udp and dst port 9' },
        source: 'native',
        timeoutMs: 1000,
      };
      const { child, next } = await captureChild(t, lab, 'q', args);
      t.equal(await burst(lab, 'r', 40), 40, 'sent');
      await lab.ip('q', 'link', 'del', 'v0');
      const ended = (await next()) as {
        ended?: string;
        delivered?: number;
      };
      t.same(ended, { ended: 'CAPTURE_INTERFACE_GONE', delivered: 40 }, 'all 40, then the end');
      child.stdin.end();
      const res = (await next()) as ChildResult;
      t.equal(res.delivered, 40, 'nothing more after the end');
    },
  );

  void t.test(
    'on `any`, loopback traffic is counted once: nothing reported lost, outgoing kept',
    async (t) => {
      await buildPair(lab, 'k', 'l');
      const cap = new NsCapture(
        { point: 'egress', node: 'n1', iface: 'any', filter: 'udp and dst port 9', foldFirst: 0 },
        { netnsPath: `/run/netns/${lab.full('k')}`, statsIntervalMs: 100 },
      );
      let delivered = 0;
      let viaLo = 0;
      await cap.start(
        (events) => {
          delivered += events.length;
          for (const e of events) if (e.inner?.dst === '127.0.0.1') viaLo++;
        },
        () => undefined,
      );
      t.equal(cap.sourceKind, 'native', 'the worker runs the native source');
      // Over loopback (the tap sees an outgoing and an incoming copy of each), and out of v0 to
      // the peer (outgoing only: must still be captured).
      t.equal(await burst(lab, 'k', 300, 60_000, 18, '127.0.0.1'), 300, 'sent over lo');
      t.equal(await burst(lab, 'k', 200, 60_000, 18, B_IP), 200, 'sent out of v0');
      for (let i = 0; i < 60 && delivered < 500; i++) await new Promise((r) => setTimeout(r, 50));
      await cap.stop();
      const s = cap.stats();
      t.equal(delivered, 500, 'each datagram delivered once');
      t.equal(viaLo, 300, 'loopback datagrams once each');
      t.equal(s.received, 500, `the kernel counted each once (received ${String(s.received)})`);
      t.equal(s.kernelDrops, 0, 'no kernel drops');
      t.equal(s.queueDrops, 0, 'nothing reported as left in the ring');
    },
  );

  void t.test(
    'the interface taken down and up while idle: the capture waits, then delivers all',
    async (t) => {
      const { cap, delivered, ends } = await countingCapture(lab, 'i', 'j');
      // Light traffic: the worker waits on the capture socket, which reports the link going down
      // as an error (ENETDOWN); down is not gone, so it waits on.
      t.equal(await burst(lab, 'j', 100), 100, 'traffic before');
      await flap(lab, 'i');
      await new Promise((r) => setTimeout(r, 300));
      t.same(ends, [], 'the capture did not end');
      t.equal(await burst(lab, 'j', 100), 100, 'traffic after');
      for (let i = 0; i < 40 && delivered() < 200; i++) await new Promise((r) => setTimeout(r, 50));
      t.equal(delivered(), 200, 'every datagram delivered, before and after');
      await cap.stop();
      t.same(ends, [null], 'onEnd once, without error, at stop()');
    },
  );

  void t.test(
    'the interface taken down, then deleted: the capture still ends with INTERFACE_GONE',
    async (t) => {
      const { cap, delivered, ends } = await countingCapture(lab, 'w', 'x');
      t.equal(await burst(lab, 'x', 40), 40, 'traffic before');
      // Deletion sets the link down first; here the two are apart, so the socket's only error
      // (ENETDOWN, at "down") comes while the interface still exists. Before, nothing came when
      // it was unregistered and the capture never ended.
      await lab.ip('w', 'link', 'set', 'v0', 'down');
      await new Promise((r) => setTimeout(r, 300));
      t.same(ends, [], 'down is not gone: the capture waits');
      await lab.ip('w', 'link', 'del', 'v0');
      for (let i = 0; i < 100 && ends.length === 0; i++)
        await new Promise((r) => setTimeout(r, 50));
      t.match(ends, [{ code: 'CAPTURE_INTERFACE_GONE' }], 'then gone: the capture ends');
      t.equal(delivered(), 40, 'after delivering what it had');
      await cap.stop();
    },
  );
}

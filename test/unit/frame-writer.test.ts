/**
 * The capture worker's frame writer (native/pcap-batch/src/frame_out.c), on a FIFO this test
 * creates: frames arrive whole and in order whether the reader keeps up or not, a droppable frame
 * is dropped (and said so) only while more than the bound is unread, control frames are never
 * dropped, a reader that goes away is reported. The same through a shared frame ring (frame_ring.c):
 * frames whole and in order over many wrap-arounds, only notices on the FIFO, a full ring drops,
 * bad notices are refused. And the capture's direct output: batches the addon
 * writes itself decode to the same events as the batches it hands to JavaScript (live on
 * loopback, root). Fails (never skips) without the addon or root.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
} from 'node:fs';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join } from 'node:path';
import t from 'tap';
import type tap from 'tap';
import { loadNativeAddon, type PcapFrameWriter } from '../../native/loader';
import { NativeSource } from '../../agent/capture/native-source';
import { summaryPortTable } from '../../core/decode/summary';
import {
  FRAME_CONTROL,
  FRAME_RING,
  WorkerFrameParser,
  type WorkerFrame,
} from '../../agent/capture/worker-frames';
import type { PacketEvent } from '../../common/event';
import type { CaptureSpec } from '../../agent/capture/source';
import type { DecodeOptions } from '../../core/decode/frame';
import { eventually } from './eventually';

const native = loadNativeAddon();
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** A type-2 frame of `size` bytes whose JSON body carries its sequence number. */
function frame(seq: number, size: number): Buffer {
  const json = Buffer.from(JSON.stringify({ kind: 'warning', message: String(seq) }), 'utf8');
  const body = Buffer.alloc(Math.max(size - 5, json.length), 0x20); // JSON tolerates trailing blanks
  json.copy(body);
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length + 1, 0);
  out[4] = FRAME_CONTROL;
  body.copy(out, 5);
  return out;
}

interface Fifo {
  path: string;
  rd: number;
  wr: number;
  dir: string;
}

function fifo(): Fifo {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-fifo-'));
  const path = join(dir, 'out');
  execFileSync('mkfifo', [path]);
  const rd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const wr = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
  return { path, rd, wr, dir };
}

/** A FIFO removed (both ends closed) when test `t` ends. */
function fifoFor(t: Pick<typeof tap, 'teardown'>): Fifo {
  const f = fifo();
  t.teardown(() => {
    closeSync(f.rd);
    closeSync(f.wr);
    rmSync(f.dir, { recursive: true, force: true });
  });
  return f;
}

/** Reads what the FIFO holds now (non-blocking). */
function readAvailable(fd: number): Buffer {
  const parts: Buffer[] = [];
  const chunk = Buffer.alloc(1 << 20);
  for (;;) {
    let n = 0;
    try {
      n = readSync(fd, chunk, 0, chunk.length, null);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN') break;
      throw e;
    }
    if (n === 0) break;
    parts.push(Buffer.from(chunk.subarray(0, n)));
  }
  return Buffer.concat(parts);
}

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 5));

/**
 * Reads until the writer has nothing pending and the FIFO is empty; returns the parsed frames
 * (with a ring: releasing what each read handed out, as ns-capture does).
 */
async function drainAll(
  w: PcapFrameWriter,
  fd: number,
  parser = new WorkerFrameParser(),
): Promise<WorkerFrame[]> {
  const frames: WorkerFrame[] = [];
  const deadline = Date.now() + 10_000;
  for (;;) {
    const got = readAvailable(fd);
    if (got.length > 0) frames.push(...parser.push(got));
    parser.release();
    if (w.pending() === 0 && got.length === 0) break;
    if (Date.now() > deadline) throw new Error(`writer still has ${w.pending()} bytes pending`);
    await tick(); // the writer's poll runs on the event loop
  }
  return frames;
}

const seqOf = (f: WorkerFrame): number =>
  f.type === 'control' && f.msg.kind === 'warning' ? Number(f.msg.message) : -1;

if (!native.ok) {
  t.fail(`the native capture addon is unavailable: ${native.reason}`);
} else {
  const addon = native.addon;

  void t.test('a reader that keeps up: every frame, whole and in order', async (t) => {
    const f = fifoFor(t);
    const w = new addon.FrameWriter(f.wr, 1 << 20);
    const sent: number[] = [];
    for (let i = 0; i < 200; i++) {
      t.equal(w.write(frame(i, 100 + ((i * 997) % 5000)), true), true, `frame ${i} accepted`);
      sent.push(i);
      if (i % 20 === 0) await tick();
    }
    const frames = await drainAll(w, f.rd);
    t.same(frames.map(seqOf), sent, 'all 200 frames, in order');
    t.equal(w.error(), null, 'no error');
    w.close();
  });

  void t.test(
    'a stalled reader: droppable frames dropped beyond the bound, control frames kept',
    async (t) => {
      const f = fifoFor(t);
      const bound = 256 * 1024;
      const w = new addon.FrameWriter(f.wr, bound);
      const accepted: number[] = [];
      let dropped = 0;
      // 64 KiB frames, nobody reading: the FIFO fills (1 MiB), then the queue, then drops.
      for (let i = 0; i < 64; i++) {
        if (w.write(frame(i, 64 * 1024), true)) accepted.push(i);
        else dropped++;
      }
      t.ok(dropped > 0, `frames were dropped (${dropped})`);
      t.ok(w.pending() > bound, `the queue went past the bound (${w.pending()})`);
      t.ok(w.pending() <= bound + 64 * 1024, 'but by at most one frame');
      // A control frame is never dropped, however full the queue.
      t.equal(w.write(frame(1000, 200), false), true, 'control frame accepted');
      accepted.push(1000);
      const frames = await drainAll(w, f.rd);
      t.same(frames.map(seqOf), accepted, 'what was accepted arrives whole and in order');
      t.equal(accepted.length + dropped, 65, 'accepted + dropped = written');
      w.close();
    },
  );

  void t.test('the reader goes away: the writer says why and stops', (t) => {
    const f = fifo();
    t.teardown(() => {
      closeSync(f.wr);
      rmSync(f.dir, { recursive: true, force: true });
    });
    const w = new addon.FrameWriter(f.wr, 1 << 20);
    t.equal(w.write(frame(1, 100), false), true, 'first frame written');
    closeSync(f.rd);
    t.equal(w.write(frame(2, 100), false), false, 'a write after the reader left fails');
    t.match(w.error() ?? '', /pipe/i, `error names the broken pipe (${String(w.error())})`);
    t.equal(w.write(frame(3, 100), false), false, 'and writing stays stopped');
    w.close();
    w.close();
    t.equal(w.pending(), 0, 'closed twice, nothing pending');
    t.end();
  });

  void t.test('through a shared ring: whole, in order, over many wrap-arounds', (t) => {
    const f = fifoFor(t);
    const ring = new addon.SharedRing(64 * 1024);
    t.teardown(() => {
      ring.dispose();
    });
    t.equal(ring.buffer.length, 64 * 1024, 'the data area is the size asked for');
    const w = new addon.FrameWriter(f.wr, 1 << 20, ring.fd);
    const parser = new WorkerFrameParser({ ring });
    const sent: number[] = [];
    const got: WorkerFrame[] = [];
    let fifoBytes = 0;
    let written = 0;
    // ~1.3 MB through a 64 KiB ring: frames of 100 B … 12 KB, read after every few writes.
    for (let i = 0; i < 500; i++) {
      const fr = frame(i, 100 + ((i * 7919) % 12_000));
      t.equal(w.write(fr, true), true, `frame ${i} accepted`);
      sent.push(i);
      written += fr.length;
      if (i % 3 === 2) {
        const chunk = readAvailable(f.rd);
        fifoBytes += chunk.length;
        got.push(...parser.push(chunk));
        parser.release();
      }
    }
    const chunk = readAvailable(f.rd);
    fifoBytes += chunk.length;
    got.push(...parser.push(chunk));
    t.same(got.map(seqOf), sent, 'all 500 frames, in order');
    t.ok(written > 16 * ring.size, `the ring wrapped many times (${written} bytes)`);
    t.equal(fifoBytes, 500 * 21, 'only a 21-byte notice per frame crossed the FIFO');
    t.equal(w.error(), null, 'no error');
    w.close();
    t.end();
  });

  void t.test(
    'a ring nobody releases: droppable frames dropped once full, control frames inline',
    async (t) => {
      const f = fifoFor(t);
      const ring = new addon.SharedRing(64 * 1024);
      t.teardown(() => {
        ring.dispose();
      });
      const w = new addon.FrameWriter(f.wr, 1 << 20, ring.fd);
      const accepted: number[] = [];
      let dropped = 0;
      for (let i = 0; i < 20; i++) {
        if (w.write(frame(i, 10_000), true)) accepted.push(i);
        else dropped++;
      }
      t.equal(accepted.length, 6, 'six 10 kB frames fit in 64 KiB');
      t.equal(dropped, 14, 'the rest were dropped, and said so');
      t.equal(w.write(frame(100, 200), false), true, 'a control frame still goes (inline)');
      accepted.push(100);
      const parser = new WorkerFrameParser({ ring });
      const frames = await drainAll(w, f.rd, parser);
      t.same(frames.map(seqOf), accepted, 'what was accepted arrives, in order');
      // Released (drainAll does): the ring takes frames again.
      t.equal(w.write(frame(200, 10_000), true), true, 'accepted again after release');
      t.same((await drainAll(w, f.rd, parser)).map(seqOf), [200], 'and delivered');
      w.close();
    },
  );

  void t.test('dispose(): unmapped now, every view empty, safe to call again', (t) => {
    const mapped = (): number =>
      readFileSync('/proc/self/maps', 'utf8')
        .split('\n')
        .filter((l) => l.includes('hoptrace-frame-ring')).length;
    const before = mapped();
    const ring = new addon.SharedRing(64 * 1024);
    const view = ring.buffer.subarray(100, 200);
    t.equal(mapped(), before + 1, 'mapped while alive');
    ring.dispose();
    t.equal(mapped(), before, 'unmapped by dispose()');
    t.equal(ring.buffer.length, 0, 'the buffer is detached');
    t.equal(view.length, 0, 'and so is every view of it (no read of unmapped memory)');
    t.doesNotThrow(() => {
      ring.release(100);
      ring.dispose();
      ring.close();
    }, 'release/dispose/close after dispose do nothing');
    const notice = Buffer.alloc(21);
    notice.writeUInt32BE(17, 0);
    notice[4] = FRAME_RING;
    notice.writeUInt32LE(5, 9);
    t.throws(
      () => new WorkerFrameParser({ ring }).push(notice),
      /outside the 0-byte ring/,
      'a notice after dispose is refused, not read',
    );
    t.end();
  });

  void t.test('bad ring notices are refused with the reason', (t) => {
    const ring = new addon.SharedRing(64 * 1024);
    t.teardown(() => {
      ring.close();
    });
    const notice = (offset: number, length: number, end: number): Buffer => {
      const b = Buffer.alloc(21);
      b.writeUInt32BE(17, 0);
      b[4] = FRAME_RING;
      b.writeUInt32LE(offset, 5);
      b.writeUInt32LE(length, 9);
      b.writeUInt32LE(end % 2 ** 32, 13);
      b.writeUInt32LE(Math.floor(end / 2 ** 32), 17);
      return b;
    };
    t.throws(
      () => new WorkerFrameParser().push(notice(0, 100, 100)),
      /no ring was set up/,
      'a notice without a ring',
    );
    t.throws(
      () => new WorkerFrameParser({ ring }).push(notice(65_000, 1000, 66_000)),
      /points outside the 65536-byte ring/,
      'a notice past the end of the ring',
    );
    ring.buffer.fill(0, 0, 200);
    t.throws(
      () => new WorkerFrameParser({ ring }).push(notice(0, 100, 100)),
      /not one whole frame of 100 bytes/,
      'a notice pointing at something that is not a frame',
    );
    frame(7, 100).copy(ring.buffer, 0);
    const p = new WorkerFrameParser({ ring });
    t.same(p.push(notice(0, 100, 100)).map(seqOf), [7], 'a good notice parses');
    t.throws(() => p.push(notice(0, 100, 50)), /or back/, 'an end that moves back');
    t.end();
  });

  void t.test('bad arguments are refused with BAD_ARGUMENT', (t) => {
    t.throws(() => new addon.FrameWriter(-1, 0), { code: 'BAD_ARGUMENT' }, 'negative fd');
    t.throws(() => new addon.SharedRing(1024), { code: 'BAD_ARGUMENT' }, 'a ring too small');
    const g = fifoFor(t);
    t.throws(
      () => new addon.FrameWriter(g.wr, 1024, g.rd),
      { code: 'BAD_ARGUMENT', message: /is not a frame ring/ },
      'a ring fd that is not a ring',
    );
    const noop = (): void => undefined;
    t.throws(
      () =>
        new addon.Capture(
          { iface: 'lo', frameOut: {} as PcapFrameWriter, summaryPorts: Buffer.alloc(65536) },
          noop,
          noop,
        ),
      { code: 'BAD_ARGUMENT', message: /FrameWriter/ },
      'frameOut that is not a FrameWriter',
    );
    t.throws(
      () => new addon.Capture({ iface: 'lo', summaryPorts: Buffer.alloc(65536) }, noop, noop),
      { code: 'BAD_ARGUMENT', message: /summaryPorts needs frameOut/ },
      'summary mode without frameOut',
    );
    const f = fifoFor(t);
    const w = new addon.FrameWriter(f.wr, 1024);
    t.throws(
      () => new addon.Capture({ iface: 'lo', frameOut: w }, noop, noop),
      { code: 'BAD_ARGUMENT', message: /summaryPorts/ },
      'frameOut without summary mode',
    );
    w.close();
    t.end();
  });

  /** Fails t (never skips) unless the suite runs as root, as live capture needs. */
  function asRoot(t: Pick<typeof tap, 'fail'>): boolean {
    if (!isRoot) t.fail('live capture on loopback needs root (run the suite as root, as CI does)');
    return isRoot;
  }

  /** A loopback capture of UDP to a port of its own (salt), and its frame context. */
  function loCapture(
    salt: number,
    extra: { snaplen?: number } = {},
  ): { port: number; spec: CaptureSpec; context: string } {
    const port = 40_000 + ((process.pid + salt) % 20_000);
    const spec: CaptureSpec = {
      point: 'backend',
      node: 'n1',
      iface: 'lo',
      filter: `udp and dst port ${port}`,
      ...extra,
    };
    const context = JSON.stringify({ point: spec.point, node: spec.node, iface: spec.iface });
    return { port, spec, context };
  }

  /**
   * A started loopback capture (10 ms block timeout) writing through a FIFO and gathering records
   * for up to a second (coalesceMs 1000), so frames go out when a batch fills or at stop().
   */
  async function gatheringCapture(
    t: Pick<typeof tap, 'teardown'>,
    salt: number,
    o: { snaplen?: number; batchBytes?: number; decode?: (port: number) => DecodeOptions } = {},
  ): Promise<{ f: Fifo; port: number; w: PcapFrameWriter; src: NativeSource }> {
    const f = fifoFor(t);
    const { port, spec, context } = loCapture(
      salt,
      o.snaplen !== undefined ? { snaplen: o.snaplen } : {},
    );
    const w = new addon.FrameWriter(f.wr, 8 << 20);
    const src = new NativeSource(spec, {
      direct: true,
      timeoutMs: 10,
      ...(o.batchBytes !== undefined ? { batchBytes: o.batchBytes } : {}),
      ...(o.decode !== undefined ? { decode: o.decode(port) } : {}),
      frameOut: { writer: w, context, coalesceMs: 1000 },
    });
    const noop = (): void => undefined;
    await src.start(noop, noop);
    return { f, port, w, src };
  }

  void t.test(
    'direct output decodes to the same events as delivery to JavaScript (loopback)',
    async (t) => {
      if (!asRoot(t)) return;
      const f = fifoFor(t);
      const { port, spec, context } = loCapture(0);
      const w = new addon.FrameWriter(f.wr, 8 << 20);
      const direct = new NativeSource(spec, { direct: true, frameOut: { writer: w, context } });
      const viaJs = new NativeSource(spec, { direct: true });
      const jsEvents: PacketEvent[] = [];
      await direct.start(
        () => t.fail('onEvents is not called with direct output'),
        () => undefined,
      );
      await viaJs.start(
        (evs) => jsEvents.push(...evs),
        () => undefined,
      );
      const sock = createSocket('udp4');
      const N = 300;
      for (let i = 0; i < N; i++) {
        // Some payloads carry a probe marker and a request line, so the keys differ per packet.
        const body =
          i % 3 === 0 ? `GET /x?${i} HTTP/1.1\r\nhoptrace-probe-m${i}\r\n` : `datagram ${i}`;
        await new Promise<void>((r) => {
          sock.send(body, port, '127.0.0.1', () => {
            r();
          });
        });
      }
      sock.close();
      await new Promise((r) => setTimeout(r, 200));
      await direct.stop();
      await viaJs.stop();
      const frames = await drainAll(w, f.rd);
      const directEvents = frames.flatMap((fr) => (fr.type === 'events' ? fr.events : []));
      t.equal(jsEvents.length, N, `JavaScript delivery saw all ${N} datagrams`);
      t.equal(directEvents.length, N, `direct output wrote all ${N}`);
      // Frame numbers count per source; everything else must be identical.
      const strip = (e: PacketEvent): PacketEvent => ({ ...e, frame: 0 });
      t.same(directEvents.map(strip), jsEvents.map(strip), 'same events');
      t.same(
        directEvents.map((e) => e.frame),
        Array.from({ length: N }, (_, i) => i + 1),
        'frame numbers run 1..N across batches',
      );
      const s = direct.stats();
      t.equal(s.packets, N, 'stats().packets counts what the addon wrote');
      // On loopback the kernel would count each datagram twice (outgoing and incoming; libpcap
      // drops the outgoing copy in user space) unless the addon asks not to receive it.
      t.equal(s.received, N, `ps_recv counts each datagram once (${String(s.received)})`);
      t.equal(s.queueDrops, 0, 'nothing dropped');
      t.equal(viaJs.stats().queueDrops, 0, 'nothing dropped on the JS path either');
      w.close();
    },
  );

  void t.test(
    'coalescing: wake-ups gathered into fewer frames, the rest written by the timer, none lost',
    async (t) => {
      if (!asRoot(t)) return;
      const f = fifoFor(t);
      const { port, spec, context } = loCapture(7);
      // Two captures of the same traffic: 10 ms block timeout, one writing every wake-up's
      // records at once, one gathering them for up to 300 ms.
      const plain = new addon.FrameWriter(f.wr, 8 << 20);
      const g = fifoFor(t);
      const gathered = new addon.FrameWriter(g.wr, 8 << 20);
      const a = new NativeSource(spec, {
        direct: true,
        timeoutMs: 10,
        frameOut: { writer: plain, context },
      });
      const b = new NativeSource(spec, {
        direct: true,
        timeoutMs: 10,
        frameOut: { writer: gathered, context, coalesceMs: 300 },
      });
      const noop = (): void => undefined;
      await a.start(noop, noop);
      await b.start(noop, noop);
      const sock = createSocket('udp4');
      const N = 40;
      const sendStart = Date.now();
      for (let i = 0; i < N; i++) {
        await new Promise<void>((r) => {
          sock.send(`datagram ${i}`, port, '127.0.0.1', () => {
            r();
          });
        });
        await new Promise((r) => setTimeout(r, 15)); // ~600 ms of traffic, many wake-ups
      }
      sock.close();
      // Gathering sends one frame at once and then at most one per 300 ms while traffic lasts;
      // a loaded machine stretches the traffic, so the bound follows the time it really took.
      const most = 2 + Math.ceil((Date.now() - sendStart) / 300);
      // No stop(): what the gathering capture still holds must come from its timer.
      await new Promise((r) => setTimeout(r, 700));
      const plainFrames = await drainAll(plain, f.rd);
      const gatheredFrames = await drainAll(gathered, g.rd);
      const count = (fr: WorkerFrame[]): number =>
        fr.reduce((n, x) => n + (x.type === 'events' ? x.events.length : 0), 0);
      t.equal(
        count(plainFrames),
        N,
        `every datagram written at once (${plainFrames.length} frames)`,
      );
      t.equal(count(gatheredFrames), N, 'every datagram written by coalescing, before stop()');
      t.ok(
        gatheredFrames.length <= most && gatheredFrames.length < plainFrames.length,
        `fewer frames when gathering (${gatheredFrames.length}, at most ${most}, vs ${plainFrames.length})`,
      );
      await a.stop();
      await b.stop();
      t.equal(b.stats().packets, N, 'stats count what was written');
      t.equal(b.stats().queueDrops, 0, 'nothing dropped');
      plain.close();
      gathered.close();
    },
  );

  void t.test(
    'coalescing: stats() count records held for the next frame as held, not as delivered',
    async (t) => {
      if (!asRoot(t)) return;
      const { f, port, w, src } = await gatheringCapture(t, 17);
      const until = async (what: string, ok: () => boolean): Promise<void> => {
        t.ok(await eventually(ok, 3000), what);
      };
      // After a quiet spell the first datagram goes out at once; the next ones within the
      // coalescing period wait in the batch.
      await sendBurst(port, 1, () => 'first');
      await until('the first datagram written at once', () => src.stats().packets === 1);
      await sendBurst(port, 5, (i) => `held ${i}`);
      await until('five records held for the next frame', () => src.pcapStats()?.held === 5);
      t.equal(src.stats().packets, 1, 'held records are not counted as delivered');
      t.equal(src.pcapStats()?.delivered, 6, 'the addon has read all six');
      // The coalescing timer writes them within the period (1 s after the first frame).
      await until('the timer wrote them', () => src.stats().packets === 6);
      t.equal(src.pcapStats()?.held, 0, 'nothing held once written');
      const frames = await drainAll(w, f.rd);
      t.same(eventsIn(frames), [1, 5], 'two frames: the first datagram, then the five');
      await src.stop();
      t.equal(src.stats().packets, 6, 'six delivered at stop');
      w.close();
    },
  );

  /** Sends n datagrams to port on loopback, each after the previous one's callback. */
  async function sendBurst(port: number, n: number, body: (i: number) => string): Promise<void> {
    const sock = createSocket('udp4');
    for (let i = 0; i < n; i++) {
      await new Promise<void>((r) => {
        sock.send(body(i), port, '127.0.0.1', () => {
          r();
        });
      });
    }
    sock.close();
  }

  const eventsIn = (frames: WorkerFrame[]): number[] =>
    frames.flatMap((fr) => (fr.type === 'events' ? [fr.events.length] : []));

  void t.test(
    'a batch holds batchBytes / 192 records whatever the snaplen (fewer, larger frames)',
    async (t) => {
      if (!asRoot(t)) return;
      // 64 KiB of records: 341 of them. Sized for full-snaplen (512) frames it held 124.
      const { f, port, w, src } = await gatheringCapture(t, 11, { batchBytes: 65536 });
      const N = 1000;
      await sendBurst(port, N, (i) => `datagram ${i}`);
      await new Promise((r) => setTimeout(r, 100));
      await src.stop();
      const sizes = eventsIn(await drainAll(w, f.rd));
      t.equal(
        sizes.reduce((a, b) => a + b, 0),
        N,
        'every datagram written',
      );
      t.equal(
        Math.max(...sizes),
        Math.floor(65536 / 192),
        `full batches of 341 (${sizes.join(', ')})`,
      );
      t.equal(src.stats().queueDrops, 0, 'nothing dropped');
      w.close();
    },
  );

  void t.test('SLOW frames that fill the raw area send the batch early, none lost', async (t) => {
    if (!asRoot(t)) return;
    // The port as WireGuard's: the C fast path leaves these frames to the reference decoder,
    // so each keeps its bytes in the batch's raw area. Raw area: a quarter of 64 KiB = 256
    // frames of 64 bytes; a batch has room for 341 records.
    const { f, port, w, src } = await gatheringCapture(t, 13, {
      snaplen: 64,
      batchBytes: 65536,
      decode: (p) => ({ wireguardPorts: [p] }),
    });
    const N = 600;
    await sendBurst(port, N, (i) => `slow datagram ${String(i).padStart(30, '.')}`);
    await new Promise((r) => setTimeout(r, 100));
    await src.stop();
    const frames = await drainAll(w, f.rd);
    const events = frames.flatMap((fr) => (fr.type === 'events' ? fr.events : []));
    const sizes = eventsIn(frames);
    t.equal(events.length, N, 'every datagram written');
    t.equal(
      Math.max(...sizes),
      256,
      `batches sent when the raw area was full (${sizes.join(', ')})`,
    );
    t.same(
      events.map((e) => e.frame),
      Array.from({ length: N }, (_, i) => i + 1),
      'in order, frame numbers 1..N',
    );
    const odd = events.find((e) => !(e.inner?.dport === port && e.wireLength === 86));
    t.equal(odd, undefined, 'each decoded from its own bytes');
    t.equal(src.stats().queueDrops, 0, 'nothing dropped');
    w.close();
  });

  /**
   * A capture on loopback writing through a FIFO, with busy polling every `busyPollMs`, and a
   * burst of n 1400-byte datagrams to it from another process (this one's loop kept free: sent
   * from here, the burst kept the capture's poll from running until it was over). At snaplen
   * 2048 ~150 such frames fill a 256 KiB ring block, so blocks retire a few ms apart.
   */
  function busyCapture(
    t: Pick<typeof tap, 'teardown'>,
    salt: number,
    extra: { bufferBytes?: number },
  ): {
    cap: ReturnType<typeof openCapture>;
    burst: (n: number) => Promise<void>;
    written: () => Promise<number>;
    errors: string[];
  } {
    const f = fifoFor(t);
    const { port } = loCapture(salt);
    const w = new addon.FrameWriter(f.wr, 64 << 20);
    const errors: string[] = [];
    const cap = openCapture(port, w, extra, errors);
    t.teardown(() => {
      cap.close();
      w.close();
    });
    const burst = async (n: number): Promise<void> => {
      const sender = `const s = require('node:dgram').createSocket('udp4');
        const p = Buffer.alloc(1400, 120);
        let i = 0;
        (function next() {
          if (i++ >= ${n}) return s.close();
          s.send(p, ${port}, '127.0.0.1', next);
        })();`;
      await promisify(execFile)(process.execPath, ['-e', sender]);
    };
    const written = async (): Promise<number> =>
      eventsIn(await drainAll(w, f.rd)).reduce((a, b) => a + b, 0);
    return { cap, burst, written, errors };
  }

  function openCapture(
    port: number,
    w: PcapFrameWriter,
    extra: { bufferBytes?: number },
    errors: string[],
  ): InstanceType<typeof addon.Capture> {
    return new addon.Capture(
      {
        iface: 'lo',
        filter: `udp and dst port ${port}`,
        snaplen: 2048,
        timeoutMs: 10,
        summaryPorts: summaryPortTable(),
        frameOut: w,
        frameContext: JSON.stringify({ point: 'backend', node: 'n1', iface: 'lo' }),
        busyPollMs: 100,
        ...extra,
      },
      () => undefined,
      (code, message) => errors.push(`${code}: ${message}`),
    );
  }

  void t.test(
    'busy polling: blocks retiring close together switch to a timer, an empty tick back to the socket',
    async (t) => {
      if (!asRoot(t)) return;
      const { cap, burst, written, errors } = busyCapture(t, 17, {});
      const N = 3000;
      await burst(N);
      // Read at once: busy mode ends on the first empty tick after the burst, which can fall
      // before any fixed wait on a loaded machine (CI saw it gone 50 ms after the sender exited).
      // A timer wake-up happens only in busy mode, so either fact shows the switch.
      const during = cap.stats();
      t.ok(
        during.busy || during.timerWakeups > 0,
        `switched to the timer during the burst (busy ${during.busy}, ticks ${during.timerWakeups})`,
      );
      // The next tick finds the ring empty and goes back to the socket (a loaded machine can
      // delay that tick, so wait for it, bounded).
      await eventually(() => !cap.stats().busy, 5000);
      const after = cap.stats();
      t.ok(after.timerWakeups > 0, `timer ticks read the ring (${after.timerWakeups})`);
      t.notOk(after.busy, 'back on the socket once a tick found nothing');
      // A lone datagram now arrives through the socket's wake-up, within its block timeout.
      await burst(1);
      await eventually(() => cap.stats().pollWakeups > after.pollWakeups, 3000);
      const last = cap.stats();
      t.ok(last.pollWakeups > after.pollWakeups, 'the socket woke the capture again');
      t.equal(last.timerWakeups, after.timerWakeups, 'no ticks while idle');
      t.equal(
        await written(),
        N + 1,
        'every datagram written, the last without waiting for stop()',
      );
      t.equal(last.drop, 0, 'nothing dropped by the kernel');
      t.same(errors, [], 'no capture errors');
    },
  );

  void t.test(
    'busy polling stays off when the ring could not hold four periods of the traffic',
    async (t) => {
      if (!asRoot(t)) return;
      // 1 MiB: four blocks, a few ms of this burst each; a 100 ms tick would overflow it.
      const { cap, burst, written, errors } = busyCapture(t, 19, { bufferBytes: 1 << 20 });
      const N = 3000;
      await burst(N);
      await new Promise((r) => setTimeout(r, 200));
      const s = cap.stats();
      t.equal(s.timerWakeups, 0, 'no timer ticks');
      t.notOk(s.busy, 'on the socket');
      // At least once: a reader descheduled past the burst takes the whole ring in one wake-up.
      t.ok(s.pollWakeups >= 1, `woken by the socket (${s.pollWakeups})`);
      t.equal(s.recv, N, 'the kernel saw every datagram');
      // The small ring is the point of this test: on a loaded machine (CI beside other work) the
      // reader can be descheduled long enough for it to overflow. What must hold either way is
      // that every datagram is written or counted as the kernel's drop — none vanishes.
      const w = await written();
      t.equal(w + s.drop, N, `every datagram written (${w}) or counted dropped (${s.drop})`);
      t.same(errors, [], 'no capture errors');
    },
  );

  void t.test('busyPollMs without frameOut, or out of range, is refused', (t) => {
    const noop = (): void => undefined;
    t.throws(() => new addon.Capture({ iface: 'lo', busyPollMs: 10 }, noop, noop), {
      code: 'BAD_ARGUMENT',
      message: /busyPollMs/,
    });
    t.throws(
      () =>
        new addon.Capture(
          {
            iface: 'lo',
            busyPollMs: 5000,
            summaryPorts: summaryPortTable(),
            frameOut: new addon.FrameWriter(1, 1 << 20),
            frameContext: '{}',
          },
          noop,
          noop,
        ),
      { code: 'BAD_ARGUMENT', message: /busyPollMs/ },
    );
    t.end();
  });

  void t.test('coalesceMs without frameOut is refused', (t) => {
    const noop = (): void => undefined;
    t.throws(() => new addon.Capture({ iface: 'lo', coalesceMs: 10 }, noop, noop), {
      code: 'BAD_ARGUMENT',
      message: /coalesceMs/,
    });
    t.end();
  });
}

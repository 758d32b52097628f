// Live capture inside real namespaces: every target form, a namespace deleted and an interface
// removed mid-capture, the worker leaving with its parent, and the addresses an agent reports.
// Needs root; fails with the reason otherwise. Traffic stays inside this test's namespaces.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import t from 'tap';
import { namespaceInventory, nodeAddresses } from '../../agent/netns/addresses';
import { resolveTarget } from '../../agent/netns/resolve';
import { NsCapture } from '../../agent/capture/ns-capture';
import type { CaptureSpec } from '../../agent/capture/source';
import { WorkerFrameParser } from '../../agent/capture/worker-frames';
import type { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import { Netns, runCommand } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { A_IP, B_IP, buildPair, sendUdp } from './fixtures/capture-pair';

const spec: CaptureSpec = {
  point: 'backend',
  node: 'n1',
  iface: 'v0',
  filter: 'udp dst port 9999',
};

/** Starts a capture at `netnsPath` and returns helpers to wait for events or the end. */
async function capture(netnsPath: string, s: CaptureSpec = spec) {
  const events: PacketEvent[] = [];
  let endErr: HoptraceError | null | undefined;
  let onChange: () => void = () => undefined;
  const cap = new NsCapture(s, { netnsPath, batch: { maxDelayMs: 10 }, watchIntervalMs: 100 });
  await cap.start(
    (b) => {
      events.push(...b);
      onChange();
    },
    (e) => {
      endErr = e;
      onChange();
    },
  );
  const until = (ok: () => boolean, ms = 10_000): Promise<boolean> =>
    new Promise((resolve) => {
      if (ok()) {
        resolve(true);
        return;
      }
      const timer = setTimeout(() => {
        resolve(false);
      }, ms);
      onChange = () => {
        if (!ok()) return;
        clearTimeout(timer);
        resolve(true);
      };
    });
  return { cap, events, until, end: () => endErr };
}

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  const lab = new Netns();
  const built = buildPair(lab);
  t.teardown(() => lab.destroy());
  const pathA = `/run/netns/${lab.full('a')}`;

  void t.test(
    'a target as path, /proc/PID/ns/net, PID and pod IP resolves and captures',
    async (t) => {
      await built;
      const holder = lab.spawn('a', 'sleep', ['600']);
      const pid = holder.pid ?? 0;
      const scope = { netnsGlob: `/run/netns/${lab.prefix}*`, scanProc: false };
      const byPath = await resolveTarget(pathA, scope);
      for (const target of [pathA, `/proc/${pid}/ns/net`, String(pid), A_IP]) {
        const r = await resolveTarget(target, scope);
        t.equal(r.inode, byPath.inode, `${target} → namespace a`);
        const c = await capture(r.path);
        t.comment(`${target}: worker ready after ${c.cap.startupMs?.toFixed(0) ?? '?'} ms`);
        await sendUdp(lab, 'b', A_IP, 9999, 3);
        t.ok(await c.until(() => c.events.length >= 3), `${target}: events arrive`);
        t.match(c.events[0], {
          point: 'backend',
          iface: 'v0',
          inner: { src: B_IP, dst: A_IP, dport: 9999 },
        });
        await c.cap.stop();
        t.equal(c.end(), null);
      }
      // Scanning /proc too finds the same namespace once (deduplicated by inode).
      const all = await resolveTarget(B_IP, {
        netnsGlob: `/run/netns/${lab.prefix}*`,
        scanProc: true,
      });
      t.equal(all.path, `/run/netns/${lab.full('b')}`);
      const err: unknown = await resolveTarget('10.77.9.9', scope).catch((e: unknown) => e);
      t.match(String(err), /TARGET_NOT_FOUND: no namespace holds 10\.77\.9\.9 among 2 searched/);
      holder.kill();
    },
  );

  void t.test('a missing namespace, interface or filter rejects start() clearly', async (t) => {
    await built;
    const gone = new NsCapture(spec, { netnsPath: `/run/netns/${lab.prefix}none` });
    await t.rejects(
      gone.start(
        () => undefined,
        () => undefined,
      ),
      { code: 'TARGET_NOT_FOUND' },
    );
    const noIf = new NsCapture({ ...spec, iface: 'eth9' }, { netnsPath: pathA });
    await t.rejects(
      noIf.start(
        () => undefined,
        () => undefined,
      ),
      {
        code: 'CAPTURE_NO_INTERFACE',
        message: /no interface 'eth9'; this namespace has: .*v0/,
      },
    );
  });

  void t.test('namespace deleted mid-capture → CAPTURE_NAMESPACE_GONE', async (t) => {
    await built;
    await lab.add('c');
    await lab.ip('c', 'link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'd0p');
    await lab.ip('c', 'link', 'set', 'd0', 'up');
    const c = await capture(`/run/netns/${lab.full('c')}`, { ...spec, iface: 'd0', filter: '' });
    await runCommand('ip', ['netns', 'del', lab.full('c')]);
    t.ok(await c.until(() => c.end() !== undefined, 5000), 'capture ended');
    t.equal(c.end()?.code, 'CAPTURE_NAMESPACE_GONE', String(c.end()));
    await c.cap.stop();
  });

  void t.test('interface removed mid-capture → CAPTURE_INTERFACE_GONE', async (t) => {
    await built;
    await lab.ip('a', 'link', 'add', 'd1', 'type', 'veth', 'peer', 'name', 'd1p');
    await lab.ip('a', 'link', 'set', 'd1', 'up');
    const c = await capture(pathA, { ...spec, iface: 'd1', filter: '' });
    await lab.ip('a', 'link', 'del', 'd1');
    t.ok(await c.until(() => c.end() !== undefined, 5000), 'capture ended');
    t.equal(c.end()?.code, 'CAPTURE_INTERFACE_GONE', String(c.end()));
    await c.cap.stop();
  });

  void t.test('the worker exits when its parent closes stdin', async (t) => {
    await built;
    const worker = join(__dirname, '..', '..', 'agent', 'capture', 'worker.js');
    const child = spawn(
      'nsenter',
      [`--net=${pathA}`, '--', process.execPath, worker, JSON.stringify({ spec })],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const parser = new WorkerFrameParser();
    const ready = new Promise<void>((resolve) => {
      child.stdout.on('data', (b: Buffer) => {
        if (parser.push(b).some((f) => f.type === 'control' && f.msg.kind === 'ready')) resolve();
      });
    });
    await ready;
    const exited = once(child, 'exit');
    child.stdin.end();
    const [code] = (await exited) as [number | null];
    t.equal(code, 0);
  });

  void t.test('addresses of a namespace-node and the inventory of the scope', async (t) => {
    await built;
    t.same(await nodeAddresses(pathA), [A_IP], 'no loopback, no IPv6 link-local');
    const inv = await namespaceInventory({
      netnsGlob: `/run/netns/${lab.prefix}*`,
      scanProc: false,
    });
    const a = inv.find((n) => n.path === pathA);
    t.match(a, { addresses: [A_IP], ifaces: ['lo', 'v0'] });
    t.ok(inv.some((n) => n.addresses.includes(B_IP)));
  });
}

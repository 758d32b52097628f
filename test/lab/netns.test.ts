// The namespace builder: per-run prefixes, and nothing left behind after an error mid-setup, after
// destroy(), or after SIGTERM; after SIGKILL, the next run's first namespace sweeps the leftovers
// (owner gone), and leaves alone a lab-named namespace of no known run. Runs as root with iproute2; otherwise fails with LAB_PREREQUISITE.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import {
  listNamespaces,
  Netns,
  newRunPrefix,
  OWNER_DIR,
  processStart,
  sweepOrphanLabs,
} from '../../lab/netns';
import { existsSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { missingPrerequisites } from '../../lab/prereq';
import { runScenario } from '../../lab/run';
import { findScenario, type Scenario } from '../../lab/scenarios';

function goneOrZombie(pid: number): boolean {
  try {
    return /^State:\s+[ZX]/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('each run gets its own ht<6 hex>- prefix', (t) => {
    const a = newRunPrefix();
    const b = newRunPrefix();
    t.match(a, /^ht[0-9a-f]{6}-$/);
    t.not(a, b);
    t.throws(() => new Netns('nope-'), /LAB_SETUP/);
    t.end();
  });

  void t.test('a failing command names itself and its stderr', async (t) => {
    const lab = new Netns();
    try {
      await lab.add('a');
      t.equal(lab.namespaces()[0], `${lab.prefix}a`);
      const err: unknown = await lab.ip('a', 'link', 'add', 'x0', 'type', 'no-such-kind').then(
        () => null,
        (e: unknown) => e,
      );
      t.ok(isHoptraceError(err) && err.code === 'LAB_SETUP', 'LAB_SETUP');
      t.match(String(err), /ip -n ht[0-9a-f]{6}-a link add x0 type no-such-kind/);
    } finally {
      await lab.destroy();
    }
    t.notOk((await listNamespaces()).some((n) => n.startsWith(lab.prefix)));
  });

  void t.test('destroy kills processes inside before deleting the namespaces', async (t) => {
    const lab = new Netns();
    await lab.add('p');
    const child = lab.spawn('p', 'sleep', ['60']);
    const exited = once(child, 'exit');
    await lab.destroy();
    await exited;
    t.not(child.signalCode, null, `sleep ended by ${String(child.signalCode)}`);
    t.notOk((await listNamespaces()).some((n) => n.startsWith(lab.prefix)));
    await lab.destroy(); // idempotent
  });

  void t.test('the builder cleans up after a thrown error mid-setup', async (t) => {
    const base = findScenario('kube-proxy-tun');
    if (base === undefined) throw new Error('kube-proxy-tun scenario missing');
    // Fails at the iptables step: after namespaces, veths, the socat tunnel and routes exist.
    const broken: Scenario = {
      ...base,
      name: 'broken',
      rules: [
        { kind: 'kube-proxy', serviceIp: '999.0.0.1', servicePort: 30080, randomFully: false },
      ],
    };
    const lab = new Netns();
    const out = mkdtempSync(join(tmpdir(), 'hoptrace-lab-test-'));
    try {
      const err: unknown = await runScenario(broken, { outDir: out, lab }).then(
        () => null,
        (e: unknown) => e,
      );
      t.ok(isHoptraceError(err) && err.code === 'LAB_SETUP', `LAB_SETUP thrown: ${String(err)}`);
      t.match(String(err), /iptables/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    t.same(lab.namespaces(), []);
    t.notOk(
      (await listNamespaces()).some((n) => n.startsWith(lab.prefix)),
      `no ${lab.prefix}* namespace left`,
    );
  });

  void t.test(
    'after SIGKILL the next run sweeps the leftovers; unowned ones are left',
    async (t) => {
      const child = spawn(process.execPath, [join(__dirname, 'fixtures', 'hold-lab.js')], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const [line] = (await once(child.stdout, 'data')) as [Buffer];
      const { prefix, pid } = JSON.parse(line.toString()) as { prefix: string; pid: number };
      t.ok(existsSync(join(OWNER_DIR, prefix)), 'the run wrote its owner file');
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
      t.ok((await listNamespaces()).includes(`${prefix}held`), 'SIGKILL left the namespace');
      // A lab-named namespace of no known run (an older version's leftover), and a live run whose
      // owner file names this process: neither may be touched.
      const stray = `${newRunPrefix()}stray`;
      execFileSync('ip', ['netns', 'add', stray]);
      const liveLab = new Netns();
      try {
        await liveLab.add('live');
        const report = await sweepOrphanLabs();
        t.same(report.removed, [`${prefix}held`], 'the dead run removed');
        t.ok(report.unowned.includes(stray), 'the unowned one named');
        const names = await listNamespaces();
        t.notOk(
          names.some((n) => n.startsWith(prefix)),
          `no ${prefix}* namespace left`,
        );
        t.ok(names.includes(stray), 'the unowned one left alone');
        t.ok(names.includes(`${liveLab.prefix}live`), 'the live run left alone');
        t.notOk(existsSync(join(OWNER_DIR, prefix)), 'its owner file removed');
        t.ok(goneOrZombie(pid), 'the process inside is gone');
        // A reused PID is not the owner: same PID, another start time.
        const fake = newRunPrefix();
        writeFileSync(
          join(OWNER_DIR, fake),
          `${process.pid} ${Number(processStart(process.pid)) + 1}\n`,
        );
        execFileSync('ip', ['netns', 'add', `${fake}x`]);
        t.same((await sweepOrphanLabs()).removed, [`${fake}x`], 'a reused PID is not the owner');
      } finally {
        await liveLab.destroy();
        execFileSync('ip', ['netns', 'del', stray]);
      }
      t.notOk(existsSync(join(OWNER_DIR, liveLab.prefix)), 'destroy removed the owner file');
    },
  );

  void t.test('SIGTERM removes the namespaces and their processes', async (t) => {
    const child = spawn(process.execPath, [join(__dirname, 'fixtures', 'hold-lab.js')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(child.stdout, 'data')) as [Buffer];
    const { prefix, pid } = JSON.parse(line.toString()) as { prefix: string; pid: number };
    t.ok((await listNamespaces()).includes(`${prefix}held`), 'namespace exists while held');
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    t.equal(code, 143);
    t.notOk(
      (await listNamespaces()).some((n) => n.startsWith(prefix)),
      `no ${prefix}* namespace left`,
    );
    // Reparented to init once its parent exited; a zombie awaiting reaping counts as gone.
    t.ok(goneOrZombie(pid), 'the process inside is gone');
  });
}

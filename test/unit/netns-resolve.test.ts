// Target parsing, address parsing and pod-IP resolution against an injected inventory, and the
// scope of path and PID targets against this process's own namespace: no namespaces created (the
// live forms are in test/lab/live-capture.test.ts).
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import {
  globToRegExp,
  parseIpAddrJson,
  type NamespaceInfo,
  type NetnsScope,
} from '../../agent/netns/addresses';
import { parseTarget, resolveTarget, sameAddress } from '../../agent/netns/resolve';
import { isHoptraceError } from '../../common/errors';

void t.test('target forms', (t) => {
  t.same(parseTarget('/run/netns/x'), { kind: 'path', path: '/run/netns/x' });
  t.same(parseTarget('/proc/42/ns/net'), { kind: 'path', path: '/proc/42/ns/net' });
  t.same(parseTarget(' 4242 '), { kind: 'pid', pid: 4242 });
  t.same(parseTarget('10.244.1.10'), { kind: 'ip', ip: '10.244.1.10' });
  t.same(parseTarget('[fd00::5]'), { kind: 'ip', ip: 'fd00::5' });
  t.throws(() => parseTarget('web-1'), { code: 'TARGET_INVALID' });
  t.end();
});

void t.test('ip -j addr: every address but loopback and IPv6 link-local', (t) => {
  // Shape of `ip -j addr show` (iproute2 6.x), trimmed.
  const json = JSON.stringify([
    {
      ifname: 'lo',
      flags: ['LOOPBACK', 'UP'],
      link_type: 'loopback',
      addr_info: [
        { family: 'inet', local: '127.0.0.1', scope: 'host' },
        { family: 'inet6', local: '::1', scope: 'host' },
      ],
    },
    {
      ifname: 'cni0',
      flags: ['UP'],
      link_type: 'ether',
      addr_info: [
        { family: 'inet', local: '10.244.2.1', scope: 'global' },
        { family: 'inet6', local: 'fe80::1', scope: 'link' },
      ],
    },
    {
      ifname: 'up0',
      flags: ['UP'],
      link_type: 'ether',
      addr_info: [
        { family: 'inet', local: '192.168.50.2', scope: 'global' },
        { family: 'inet6', local: 'fd00::2', scope: 'global' },
      ],
    },
    { ifname: 'down0', flags: [], link_type: 'ether', addr_info: [] },
  ]);
  t.same(parseIpAddrJson(json), {
    ifaces: ['lo', 'cni0', 'up0', 'down0'],
    addresses: ['10.244.2.1', '192.168.50.2', 'fd00::2'],
  });
  t.end();
});

void t.test('globs match the last path part only', (t) => {
  t.ok(globToRegExp('ht123abc-*').test('ht123abc-vpn-pod'));
  t.notOk(globToRegExp('ht123abc-*').test('ht999999-vpn-pod'));
  t.ok(globToRegExp('a?c').test('abc'));
  t.notOk(globToRegExp('a.c').test('abc'), 'dots are literal');
  t.end();
});

void t.test('addresses compare canonically', (t) => {
  t.ok(sameAddress('FD00:0:0::5', 'fd00::5'));
  t.ok(sameAddress('fe80::1%eth0', 'fe80::1'));
  t.notOk(sameAddress('10.0.0.1', '10.0.0.10'));
  t.end();
});

void t.test('pod IP → the one namespace holding it', async (t) => {
  const inv: NamespaceInfo[] = [
    { path: '/', inode: 1, addresses: ['10.244.1.10'], ifaces: ['eth0'] },
    { path: '/proc/self/ns/net', inode: 2, addresses: ['10.244.2.5', 'fd00::5'], ifaces: ['eth0'] },
  ];
  const inventory = () => Promise.resolve(inv);
  // Paths here are stat-able files so the final check passes.
  const r = await resolveTarget('fd00:0::5', {}, { inventory });
  t.equal(r.path, '/proc/self/ns/net');
  t.equal(r.via, 'ip');

  const missing: unknown = await resolveTarget(
    '10.9.9.9',
    { netnsGlob: '/run/netns/ht1-*', scanProc: false },
    { inventory },
  ).catch((e: unknown) => e);
  t.ok(isHoptraceError(missing) && missing.code === 'TARGET_NOT_FOUND', String(missing));
  t.match(String(missing), /10\.9\.9\.9 among 2 searched \(\/run\/netns\/ht1-\*\)/);

  const twice = () =>
    Promise.resolve([
      ...inv,
      { path: '/proc/1/ns/net', inode: 3, addresses: ['10.244.1.10'], ifaces: [] },
    ]);
  const amb: unknown = await resolveTarget('10.244.1.10', {}, { inventory: twice }).catch(
    (e: unknown) => e,
  );
  t.ok(isHoptraceError(amb) && amb.code === 'TARGET_AMBIGUOUS', String(amb));

  const gone: unknown = await resolveTarget('/run/netns/ht000000-none').catch((e: unknown) => e);
  t.ok(isHoptraceError(gone) && gone.code === 'TARGET_OUT_OF_SCOPE', String(gone));
  const noPid: unknown = await resolveTarget('999999999').catch((e: unknown) => e);
  t.ok(isHoptraceError(noPid) && noPid.code === 'TARGET_NOT_FOUND', String(noPid));
});

void t.test(
  "a path or PID target must be a network namespace in the agent's scope (res.js)",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'ht-scope-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    // A view of this process's own namespace under a glob, and a regular file beside it.
    symlinkSync(`/proc/${process.pid}/ns/net`, join(dir, 'ns-own'));
    writeFileSync(join(dir, 'ns-file'), 'not a namespace\n');
    const pid = String(process.pid);
    const code = async (target: string, scope: NetnsScope): Promise<string> => {
      try {
        const r = await resolveTarget(target, scope);
        return `ok ${r.via}`;
      } catch (e) {
        return isHoptraceError(e) ? e.code : String(e);
      }
    };
    const nothing = { netnsGlob: join(dir, 'none-*'), scanProc: false };
    const procs = { netnsGlob: join(dir, 'none-*'), scanProc: true };
    const view = { netnsGlob: join(dir, 'ns-*'), scanProc: false };
    const cases: [string, NetnsScope, string][] = [
      // The reviewer's: /etc/passwd was taken as a namespace, and the scope was not applied.
      ['/etc/passwd', procs, 'TARGET_OUT_OF_SCOPE'],
      ['/etc/passwd', view, 'TARGET_OUT_OF_SCOPE'],
      [join(dir, 'ns-file'), view, 'TARGET_OUT_OF_SCOPE'],
      // A namespace file, but a mount namespace: no process's network namespace.
      ['/proc/self/ns/mnt', procs, 'TARGET_OUT_OF_SCOPE'],
      // The agent's own namespace, only where the scope holds it.
      ['/proc/self/ns/net', nothing, 'TARGET_OUT_OF_SCOPE'],
      [`/proc/${pid}/ns/net`, nothing, 'TARGET_OUT_OF_SCOPE'],
      [pid, nothing, 'TARGET_OUT_OF_SCOPE'],
      ['/proc/self/ns/net', procs, 'ok path'],
      [pid, procs, 'ok pid'],
      [join(dir, 'ns-own'), view, 'ok path'],
      // --no-proc-scan, but the process's namespace is one the glob names: in scope.
      [pid, view, 'ok pid'],
      [`/proc/${pid}/ns/net`, view, 'ok path'],
    ];
    for (const [target, scope, want] of cases)
      t.equal(await code(target, scope), want, `${target} with ${JSON.stringify(scope)}`);
    // Missing, a regular file, a namespace outside the scope: one answer, so the collector's side
    // cannot tell which files exist on the node.
    const say = async (target: string): Promise<string> => {
      const e: unknown = await resolveTarget(target, view).catch((x: unknown) => x);
      return isHoptraceError(e) ? e.message.replace(target, 'PATH') : String(e);
    };
    const missing = await say('/etc/no-such-file');
    t.equal(await say('/etc/passwd'), missing);
    t.equal(await say('/proc/self/ns/mnt'), missing);
    t.match(missing, /PATH is not a network namespace in this agent's scope \(.*ns-\*\)/);
  },
);

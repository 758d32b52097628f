/**
 * `npm install -g` of the packed package puts kubectl-hoptrace on PATH where kubectl finds it:
 * packs the checkout (`npm pack`, dist/ as built), unpacks the tarball (exactly the files a user
 * gets) and installs that folder globally into a temporary prefix with `--offline`, its
 * dependencies being the checkout's node_modules (linked beside it). Installing the tarball itself
 * would resolve its dependencies' registry metadata, which only a network or a warm npm cache
 * has: CI on a fresh machine failed with ENOTCACHED. Then Debian's kubectl (`kubernetes-client`,
 * which scripts/setup.sh installs) lists the plugin and runs `kubectl hoptrace --help`. Without
 * kubectl this fails with the reason; it never skips.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

const ROOT = join(__dirname, '..', '..', '..');

void t.test('kubectl plugin list finds kubectl-hoptrace after npm install -g', (t) => {
  const kubectl = spawnSync('bash', ['-c', 'command -v kubectl'], { encoding: 'utf8' });
  if (kubectl.status !== 0) {
    t.fail(
      'kubectl is not on PATH (Debian: apt-get install kubernetes-client; scripts/setup.sh does)',
    );
    t.end();
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-global-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const packed = execFileSync(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', dir],
    { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const tarball = join(dir, (JSON.parse(packed) as { filename: string }[])[0]?.filename ?? '');
  const pkg = join(dir, 'package');
  mkdirSync(pkg);
  execFileSync('tar', ['xzf', tarball, '-C', pkg, '--strip-components=1']);
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
  const prefix = join(dir, 'prefix');
  // --ignore-scripts: the postinstall would build the native addon, which this test is not about.
  const install = spawnSync(
    'npm',
    [
      'install',
      '-g',
      '--prefix',
      prefix,
      '--offline',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      pkg,
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  t.equal(install.status, 0, `npm install -g: ${install.stderr}`);
  const bin = join(prefix, 'bin');
  const env = {
    ...process.env,
    PATH: `${bin}:${process.env['PATH'] ?? ''}`,
    KUBECONFIG: join(dir, 'none'),
  };
  const list = spawnSync('kubectl', ['plugin', 'list'], { cwd: dir, env, encoding: 'utf8' });
  t.match(list.stdout, new RegExp(`^${join(bin, 'kubectl-hoptrace')}$`, 'm'), list.stderr);
  const help = spawnSync('kubectl', ['hoptrace', '--help'], { cwd: dir, env, encoding: 'utf8' });
  t.equal(help.status, 0, help.stderr);
  t.match(help.stdout, /^usage: kubectl hoptrace <command> \[options\]/);
  t.end();
});

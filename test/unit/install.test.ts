/**
 * `hoptrace` outside the checkout, as the README's Install section says: `npm pack`, then
 * `npm install -g` of the tarball into a fresh prefix, then the command on PATH from another
 * folder decodes a capture and analyses three files, and the kubectl plugin `kubectl-hoptrace`
 * is on PATH beside it (with the manifests and the TLS script install needs). The tarball must carry what the command
 * needs at run time (dist/, proto/, the addon's sources, which its postinstall builds) and
 * nothing of the test suite.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PCAPS } from './corpus';

const root = join(__dirname, '..', '..', '..');

function run(
  cmd: string,
  args: string[],
  cwd: string,
  env = process.env,
): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 400_000 });
}

void t.test('npm pack + npm install -g puts a working hoptrace on PATH', (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'hoptrace-install-'));
  t.teardown(() => {
    rmSync(tmp, { recursive: true, force: true });
  });
  // --ignore-scripts: the suite runs from dist/, which `npm test` has just built (prepack would
  // rebuild it under the feet of the tests running beside this one).
  const pack = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], root);
  t.equal(pack.status, 0, `npm pack: ${pack.stderr}`);
  const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
  const files = info!.files.map((f) => f.path);
  for (const need of [
    'bin/hoptrace',
    'bin/kubectl-hoptrace',
    'dist/cli/main.js',
    'dist/cli/kubectl/main.js',
    'deploy/base/kustomization.yaml',
    'deploy/base/collector.yaml',
    'scripts/deploy-tls.sh',
    'dist/core/decode/frame.js',
    'proto/hoptrace.proto',
    'native/pcap-batch/binding.gyp',
    'scripts/build-native.sh',
  ])
    t.ok(files.includes(need), `the tarball has ${need}`);
  t.notOk(
    files.some((f) => f.startsWith('dist/test/') || f.startsWith('test/')),
    'no test code or data in the tarball',
  );

  const prefix = join(tmp, 'prefix');
  const install = run(
    'npm',
    [
      'install',
      '-g',
      '--prefix',
      prefix,
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      join(tmp, info!.filename),
    ],
    tmp,
  );
  t.equal(install.status, 0, `npm install -g: ${install.stderr.slice(-2000)}`);
  const bin = join(prefix, 'bin', 'hoptrace');
  t.ok(existsSync(bin), 'hoptrace is in the prefix bin/');
  const env = { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` };

  const decode = run('hoptrace', ['decode', join(PCAPS, 'zeek_http-get.pcap')], tmp, env);
  t.equal(decode.status, 0, `hoptrace decode: ${decode.stderr}`);
  t.match(decode.stdout, /^1 /m, 'one line per frame');
  t.match(decode.stdout, /tcp/);

  const bad = run('hoptrace', ['decode', join(PCAPS, 'README.md')], tmp, env);
  t.equal(bad.status, 1);
  t.match(bad.stderr, /FILE_BAD_MAGIC/, 'a clear error, not a stack trace');
  t.notMatch(bad.stderr, /\n\s+at /);

  // The kubectl plugin beside it: kubectl's convention finds `kubectl-hoptrace` on PATH.
  t.ok(
    existsSync(join(prefix, 'bin', 'kubectl-hoptrace')),
    'kubectl-hoptrace is in the prefix bin/',
  );
  const plugin = run('kubectl-hoptrace', ['install', '--help'], tmp, env);
  t.equal(plugin.status, 0, `kubectl-hoptrace install --help: ${plugin.stderr}`);
  t.match(plugin.stdout, /^usage: kubectl hoptrace install --image IMAGE/);
  const noImage = run('kubectl-hoptrace', ['install'], tmp, env);
  t.equal(noImage.status, 2);
  t.match(noImage.stderr, /CLI_USAGE: kubectl hoptrace install: give --image/);
  const kubectl = run('kubectl', ['plugin', 'list'], tmp, env);
  if (kubectl.error === undefined) {
    t.match(kubectl.stdout, /\/bin\/kubectl-hoptrace$/m, 'kubectl plugin list finds it');
  } else {
    t.comment('no kubectl here: kubectl plugin list not checked');
  }

  const addon = join(
    prefix,
    'lib',
    'node_modules',
    'hoptrace',
    'native',
    'pcap-batch',
    'build',
    'Release',
    'pcap_batch.node',
  );
  t.ok(existsSync(addon), 'postinstall built the native addon in the installed package');
  t.end();
});

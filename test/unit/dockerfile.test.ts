/**
 * The Dockerfile and scripts/image.sh, checked without a container engine: two stages, node-gyp
 * pointed at the base image's headers before anything compiles (so it never downloads them), no
 * compiler in the runtime stage, a numeric non-root default user, the OCI version label fed from
 * package.json, every COPY source present and not excluded by .dockerignore, and image.sh refusing
 * to pass when no engine is usable. What needs an engine (the addons loading inside the built
 * image) is image.sh's own checks; README "The image" records their result on this machine.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

const ROOT = join(__dirname, '..', '..', '..');

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | undefined;
  body: Instruction[];
}

/** Dockerfile instructions with `\` continuations joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const logical: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (cur === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' ';
      continue;
    }
    logical.push(cur + line);
    cur = '';
  }
  return logical.map((l) => {
    const m = /^(\S+)\s*(.*)$/.exec(l);
    return { op: (m?.[1] ?? '').toUpperCase(), args: m?.[2] ?? '' };
  });
}

function stages(list: Instruction[]): Stage[] {
  const out: Stage[] = [];
  for (const i of list) {
    if (i.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args);
      out.push({ from: m?.[1] ?? i.args, name: m?.[2], body: [] });
    } else out.at(-1)?.body.push(i);
  }
  return out;
}

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const all = stages(instructions(dockerfile));
const build = all.find((s) => s.name === 'build');
const runtime = all.at(-1);
const COMPILERS = ['g++', 'gcc', 'clang', 'make', 'python3', 'build-essential', 'libpcap-dev'];

void t.test('two stages on node:20-bookworm-slim: build, then the runtime', (t) => {
  t.equal(all.length, 2);
  t.ok(build, 'a stage named build');
  t.not(runtime, build, 'the last stage is not the build stage');
  for (const s of all) t.equal(s.from, 'node:20-bookworm-slim');
  t.end();
});

void t.test('npm_config_nodedir points node-gyp at local headers before npm ci', (t) => {
  const body = build?.body ?? [];
  const env = body.findIndex(
    (i) => i.op === 'ENV' && /\bnpm_config_nodedir=\/usr\/local\b/.test(i.args),
  );
  const ci = body.findIndex((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args));
  const native = body.findIndex((i) => i.op === 'RUN' && /build:native/.test(i.args));
  t.ok(env >= 0, 'ENV npm_config_nodedir=/usr/local in the build stage');
  t.ok(ci > env, 'npm ci (which builds cap) comes after it');
  t.ok(native > env, 'build:native comes after it');
  // A base without the headers stops the build instead of letting node-gyp download them.
  const guard = body.findIndex(
    (i) => i.op === 'RUN' && i.args.includes('test -f /usr/local/include/node/node_api.h'),
  );
  t.ok(guard >= 0 && guard < ci, 'the headers are checked before npm ci');
  t.end();
});

void t.test(
  'the runtime stage installs no compiler and copies its build from the build stage',
  (t) => {
    const body = runtime?.body ?? [];
    for (const i of body.filter((i) => i.op === 'RUN')) {
      const words = i.args.split(/\s+/);
      for (const c of COMPILERS) t.notOk(words.includes(c), `runtime RUN does not install ${c}`);
    }
    const copies = body.filter((i) => i.op === 'COPY');
    t.ok(copies.some((c) => c.args.startsWith('--from=build ') && c.args.includes('node_modules')));
    t.ok(copies.some((c) => c.args.startsWith('--from=build ') && /\bdist\b/.test(c.args)));
    t.end();
  },
);

void t.test('numeric non-root default user; the agent asks for uid 0 explicitly', (t) => {
  const users = (runtime?.body ?? []).filter((i) => i.op === 'USER');
  t.same(
    users.map((u) => u.args),
    ['1000:1000'],
  );
  const agent = readFileSync(join(ROOT, 'deploy', 'base', 'agent.yaml'), 'utf8');
  t.match(agent, /runAsUser: 0\b/, 'agent.yaml sets runAsUser: 0');
  const collector = readFileSync(join(ROOT, 'deploy', 'base', 'collector.yaml'), 'utf8');
  t.match(collector, /runAsUser: 1000\b/);
  t.match(collector, /runAsNonRoot: true/);
  t.end();
});

void t.test(
  'the OCI version label comes from a build ARG that image.sh fills from package.json',
  (t) => {
    const body = runtime?.body ?? [];
    t.ok(
      body.some((i) => i.op === 'ARG' && /^VERSION(=|$)/.test(i.args)),
      'ARG VERSION in the runtime stage',
    );
    const label = body.find((i) => i.op === 'LABEL')?.args ?? '';
    t.match(label, /org\.opencontainers\.image\.version="\$\{VERSION\}"/);
    t.match(label, /org\.opencontainers\.image\.title=/);
    const script = readFileSync(join(ROOT, 'scripts', 'image.sh'), 'utf8');
    t.match(script, /require\('\.\/package\.json'\)\.version/);
    t.match(script, /--build-arg "VERSION=\$version"/);
    t.end();
  },
);

/** .dockerignore patterns as plain prefixes (all this project's are directory or file names). */
const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));

void t.test('.dockerignore keeps the context to sources', (t) => {
  for (const p of ['.git', 'node_modules', 'dist', 'native/pcap-batch/build'])
    t.ok(ignored.includes(p), `${p} is ignored (the image builds its own)`);
  t.end();
});

void t.test('every COPY source from the context exists and is not ignored', (t) => {
  const sources = all
    .flatMap((s) => s.body)
    .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from='))
    .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
  t.ok(sources.length >= 10);
  for (const src of sources) {
    t.ok(existsSync(join(ROOT, src)), `${src} exists`);
    t.notOk(
      ignored.some((p) => src === p || src.startsWith(p + '/')),
      `${src} is not excluded by .dockerignore`,
    );
  }
  t.end();
});

void t.test('image.sh with no usable engine says so and exits 5 (never a silent pass)', (t) => {
  const bin = mkdtempSync(join(tmpdir(), 'hoptrace-image-'));
  t.teardown(() => {
    rmSync(bin, { recursive: true, force: true });
  });
  // A PATH with what the script needs to get that far, and no docker or podman.
  for (const cmd of ['node', 'dirname', 'sed', 'cut', 'tr', 'date']) {
    const at = execFileSync('bash', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).trim();
    symlinkSync(at, join(bin, cmd));
  }
  const none = spawnSync('/bin/bash', [join(ROOT, 'scripts', 'image.sh')], {
    env: { PATH: bin },
    encoding: 'utf8',
  });
  t.equal(none.status, 5);
  t.match(none.stderr, /NO_ENGINE: no usable container engine/);
  // A docker whose daemon does not answer is not usable either.
  writeFileSync(join(bin, 'docker'), '#!/bin/bash\nexit 1\n', { mode: 0o755 });
  const dead = spawnSync('/bin/bash', [join(ROOT, 'scripts', 'image.sh'), '--engine', 'docker'], {
    env: { PATH: bin },
    encoding: 'utf8',
  });
  t.equal(dead.status, 5);
  t.match(dead.stderr, /NO_ENGINE: docker does not answer/);
  t.end();
});

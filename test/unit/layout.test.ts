/**
 * The layout keeps its promises (ARCHITECTURE.md): the folder table names exactly the tree, no
 * module imports across the rule (ESLint refuses such an import, checked here on a real file),
 * no import cycle anywhere, no file reaches outside the repository for its data, and the public
 * captures are the bytes SOURCES.tsv says they are.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import t from 'tap';
import { PCAPS } from './corpus';

const root = join(__dirname, '..', '..', '..');

/** Folders that are made, not written: ignored by git, never in a clone. */
const GENERATED = new Set(['node_modules', 'dist', 'lab-out', 'reports', 'tmp']);

function topFolders(): string[] {
  return readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !GENERATED.has(e.name))
    .map((e) => e.name)
    .sort();
}

/** Every file under `dir` (relative to root), generated folders and the addon's build left out. */
function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
    if (GENERATED.has(e.name) || e.name === '.git' || e.name === '.tap' || e.name === 'build')
      continue;
    const rel = join(dir, e.name);
    if (e.isDirectory()) walk(rel, out);
    else out.push(rel);
  }
  return out;
}

/** First-column cells of ARCHITECTURE.md's table rows, as written (`core/`, `core/decode/`). */
function tableFolders(): string[] {
  const md = readFileSync(join(root, 'ARCHITECTURE.md'), 'utf8');
  return [...md.matchAll(/^\| `([a-z][a-z0-9-]*(?:\/[a-z0-9-]+)*)\/` \|/gm)].map((m) => m[1]!);
}

void t.test("ARCHITECTURE.md's folder table names every top-level folder, and only those", (t) => {
  const named = tableFolders().filter((f) => !f.includes('/'));
  t.strictSame([...named].sort(), topFolders());
  t.end();
});

void t.test('ARCHITECTURE.md names every folder of core/, and only those', (t) => {
  const named = tableFolders().filter((f) => f.startsWith('core/'));
  const tree = readdirSync(join(root, 'core'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => `core/${e.name}`)
    .sort();
  t.ok(tree.length > 0);
  t.strictSame([...named].sort(), tree);
  t.end();
});

const CODE_FOLDERS = ['core', 'common', 'native', 'offline', 'agent', 'collector', 'cli', 'lab'];
const SOURCES = [...CODE_FOLDERS, 'bench', 'scripts', 'test']
  .flatMap((d) => walk(d))
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));

/** Relative imports of a TypeScript file, resolved to repository paths. */
function importsOf(file: string): string[] {
  const src = readFileSync(join(root, file), 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
    const target = normalize(join(dirname(file), m[1]!));
    const candidates = [`${target}.ts`, join(target, 'index.ts')];
    const hit = candidates.find((c) => SOURCES.includes(c));
    if (hit !== undefined) out.push(hit);
  }
  return out;
}

void t.test('no import cycle anywhere (type imports included)', (t) => {
  const graph = new Map(SOURCES.map((f) => [f, importsOf(f)]));
  t.ok(graph.size > 100, `${graph.size} modules read`);
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const stack: string[] = [];
  const visit = (f: string): void => {
    state.set(f, 'open');
    stack.push(f);
    for (const g of graph.get(f) ?? []) {
      if (state.get(g) === 'open') cycles.push([...stack.slice(stack.indexOf(g)), g].join(' → '));
      else if (!state.has(g)) visit(g);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of graph.keys()) if (!state.has(f)) visit(f);
  t.strictSame(cycles, []);
  t.end();
});

void t.test('core/ imports only common/ and itself', (t) => {
  const outside = SOURCES.filter((f) => f.startsWith('core/')).flatMap((f) =>
    importsOf(f)
      .filter((g) => !g.startsWith('core/') && !g.startsWith('common/'))
      .map((g) => `${f} → ${g}`),
  );
  t.strictSame(outside, []);
  t.end();
});

void t.test('the lint refuses an import across the rule', (t) => {
  // A real file in the tree (typed linting reads it from disk), removed whatever happens.
  const probes: [string, string, RegExp[]][] = [
    [
      'core/report/layout-probe.ts',
      "import { readFileSync } from 'node:fs';\nimport { SessionManager } from '../../collector/sessions';\nexport const probe = [readFileSync, SessionManager, Date.now()];\n",
      [/core\/ may import only common/, /core\/ is pure: no I\/O/, /the clock is passed in/],
    ],
    [
      'cli/layout-probe.ts',
      "import { NsCapture } from '../agent/capture/ns-capture';\nimport { startAgent } from '../agent';\nexport const probe = [NsCapture, startAgent];\n",
      [/'\.\.\/agent\/capture\/ns-capture' import is restricted[^\n]*cli\/ may import only/],
    ],
    [
      'collector/layout-probe.ts',
      "import { startAgent } from '../agent';\nexport const probe = [startAgent];\n",
      [/'\.\.\/agent' import is restricted[^\n]*collector\/ may import only core, common/],
    ],
  ];
  const paths = probes.map(([file]) => join(root, file));
  try {
    for (const [file, code] of probes) writeFileSync(join(root, file), code);
    const r = spawnSync(
      process.execPath,
      [
        join(root, 'node_modules', 'eslint', 'bin', 'eslint.js'),
        '--no-warn-ignored',
        ...probes.map(([file]) => file),
      ],
      { cwd: root, encoding: 'utf8', timeout: 300_000 },
    );
    t.equal(r.status, 1, 'the lint fails');
    // ESLint prints one section per file, headed by its absolute path.
    const sections = r.stdout.split(/^(?=\/)/m);
    for (const [file, , expected] of probes) {
      const section = sections.find((x) => x.startsWith(join(root, file))) ?? '';
      for (const re of expected) t.match(section, re, `${file}: refused for the rule's reason`);
      // The allowed import beside it (the agent's index.ts, from cli/) is not reported.
      t.notMatch(
        section,
        /'\.\.\/agent' import is restricted[^\n]*cli\//,
        `${file}: index.ts is open`,
      );
    }
  } finally {
    for (const path of paths) rmSync(path, { force: true });
  }
  t.end();
});

void t.test('no file of the project reads outside the repository for its data', (t) => {
  // The corpus and the flood sender live here now (test/pcaps, bench/udp-flood.c): a clone alone
  // passes its suite. The needles are built so that this file does not match itself.
  const parent = ['..', 'shared'].join('/');
  const joined = new RegExp(`join\\([^)]*'\\.\\.'\\s*,\\s*'${'sha' + 'red'}'`);
  const files = [...CODE_FOLDERS, 'bench', 'scripts', 'test', 'deploy', '.ci']
    .flatMap((d) => walk(d))
    .concat(['package.json', 'Dockerfile', 'tsconfig.json', 'eslint.config.mjs'])
    .filter((f) => /\.(ts|mjs|js|sh|json|ya?ml|c|h|gyp)$|(^|\/)(Dockerfile|run)$/.test(f));
  t.ok(files.length > 100, `${files.length} files read`);
  const offenders = files.filter((f) => {
    const text = readFileSync(join(root, f), 'utf8');
    return text.includes(parent) || joined.test(text);
  });
  t.strictSame(offenders, []);
  t.end();
});

void t.test('the public captures are the bytes SOURCES.tsv names, with their licences', (t) => {
  const rows = readFileSync(join(PCAPS, 'SOURCES.tsv'), 'utf8').trim().split('\n');
  const head = rows.shift()!.split('\t');
  const fileAt = head.indexOf('file');
  const shaAt = head.indexOf('sha256');
  const licenceAt = head.indexOf('license_of_repo');
  t.ok(fileAt >= 0 && shaAt >= 0 && licenceAt >= 0, 'SOURCES.tsv has file, sha256, licence');
  const notice = readFileSync(join(PCAPS, 'NOTICE'), 'utf8');
  const listed = new Set<string>();
  for (const row of rows) {
    const cols = row.split('\t');
    const file = cols[fileAt]!;
    listed.add(file);
    const sha = createHash('sha256')
      .update(readFileSync(join(PCAPS, file)))
      .digest('hex');
    t.equal(sha, cols[shaAt], `${file}: sha256`);
    const prefix = file.slice(0, file.indexOf('_') + 1);
    t.ok(notice.includes(`${prefix}*`), `${file}: NOTICE covers ${prefix}*`);
  }
  const captures = readdirSync(PCAPS).filter((f) => /\.pcap(ng)?$/.test(f));
  t.strictSame(captures.sort(), [...listed].sort(), 'every capture is listed, every listed exists');
  t.equal(relative(root, PCAPS), join('test', 'pcaps'));
  t.end();
});

void t.test("the image's build stage copies every folder tsconfig.json compiles", (t) => {
  const tsconfig = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')) as {
    include: string[];
  };
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const copied = new Set([...dockerfile.matchAll(/^COPY ([a-z]+) \1$/gm)].map((m) => m[1]!));
  t.strictSame(
    tsconfig.include.filter((f) => !copied.has(f)),
    [],
    'every compiled folder is copied',
  );
  t.strictSame(
    topFolders().filter((f) => !tsconfig.include.includes(f) && fsHasTs(f)),
    [],
    'every folder with TypeScript is compiled',
  );
  t.end();
});

function fsHasTs(folder: string): boolean {
  return walk(folder).some((f) => f.endsWith('.ts'));
}

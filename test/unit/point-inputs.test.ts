/**
 * What `analyze` takes as its points' files (offline/point-inputs.ts): a later point may be standard
 * input or a pipe, read once (the analysis reads a later point once); the first point, read twice,
 * may not — refused with CLI_BAD_POINT naming it, not FILE_NOT_FOUND EBADF or FILE_BAD_MAGIC from
 * a header check that took the stream's first bytes; and one capture given for two points (the
 * same path, a link, `-` beside /dev/stdin) is refused, never counted as two witnesses.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  linkSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import t from 'tap';
import { isHoptraceError } from '../../common/errors';
import { checkPointInputs } from '../../offline/point-inputs';
import { PCAPS } from './corpus';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');
const httpGet = join(PCAPS, 'zeek_http-get.pcap');
const dir = mkdtempSync(join(tmpdir(), 'ht-point-inputs-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
const decap = join(dir, 'decap.pcap');
const backend = join(dir, 'backend.pcap');
copyFileSync(httpGet, decap);
copyFileSync(httpGet, backend);
const fifo = join(dir, 'backend.fifo');
const made = spawnSync('mkfifo', [fifo]);
if (made.status !== 0) throw new Error(`mkfifo failed: ${String(made.stderr)}`);

/** The HoptraceError message checkPointInputs throws for `files` (as points a, b, …), or ''. */
function refusal(files: string[]): string {
  try {
    checkPointInputs(files.map((file, i) => ({ name: String.fromCharCode(97 + i), file })));
    return '';
  } catch (e) {
    if (!isHoptraceError(e)) throw e;
    return `${e.code}: ${e.detail} (${e.hint ?? ''})`;
  }
}

void t.test('the first point must be a file: a stream is refused, saying what to do', (t) => {
  const streams: [string, string][] = [
    ['-', 'standard input'],
    [fifo, 'a pipe'],
  ];
  for (const [first, kind] of streams) {
    const why = refusal([first, backend]);
    t.match(why, /^CLI_BAD_POINT: a=/, `${kind}: CLI_BAD_POINT naming the point`);
    t.match(why, new RegExp(`${kind}.* cannot be the first point`), kind);
    t.match(why, /save it to a file first/, `${kind}: what to do`);
  }
  t.equal(refusal([decap, '-']), '', 'standard input as a later point');
  t.equal(refusal([decap, fifo]), '', 'a pipe as a later point');
  t.end();
});

void t.test('one capture for two points is refused, naming both', (t) => {
  const link = join(dir, 'hard.pcap');
  linkSync(decap, link);
  const sym = join(dir, 'sym.pcap');
  symlinkSync(decap, sym);
  const cases: [string, string[]][] = [
    ['the same path', [decap, backend, decap]],
    ['a relative path to it', [decap, relative(process.cwd(), decap)]],
    ['a hard link', [decap, link]],
    ['a symbolic link', [decap, sym]],
    ['standard input twice', [decap, '-', '-']],
  ];
  for (const [what, files] of cases) {
    const last = String.fromCharCode(96 + files.length);
    t.match(
      refusal(files),
      new RegExp(`^CLI_BAD_POINT: points '.' and '${last}' read the same capture`),
      what,
    );
  }
  t.match(refusal([decap, backend, decap]), /points 'a' and 'c'/, 'the two points are named');
  t.equal(refusal([decap, backend]), '', 'two copies are two files');
  t.end();
});

/** `hoptrace analyze --json` with `stdin` as its standard input (a Buffer, or 'ignore'). */
function analyze(args: string[], stdin: Buffer | 'ignore') {
  const r = spawnSync(process.execPath, [bin, 'analyze', ...args], {
    input: stdin === 'ignore' ? undefined : stdin,
    stdio: [stdin === 'ignore' ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const client = ['--client', '141.142.228.5', '--json'];
const verdictOf = (stdout: string): { layer: string } =>
  (JSON.parse(stdout) as { verdict: { layer: string } }).verdict;
const layerOf = (stdout: string): string => verdictOf(stdout).layer;

void t.test('standard input as a later point gives the verdict the file gives', (t) => {
  const file = analyze(
    ['--point', `decap=${decap}`, '--point', `backend=${backend}`, ...client],
    'ignore',
  );
  t.equal(file.code, 0, file.stderr);
  t.equal(layerOf(file.stdout), 'preserved');
  const rd = join(dir, 'rd-stdin');
  const piped = analyze(
    ['--point', `decap=${decap}`, '--point', 'backend=-', ...client, '--report-dir', rd],
    readFileSync(backend),
  );
  t.equal(piped.code, 0, piped.stderr);
  t.same(verdictOf(piped.stdout), verdictOf(file.stdout), 'the same verdict');
  const doc = JSON.parse(readFileSync(join(rd, 'report.json'), 'utf8')) as {
    inputs: { name: string; sha256: string | null }[];
    evidence: { problems: { point: string; code: string; detail: string }[] };
    identityHeaders: { notScanned: { point: string; why: string }[] };
  };
  t.same(
    doc.inputs.map((i) => [i.name, i.sha256 === null]),
    [
      ['decap', false],
      ['backend', true],
    ],
    'standard input is not hashed',
  );
  t.match(doc.evidence.problems, [{ point: 'backend', code: 'FILE_STREAM' }]);
  t.match(doc.evidence.problems[0]?.detail, /standard input \(-\) was read once/);
  t.match(doc.identityHeaders.notScanned, [{ point: 'backend', why: /read once/ }]);
  t.end();
});

void t.test('a pipe as a later point gives the verdict the file gives', async (t) => {
  const writer = spawn('sh', ['-c', 'cat "$1" > "$2"', 'sh', backend, fifo], { stdio: 'ignore' });
  const ended = new Promise<number | null>((resolve) => writer.on('exit', resolve));
  const r = analyze(
    ['--point', `decap=${decap}`, '--point', `backend=${fifo}`, ...client],
    'ignore',
  );
  t.equal(r.code, 0, r.stderr);
  t.equal(layerOf(r.stdout), 'preserved');
  t.equal(await ended, 0, 'the writer wrote everything');
});

void t.test('the CLI refuses a stream first point and a capture given twice (exit 2)', (t) => {
  const first = analyze(
    ['--point', 'decap=-', '--point', `backend=${backend}`],
    readFileSync(decap),
  );
  t.equal(first.code, 2);
  t.match(first.stderr, /^hoptrace: CLI_BAD_POINT: --point: decap=-: standard input \(-\) cannot/);
  const twice = analyze(['--point', `decap=${decap}`, '--point', `backend=${decap}`], 'ignore');
  t.equal(twice.code, 2);
  t.match(twice.stderr, /CLI_BAD_POINT: --point: points 'decap' and 'backend' read the same/);
  t.end();
});

void t.test(
  'standard input redirected from a file is that file: a first point, hashed, named',
  (t) => {
    // `--point decap=- < decap.pcap`: fd 0 is the file itself, which can be read twice.
    const fd = openSync(decap, 'r');
    t.teardown(() => {
      closeSync(fd);
    });
    const rd = join(dir, 'rd-redirected');
    const r = spawnSync(
      process.execPath,
      [
        bin,
        'analyze',
        '--point',
        'decap=-',
        '--point',
        `backend=${backend}`,
        ...client,
        '--report-dir',
        rd,
      ],
      { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(r.status, 0, r.stderr);
    t.equal(layerOf(r.stdout), 'preserved');
    const doc = JSON.parse(readFileSync(join(rd, 'report.json'), 'utf8')) as {
      inputs: { name: string; file: string; sha256: string | null }[];
      evidence: { problems?: unknown[] };
      reproduce: { argv: string[] };
    };
    t.match(
      doc.inputs[0],
      { name: 'decap', file: decap, sha256: /^[0-9a-f]{64}$/ },
      'hashed as the file',
    );
    t.equal(doc.evidence.problems?.length ?? 0, 0, 'evidence.pcapng holds both points');
    t.ok(doc.reproduce.argv.includes(`decap=${decap}`), 'the reproduce command names the file');
    // Both points from the one redirected file is one capture given twice.
    const twice = spawnSync(
      process.execPath,
      [bin, 'analyze', '--point', `decap=${decap}`, '--point', 'backend=-'],
      { stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(twice.status, 2);
    t.match(twice.stderr, /CLI_BAD_POINT: --point: points 'decap' and 'backend' read the same/);
    t.end();
  },
);

void t.test(
  'a stream later point that did not see the request: a verdict, and it says the stream was not looked at further away',
  (t) => {
    // The review's crash: when a later point does not see the request, the analysis reads it again
    // over all of its time (far-syn.ts); a stream cannot be read again (FILE_NOT_FOUND EBADF).
    const bench = mkdtempSync(join(tmpdir(), 'ht-point-inputs-drop-'));
    t.teardown(() => {
      rmSync(bench, { recursive: true, force: true });
    });
    const files = (['decap', 'egress', 'backend'] as const).map((name) => {
      const file = join(bench, `${name}.pcap`);
      // The backend without the request: its probe frame lies past its last.
      writeBenchPcap(
        file,
        2000,
        'stream01',
        'pcap',
        BENCH_POINTS[name],
        name === 'backend' ? 9999 : 1500,
      );
      return file;
    });
    const r = spawnSync(
      process.execPath,
      [
        bin,
        'analyze',
        '--point',
        `decap=${files[0]}`,
        '--point',
        `egress=${files[1]}`,
        '--point',
        'backend=-',
      ],
      { input: readFileSync(files[2] ?? ''), encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(r.status, 0, r.stderr);
    t.match(r.stdout, /^verdict: dropped/m);
    t.match(
      r.stdout,
      /backend: the request was not seen within ±10 s of its time at decap, and a stream is read once/,
    );
    t.notMatch(r.stderr, /FILE_NOT_FOUND|EBADF/);
    t.end();
  },
);

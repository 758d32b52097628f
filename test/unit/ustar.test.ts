/**
 * The ustar writer (core/report/ustar.ts) against GNU tar: an archive of a directory and files of
 * awkward sizes (0, 1, 511, 512, 513 bytes, 200 KB), each body split across several chunks, lists
 * and extracts with `tar` with no complaint, every file byte for byte with its name, mode 0644
 * (the directory 0755) and the time given; each header is the very header `tar --format=ustar`
 * writes for the same member. A name of 100 bytes fills the name field and extracts whole; one of
 * 101 bytes, a `..`, an absolute path, a size beyond 11 octal digits, or a body that gives more or
 * fewer bytes than its size is refused (BUNDLE_ARCHIVE).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  USTAR_BLOCK,
  USTAR_NAME_MAX,
  USTAR_NUMBER_MAX,
  ustarChunks,
  ustarHeader,
  ustarLength,
  ustarNameProblem,
  type UstarEntry,
} from '../../core/report/ustar';
import { tempDir } from './live-capture-fixtures';
import { xorshift32 } from './xorshift';

/** 2025-01-15T08:00:00Z (in the past: tar warns of a time in the future). */
const MTIME = Date.parse('2025-01-15T08:00:00Z') / 1000;
const TOP = 'hoptrace-c-test-0123abcd/';

function bytes(n: number, seed: number): Buffer {
  const rand = xorshift32(seed);
  return Buffer.from(Array.from({ length: n }, () => rand(256)));
}

/** `b` in pieces of 1, 7, 300, … bytes, as a file read a chunk at a time gives it. */
function* pieces(b: Buffer): Generator<Uint8Array> {
  const sizes = [1, 7, 300, 4096, 65536];
  for (let at = 0, i = 0; at < b.length; i++) {
    const n = sizes[i % sizes.length] ?? 1;
    yield b.subarray(at, at + n);
    at += n;
  }
}

async function archive(entries: readonly UstarEntry[], mtime = MTIME): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const c of ustarChunks(entries, mtime)) out.push(c);
  return Buffer.concat(out);
}

const FILES: [string, Buffer][] = [
  ['empty', Buffer.alloc(0)],
  ['one.txt', Buffer.from('x')],
  ['report.md', bytes(511, 1)],
  ['block.bin', bytes(512, 2)],
  ['SHA256SUMS', bytes(513, 3)],
  ['evidence.pcapng', bytes(200_000, 4)],
];

void t.test('GNU tar lists and extracts the archive: bytes, names, modes, time', async (t) => {
  const dir = tempDir(t, 'ustar');
  const entries: UstarEntry[] = [
    { name: TOP, size: 0 },
    ...FILES.map(([name, b]) => ({ name: TOP + name, size: b.length, body: pieces(b) })),
  ];
  const tar = await archive(entries);
  t.equal(tar.length, ustarLength(entries), 'the length announced is the length written');
  t.equal(tar.length % USTAR_BLOCK, 0, 'whole blocks');
  t.ok(
    tar.subarray(-2 * USTAR_BLOCK).every((b) => b === 0),
    'ended by two zero blocks',
  );
  const file = join(dir, 'a.tar');
  writeFileSync(file, tar);

  // TZ=UTC: tar shows times in the local zone.
  const env = { ...process.env, TZ: 'UTC', LC_ALL: 'C' };
  const list = spawnSync('tar', ['-tvf', file, '--numeric-owner', '--full-time'], {
    encoding: 'utf8',
    env,
  });
  t.equal(list.status, 0, 'tar -t succeeds');
  t.equal(list.stderr, '', 'with no warning');
  const rows = list.stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split(/\s+/));
  t.same(
    rows.map((r) => [r[0], r[1], r[3], r[4], r[5]]),
    [
      ['drwxr-xr-x', '0/0', '2025-01-15', '08:00:00', TOP],
      ...FILES.map(([name]) => ['-rw-r--r--', '0/0', '2025-01-15', '08:00:00', TOP + name]),
    ],
    'tar -tv: type, mode, owner, time and name of each member, in order',
  );
  t.same(
    rows.map((r) => Number(r[2])),
    [0, ...FILES.map(([, b]) => b.length)],
    'tar -tv: each size',
  );

  const out = join(dir, 'out');
  mkdirSync(out);
  // -p: the modes as archived, whatever this process's umask.
  const x = spawnSync('tar', ['-xpf', file, '-C', out], { encoding: 'utf8', env });
  t.equal(x.status, 0, 'tar -x succeeds');
  t.equal(x.stderr, '', 'with no warning');
  t.equal(statSync(join(out, TOP)).mode & 0o7777, 0o755, 'the directory: rwxr-xr-x');
  for (const [name, b] of FILES) {
    const path = join(out, TOP, name);
    t.ok(readFileSync(path).equals(b), `${name}: the same ${b.length} bytes`);
    const st = statSync(path);
    t.equal(st.mode & 0o7777, 0o644, `${name}: rw-r--r--`);
    t.equal(st.mtimeMs, MTIME * 1000, `${name}: the time given`);
  }
});

void t.test("each header is the one GNU tar's ustar format writes", (t) => {
  const dir = tempDir(t, 'ustar');
  const top = TOP.slice(0, -1);
  mkdirSync(join(dir, top));
  for (const [name, b] of FILES) writeFileSync(join(dir, top, name), b);
  const gnu = (mode: string, ...names: string[]): Buffer => {
    const file = join(dir, `ref-${mode}.tar`);
    execFileSync('tar', [
      '--format=ustar',
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      `--mtime=@${MTIME}`,
      `--mode=${mode}`,
      '--no-recursion',
      '-cf',
      file,
      '-C',
      dir,
      ...names,
    ]);
    return readFileSync(file);
  };
  t.same(
    Buffer.from(ustarHeader({ name: TOP, size: 0 }, MTIME)),
    gnu('0755', TOP).subarray(0, USTAR_BLOCK),
    'the directory',
  );
  for (const [name, b] of FILES)
    t.same(
      Buffer.from(ustarHeader({ name: TOP + name, size: b.length }, MTIME)),
      gnu('0644', TOP + name).subarray(0, USTAR_BLOCK),
      name,
    );
  t.end();
});

void t.test('a name fits the 100-byte name field, or is refused', async (t) => {
  const full = TOP + 'r'.repeat(USTAR_NAME_MAX - TOP.length);
  t.equal(full.length, 100);
  t.equal(ustarNameProblem(full), null, '100 bytes: fits');
  const dir = tempDir(t, 'ustar');
  const body = Buffer.from('whole name\n');
  const tar = await archive([
    { name: TOP, size: 0 },
    { name: full, size: body.length, body: [body] },
  ]);
  writeFileSync(join(dir, 'a.tar'), tar);
  const x = spawnSync('tar', ['-xf', join(dir, 'a.tar'), '-C', dir], { encoding: 'utf8' });
  t.equal(x.status, 0, `tar -x: ${x.stderr}`);
  t.ok(readFileSync(join(dir, full)).equals(body), 'a 100-byte name extracts whole');

  const long = `${full}x`;
  t.match(ustarNameProblem(long), /is 101 bytes, more than the 100 of a ustar name field/);
  t.throws(() => ustarHeader({ name: long, size: 1 }, MTIME), { code: 'BUNDLE_ARCHIVE' });
  const refused = await archive([{ name: long, size: 0, body: [] }]).then(
    () => null,
    (e: unknown) => e,
  );
  t.match(refused, { code: 'BUNDLE_ARCHIVE' }, 'the archive refuses it before its first byte');
  for (const bad of ['../x', '/etc/passwd', 'a//b', 'a/./b', 'a b', 'ré.md', ''])
    t.throws(() => ustarHeader({ name: bad, size: 0 }, MTIME), { code: 'BUNDLE_ARCHIVE' }, bad);
});

void t.test('sizes and times beyond 11 octal digits, and bodies of the wrong size', async (t) => {
  t.throws(() => ustarHeader({ name: 'big', size: USTAR_NUMBER_MAX + 1 }, MTIME), {
    code: 'BUNDLE_ARCHIVE',
    message: /8 GiB or more/,
  });
  t.throws(() => ustarHeader({ name: 'old', size: 1 }, -1), { code: 'BUNDLE_ARCHIVE' });
  t.throws(() => ustarHeader({ name: 'dir/', size: 1 }, MTIME), { code: 'BUNDLE_ARCHIVE' });
  const short = await archive([{ name: 'a', size: 10, body: [Buffer.alloc(9)] }]).then(
    () => null,
    (e: unknown) => e,
  );
  t.match(short, { code: 'BUNDLE_ARCHIVE', message: /a: 9 of its 10 bytes/ });
  const long = await archive([{ name: 'a', size: 10, body: [Buffer.alloc(11)] }]).then(
    () => null,
    (e: unknown) => e,
  );
  t.match(long, { code: 'BUNDLE_ARCHIVE', message: /a: more than its 10 bytes/ });
});

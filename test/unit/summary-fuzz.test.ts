/**
 * Builds native/pcap-batch/fuzz/fuzz.c with summary.c (and headers.c) under AddressSanitizer and
 * UndefinedBehaviorSanitizer and runs it: a million mutated and truncated frames, each in an
 * exactly-sized buffer. Any read past a frame or undefined behaviour aborts it. Needs cc with
 * libasan/libubsan (gcc on Debian has both); fails with the reason when they are missing.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

const root = join(__dirname, '..', '..', '..');
const native = join(root, 'native', 'pcap-batch');

void t.test('summary.c and summary_wire.c under ASan/UBSan: a million mutated frames', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-fuzz-'));
  try {
    const bin = join(dir, 'fuzz');
    try {
      execFileSync(
        'cc',
        [
          '-O1',
          '-g',
          '-fsanitize=address,undefined',
          '-fno-sanitize-recover=all',
          '-fno-omit-frame-pointer',
          '-I',
          join(native, 'src'),
          '-o',
          bin,
          join(native, 'fuzz', 'fuzz.c'),
          join(native, 'src', 'summary.c'),
          join(native, 'src', 'summary_wire.c'),
          join(native, 'src', 'headers.c'),
        ],
        { stdio: 'pipe' },
      );
    } catch (e) {
      const err = e as { stderr?: Buffer };
      t.fail(
        `cannot build the sanitizer fuzz (needs cc with libasan and libubsan: apt-get install gcc): ${err.stderr?.toString() ?? String(e)}`,
      );
      t.end();
      return;
    }
    let out = '';
    try {
      out = execFileSync(bin, ['1000000'], {
        stdio: 'pipe',
        env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1' },
        timeout: 120_000,
      }).toString();
    } catch (e) {
      const err = e as { stderr?: Buffer; status?: number };
      t.fail(`the fuzz found a bug (exit ${String(err.status)}): ${err.stderr?.toString() ?? ''}`);
      t.end();
      return;
    }
    const m =
      /ok: (\d+) frames, (\d+) took the fast path, (\d+) summary_quick, (\d+) left out quiet/.exec(
        out,
      );
    t.ok(m, out);
    // The seeds must reach the fast path often, or the fuzz exercises only the early exits.
    t.ok(Number(m?.[2] ?? 0) > 100_000, `${m?.[2] ?? 0} frames took the fast path`);
    t.ok(Number(m?.[3] ?? 0) > 10_000, `${m?.[3] ?? 0} frames taken by summary_quick`);
    // The quiet test (quick path against the record) must see frames it leaves out, or it
    // compares only frames both send to the record.
    t.ok(Number(m?.[4] ?? 0) > 10_000, `${m?.[4] ?? 0} frames left out by the quiet test`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.end();
});

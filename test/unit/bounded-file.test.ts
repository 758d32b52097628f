/**
 * --inventory and --doctor are read whole but bounded (common/bounded-file.ts): a file above the
 * bound, /dev/zero or an endless pipe is refused with the flag's usual outcome — CLI_BAD_INVENTORY,
 * or doctor "unreadable" (never "no findings") — instead of filling memory (readFileSync of
 * /dev/zero grew to 8 GB; doctor's aborted with std::bad_alloc). A pipe within the bound is read.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { readBoundedText } from '../../common/bounded-file';
import { isHoptraceError } from '../../common/errors';
import { INVENTORY_MAX_BYTES, readInventoryFile } from '../../common/inventory-file';
import { DOCTOR_MAX_BYTES, readDoctorFile } from '../../cli/analyze';

const dir = mkdtempSync(join(tmpdir(), 'ht-bounded-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A file of `bytes` bytes that is a valid JSON object when read whole: `{}` then spaces. */
function jsonOfSize(name: string, bytes: number): string {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  const spaces = Buffer.alloc(1 << 20, 0x20);
  writeSync(fd, '{}');
  for (let left = bytes - 2; left > 0; left -= spaces.length)
    writeSync(fd, spaces, 0, Math.min(left, spaces.length));
  closeSync(fd);
  return path;
}

/** The HoptraceError's code and detail readInventoryFile throws, or 'read'. */
function inventoryOutcome(path: string): string {
  try {
    readInventoryFile(path);
    return 'read';
  } catch (e) {
    if (!isHoptraceError(e)) throw e;
    return `${e.code}: ${e.detail}`;
  }
}

void t.test('the bound: exactly `limit` bytes are read, one more is refused', (t) => {
  const file = join(dir, 'ten');
  writeFileSync(file, '0123456789');
  t.equal(readBoundedText(file, 10), '0123456789');
  t.throws(() => readBoundedText(file, 9), /it holds more than 9 bytes/);
  t.throws(() => readBoundedText('/dev/zero', 1 << 20), /it holds more than 1 MiB/);
  t.end();
});

void t.test('--inventory: above the bound or endless is CLI_BAD_INVENTORY', (t) => {
  t.equal(inventoryOutcome(jsonOfSize('at-bound.json', INVENTORY_MAX_BYTES)), 'read');
  t.match(
    inventoryOutcome(jsonOfSize('above.json', INVENTORY_MAX_BYTES + 1)),
    /^CLI_BAD_INVENTORY: cannot read the file \(it holds more than 64 MiB, the most read as an inventory; 150,000 pods/,
  );
  t.match(inventoryOutcome('/dev/zero'), /^CLI_BAD_INVENTORY: .*it holds more than 64 MiB/);
  t.end();
});

void t.test('--inventory from a pipe within the bound is read', async (t) => {
  const fifo = join(dir, 'inv.fifo');
  t.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  const inv = '{"nodes": {"n1": ["192.168.50.1"]}, "pods": {}}';
  const writer = spawn('sh', ['-c', 'printf %s "$1" > "$2"', 'sh', inv, fifo], { stdio: 'ignore' });
  const ended = new Promise<number | null>((resolve) => writer.on('exit', resolve));
  t.same(readInventoryFile(fifo), { nodes: { n1: ['192.168.50.1'] }, pods: {} });
  t.equal(await ended, 0);
});

void t.test('--doctor: above the bound or endless is unreadable, saying why', (t) => {
  for (const path of ['/dev/zero', jsonOfSize('doctor.json', DOCTOR_MAX_BYTES + 1)]) {
    t.match(
      readDoctorFile(path),
      { status: 'unreadable', detail: /^it holds more than 4 MiB/ },
      path,
    );
  }
  t.end();
});

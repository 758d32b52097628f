// The data directory on a disk that fills up (issue 17, high #4), on a real filesystem: a small
// tmpfs this test mounts under a temporary folder and unmounts in `finally` (root, never
// skipped). Appends that hit ENOSPC fail (so the hub does not acknowledge them) and leave no
// partial record behind; once space is back, the resent batches are stored and every
// acknowledged event is there after a restart.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseEventFile } from '../../collector/event-file';
import { CaptureSession, DEFAULT_SETTLE_MS } from '../../collector/session';
import { CaptureStore } from '../../collector/store';
import type { PacketEvent } from '../../common/event';
import { missingPrerequisites } from '../../lab/prereq';
import { DIRECT, exchange } from '../unit/fixtures-events';

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('ENOSPC: no acknowledged event lost, no stray bytes, resend completes', async (t) => {
    const mnt = mkdtempSync(join(tmpdir(), 'hoptrace-diskfull-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', mnt]);
    try {
      const dir = join(mnt, 'data');
      const store = new CaptureStore({ dir, fsync: true });
      const s = CaptureSession.create(
        'c-full-0000aaaa',
        {
          points: [{ name: 'decap', target: '/run/netns/x', iface: 'eth0' }],
          timeoutMs: 30_000,
          stopOnFirstMatch: true,
          settleMs: DEFAULT_SETTLE_MS,
        },
        1000,
      );
      store.saveSession(s.record);
      const one = exchange('decap', DIRECT)[0]!;
      const batch = (from: number): PacketEvent[] =>
        Array.from({ length: 100 }, (_, i) => ({ ...one, frame: from + i }));
      // Append batches until the disk is full; count what was acknowledged (stored).
      let acked = 0;
      let failures = 0;
      let next = 1;
      const pending: PacketEvent[][] = [];
      for (let i = 0; i < 2000 && failures < 3; i++) {
        const b = batch(next);
        next += b.length;
        try {
          await store.appendEvents(s.id, 'decap', b);
          acked += b.length;
        } catch (e) {
          failures++;
          pending.push(b);
          t.match(String(e), /STORE_IO: .*cannot append events/, 'the failure is STORE_IO');
        }
      }
      t.ok(failures > 0, `the disk filled up after ${acked} events`);
      const file = join(dir, 'captures', s.id, 'events-decap.pb');
      const full = parseEventFile(readFileSync(file));
      t.equal(full.events.length, acked, 'exactly the acknowledged events are on disk');
      t.equal(full.goodBytes, statSync(file).size, 'no partial record left behind');
      t.equal(full.corruptRecords, 0);
      // Space comes back (the filesystem grows); the agent resends what was not acknowledged.
      execFileSync('mount', ['-o', 'remount,size=8m', mnt]);
      for (const b of pending) {
        await store.appendEvents(s.id, 'decap', b);
        acked += b.length;
      }
      await store.close();
      const again = new CaptureStore({ dir, fsync: false });
      const [loaded] = again.loadSessions();
      t.equal(loaded?.events.get('decap')?.length, acked, 'after a restart: every stored event');
      t.same(loaded?.repaired, [], 'nothing to repair');
      await again.close();
    } finally {
      execFileSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    }
  });
}

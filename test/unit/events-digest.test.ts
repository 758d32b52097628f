/**
 * A finished capture's stored events named in its report inputs (collector/events-digest.ts): each
 * point's events-<point>.pb with its path in the data directory, size and SHA-256 — the real
 * digest of the file's bytes, taken after the appends still in flight when it was asked for (as a
 * batch a capture stores while it finishes), not in the middle of them; a point with no file is
 * null, never a digest of nothing; and only live inputs take one.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { storedEventsFiles, withEventsFiles } from '../../collector/events-digest';
import { CaptureStore } from '../../collector/store';
import { sha256Hex } from '../../common/sha256sums';
import type { ReportInput } from '../../core/report/report-document';
import { DIRECT, exchange } from './fixtures-events';

const ID = 'c-test-0123abcd';

void t.test(
  "each point's events file: its real SHA-256, after the appends in flight",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-events-digest-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const store = new CaptureStore({ dir, fsync: false });
    t.teardown(() => store.close());
    mkdirSync(store.sessionDir(ID), { recursive: true });
    const evs = exchange('decap', DIRECT);
    await store.appendEvents(ID, 'decap', evs, 1);
    // Not awaited: 50 more batches still being written, one after the other, when the digest is
    // asked for (a read that did not wait for them would see a part of them).
    const inFlight = Array.from({ length: 50 }, (_, i) =>
      store.appendEvents(ID, 'decap', evs, i + 2),
    );
    const files = await storedEventsFiles(store, ID, ['decap', 'backend']);
    await Promise.all(inFlight);
    const bytes = readFileSync(join(dir, 'captures', ID, 'events-decap.pb'));
    t.same(
      files.get('decap'),
      { file: `captures/${ID}/events-decap.pb`, bytes: bytes.length, sha256: sha256Hex(bytes) },
      'the digest of every byte stored, the batches in flight included',
    );
    t.equal(files.get('backend'), null, 'no file: null');

    const inputs: ReportInput[] = [
      { name: 'decap', file: 'live …', live: live() },
      { name: 'backend', file: 'live …', live: live() },
      { name: 'other', file: '/tmp/x.pcap', sha256: null, bytes: null },
    ];
    const named = withEventsFiles(inputs, files);
    t.same(named[0]?.live?.eventsFile, files.get('decap'));
    t.equal(named[1]?.live?.eventsFile, null);
    t.same(named[2], inputs[2], 'a file input is left as it is');
  },
);

function live(): NonNullable<ReportInput['live']> {
  return {
    agentId: 'a',
    agentVersion: null,
    node: 'n',
    target: '10.0.0.1',
    netns: null,
    iface: 'eth0',
    filter: null,
    eventsReceived: 4,
  };
}

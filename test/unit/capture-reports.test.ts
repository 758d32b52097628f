/**
 * What a finished live capture leaves in the data directory (collector/capture-reports.ts): the
 * picture's lanes carry point, node, the namespace the agent captured in and the interface, in
 * sequence.svg, in report.html and in the web view's picture.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { liveLanes, writeCaptureReports } from '../../collector/capture-reports';
import { CaptureSession } from '../../collector/session';
import { CaptureStore } from '../../collector/store';
import { cni, liveMeta, record } from './live-report-fixtures';

/** The `<title>` of each lane group (its full label, unclipped). */
const laneTitles = (svg: string): string[] =>
  [...svg.matchAll(/<g class="lane"[^>]*><title>([^<]*)<\/title>/g)].map((m) => m[1] ?? '');

void t.test('liveLanes: point, node, namespace, interface; an unknown namespace left out', (t) => {
  t.strictSame(
    liveLanes([
      { name: 'decap', node: 'vpn-node', netns: '/run/netns/vpn-0', iface: 'tun0' },
      { name: 'backend', node: null, netns: null, iface: 'eth0' },
    ]),
    [
      { point: 'decap', node: 'vpn-node', namespace: '/run/netns/vpn-0', iface: 'tun0' },
      { point: 'backend', iface: 'eth0' },
    ],
  );
  t.end();
});

void t.test('sequence.svg and report.html: each lane names its namespace', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-capture-reports-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const store = new CaptureStore({ dir, fsync: false });
  const s = new CaptureSession({ ...structuredClone(record), id: 'c-test-0000abcd' });
  store.saveSession(s.record);
  const meta = liveMeta(s.record);
  writeCaptureReports(store, s, { state: 'resolved', reason: 'conclusive', result: cni, meta });
  const at = join(dir, 'captures', s.id);
  for (const f of ['sequence.svg', 'report.html']) {
    const titles = laneTitles(readFileSync(join(at, f), 'utf8'));
    t.equal(titles.length, 3, `${f}: three lanes`);
    t.match(titles[0], /^decap, node vpn-node, netns \/run\/netns\/vpn-0, iface tun0;/, f);
    t.match(titles[2], /^backend, node backend-node, netns \/run\/netns\/web-1, iface eth0;/, f);
  }
  t.end();
});

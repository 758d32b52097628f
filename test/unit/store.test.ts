/** The data directory: sessions and events survive a restart; a torn last record loses nothing before it. */
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CaptureSession, DEFAULT_SETTLE_MS } from '../../collector/session';
import { encodeEventRecords, parseEventFile } from '../../collector/event-file';
import { CaptureStore } from '../../collector/store';
import { encodePacketEvent } from '../../common/codec';
import { crc32c } from '../../common/crc32c';
import { DIRECT, exchange } from './fixtures-events';

function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-store-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

function session(id: string): CaptureSession {
  return CaptureSession.create(
    id,
    {
      points: ['decap', 'backend'].map((name) => ({ name, target: '/run/netns/x', iface: 'eth0' })),
      timeoutMs: 30_000,
      stopOnFirstMatch: true,
      settleMs: DEFAULT_SETTLE_MS,
    },
    1000,
  );
}

void t.test('sessions, events and lastSeq survive a restart', async (t) => {
  const dir = tempDir(t);
  const a = new CaptureStore({ dir });
  const s = session('c-abc-0000aaaa');
  s.markArmed('decap', 'agent-1', 'vpn-node', 1000);
  a.saveSession(s.record);
  const evs = exchange('decap', DIRECT);
  await a.appendEvents(s.id, 'decap', evs.slice(0, 3));
  await a.appendEvents(s.id, 'decap', evs.slice(3));
  a.lastSeq.set('agent-1', 17);
  a.lastSeq.set('agent-1', 5); // never goes back
  await a.close();

  const b = new CaptureStore({ dir });
  t.equal(b.collectorId, a.collectorId, 'the collector id is stable');
  t.equal(b.lastSeq.get('agent-1'), 17);
  t.equal(b.lastSeq.get('unknown'), 0);
  const [loaded] = b.loadSessions();
  t.ok(loaded);
  if (!loaded) return;
  t.equal(loaded.record.id, s.id);
  t.equal(loaded.record.points[0]?.agentId, 'agent-1');
  t.equal(loaded.record.points[0]?.events, evs.length);
  t.same(loaded.events.get('decap'), evs, 'events round-trip through protobuf');
  t.same(loaded.events.get('backend'), []);
  t.same(loaded.repaired, []);
  await b.close();
});

void t.test(
  "one node binding id after id keeps one record in agents.json; another node's survives",
  async (t) => {
    const dir = tempDir(t);
    const a = new CaptureStore({ dir, fsync: false });
    a.lastSeq.bind('b-1', 'node-b');
    a.lastSeq.set('b-1', 42);
    a.lastSeq.bind('a-0', 'node-a');
    a.lastSeq.set('a-0', 7);
    // What one node's token could do: a new agent id on every connection.
    for (let i = 1; i <= 300; i++) a.lastSeq.bind(`a-${i}`, 'node-a');
    const file = (): Record<string, { seq: number; node: string }> =>
      JSON.parse(readFileSync(join(dir, 'agents.json'), 'utf8')) as Record<
        string,
        { seq: number; node: string }
      >;
    t.same(Object.keys(file()).sort(), ['a-300', 'b-1'], 'node-a has one record: its newest id');
    t.equal(a.lastSeq.nodeOf('a-0'), undefined, "node-a's earlier ids are unbound");
    t.equal(a.lastSeq.get('a-0'), 0, 'and their seqs forgotten');
    t.equal(a.lastSeq.nodeOf('b-1'), 'node-b', "node-b's record is untouched");
    // A restarted agent: a new id on the same node starts from 0, and its seqs are kept.
    a.lastSeq.bind('a-restarted', 'node-a');
    t.equal(a.lastSeq.get('a-restarted'), 0);
    a.lastSeq.set('a-restarted', 5);
    a.lastSeq.set('a-restarted', 3); // never goes back
    await a.close();
    t.same(Object.keys(file()).sort(), ['a-restarted', 'b-1']);
    t.match(file(), {
      'a-restarted': { seq: 5, node: 'node-a' },
      'b-1': { seq: 42, node: 'node-b' },
    });
    const b = new CaptureStore({ dir, fsync: false });
    t.equal(b.lastSeq.get('a-restarted'), 5, "the current id's seq survives a restart");
    t.equal(b.lastSeq.get('b-1'), 42);
    await b.close();
  },
);

void t.test(
  "an older collector's agents.json with many ids of a node loads the newest",
  async (t) => {
    const dir = tempDir(t);
    const now = Date.now();
    const records: Record<string, unknown> = {
      'b-1': { seq: 42, node: 'node-b', seenAt: now - 5_000 },
      legacy: 9,
    };
    for (let i = 0; i < 50; i++)
      records[`a-${i}`] = { seq: i, node: 'node-a', seenAt: now - 50 + i };
    writeFileSync(join(dir, 'agents.json'), JSON.stringify(records));
    const store = new CaptureStore({ dir, fsync: false });
    t.equal(store.lastSeq.nodeOf('a-49'), 'node-a', 'the one seen last');
    t.equal(store.lastSeq.get('a-49'), 49);
    t.equal(store.lastSeq.nodeOf('a-48'), undefined, 'the others dropped');
    t.equal(store.lastSeq.get('b-1'), 42);
    t.equal(store.lastSeq.get('legacy'), 9, 'an unbound record (before ids were bound) is kept');
    await store.close();
  },
);

void t.test('a capture asked with evidencePayload keeps it across a restart', async (t) => {
  const dir = tempDir(t);
  const a = new CaptureStore({ dir });
  const s = session('c-pay-0000aaaa');
  s.record.spec.evidencePayload = true;
  a.saveSession(s.record);
  const bad = session('c-pay-0000bbbb');
  a.saveSession(bad.record);
  await a.close();
  // An edited session.json whose evidencePayload is not a boolean is not one.
  const file = join(dir, 'captures', bad.id, 'session.json');
  const raw = JSON.parse(readFileSync(file, 'utf8')) as { spec: Record<string, unknown> };
  raw.spec['evidencePayload'] = 'yes';
  writeFileSync(file, JSON.stringify(raw));
  const b = new CaptureStore({ dir });
  const loaded = b.loadSessions();
  t.same(
    loaded.map((l) => [l.record.id, l.record.spec.evidencePayload]),
    [['c-pay-0000aaaa', true]],
  );
  t.match(b.quarantined, [{ reason: /spec\.evidencePayload is not valid/ }]);
  await b.close();
});

void t.test(
  'a capture asked with doctor keeps it across a restart; a bad one is quarantined',
  async (t) => {
    const dir = tempDir(t);
    const a = new CaptureStore({ dir });
    const s = session('c-doc-0000aaaa');
    s.record.spec.doctor = { tunnelRange: '10.90.0.0/24' };
    a.saveSession(s.record);
    const bad = session('c-doc-0000bbbb');
    a.saveSession(bad.record);
    await a.close();
    const file = join(dir, 'captures', bad.id, 'session.json');
    const raw = JSON.parse(readFileSync(file, 'utf8')) as { spec: Record<string, unknown> };
    raw.spec['doctor'] = { tunnelRange: 'ten-ninety' };
    writeFileSync(file, JSON.stringify(raw));
    const b = new CaptureStore({ dir });
    t.same(
      b.loadSessions().map((l) => [l.record.id, l.record.spec.doctor]),
      [['c-doc-0000aaaa', { tunnelRange: '10.90.0.0/24' }]],
    );
    t.match(b.quarantined, [{ reason: /spec\.doctor is not valid/ }]);
    await b.close();
  },
);

void t.test('a torn last record is dropped and truncated; earlier events are kept', async (t) => {
  const dir = tempDir(t);
  const a = new CaptureStore({ dir, fsync: false });
  const s = session('c-abc-0000bbbb');
  a.saveSession(s.record);
  const evs = exchange('decap', DIRECT);
  await a.appendEvents(s.id, 'decap', evs);
  await a.close();
  const file = join(dir, 'captures', s.id, 'events-decap.pb');
  const good = statSync(file).size;
  // A crash in the middle of the next append: half a record.
  const next = encodeEventRecords(exchange('decap', DIRECT).slice(0, 1));
  appendFileSync(file, next.subarray(0, next.length - 5));

  const b = new CaptureStore({ dir, fsync: false });
  const [loaded] = b.loadSessions();
  t.same(loaded?.events.get('decap'), evs, 'every whole record survives');
  t.same(loaded?.repaired, [
    {
      point: 'decap',
      tornBytes: next.length - 5,
      corruptRecords: 0,
      duplicateEvents: 0,
      missingEvents: 0,
    },
  ]);
  t.equal(statSync(file).size, good, 'the torn tail is cut off');
  // Appending after the repair starts on a record boundary.
  await b.appendEvents(s.id, 'decap', evs.slice(0, 2));
  await b.close();
  const parsed = parseEventFile(readFileSync(file));
  t.equal(parsed.events.length, evs.length + 2);
  t.equal(parsed.goodBytes, statSync(file).size);
});

void t.test('a torn length prefix (fewer than 4 bytes) is handled too', (t) => {
  const bytes = Buffer.concat([
    encodeEventRecords(exchange('x', DIRECT).slice(0, 2)),
    Buffer.from([0, 0]),
  ]);
  const p = parseEventFile(bytes);
  t.equal(p.events.length, 2);
  t.equal(p.goodBytes, bytes.length - 2);
  t.end();
});

void t.test('a corrupt record inside the file is skipped, later ones kept', (t) => {
  const evs = exchange('x', DIRECT).slice(0, 2);
  const garbage = Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff]);
  const bytes = Buffer.concat([
    encodeEventRecords(evs.slice(0, 1)),
    garbage,
    encodeEventRecords(evs.slice(1)),
  ]);
  const p = parseEventFile(bytes);
  t.same(p.events, evs);
  t.equal(p.corruptRecords, 1);
  t.end();
});

void t.test('final reports are written and read back; unknown ids are refused', async (t) => {
  const dir = tempDir(t);
  const st = new CaptureStore({ dir, fsync: false });
  const s = session('c-abc-0000cccc');
  st.saveSession(s.record);
  t.equal(st.readReport(s.id, 'md'), null);
  t.equal(st.readReportInputs(s.id), null);
  st.writeFinal(s.id, {
    verdict: '{}\n',
    markdown: '# hoptrace\n',
    json: '{"verdict":{}}\n',
    inputs: '{"state":"resolved"}\n',
  });
  t.equal(st.readReport(s.id, 'md'), '# hoptrace\n');
  t.equal(st.readReport(s.id, 'json'), '{"verdict":{}}\n');
  t.same(st.readReportInputs(s.id), { state: 'resolved' });
  t.throws(() => st.sessionDir('../../etc'));
  await t.rejects(st.appendEvents(s.id, '../x', []));
  await st.close();
});

void t.test('a damaged length prefix mid-file costs one record, not the rest (issue 17)', (t) => {
  const one = exchange('x', DIRECT)[0]!;
  const evs = Array.from({ length: 1000 }, (_, i) => ({ ...one, frame: i + 1 }));
  const bytes = encodeEventRecords(evs);
  // Record 100's length prefix (bytes 4..7 of its header) becomes huge.
  const at100 = encodeEventRecords(evs.slice(0, 99)).length;
  bytes.writeUInt32BE(0x7fffffff, at100 + 4);
  const p = parseEventFile(bytes);
  t.equal(p.events.length, 999, 'every other record survives');
  t.equal(p.corruptRecords, 1, 'the damaged one is counted');
  t.equal(p.goodBytes, bytes.length, 'nothing is taken for a torn tail');
  t.same(p.events.map((e) => e.frame).slice(98, 100), [99, 101], 'record 100 alone is missing');
  t.end();
});

void t.test('stray bytes between records (a short write) cost nothing but a count', (t) => {
  const evs = exchange('x', DIRECT);
  const bytes = Buffer.concat([
    encodeEventRecords(evs.slice(0, 3)),
    Buffer.from([0x48, 0x54, 0x45]), // 3 bytes of a record that was never finished
    encodeEventRecords(evs.slice(3)),
  ]);
  const p = parseEventFile(bytes);
  t.same(p.events, evs);
  t.equal(p.corruptRecords, 1);
  t.equal(p.goodBytes, bytes.length);
  t.end();
});

void t.test('a flipped body byte fails the checksum: that record alone is skipped', (t) => {
  const evs = exchange('x', DIRECT);
  const bytes = encodeEventRecords(evs);
  bytes.writeUInt8(bytes.readUInt8(12 + 5) ^ 0xff, 12 + 5); // inside the first record's body
  const p = parseEventFile(bytes);
  t.same(p.events, evs.slice(1));
  t.equal(p.corruptRecords, 1);
  t.end();
});

void t.test(
  'files of the earlier format (bare lengths) still load, appends after them too',
  (t) => {
    const evs = exchange('x', DIRECT);
    const legacy = Buffer.concat(
      evs.slice(0, 3).map((e) => {
        const body = Buffer.from(encodePacketEvent(e));
        const head = Buffer.alloc(4);
        head.writeUInt32BE(body.length, 0);
        return Buffer.concat([head, body]);
      }),
    );
    const p = parseEventFile(Buffer.concat([legacy, encodeEventRecords(evs.slice(3))]));
    t.same(p.events, evs);
    t.equal(p.corruptRecords, 0);
    t.end();
  },
);

void t.test('CRC-32C: the RFC 3720 check value', (t) => {
  t.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  t.equal(crc32c(new Uint8Array(32)), 0x8a9136aa, 'RFC 3720 B.4: 32 bytes of zeroes');
  t.end();
});

void t.test(
  'session.json saved off the event loop: coalesced, never older over newer, errors reject',
  async (t) => {
    const dir = tempDir(t);
    const st = new CaptureStore({ dir });
    const s = session('c-soon-0000aaaa');
    st.saveSession(s.record);
    const file = join(dir, 'captures', s.id, 'session.json');
    const packets = (): number =>
      (JSON.parse(readFileSync(file, 'utf8')) as { points: { packets: number }[] }).points[0]
        ?.packets ?? -1;
    // 50 changes, each followed by a save, without waiting: at most a few writes, the last state kept.
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 50; i++) {
      const p = s.record.points[0];
      if (p) p.packets = i;
      saves.push(st.saveSessionSoon(s.record));
    }
    t.equal(new Set(saves).size <= 2, true, 'the calls during one write share the next save');
    await Promise.all(saves);
    t.equal(packets(), 50, 'the last state is on disk when every call has resolved');
    // A sync save of a newer state while an async save of an older one is being written.
    const p0 = s.record.points[0];
    if (p0) p0.packets = 60;
    const older = st.saveSessionSoon(s.record);
    if (p0) p0.packets = 70;
    st.saveSession(s.record);
    await older;
    t.equal(packets(), 70, 'the older async save is not renamed over the newer one');
    t.same(
      readdirSync(join(dir, 'captures', s.id)).filter((f) => f.includes('.tmp')),
      [],
      'no temporary file left',
    );
    // The capture's directory replaced by a file: the save rejects with STORE_IO, nothing thrown later.
    rmSync(join(dir, 'captures', s.id), { recursive: true, force: true });
    appendFileSync(join(dir, 'captures', s.id), 'x');
    await t.rejects(st.saveSessionSoon(s.record), { code: 'STORE_IO' });
    await st.close();
  },
);

void t.test('evidence frames: saved per point, read back, damage named (STORE_IO)', (t) => {
  const dir = tempDir(t);
  const store = new CaptureStore({ dir, fsync: false });
  const s = session('c-frm-0000aaaa');
  store.saveSession(s.record);
  t.equal(store.loadFrames(s.id, 'decap'), null, 'not fetched yet');
  const bytes = Buffer.from('00112233445566778899aabb08004500', 'hex');
  store.saveFrames(s.id, {
    captureId: s.id,
    point: 'decap',
    agentId: 'agent-1',
    linkType: 1,
    snaplen: 256,
    records: [{ frame: 3, tsNs: 1_700_000_000_000_000_123n, origLen: 1514, data: bytes }],
    missing: [{ frame: 4, reason: 'RETENTION_FULL' }],
    fetchedUnixMs: 5000,
    retained: 3,
    retentionDropped: 9,
  });
  const f = store.loadFrames(s.id, 'decap');
  t.match(f, {
    point: 'decap',
    agentId: 'agent-1',
    linktype: 1,
    snaplen: 256,
    missing: [{ frame: 4, reason: 'RETENTION_FULL' }],
    fetchedAtMs: 5000,
    retained: 3,
    retentionDropped: 9,
  });
  t.same(
    f?.frames.map((x) => [x.frame, x.tsNs, x.origLen, Buffer.from(x.bytes)]),
    [[3, 1_700_000_000_000_000_123n, 1514, bytes]],
  );
  t.equal(store.loadFrames(s.id, '../../etc'), null, 'not a point name: nothing read');
  const path = join(store.sessionDir(s.id), 'frames-decap.pb');
  appendFileSync(path, Buffer.from([0xff, 0xff]));
  t.throws(() => store.loadFrames(s.id, 'decap'), { code: 'STORE_IO' }, 'a damaged file');
  store.saveFrames(s.id, {
    captureId: 'c-other-0000bbbb',
    point: 'backend',
    agentId: '',
    linkType: null,
    snaplen: 0,
    records: [],
    missing: [],
    fetchedUnixMs: 0,
    retained: 0,
    retentionDropped: 0,
  });
  t.throws(() => store.loadFrames(s.id, 'backend'), { code: 'STORE_IO' }, "another capture's file");
  t.end();
});

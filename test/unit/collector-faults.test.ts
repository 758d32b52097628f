/**
 * The collector under damaged data and failing disks (issue 17): a session.json that is not one
 * is moved aside and named in the log, and the collector starts; a session.json save that fails
 * inside a timer is logged, never thrown where it would end the process.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger, type CollectorLogger } from '../../collector/logger';
import { CaptureSession, DEFAULT_SETTLE_MS } from '../../collector/session';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { FakeHub } from './collector-fixtures';
import { DIRECT, exchange } from './fixtures-events';
import { eventually } from './eventually';

function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-faults-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** A logger that keeps what it was given. */
function recordingLogger(): CollectorLogger & { lines: { level: string; msg: string }[] } {
  const lines: { level: string; msg: string }[] = [];
  const at =
    (level: string) =>
    (_f: unknown, msg: string): void => {
      lines.push({ level, msg });
    };
  return { lines, info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') };
}

function goodSession(id: string): CaptureSession {
  return CaptureSession.create(
    id,
    {
      points: [{ name: 'decap', target: '/run/netns/x', iface: 'eth0' }],
      timeoutMs: 30_000,
      stopOnFirstMatch: true,
      settleMs: DEFAULT_SETTLE_MS,
    },
    1000,
  );
}

void t.test('a session.json that is not one is quarantined; the collector starts', async (t) => {
  const dir = tempDir(t);
  const store = new CaptureStore({ dir, fsync: false });
  const good = goodSession('c-good-0000aaaa');
  store.saveSession(good.record);
  const broken: [string, unknown][] = [
    ['c-nullpt-0000bbbb', { ...good.record, id: 'c-nullpt-0000bbbb', points: [null] }],
    ['c-nospec-0000cccc', { ...good.record, id: 'c-nospec-0000cccc', spec: null }],
    ['c-badtime-0000dddd', { ...good.record, id: 'c-badtime-0000dddd', createdAtMs: 'x' }],
  ];
  for (const [id, rec] of broken) {
    mkdirSync(join(dir, 'captures', id), { recursive: true });
    writeFileSync(join(dir, 'captures', id, 'session.json'), JSON.stringify(rec));
  }
  mkdirSync(join(dir, 'captures', 'c-notjson-0000eeee'));
  writeFileSync(join(dir, 'captures', 'c-notjson-0000eeee', 'session.json'), '{"id": "c-not');
  await store.close();

  const again = new CaptureStore({ dir, fsync: false });
  const log = recordingLogger();
  const sessions = new SessionManager({ hub: new FakeHub(), store: again, logger: log });
  t.doesNotThrow(() => {
    sessions.start();
  }, 'the collector starts');
  t.same(
    sessions.list().map((v) => v.id),
    ['c-good-0000aaaa'],
    'the good capture is loaded, the others are not',
  );
  const warned = log.lines.filter(
    (l) => l.level === 'warn' && /not loaded from the data directory/.test(l.msg),
  );
  t.equal(warned.length, 4, 'each one is named in the log');
  t.match(warned.map((l) => l.msg).join('\n'), /points\[0\] is not an object/);
  t.match(warned.map((l) => l.msg).join('\n'), /spec is not an object/);
  t.match(warned.map((l) => l.msg).join('\n'), /its times are not valid/);
  t.match(warned.map((l) => l.msg).join('\n'), /not a JSON object/);
  const left = readdirSync(join(dir, 'captures')).sort();
  t.equal(left.filter((d) => d.includes('.quarantined-')).length, 4, 'moved aside, not deleted');
  t.ok(existsSync(join(dir, 'captures', 'c-good-0000aaaa', 'session.json')));
  await sessions.close();

  // Started once more: the quarantined ones stay aside, nothing is reported twice.
  const third = new CaptureStore({ dir, fsync: false });
  t.same(
    third.loadSessions().map((l) => l.record.id),
    ['c-good-0000aaaa'],
  );
  t.same(third.quarantined, []);
  await third.close();
});

void t.test('a session.json save that fails in a timer is logged, not thrown', async (t) => {
  const dir = tempDir(t);
  const hub = new FakeHub();
  hub.addAgent(
    'agent-1',
    'vpn-node',
    ['192.168.50.1'],
    [{ path: '/run/netns/vpn', inode: 1, addresses: ['10.244.1.10'], interfaces: ['tun0'] }],
  );
  const store = new CaptureStore({ dir, fsync: false });
  const log = recordingLogger();
  const sessions = new SessionManager({ hub, store, logger: log, debounceMs: 20 });
  sessions.start();
  t.teardown(() => sessions.close());
  const view = await sessions.create({
    points: [
      { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
      { name: 'backend', target: '10.244.1.10', iface: 'tun0' },
    ],
    timeoutMs: 30_000,
    stopOnFirstMatch: true,
    settleMs: 60_000,
  });
  // From now on every write of session.json fails (it cannot be renamed over a directory), as on
  // a full disk: the debounced save after the next events batch runs in a timer.
  rmSync(join(dir, 'captures', view.id, 'session.json'));
  mkdirSync(join(dir, 'captures', view.id, 'session.json'));
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown): void => {
    uncaught.push(e);
  };
  process.on('uncaughtException', onUncaught);
  t.teardown(() => process.off('uncaughtException', onUncaught));
  await hub.deliver({
    kind: 'events',
    agentId: 'agent-1',
    batch: { captureId: view.id, point: 'decap', events: exchange('decap', DIRECT).slice(0, 2) },
  });
  // The save runs after a debounce, on the file-I/O threads: wait for its log line, bounded.
  const logged = (): boolean =>
    log.lines.some((l) => l.level === 'error' && l.msg === 'cannot save session.json');
  await eventually(logged, 5000);
  t.same(uncaught, [], 'nothing escaped the timer');
  t.ok(logged(), 'the failed save is logged');
  t.equal(sessions.get(view.id)?.points[0]?.events, 2, 'the capture goes on in memory');
});

void t.test('log lines name their component once (issue 17)', (t) => {
  const lines: string[] = [];
  const log = createLogger({
    destination: {
      write: (s: string) => {
        lines.push(...s.split('\n').filter((l) => l !== ''));
      },
    },
  });
  log.info({ captureId: 'c-1' }, 'from the collector');
  log.pino?.child({ component: 'hub' }).info({ agentId: 'a-1' }, 'from the hub');
  t.equal(lines.length, 2);
  for (const line of lines) {
    t.equal(line.match(/"component":/g)?.length, 1, `one component key: ${line}`);
  }
  t.same(
    lines.map((l) => (JSON.parse(l) as { component: string }).component),
    ['collector', 'hub'],
  );
  t.end();
});

void t.test(
  'a corrupt collector.json or agents.json is moved aside and named, not reset silently',
  async (t) => {
    const dir = tempDir(t);
    const first = new CaptureStore({ dir, fsync: false });
    first.lastSeq.set('agent-1', 41);
    await first.close();
    writeFileSync(join(dir, 'collector.json'), '{"collectorId": 7}');
    writeFileSync(join(dir, 'agents.json'), '{"agent-1": "x"');
    const store = new CaptureStore({ dir, fsync: false });
    const log = recordingLogger();
    const sessions = new SessionManager({ hub: new FakeHub(), store, logger: log });
    sessions.start();
    const warned = log.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    t.equal(warned.length, 2, warned.join('\n'));
    t.match(warned.join('\n'), /collector\.json is not valid; starting without it/);
    t.match(warned.join('\n'), /agents\.json is not valid; starting without it/);
    t.match(store.collectorId, /^collector-[0-9a-f]{12}$/, 'a new collector id');
    t.equal(store.lastSeq.get('agent-1'), 0);
    t.equal(
      readdirSync(dir).filter((f) => f.includes('.quarantined-')).length,
      2,
      'both kept aside for whoever wants to look',
    );
    await sessions.close();
  },
);

void t.test(
  'a record of agents.json that is not valid costs that record, named in the log; the others load (review F4)',
  async (t) => {
    const dir = tempDir(t);
    const first = new CaptureStore({ dir, fsync: false });
    first.lastSeq.bind('good-agent', 'good-node');
    first.lastSeq.set('good-agent', 5);
    await first.close();
    const path = join(dir, 'agents.json');
    const saved = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    const now = Date.now();
    // What a hub without name checks wrote: a 300-character node, a 4,200-character id.
    saved['agent-longnode'] = { seq: 1, node: 'n'.repeat(300), seenAt: now };
    saved['agent-'.repeat(700)] = { seq: 1, node: 'node-b', seenAt: now };
    saved['agent-badseq'] = { seq: -1, node: 'node-c', seenAt: now };
    writeFileSync(path, JSON.stringify(saved));

    const store = new CaptureStore({ dir, fsync: false });
    const log = recordingLogger();
    const sessions = new SessionManager({ hub: new FakeHub(), store, logger: log });
    sessions.start();
    t.equal(store.quarantined.length, 0, 'the file is not moved aside');
    t.equal(store.lastSeq.get('good-agent'), 5, 'the good record keeps its seq');
    t.equal(store.lastSeq.nodeOf('good-agent'), 'good-node', 'and its node');
    t.equal(store.lastSeq.nodeOf('agent-longnode'), undefined, 'the bad ones are dropped');
    t.equal(store.lastSeq.get('agent-badseq'), 0);
    const warned = log.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    t.equal(warned.length, 3, warned.join('\n'));
    t.match(
      warned[0],
      /^agents\.json: the record of agent id agent-longnode is not valid \('n{64}… \(300 characters\)' is not a node name/,
    );
    t.match(
      warned.join('\n'),
      /agent id (agent-){13}ag… is not valid \(an agent id of 4200 characters \(at most 260\)\)/,
    );
    t.match(warned.join('\n'), /agent id agent-badseq is not valid \(seq is not valid\); dropped/);
    t.throws(
      () => {
        store.lastSeq.bind('agent-new', '');
      },
      { code: 'AGENT_BAD_NAME' },
      'a name that would not load again is never bound',
    );
    await sessions.close();
  },
);

/**
 * A repro's bundle end to end, agents simulated (FakeHub and a fake frames channel): a probe
 * through the old pod, one that could not connect while no pod was there, the deletion and the
 * replacement marked; the repro finishes, the agents are asked for the probes' frames (the old
 * pod's egress answers RETENTION_GONE, as when its capture went with the pod), and every file is
 * written: report.json against proto/repro-report.schema.json, report.html and timeline.svg
 * well-formed with one mark per probe, evidence.pcapng read back by tshark (one interface per
 * capture that gave frames), inventory.json. Then served again from the data directory by a
 * collector started after, and while running, the text forms rendered on request. The whole bundle
 * as one archive (from memory, and from the data directory) unpacks to hoptrace-<id>/ where
 * sha256sum -c passes; a running repro has none.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { isStreamBody } from '../../collector/api-message';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { ReproManager } from '../../collector/repro';
import { REPRO_FILES } from '../../collector/repro-bundle';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import type { PacketEvent } from '../../common/event';
import type { FramesReply, FramesRequest } from '../../common/wire';
import { REPRO_EVIDENCE_MAX_FRAMES, reproFramesToFetch } from '../../core/repro/repro-evidence';
import { REPRO_TIMES_NOTE, type ProbeFlow } from '../../core/repro/repro-core';
import { esc } from '../../core/report/markup';
import { sha256Hex } from '../../common/sha256sums';
import { hoptraceVersion } from '../../common/version';
import { FakeHub, status } from './collector-fixtures';
import { DIRECT, INVENTORY, MS, T0, exchange } from './fixtures-events';
import { tcp } from './frames';
import { markupErrors } from './markup-check';
import { reproReportSchemaErrors } from './report-schema';
import { LAB_REPRO, labNamespace, labReproHub } from './repro-fixtures';
import { tsharkColumn } from './tshark';
import { checkSums, listedNames } from './sums-check';
import { archiveBytes, untar } from './archive-check';

/** Frames as an agent retains them: by capture id and point, frame number → bytes. */
type Retained = Map<string, Map<number, { tsNs: bigint; data: Buffer }>>;

function bytesOf(e: PacketEvent): Buffer {
  const tu = e.inner;
  if (tu === null) throw new Error('no tuple');
  return tcp(e.tsNs, {
    src: tu.src,
    dst: tu.dst,
    sport: tu.sport ?? 0,
    dport: tu.dport ?? 0,
    seq: e.keys.tcpSeq ?? 0,
    ack: e.keys.tcpAck ?? 0,
    flags: e.keys.tcpFlags ?? 0,
    payload: 'x'.repeat(e.keys.payloadLength),
  }).data;
}

/** The agents' side of FramesRequests; `gone` captures answer RETENTION_GONE. */
function fakeFrames(
  retained: Retained,
  gone: Set<string>,
  asked: FramesRequest[],
): { frames: (a: string, r: Omit<FramesRequest, 'requestId'>) => Promise<FramesReply> } {
  return {
    frames: (_agentId, req) => {
      asked.push({ requestId: '', ...req });
      const k = `${req.captureId}/${req.point}`;
      const held = retained.get(k);
      const base: FramesReply = {
        requestId: 'x',
        captureId: req.captureId,
        point: req.point,
        linkType: null,
        snaplen: 0,
        records: [],
        missing: [],
        retained: held?.size ?? 0,
        retentionDropped: 0,
        errorCode: '',
        message: '',
      };
      if (gone.has(k) || held === undefined)
        return Promise.resolve({
          ...base,
          errorCode: 'RETENTION_GONE',
          missing: req.frames.map((frame) => ({ frame, reason: 'RETENTION_GONE' })),
        });
      return Promise.resolve({
        ...base,
        linkType: 1,
        snaplen: 262144,
        records: req.frames.flatMap((frame) => {
          const f = held.get(frame);
          return f === undefined
            ? []
            : [{ frame, tsNs: f.tsNs, origLen: f.data.length, data: f.data }];
        }),
        missing: req.frames
          .filter((f) => !held.has(f))
          .map((frame) => ({ frame, reason: 'RETENTION_CUT' })),
      });
    },
  };
}

const SPEC = LAB_REPRO;

const labHub = labReproHub;

void t.test('a finished repro writes its whole bundle, evidence included', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-repro-bundle-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const store = new CaptureStore({ dir, fsync: false });
  const hub = labHub();
  const retained: Retained = new Map();
  const asked: FramesRequest[] = [];
  const T = Number(T0 / MS);
  let now = T - 1000;
  const repros = new ReproManager({
    hub,
    logger: silentLogger(),
    nowMs: () => now,
    store,
    frames: fakeFrames(retained, new Set(), asked),
  });
  repros.start();
  t.teardown(() => {
    repros.close();
  });
  const v = await repros.create(SPEC);
  const e1 = `${v.id}-e1`;
  const b = `${v.id}-b`;
  const send = async (agentId: string, captureId: string, point: string, evs: PacketEvent[]) => {
    await repros.handle({
      kind: 'status',
      agentId,
      seq: 0,
      status: status(captureId, point, 'capturing', { kernelDrops: 0, packets: evs.length }),
    });
    await repros.handle({
      kind: 'events',
      agentId,
      seq: 0,
      batch: { captureId, point, events: evs },
    });
    const held =
      retained.get(`${captureId}/${point}`) ?? new Map<number, { tsNs: bigint; data: Buffer }>();
    for (const e of evs) held.set(e.frame, { tsNs: e.tsNs, data: bytesOf(e) });
    retained.set(`${captureId}/${point}`, held);
  };
  const ep = { ...DIRECT, sport: 40001 };
  const per = exchange('decap', ep).length;
  await send('a-vpn', e1, 'decap', exchange('decap', ep));
  await send('a-vpn', e1, 'egress', exchange('egress', ep, { at: MS }));
  await send('a-web', b, 'backend', exchange('backend', ep, { at: 2n * MS }));
  now = T;
  repros.addProbe(v.id, {
    probeId: 'p1',
    sport: 40001,
    startedAtMs: T,
    endedAtMs: T + 50,
    ok: true,
    httpCode: '200',
    error: null,
  });

  t.equal(repros.heldEvents(), 3 * per, 'a running repro holds what its points sent');

  // Running: the text forms are rendered on request; there is no evidence yet.
  t.equal(repros.bundleFile(v.id, 'evidence.pcapng'), null, 'no evidence.pcapng while running');
  const running = JSON.parse(repros.bundleFile(v.id, 'report.json')?.body.toString() ?? '{}') as {
    state: string;
    evidenceMissing: string;
  };
  t.same(reproReportSchemaErrors(running), [], 'a running repro’s report.json is valid');
  t.equal(running.state, 'running');
  t.match(running.evidenceMissing, /still running/);
  t.equal(repros.bundleFile(v.id, 'SHA256SUMS'), null, 'no SHA256SUMS of a rendering');
  t.notOk('manifest' in running, 'and report.json names none');
  t.notOk(repros.bundleNames(v.id).includes('SHA256SUMS'));
  t.match(repros.bundleArchive(v.id), { status: 404 }, 'nor a whole-bundle archive');

  // The pod goes; a probe finds no one; the replacement comes.
  addMark(repros, v.id, 'deleted', T + 1000);
  const vpnAgent = hub.list.find((a) => a.agentId === 'a-vpn');
  if (vpnAgent === undefined) throw new Error('no agent');
  // The agent's next hello: the old namespace gone, the replacement's there.
  vpnAgent.hello = {
    ...vpnAgent.hello,
    namespaces: [labNamespace('/run/netns/vpn-pod-r1', '10.244.1.11')],
  };
  now = T + 1500;
  hub.setConnected('a-vpn', true);
  repros.addProbe(v.id, {
    probeId: 'p2',
    sport: 40002,
    startedAtMs: T + 1200,
    endedAtMs: T + 2200,
    ok: false,
    httpCode: null,
    error: 'curl exit 7: could not connect',
  });
  addMark(repros, v.id, 'replacement-ready', T + 2500);
  const mid = repros.get(v.id);
  t.equal(mid?.attachments.length, 2, 'attached to the replacement');
  t.equal(mid?.attachments[0]?.detachedAt !== null, true, 'the old pod detached');

  now = T + 5000;
  const done = await repros.finishReadingRoutes(v.id, []);
  t.equal(done?.state, 'finished');
  t.equal(done?.bundle?.state, 'written', done?.bundle?.detail ?? '');

  // Each capture with frames was asked for them, and told it may drop its retention.
  t.ok(
    asked.some((a) => a.captureId === e1 && a.point === 'decap' && a.frames.length > 0),
    'decap of the old pod asked',
  );
  t.ok(
    asked.every((a) => a.release),
    'every request lets the agent release',
  );

  for (const name of REPRO_FILES)
    t.ok(repros.bundleFile(v.id, name) !== null, `${name} is in the bundle`);
  t.equal(repros.bundleFile(v.id, 'evidence.pcapng')?.contentType, 'application/vnd.tcpdump.pcap');
  t.equal(repros.bundleFile(v.id, 'timeline.svg')?.contentType, 'image/svg+xml; charset=utf-8');

  const file = (name: string): string => readFileSync(join(dir, 'repros', v.id, name), 'utf8');
  const doc = JSON.parse(file('report.json')) as {
    schemaVersion: number;
    inputs: { captures: { capture: string; node: string; iface: string; agentVersion: string }[] };
    captureHealth: { capture: string; packets: number; events: number }[];
    evidence: { packets: number; interfaces: { name: string }[]; probesWithoutPackets: string[] };
    timeline: { probeId: string; verdict: string }[];
  };
  t.same(
    reproReportSchemaErrors(doc),
    [],
    'report.json is valid against proto/repro-report.schema.json',
  );
  t.equal(doc.schemaVersion, 1);
  // The schema is strict: a member it does not know, or one missing, fails.
  t.ok(reproReportSchemaErrors({ ...doc, extra: 1 }).length > 0, 'an unknown member fails');
  t.ok(
    reproReportSchemaErrors({ ...doc, schemaVersion: undefined }).length > 0,
    'a missing schemaVersion fails',
  );
  t.same(
    doc.inputs.captures.map((c) => `${c.capture} ${c.node}/${c.iface}`),
    [
      'backend backend-node/eth0',
      'decap (vpn-pod) vpn-node/vx0',
      'egress (vpn-pod) vpn-node/eth0',
      'decap (vpn-pod-r1) vpn-node/vx0',
      'egress (vpn-pod-r1) vpn-node/eth0',
    ],
    'every capture of both attachments, with its node and interface',
  );
  t.equal(doc.inputs.captures[0]?.agentVersion, 'test');
  t.equal(doc.captureHealth.find((c) => c.capture === 'backend')?.packets, per);
  t.same(
    doc.timeline.map((r) => `${r.probeId} ${r.verdict}`),
    ['p1 preserved', 'p2 failed-to-connect'],
  );
  t.same(doc.evidence.probesWithoutPackets, ['p2'], 'the probe that never connected is named');
  t.same(
    doc.evidence.interfaces.map((i) => i.name),
    ['backend@backend-node/eth0', 'decap@vpn-node/vx0 (vpn-pod)', 'egress@vpn-node/eth0 (vpn-pod)'],
  );
  const html = file('report.html');
  const svg = file('timeline.svg');
  t.same(markupErrors(html, true), [], 'report.html is well-formed');
  t.same(markupErrors(svg), [], 'timeline.svg is well-formed');
  for (const [what, x] of [
    ['report.html', html],
    ['timeline.svg', svg],
  ] as const) {
    t.equal((x.match(/<g class="probe /g) ?? []).length, 2, `${what}: one mark per probe`);
    t.match(x, /class="mark deleted"/, `${what}: the deletion marked`);
    t.match(x, /class="mark replacement-ready"/, `${what}: the replacement marked`);
  }
  t.notMatch(html, /<script/i);
  t.match(html, /class="inputs"/, 'report.html lists the inputs');
  t.match(html, /class="health"/, 'and the capture health');
  const md = file('report.md');
  t.match(md, /## Inputs[\s\S]*decap \(vpn-pod\) \| r-/);
  t.match(md, /## Capture health/);
  // Issue 16: every time a person reads is UTC ISO-8601 with date and Z; repro times are taken in
  // ms (the prober's and the collector's clocks) and said to be, never padded to µs.
  const ISO_MS = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;
  const bareClock = /(?<![T\d])\d\d:\d\d:\d\d/;
  for (const [what, x] of [
    ['report.md', md],
    ['report.html', html],
    ['timeline.svg', svg],
  ] as const) {
    t.notMatch(x, bareClock, `${what}: no time without its date`);
    t.match(x, ISO_MS, `${what}: ISO-8601 UTC`);
  }
  t.match(md, new RegExp(`\n${ISO_MS.source}  \\+ *0\\.0s  p1 `), "report.md: p1's row");
  t.ok(md.includes(REPRO_TIMES_NOTE), 'report.md says the times are to the ms, and whose');
  t.ok(html.includes(esc(REPRO_TIMES_NOTE)), 'report.html says so too');
  t.match(html, new RegExp(`<time datetime="${ISO_MS.source}">`), 'report.html: <time> in UTC');
  t.match(md, new RegExp(`evidence\\.pcapng: ${3 * per} packets in 3 interfaces`));
  t.same(
    (JSON.parse(file('inventory.json')) as typeof INVENTORY).pods['web-1'],
    INVENTORY.pods['web-1'],
    'inventory.json: the inventory as used',
  );

  // tshark reads evidence.pcapng back: every packet of p1's connection, one interface per capture.
  const pcap = join(dir, 'repros', v.id, 'evidence.pcapng');
  const names = tsharkColumn(pcap, 'frame.interface_name');
  t.equal(names.length, 3 * per, 'every packet of p1 at each of the three points');
  t.same([...new Set(names)].sort(), [
    'backend@backend-node/eth0',
    'decap@vpn-node/vx0 (vpn-pod)',
    'egress@vpn-node/eth0 (vpn-pod)',
  ]);
  t.match(
    tsharkColumn(pcap, 'frame.comment').join('\n'),
    /probe p1 \(preserved\): decap \(vpn-pod\) frame 1: request SYN/,
  );

  // SHA256SUMS: every other file as written, checked in the bundle's directory; the collector's
  // runtime and evidence.pcapng's digest in every text form.
  const bundleDir = join(dir, 'repros', v.id);
  t.same(
    listedNames(file('SHA256SUMS')),
    REPRO_FILES.filter((n) => n !== 'SHA256SUMS').sort(),
    'SHA256SUMS lists every other file of the bundle',
  );
  const sums = checkSums(bundleDir);
  t.ok(sums.ok, `${sums.how} in the bundle's directory: ${sums.out}`);
  t.equal(repros.bundleFile(v.id, 'SHA256SUMS')?.body.toString(), file('SHA256SUMS'));
  t.equal(repros.bundleFile(v.id, 'SHA256SUMS')?.contentType, 'text/plain; charset=utf-8');
  const platform = `${process.platform} ${process.arch}`;
  const withRuntime = doc as typeof doc & {
    runtime?: unknown;
    manifest?: string;
    evidence: { sha256?: string; bytes?: number };
  };
  t.same(withRuntime.runtime, { analyzedBy: 'collector', node: process.version, platform });
  t.equal(withRuntime.manifest, 'SHA256SUMS');
  const pcapBytes = readFileSync(join(bundleDir, 'evidence.pcapng'));
  t.same(
    [withRuntime.evidence.sha256, withRuntime.evidence.bytes],
    [sha256Hex(pcapBytes), pcapBytes.length],
  );
  const made = `Analysed by the collector: hoptrace ${hoptraceVersion()} on Node ${process.version} (${platform})`;
  t.match(md, made, 'report.md: the runtime line');
  t.match(html, made, 'report.html: the runtime line');
  t.match(md, `SHA-256 ${sha256Hex(pcapBytes)}`, "report.md: evidence.pcapng's digest");
  t.match(md, /\n- SHA256SUMS: the SHA-256 of every other file of this bundle/);
  const events = doc.captureHealth.find((c) => c.capture === 'backend')?.events;
  t.match(
    md,
    new RegExp(`\\| backend \\| r-\\S+ \\| a-web \\(test\\) \\| .* \\| ${events} \\|\\n`),
  );

  // Settled once written: its events are let go (a first version kept every finished repro's, up
  // to 3 × 500,000, for the collector's life, and judged them again on every GET), the view is the
  // bundle's, and a late batch is neither kept nor read into it.
  t.equal(repros.heldEvents(), 0, 'no event held once the bundle is written');
  const settled = JSON.stringify(repros.get(v.id));
  await repros.handle({
    kind: 'events',
    agentId: 'a-web',
    seq: 0,
    batch: {
      captureId: b,
      point: 'backend',
      events: exchange('backend', { ...ep, sport: 40002 }, { at: 3000n * MS }),
    },
  });
  t.equal(JSON.stringify(repros.get(v.id)), settled, 'the finished view does not move');
  t.same(
    JSON.parse(repros.bundleFile(v.id, 'report.json')?.body.toString() ?? '{}'),
    JSON.parse(file('report.json')),
    'report.json is the one written',
  );

  // A collector started again serves the bundle as written.
  const again = new ReproManager({ hub: new FakeHub(), logger: silentLogger(), store });
  again.restore();
  t.equal(again.get(v.id)?.bundle?.state, 'written');
  t.same(
    again.bundleFile(v.id, 'evidence.pcapng')?.body,
    readFileSync(pcap),
    'evidence.pcapng from the data directory',
  );
  t.same(again.bundleNames(v.id), [...REPRO_FILES]);

  // The whole bundle as one archive, from memory as written and from the data directory after a
  // restart: it unpacks to hoptrace-<id>/ where sha256sum -c passes, stamped with the bundle's time.
  for (const [from, m] of [
    ['memory', repros],
    ['the data directory', again],
  ] as const) {
    const x = untar(await archiveBytes(m.bundleArchive(v.id)), mkdtempSync(join(dir, 'tar-')));
    t.equal(x.status, 0, `${from}: tar xf ${x.stderr}`);
    t.same(x.tops, [`hoptrace-${v.id}`], `${from}: one directory, hoptrace-<id>`);
    const out = join(x.root, `hoptrace-${v.id}`);
    t.same(readdirSync(out).sort(), [...REPRO_FILES].sort(), `${from}: every file`);
    const check = checkSums(out);
    t.ok(check.ok, `${from}: ${check.how} in hoptrace-<id>/: ${check.out}`);
  }
  const memoryTar = untar(
    await archiveBytes(repros.bundleArchive(v.id)),
    mkdtempSync(join(dir, 'm-')),
  );
  t.equal(
    statSync(join(memoryTar.root, `hoptrace-${v.id}`, 'report.md')).mtimeMs,
    Math.floor((T + 5000) / 1000) * 1000,
    "stamped with the time the bundle was written (the collector's clock then, to the second)",
  );
  t.equal(repros.bundleArchive('r-none-00000000'), null, 'no such repro: none');

  // The same archive from the JSON API of a collector started again (curl with a bearer token):
  // the bytes bundleArchive gives, as a tar download; not without the token.
  const restarted = new SessionManager({ hub: new FakeHub(), store, logger: silentLogger() });
  restarted.start();
  t.teardown(() => restarted.close());
  const api = createApi({
    sessions: restarted,
    tokens: ['repro-token'],
    collectorId: store.collectorId,
    logger: silentLogger(),
  });
  const url = `/v1/repros/${v.id}/bundle.tar`;
  const got = await api.handle({
    method: 'GET',
    url,
    headers: { authorization: 'Bearer repro-token' },
  });
  t.equal(got.status, 200, `GET ${url}`);
  t.equal(got.headers['content-type'], 'application/x-tar');
  t.equal(got.headers['content-disposition'], `attachment; filename="hoptrace-${v.id}.tar"`);
  const stream = isStreamBody(got.body) ? got.body : null;
  const body = await archiveBytes(stream);
  t.ok(
    body.equals(await archiveBytes(again.bundleArchive(v.id))),
    'the archive bundleArchive gives, byte for byte',
  );
  t.equal(stream?.length, body.length, 'its length known up front (the Content-Length)');
  const x = untar(body, mkdtempSync(join(dir, 'api-')));
  t.equal(x.status, 0, `tar xf: ${x.stderr}`);
  t.ok(checkSums(join(x.root, `hoptrace-${v.id}`)).ok, 'sha256sum -c passes in what it unpacks to');
  const anonymous = await api.handle({ method: 'GET', url, headers: {} });
  t.equal(anonymous.status, 401, 'not without the token');
});

void t.test('a capture whose frames are gone is named, never left out silently', async (t) => {
  const hub = labHub();
  const retained: Retained = new Map();
  const T = Number(T0 / MS);
  const store = new Map<string, Buffer>();
  const gone = new Set<string>();
  const repros = new ReproManager({
    hub,
    logger: silentLogger(),
    nowMs: () => T,
    store: {
      saveRepro: () => undefined,
      loadRepros: () => ({ views: [], skipped: [] }),
      writeReproBundle: (_id, files) => {
        for (const [k, b] of files) store.set(k, Buffer.from(b));
      },
    },
    frames: fakeFrames(retained, gone, []),
  });
  t.teardown(() => {
    repros.close();
  });
  const v = await repros.create(SPEC);
  // The old pod's egress capture went with its namespace: the agent holds nothing of it.
  gone.add(`${v.id}-e1/egress`);
  const ep = { ...DIRECT, sport: 40001 };
  for (const [agentId, captureId, point, evs] of [
    ['a-vpn', `${v.id}-e1`, 'decap', exchange('decap', ep)],
    ['a-vpn', `${v.id}-e1`, 'egress', exchange('egress', ep, { at: MS })],
    ['a-web', `${v.id}-b`, 'backend', exchange('backend', ep, { at: 2n * MS })],
  ] as const) {
    await repros.handle({
      kind: 'events',
      agentId,
      seq: 0,
      batch: { captureId, point, events: evs },
    });
    retained.set(
      `${captureId}/${point}`,
      new Map(evs.map((e) => [e.frame, { tsNs: e.tsNs, data: bytesOf(e) }])),
    );
  }
  repros.addProbe(v.id, {
    probeId: 'p1',
    sport: 40001,
    startedAtMs: T,
    endedAtMs: T + 50,
    ok: true,
    httpCode: '200',
    error: null,
  });
  await repros.finishReadingRoutes(v.id, []);
  const doc = JSON.parse(store.get('report.json')?.toString() ?? '{}') as {
    evidence: { packets: number; problems: { capture: string; code: string; detail: string }[] };
  };
  t.same(reproReportSchemaErrors(doc), []);
  const per = exchange('decap', ep).length;
  t.equal(doc.evidence.packets, 2 * per, 'decap and backend');
  t.match(doc.evidence.problems, [
    {
      capture: 'egress (vpn-pod)',
      code: 'RETENTION_GONE',
      detail: new RegExp(`its ${per} frames are not in the file`),
    },
  ]);
  t.match(store.get('report.md')?.toString(), /missing at egress \(vpn-pod\): RETENTION_GONE/);
});

void t.test('the frames asked for are bounded per capture, and the rest counted', (t) => {
  const flow = (probeId: string, frames: number[]): ProbeFlow => ({
    probeId,
    point: 'backend',
    epoch: 0,
    node: 'n',
    iface: 'eth0',
    matchedBy: [],
    packets: frames.map((frame) => ({
      frame,
      tsNs: '1',
      dir: 'request',
      flags: 2,
      payloadLength: 0,
      tunneled: false,
    })),
  });
  const w = reproFramesToFetch([flow('a', [5, 1, 3]), flow('b', [3, 9, 7])], 4);
  t.same(w.get('backend#0'), { frames: [1, 3, 5, 7], omitted: 1 });
  t.same(
    reproFramesToFetch([flow('a', [1, 2])]).get('backend#0')?.omitted,
    0,
    `default bound ${REPRO_EVIDENCE_MAX_FRAMES}`,
  );
  t.end();
});

function addMark(
  repros: ReproManager,
  id: string,
  kind: 'deleted' | 'replacement-ready',
  atMs: number,
): void {
  repros.addMark(id, { kind, atMs, detail: kind });
}

void t.test(
  "a repro's events go to the point the agent was armed for, as that point's, whatever they claim",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-repro-claims-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const hub = labHub();
    const repros = new ReproManager({
      hub,
      logger: silentLogger(),
      nowMs: () => Number(T0 / MS),
      store: new CaptureStore({ dir, fsync: false }),
      frames: fakeFrames(new Map(), new Set(), []),
    });
    repros.start();
    t.teardown(() => {
      repros.close();
    });
    const v = await repros.create(SPEC);
    const ep = { ...DIRECT, sport: 40002 };
    // The backend's agent sends decap's packets for the backend's capture, naming point decap.
    const forged = exchange('decap', ep).map((e) => ({ ...e, node: 'vpn-node', iface: 'tun0' }));
    await repros.handle({
      kind: 'events',
      agentId: 'a-web',
      seq: 0,
      batch: { captureId: `${v.id}-b`, point: 'decap', events: forged },
    });
    // And an agent for a point it was never armed for (the VPN pod's capture) is not heard.
    await repros.handle({
      kind: 'events',
      agentId: 'a-web',
      seq: 0,
      batch: { captureId: `${v.id}-e1`, point: 'decap', events: forged },
    });
    // Internal state read on purpose: which point's list a batch joined is not in any view.
    const lists = (
      repros as unknown as {
        repros: Map<string, { events: Map<string, { events: { event: PacketEvent }[] }> }>;
      }
    ).repros.get(v.id)?.events;
    t.equal(lists?.get('decap')?.events.length ?? 0, 0, 'nothing in decap');
    const backend = lists?.get('backend')?.events ?? [];
    t.equal(backend.length, forged.length, 'the backend point holds them');
    t.same(
      [...new Set(backend.map((x) => `${x.event.point}@${x.event.node}`))],
      [`backend@${backend[0]?.event.node ?? '?'}`],
      'as the backend point',
    );
    t.not(backend[0]?.event.node, 'vpn-node', "on the backend agent's node");
  },
);

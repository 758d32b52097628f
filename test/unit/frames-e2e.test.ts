/**
 * Evidence frames agent ↔ collector over loopback: two agents (CollectorLink + AgentRuntime with
 * a RetentionStore; each capture a replay of a real capture file that retains what it delivers,
 * frame for frame, as a live capture does), the real hub, sessions and data directory. The
 * capture resolves; the collector asks each point's agent for the matched connection's frames and
 * stores them; store.loadFrames gives the file's own bytes back. Then the bound: one agent's
 * retention fills after two frames, the other agent retains nothing — every frame it cannot give
 * is named with its reason, and none is invented.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { CaptureStore, PointFrames } from '../../collector/store';
import { reportInputs } from '../../collector/capture-reports';
import { framesToFetch } from '../../collector/frames-fetch';
import { payloadOffset } from '../../core/decode/frame';
import { openCaptureFile } from '../../offline/pcap-file';
import {
  PCAP,
  POINTS,
  capture,
  collector,
  startAgent,
  tempDir,
  waitAgents,
  type LoopbackCollector,
} from './live-capture-fixtures';
import { CLIENT, writePointFiles } from './report-pcaps';
import { reportSchemaErrors } from './report-schema';
import { tsharkFields } from './tshark';

const FILE = [...openCaptureFile(PCAP).frames()].map((f) => ({
  frame: f.index,
  tsNs: f.tsNs,
  origLen: f.wireLength,
  data: Buffer.from(f.data),
}));

/** The flow frames the final analysis names per point (what the collector asked for). */
/** What an agent retains of a frame without the payload: up to its payload, at most 256 bytes. */
function headersCut(data: Uint8Array | undefined): number {
  if (data === undefined) return 0;
  return Math.min(256, payloadOffset(1, data) ?? data.length);
}

function wanted(store: CaptureStore, id: string): Map<string, number[]> {
  const inputs = reportInputs(store.readReportInputs(id));
  if (inputs === null) throw new Error('no report inputs');
  return framesToFetch(inputs.result);
}

function framesOf(store: CaptureStore, id: string, point: string): PointFrames {
  const f = store.loadFrames(id, point);
  if (f === null) throw new Error(`no frames stored for ${point}`);
  return f;
}

void t.test(
  'the verdict is final: every point’s matched frames are fetched and stored',
  async (t) => {
    const c = await collector(t, tempDir(t, 'frames-data'));
    const ret = tempDir(t, 'frames-ret');
    startAgent(
      t,
      c.port,
      'agent-vpn',
      'vpn-node',
      { path: '/run/netns/vpn', address: '10.244.1.10' },
      { dir: ret },
    );
    startAgent(
      t,
      c.port,
      'agent-backend',
      'backend-node',
      { path: '/run/netns/web', address: '10.244.2.5' },
      { dir: ret },
    );
    await waitAgents(c.sessions, 2);
    const id = await capture(c);
    const v = c.sessions.get(id);
    t.equal(v?.state, 'resolved');
    t.equal(v?.verdict?.layer, 'preserved');
    const want = wanted(c.store, id);
    for (const p of POINTS) {
      const f = framesOf(c.store, id, p.name);
      const frames = want.get(p.name) ?? [];
      t.ok(frames.length > 3, `${p.name}: the matched connection has packets (${frames.length})`);
      t.equal(f.linktype, 1, 'Ethernet, from the retention file');
      t.equal(f.snaplen, 256);
      t.same(f.missing, [], `${p.name}: nothing missing`);
      t.same(
        f.frames.map((x) => [x.frame, x.tsNs, x.origLen, Buffer.from(x.bytes)]),
        frames.map((n) => {
          const orig = FILE[n - 1];
          if (orig === undefined) throw new Error(`frame ${n} is not in the file`);
          return [n, orig.tsNs, orig.origLen, orig.data.subarray(0, headersCut(orig.data))];
        }),
        `${p.name}: the file's own bytes (headers only: cut at the payload, at most 256), timestamps and lengths`,
      );
    }
    t.equal(c.store.loadFrames(id, 'nosuch'), null, 'no such point: nothing');

    // The bundle's evidence.pcapng, built from those frames, read back by tshark.
    const until = Date.now() + 10_000;
    while (c.sessions.bundleFile(id, 'evidence.pcapng') === null && Date.now() < until)
      await new Promise((r) => setTimeout(r, 20));
    const pcapng = c.sessions.bundleFile(id, 'evidence.pcapng');
    t.ok(pcapng !== null, 'evidence.pcapng written once the frames are stored');
    const file = join(tempDir(t, 'frames-ev'), 'evidence.pcapng');
    writeFileSync(file, pcapng ?? Buffer.alloc(0));
    const rows = tsharkFields(file, [
      'frame.interface_name',
      'frame.cap_len',
      'frame.len',
      'frame.comment',
    ]);
    const total = [...want.values()].reduce((n, f) => n + f.length, 0);
    t.equal(rows.length, total, 'every matched frame of every point');
    t.same(
      [...new Set(rows.map((r) => r[0]))].sort(),
      POINTS.map(
        (p) => `${p.name}@${p.name === 'backend' ? 'backend-node' : 'vpn-node'}/${p.iface}`,
      ).sort(),
      'one interface per point, point@node/iface',
    );
    t.ok(
      rows.every((r) => Number(r[1]) <= Number(r[2])),
      'headers only: never more than the frame',
    );
    t.ok(
      rows.every((r) => /^\w+ frame \d+: (request|reply) .*matched by/.test(r[3] ?? '')),
      'comments',
    );
    const doc = JSON.parse(c.sessions.bundleFile(id, 'report.json')?.toString() ?? '{}') as {
      evidence?: { packets: number; headersOnly: boolean; problems: unknown[] };
    };
    t.equal(doc.evidence?.packets, total, 'report.json says what the file holds');
    t.same(doc.evidence?.problems, []);
    t.match(c.sessions.bundleFile(id, 'report.md')?.toString(), /## Packets \(evidence\.pcapng\)/);
  },
);

/** Waits for a finished capture's report.json to say what its evidence.pcapng holds. */
async function evidenceDoc(
  c: LoopbackCollector,
  id: string,
): Promise<Record<string, unknown> & EvidenceDoc> {
  const until = Date.now() + 10_000;
  const read = (): (Record<string, unknown> & EvidenceDoc) | null => {
    const raw = c.sessions.bundleFile(id, 'report.json');
    return raw === null
      ? null
      : (JSON.parse(raw.toString()) as Record<string, unknown> & EvidenceDoc);
  };
  while ((read()?.evidence ?? null) === null && Date.now() < until)
    await new Promise((r) => setTimeout(r, 20));
  const doc = read();
  if (doc === null) throw new Error('no report.json');
  return doc;
}

interface EvidenceDoc {
  evidence?: { packets: number; headersOnly: boolean; note: string; problems: unknown[] } | null;
  identityHeaders?: {
    scanned: string[];
    notScanned: unknown[];
    seen: { point: string; kind: string; value: string }[];
    cut: { point: string; payloadBytes: number; payloadLength: number; why: string }[];
    headersOnly?: boolean;
  };
  capture?: { request: { evidencePayload?: boolean } };
  reproduce?: { argv: string[] };
  whatToChange?: { questions: { detail: string }[] };
}

/** tshark's fields of every packet of a bundle's evidence.pcapng. */
function bundleFields(
  t: { teardown(fn: () => void): void },
  pcapng: Buffer,
  fields: string[],
): string[][] {
  const file = join(tempDir(t, 'frames-ts'), 'evidence.pcapng');
  writeFileSync(file, pcapng);
  return tsharkFields(file, fields);
}

void t.test(
  'evidencePayload: whole frames retained, payload in evidence.pcapng, identity headers found; default: cut and said so',
  async (t) => {
    const c = await collector(t, tempDir(t, 'frames-data'));
    const ret = tempDir(t, 'frames-ret');
    // The backend's request carries an X-Forwarded-For past the first 256 bytes of its frame.
    const files = new Map(
      writePointFiles(tempDir(t, 'frames-pcaps'), {
        headers: { backend: `User-Agent: ${'x'.repeat(240)}\r\nX-Forwarded-For: ${CLIENT}\r\n` },
      }),
    );
    const pcapOf = (point: string): string => files.get(point) ?? PCAP;
    startAgent(
      t,
      c.port,
      'agent-vpn',
      'vpn-node',
      { path: '/run/netns/vpn', address: '10.244.1.10' },
      { dir: ret },
      pcapOf,
    );
    startAgent(
      t,
      c.port,
      'agent-backend',
      'backend-node',
      { path: '/run/netns/web', address: '10.244.2.5' },
      { dir: ret },
      pcapOf,
    );
    await waitAgents(c.sessions, 2);
    const run = async (evidencePayload: boolean): Promise<string> => {
      const view = await c.sessions.create({
        points: POINTS,
        client: CLIENT,
        timeoutMs: 20_000,
        stopOnFirstMatch: true,
        settleMs: 30_000,
        ...(evidencePayload ? { evidencePayload } : {}),
      });
      await c.stored.wait(() => POINTS.every((p) => c.frames.includes(`${view.id}/${p.name}`)));
      return view.id;
    };

    const id = await run(true);
    t.equal(c.sessions.get(id)?.verdict?.layer, 'preserved');
    for (const p of POINTS) {
      const f = framesOf(c.store, id, p.name);
      t.equal(f.snaplen, 65535, `${p.name}: the agent retained up to the capture's snaplen`);
      t.ok(
        f.frames.length > 0 && f.frames.every((x) => x.bytes.length === x.origLen),
        `${p.name}: whole frames`,
      );
    }
    const doc = await evidenceDoc(c, id);
    t.same(reportSchemaErrors(doc), [], 'report.json is valid against the schema');
    t.equal(doc.evidence?.headersOnly, false, 'report.json: payload kept');
    t.match(
      doc.evidence?.note,
      /with their payload as retained \(the capture asked for it: at most 65535 bytes a frame/,
    );
    t.notMatch(
      doc.evidence?.note,
      /longer and cut there|reached its bound/,
      'nothing cut, nothing past a bound',
    );
    t.equal(doc.capture?.request.evidencePayload, true, 'capture.request says it was asked for');
    t.equal(
      doc.reproduce?.argv.at(-1),
      '--evidence-payload',
      'the Reproduce line asks for it again',
    );
    t.match(
      c.sessions.bundleFile(id, 'report.md')?.toString(),
      /with the payload bytes as captured/,
    );
    t.match(
      c.sessions.bundleFile(id, 'report.html')?.toString(),
      /with the payload bytes as captured/,
    );
    const pcapng = c.sessions.bundleFile(id, 'evidence.pcapng');
    if (pcapng === null) throw new Error('no evidence.pcapng');
    // Each point's copy of the connection is its own interface's; tshark's TCP analysis would
    // take the later ones for retransmissions, so the payload is read as bytes.
    const rows = bundleFields(t, pcapng, [
      'frame.interface_name',
      'frame.cap_len',
      'frame.len',
      'tcp.payload',
    ]);
    t.ok(
      rows.every((r) => r[1] === r[2]),
      'tshark: every frame whole (cap_len = len)',
    );
    const requests = rows
      .map((r) => [r[0], Buffer.from(r[3] ?? '', 'hex').toString('latin1')])
      .filter(([, text]) => text?.startsWith('GET ') === true);
    t.same(
      requests.map(([iface, text]) => [
        iface,
        /^GET (\S+)/.exec(text ?? '')?.[1],
        /X-Forwarded-For: (\S+)/.exec(text ?? '')?.[1] ?? null,
      ]),
      [
        ['decap@vpn-node/tun0', '/hoptrace-probe-rep0', null],
        ['egress@vpn-node/eth0', '/hoptrace-probe-rep0', null],
        ['backend@backend-node/eth0', '/hoptrace-probe-rep0', CLIENT],
      ],
      "tshark gives each point's HTTP request bytes, and the backend's X-Forwarded-For",
    );
    t.same(doc.identityHeaders?.scanned, ['decap', 'egress', 'backend']);
    t.same(doc.identityHeaders?.cut, [], 'nothing cut');
    t.match(doc.identityHeaders?.seen, [
      { point: 'backend', kind: 'x-forwarded-for', value: CLIENT },
    ]);
    t.equal(doc.identityHeaders?.seen.length, 1);
    t.match(
      doc.whatToChange?.questions[0]?.detail,
      /x-forwarded-for `10\.90\.0\.42` at backend .*not at the first point/,
    );

    // The same request captured without the option: headers only, and the scan says how far it read.
    const plain = await run(false);
    const d = await evidenceDoc(c, plain);
    t.same(reportSchemaErrors(d), []);
    t.equal(d.evidence?.headersOnly, true, 'headers only by default');
    t.equal(d.capture?.request.evidencePayload, undefined);
    t.notOk(d.reproduce?.argv.includes('--evidence-payload'));
    const plainRows = bundleFields(
      t,
      c.sessions.bundleFile(plain, 'evidence.pcapng') ?? Buffer.alloc(0),
      ['frame.cap_len', 'frame.len', 'tcp.len', 'tcp.payload'],
    );
    t.ok(
      plainRows.every((r) => r[3] === ''),
      'tshark: no payload bytes in any frame',
    );
    t.ok(
      plainRows.some((r) => Number(r[2]) > 0 && Number(r[0]) < Number(r[1])),
      'data segments cut after TCP',
    );
    // The agents retained headers only: no request head is read, and the report says why.
    t.equal(d.identityHeaders?.headersOnly, true);
    t.same(d.identityHeaders?.scanned, [], 'no point scanned');
    t.same(d.identityHeaders?.seen, []);
    t.match(
      d.identityHeaders?.notScanned,
      ['decap', 'egress', 'backend'].map((point) => ({ point, why: /headers only, no payload/ })),
    );
    const q1 = d.whatToChange?.questions[0]?.detail ?? '';
    t.match(q1, /was not looked for: the payload was not retained .*--evidence-payload/);
    t.notMatch(q1, /no X-Forwarded-For/, 'never said to carry none');
  },
);

void t.test(
  'retention full at one agent, none at the other: every missing frame is named',
  async (t) => {
    const c = await collector(t, tempDir(t, 'frames-data'));
    const ret = tempDir(t, 'frames-ret');
    // The pcap header (24 bytes) and two records of at most 16 + 74 bytes (headers only: a SYN's
    // Ethernet, IPv4 and TCP with options).
    startAgent(
      t,
      c.port,
      'agent-vpn',
      'vpn-node',
      { path: '/run/netns/vpn', address: '10.244.1.10' },
      { dir: ret, maxBytes: 24 + 2 * (16 + 74) },
    );
    startAgent(
      t,
      c.port,
      'agent-backend',
      'backend-node',
      { path: '/run/netns/web', address: '10.244.2.5' },
      null,
    );
    await waitAgents(c.sessions, 2);
    const id = await capture(c);
    const want = wanted(c.store, id);
    for (const name of ['decap', 'egress']) {
      const f = framesOf(c.store, id, name);
      const frames = want.get(name) ?? [];
      const retained = f.frames.map((x) => x.frame);
      const lost = f.missing.map((m) => m.frame);
      t.ok(
        Math.max(0, ...retained) < Math.min(...lost),
        `${name}: frames kept before the bound (${retained.join(',')}), none after (${lost.join(',')})`,
      );
      t.same(
        [...retained, ...lost].sort((a, b) => a - b),
        frames,
        `${name}: every frame asked for is either there or named`,
      );
      t.ok(f.missing.length > 0);
      t.ok(
        f.retained > 0 && f.retentionDropped > 0,
        `counted: ${f.retained} kept, ${f.retentionDropped} not`,
      );
      t.ok(
        f.missing.every((m) => m.reason === 'RETENTION_FULL'),
        `${name}: RETENTION_FULL (${[...new Set(f.missing.map((m) => m.reason))].join(',')})`,
      );
      for (const x of f.frames)
        t.same(
          Buffer.from(x.bytes),
          FILE[x.frame - 1]?.data.subarray(0, headersCut(FILE[x.frame - 1]?.data)),
        );
    }
    const b = framesOf(c.store, id, 'backend');
    t.same(b.frames, [], 'the backend agent retained nothing');
    t.equal(b.linktype, null, 'and claims no link type');
    t.same(
      b.missing,
      (want.get('backend') ?? []).map((frame) => ({ frame, reason: 'RETENTION_OFF' })),
    );
    // The bound is said in the evidence, per point, with the agent's counts.
    const doc = await evidenceDoc(c, id);
    for (const name of ['decap', 'egress']) {
      const f = framesOf(c.store, id, name);
      t.match(
        doc.evidence?.note,
        `${name}'s retention reached its bound after ${f.retained} frames (${f.retentionDropped} more not kept)`,
        `${name}: the evidence note names the bound`,
      );
    }
    t.match(doc.identityHeaders?.notScanned, [
      { point: 'decap', why: /headers only/ },
      { point: 'egress', why: /headers only/ },
      { point: 'backend', why: /headers only/ },
    ]);
  },
);

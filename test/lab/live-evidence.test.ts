// A live capture's evidence, payload and identity headers, in the lab: the proxy-pod scenario
// (its L7 proxy adds X-Forwarded-For to the request it sends the backend) captured twice by
// hoptrace itself — once with `evidencePayload`, whose evidence.pcapng must hold each point's
// request bytes (tshark reads the probe marker and the backend's X-Forwarded-For back) and whose
// report says the payload was kept and names the header; once by default, headers only: the
// agents retain each frame up to its transport header (no payload byte in what they hold, not
// only in evidence.pcapng), and the identity-header scan says plainly the payload was not
// retained, never "no identity header". Real namespaces, real agents and collector; needs root,
// fails with the reason otherwise.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { reportInputs } from '../../collector/capture-reports';
import { decodeStoredFrames, type StoredFrames } from '../../common/frames-wire';
import type { IdentityHeaderScan } from '../../core/report/analysis-result';
import { payloadOffset } from '../../core/decode/frame';
import { requestDataPacket } from '../../core/report/identity-scan';
import { LiveCollector, runArmedProbe, withLiveScene, type LiveRun } from '../../lab/live';
import { delay } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';
import { reportSchemaErrors } from '../unit/report-schema';
import { tsharkFields } from '../unit/tshark';

interface Doc {
  evidence?: { packets: number; headersOnly: boolean; note: string } | null;
  identityHeaders?: IdentityHeaderScan;
  capture?: { request: { evidencePayload?: boolean } };
  reproduce?: { argv: string[] };
  whatToChange?: { questions: { detail: string }[] };
  points: { name: string }[];
}

/** report.json once it says what evidence.pcapng holds (rewritten after the frames are fetched). */
async function bundleDoc(dir: string): Promise<Doc> {
  const read = (): Doc => JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as Doc;
  const until = Date.now() + 30_000;
  while ((read().evidence ?? null) === null && Date.now() < until) await delay(50);
  return read();
}

function storedFrames(dir: string, point: string): StoredFrames | null {
  const file = join(dir, `frames-${point}.pb`);
  return existsSync(file) ? decodeStoredFrames(readFileSync(file)) : null;
}

/** Each packet of evidence.pcapng: interface, captured and wire length, TCP payload as text. */
function evidenceRows(dir: string): { iface: string; cap: number; len: number; text: string }[] {
  return tsharkFields(join(dir, 'evidence.pcapng'), [
    'frame.interface_name',
    'frame.cap_len',
    'frame.len',
    'tcp.payload',
  ]).map(([iface = '', cap = '0', len = '0', hex = '']) => ({
    iface,
    cap: Number(cap),
    len: Number(len),
    text: Buffer.from(hex, 'hex').toString('latin1'),
  }));
}

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test(
    'proxy-pod: evidencePayload keeps the payload; by default the scan is honest',
    async (t) => {
      const collector = await LiveCollector.start();
      t.teardown(() => collector.close());
      const scenario = findScenario('proxy-pod');
      if (scenario === undefined) throw new Error('no proxy-pod scenario');
      await withLiveScene(collector, scenario, async (scene) => {
        await scene.startAgents();
        const capDir = (run: LiveRun): string => join(collector.dataDir, 'captures', run.captureId);
        const marker = `hoptrace-probe-${scene.probeId}`;

        await t.test('with evidencePayload', async (t) => {
          const run = await runArmedProbe(scene, {
            request: (body) => ({ ...body, evidencePayload: true }),
          });
          t.equal(run.state, 'resolved', `resolved (${run.finalReason ?? '-'})`);
          t.equal(run.verdict?.layer, 'proxy', 'the proxy is named');
          const dir = capDir(run);
          const doc = await bundleDoc(dir);
          t.same(reportSchemaErrors(doc), [], 'report.json is valid against the schema');
          t.equal(doc.evidence?.headersOnly, false, 'report.json: the payload was kept');
          t.match(doc.evidence?.note, /with their payload as retained/);
          t.equal(doc.capture?.request.evidencePayload, true);
          t.ok(doc.reproduce?.argv.includes('--evidence-payload'), 'the Reproduce line asks again');
          t.match(
            readFileSync(join(dir, 'report.md'), 'utf8'),
            /packets of the matched connection, with the payload bytes as captured/,
          );
          for (const p of doc.points) {
            const f = storedFrames(dir, p.name);
            t.ok(f !== null, `${p.name}: frames stored`);
            t.equal(f?.snaplen, 65535, `${p.name}: the agent retained up to the snaplen`);
            t.ok(
              f?.records.every((r) => r.data.length === r.origLen),
              `${p.name}: whole frames (${f?.records.length ?? 0})`,
            );
          }
          const rows = evidenceRows(dir);
          t.ok(rows.length > 0 && rows.every((r) => r.cap === r.len), 'tshark: every frame whole');
          const requests = rows.filter((r) => r.text.startsWith('GET '));
          t.same(
            [
              ...new Set(
                requests.filter((r) => r.text.includes(marker)).map((r) => r.iface.split('@')[0]),
              ),
            ],
            doc.points.map((p) => p.name),
            "tshark: each point's request with the probe marker in evidence.pcapng",
          );
          t.ok(
            requests.some(
              (r) => r.iface.startsWith('backend@') && /\r\nX-Forwarded-For: /i.test(r.text),
            ),
            "and the proxy's X-Forwarded-For in the backend's request",
          );
          const scan = doc.identityHeaders;
          t.same(
            scan?.scanned,
            doc.points.map((p) => p.name),
            'every point scanned',
          );
          t.same(scan?.cut, [], 'nothing cut');
          t.same(
            scan?.seen.map((h) => [h.point, h.kind]),
            [['backend', 'x-forwarded-for']],
            'the header at the backend only',
          );
          t.match(
            doc.whatToChange?.questions[0]?.detail,
            /x-forwarded-for `[^`]+` at backend .*not at the first point, so something on the path added it/,
          );
        });

        await t.test('by default: headers only, the scan says what it read', async (t) => {
          const run = await runArmedProbe(scene);
          t.equal(run.state, 'resolved', `resolved (${run.finalReason ?? '-'})`);
          const dir = capDir(run);
          const doc = await bundleDoc(dir);
          t.same(reportSchemaErrors(doc), [], 'report.json is valid against the schema');
          t.equal(doc.evidence?.headersOnly, true, 'headers only');
          t.equal(doc.capture?.request.evidencePayload, undefined);
          t.notOk(doc.reproduce?.argv.includes('--evidence-payload'));
          const rows = evidenceRows(dir);
          t.ok(rows.length > 0 && rows.every((r) => r.text === ''), 'tshark: no payload bytes');
          const scan = doc.identityHeaders;
          if (scan === undefined)
            throw new Error('identityHeaders missing: the frames were not scanned');
          const names = doc.points.map((p) => p.name);
          t.equal(scan.headersOnly, true, 'the scan says the payload was not retained');
          t.same(scan.scanned, [], 'no request head read');
          t.same(
            scan.notScanned.map((n) => n.point).sort(),
            [...names].sort(),
            `every point said why not (${JSON.stringify(scan.notScanned)})`,
          );
          const inputs = reportInputs(
            JSON.parse(readFileSync(join(dir, 'report-inputs.json'), 'utf8')),
          );
          if (inputs === null) throw new Error('no report inputs');
          // What the agents hold: every request frame cut where its payload starts.
          for (const name of names) {
            const packet = requestDataPacket(inputs.result, name);
            const stored = storedFrames(dir, name);
            const rec = stored?.records.find((r) => r.frame === packet?.frame);
            t.ok(
              rec !== undefined,
              `${name}: its request frame ${packet?.frame ?? '?'} was retained`,
            );
            if (rec === undefined || stored === null) continue;
            const at = payloadOffset(stored.linkType ?? 1, rec.data);
            t.ok(
              at !== null && rec.data.length === at && rec.data.length < rec.origLen,
              `${name}: retained up to its payload (${rec.data.length} of ${rec.origLen} bytes)`,
            );
          }
          const q1 = doc.whatToChange?.questions[0]?.detail ?? '';
          t.match(q1, /the payload was not retained .*--evidence-payload/);
          t.notMatch(q1, /no X-Forwarded-For/, 'never said to carry none');
        });
      });
    },
  );
}

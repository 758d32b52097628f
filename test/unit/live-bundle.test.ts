/**
 * A live capture's bundle as the collector serves it (GET /v1/captures/:id/<file>, over loopback)
 * and `kubectl hoptrace report` brings it home (cli/kubectl/bundle-download.ts): SHA256SUMS lists
 * every other file and matches the bytes served (`sha256sum -c` in the downloaded directory), the
 * reports carry the collector's runtime line, and their inputs name the agents with the versions
 * their hellos announced, the events the collector received from each and their file as stored
 * (its real size and SHA-256 in the data directory), and evidence.pcapng's digest as written. A
 * file changed on the collector's disk after it was written is refused.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { downloadBundle, downloadedLines } from '../../cli/kubectl/bundle-download';
import { CollectorClient } from '../../cli/collector-client';
import { createApi } from '../../collector/http';
import { silentLogger } from '../../collector/logger';
import { HoptraceError } from '../../common/errors';
import { sha256Hex } from '../../common/sha256sums';
import { hoptraceVersion } from '../../common/version';
import type { ReportDocument } from '../../core/report/report-document';
import {
  capture,
  collector,
  startAgent,
  tempDir,
  waitAgents,
  type LoopbackCollector,
} from './live-capture-fixtures';
import { reportSchemaErrors } from './report-schema';
import { checkSums, listedNames } from './sums-check';
import { TOKEN, closeServer } from './transport-fixtures';

/** The collector's HTTP API on loopback; its base URL. */
async function serveApi(
  t: { teardown(fn: () => Promise<void>): void },
  c: LoopbackCollector,
): Promise<string> {
  const api = createApi({
    sessions: c.sessions,
    tokens: [TOKEN],
    collectorId: c.store.collectorId,
    logger: silentLogger(),
  });
  const server = createServer(api.listener());
  await new Promise<void>((r) => {
    server.listen(0, '127.0.0.1', r);
  });
  t.teardown(() => closeServer(server));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

void t.test(
  'the served bundle: SHA256SUMS of the bytes served, the runtime line, the inputs by agent',
  async (t) => {
    const c = await collector(t, tempDir(t, 'live-bundle-data'));
    const ret = tempDir(t, 'live-bundle-ret');
    const vpn = { path: '/run/netns/vpn', address: '10.244.1.10' };
    const web = { path: '/run/netns/web', address: '10.244.2.5' };
    startAgent(t, c.port, 'agent-vpn', 'vpn-node', vpn, { dir: ret }, undefined, '9.9.1-vpn');
    startAgent(t, c.port, 'agent-backend', 'backend-node', web, { dir: ret }, undefined, '9.9.2');
    await waitAgents(c.sessions, 2);
    const id = await capture(c);
    const base = await serveApi(t, c);
    const client = new CollectorClient(base, TOKEN);

    const dir = join(tempDir(t, 'live-bundle-out'), `hoptrace-${id}`);
    const d = await downloadBundle(client, id, dir, { evidenceWaitMs: 10_000, pollMs: 20 });
    const names = readdirSync(dir).sort();
    t.same(
      names,
      [
        'SHA256SUMS',
        'evidence.pcapng',
        'inventory.json',
        'report.html',
        'report.json',
        'report.md',
        'sequence.svg',
      ],
      'the whole bundle, SHA256SUMS with it',
    );
    t.same(d.check, { verified: 6 }, 'each of the 6 other files matched');
    t.match(downloadedLines(d), [/^bundle: /, '  verified 6 files against SHA256SUMS']);
    const sums = readFileSync(join(dir, 'SHA256SUMS'), 'utf8');
    t.same(
      listedNames(sums),
      names.filter((n) => n !== 'SHA256SUMS'),
      'SHA256SUMS lists every other file, in sha256sum format',
    );
    const check = checkSums(dir);
    t.ok(check.ok, `${check.how} in the downloaded directory: ${check.out}`);
    t.equal(
      sums,
      c.sessions.bundleFile(id, 'SHA256SUMS')?.toString(),
      'the manifest as the collector keeps it',
    );

    // report.json: the collector's runtime, the manifest, the inputs by agent, evidence's digest.
    const doc = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as ReportDocument;
    t.same(reportSchemaErrors(doc), [], 'report.json is valid against the schema');
    const platform = `${process.platform} ${process.arch}`;
    t.same(doc.runtime, { analyzedBy: 'collector', node: process.version, platform });
    t.equal(doc.manifest, 'SHA256SUMS');
    const received = new Map(c.sessions.get(id)?.points.map((p) => [p.name, p.events]));
    t.match(doc.inputs, [
      { name: 'decap', agentId: 'agent-vpn', agentVersion: '9.9.1-vpn', node: 'vpn-node' },
      { name: 'egress', agentId: 'agent-vpn', agentVersion: '9.9.1-vpn', node: 'vpn-node' },
      { name: 'backend', agentId: 'agent-backend', agentVersion: '9.9.2', node: 'backend-node' },
    ]);
    for (const i of doc.inputs) {
      const n = 'eventsReceived' in i ? i.eventsReceived : null;
      t.ok(n !== null && n > 0 && n === received.get(i.name), `${i.name}: ${n} events received`);
      // The events as stored: the real size and SHA-256 of the file in the data directory.
      const stored = readFileSync(join(c.store.dir, 'captures', id, `events-${i.name}.pb`));
      t.same(
        'eventsFile' in i ? i.eventsFile : undefined,
        {
          file: `captures/${id}/events-${i.name}.pb`,
          bytes: stored.length,
          sha256: sha256Hex(stored),
        },
        `${i.name}: its stored events file, ${stored.length} bytes, and their SHA-256`,
      );
    }
    const evidence = readFileSync(join(dir, 'evidence.pcapng'));
    t.same(
      [doc.evidence?.sha256, doc.evidence?.bytes],
      [sha256Hex(evidence), evidence.length],
      'the digest of evidence.pcapng as written',
    );

    // report.md and report.html say the same in words.
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    const made = `Analysed by the collector: hoptrace ${hoptraceVersion()} on Node ${process.version} (${platform}); the agents captured and decoded the packets`;
    t.match(md, made, 'report.md: the runtime line');
    t.match(
      md,
      new RegExp(
        `- decap: .* — agent agent-vpn \\(9\\.9\\.1-vpn\\) on node vpn-node, 10\\.244\\.1\\.10 tun0, filter none; ${received.get('decap')} events received from it and stored`,
      ),
    );
    t.match(md, /- backend: .* — agent agent-backend \(9\.9\.2\) on node backend-node/);
    const decapFile =
      doc.inputs[0] !== undefined && 'eventsFile' in doc.inputs[0]
        ? doc.inputs[0].eventsFile
        : null;
    t.match(
      md,
      `events received from it and stored; its events as stored: \`captures/${id}/events-decap.pb\` — ${decapFile?.bytes} bytes, SHA-256 \`${decapFile?.sha256}\``,
      "report.md: decap's stored events file and its digest",
    );
    t.match(
      md,
      `- evidence frames: asked of each point's agent after the verdict; ${doc.evidence?.packets} packets of the matched connection written as \`evidence.pcapng\` — ${evidence.length} bytes, SHA-256 \`${sha256Hex(evidence)}\``,
    );
    t.match(md, /- `SHA256SUMS`: the SHA-256 of every other file of this bundle, written last/);
    const html = readFileSync(join(dir, 'report.html'), 'utf8');
    t.match(html, made, 'report.html: the runtime line');
    t.match(html, /agent agent-backend \(9\.9\.2\) on node backend-node/);
    t.match(html, sha256Hex(evidence));

    // A file changed on the collector's disk after it was written: the download refuses it.
    const served = join(c.store.dir, 'captures', id, 'report.html');
    const bytes = readFileSync(served);
    bytes[100] = (bytes[100] ?? 0) ^ 0x20;
    writeFileSync(served, bytes);
    const elsewhere = join(tempDir(t, 'live-bundle-bad'), 'out');
    const refused = await downloadBundle(client, id, elsewhere, {
      evidenceWaitMs: 0,
      pollMs: 20,
    }).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(refused instanceof HoptraceError, 'refused with a HoptraceError');
    t.match(refused, {
      code: 'BUNDLE_CHECKSUM',
      message:
        /report\.html: \d+ bytes received whose SHA-256 is [0-9a-f]{16}…, SHA256SUMS lists [0-9a-f]{16}…; nothing was written/,
    });
    t.notOk(existsSync(elsewhere), 'nothing was written');
  },
);

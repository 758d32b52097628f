/**
 * report.json against proto/report.schema.json: the forms written for files (several verdicts,
 * doctor given / not run / unreadable) and for a live capture (the collector's meta) are valid, and
 * the schema is strict enough that a missing required member or an unknown one fails.
 */
import t from 'tap';
import { renderReportJson, renderReportMarkdown } from '../../core/report/report';
import type { ReportMeta } from '../../core/report/report-document';
import { liveReportMeta } from '../../collector/capture-reports';
import { CLIENT, INVENTORY } from './fixtures-events';
import { DOCTOR, agents, cni, liveMeta, record } from './live-report-fixtures';
import { reportSchemaErrors } from './report-schema';

const FILES: ReportMeta = {
  generatedAt: '2026-12-01T10:00:00.000Z',
  inputs: [
    { name: 'decap', file: '/caps/decap.pcap', sha256: 'a'.repeat(64), bytes: 100 },
    { name: 'egress', file: '/caps/egress.pcap', sha256: 'b'.repeat(64), bytes: 100 },
    { name: 'backend', file: '-', sha256: null, bytes: null },
  ],
  selector: { client: CLIENT },
  hoptraceVersion: '0.1.0',
  source: 'files',
  inventoryUsed: INVENTORY,
  doctor: { status: 'given', source: '/caps/doctor.json', result: DOCTOR },
};

const live = liveMeta();

const docOf = (meta: ReportMeta): Record<string, unknown> =>
  JSON.parse(renderReportJson(cni, meta)) as Record<string, unknown>;

void t.test('valid: files (doctor given, not run, unreadable) and a live capture', (t) => {
  for (const [name, meta] of [
    ['files, doctor given', FILES],
    ['files, doctor not run', { ...FILES, doctor: undefined }],
    [
      'files, doctor unreadable',
      { ...FILES, doctor: { status: 'unreadable', source: '/x.json', detail: 'ENOENT' } },
    ],
    ['live', live],
  ] as [string, ReportMeta][]) {
    t.strictSame(reportSchemaErrors(docOf(meta)), [], name);
  }
  const doc = docOf(live);
  t.equal(doc['source'], 'live');
  t.match(doc['inputs'], [
    { name: 'decap', agentId: 'agent-vpn', agentVersion: '0.1.0', node: 'vpn-node', filter: 'tcp' },
    {},
    { name: 'backend', agentId: 'agent-backend', agentVersion: null, target: 'fd00::5' },
  ]);
  t.match(doc['capture'], {
    id: 'c-0001',
    collector: 'http://127.0.0.1:7070',
    request: { timeoutMs: 30000, settleMs: 2000, stopOnFirstMatch: true },
    inventoryGiven: INVENTORY,
  });
  t.same(doc['inventory'], INVENTORY);
  t.same(doc['runtime'], {
    analyzedBy: 'collector',
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  });
  t.match(doc['inputs'], [{ eventsReceived: 4 }, {}, {}]);
  t.end();
});

void t.test('runtime: hoptrace analyze with its decoder, the collector without one', (t) => {
  const analyze = { analyzedBy: 'analyze', node: 'v20.1.0', platform: 'linux x64' };
  const collector = { analyzedBy: 'collector', node: 'v20.1.0', platform: 'linux arm64' };
  const files = docOf(FILES);
  const liveDoc = docOf(live);
  for (const [what, doc, runtime, valid] of [
    ['analyze', files, { ...analyze, nativeDecoder: 'loaded' }, true],
    [
      'an older analyze (node and decoder only)',
      files,
      { node: 'v20.1.0', nativeDecoder: 'not-loaded' },
      true,
    ],
    ['the collector', liveDoc, collector, true],
    ['analyze without its decoder', files, analyze, false],
    ['the collector with a decoder', liveDoc, { ...collector, nativeDecoder: 'loaded' }, false],
    [
      'the collector without its platform',
      liveDoc,
      { analyzedBy: 'collector', node: 'v20.1.0' },
      false,
    ],
    ['someone else', liveDoc, { ...collector, analyzedBy: 'agent' }, false],
  ] as const) {
    const errors = reportSchemaErrors({ ...doc, runtime });
    t.equal(
      errors.length === 0,
      valid,
      `${what}: ${valid ? 'valid' : 'refused'} (${errors.join('; ')})`,
    );
  }
  t.end();
});

void t.test('the live reproduce command: every flag, placeholders said', (t) => {
  const r = live.reproduce;
  t.equal(
    r?.command,
    "hoptrace capture --point decap=10.244.1.10:tun0 --point egress=10.244.1.10:eth0 --point 'backend=backend-node/[fd00::5]:eth0' " +
      '--collector http://127.0.0.1:7070 --token-file TOKEN_FILE --client 10.90.0.42 --dst 10.244.2.5:8080 ' +
      '--inventory INVENTORY_FILE --timeout 30000ms --settle 2000ms',
  );
  t.match(r?.notes.join('\n'), /TOKEN_FILE: .*never written/);
  t.match(
    r?.notes.join('\n'),
    /different filters \(decap: tcp; egress: tcp port 8080; backend: none\)/,
  );
  t.match(r?.notes.join('\n'), /INVENTORY_FILE: .*capture\.inventoryGiven/);
  const md = renderReportMarkdown(cni, live);
  t.match(md, /agent agent-vpn \(0\.1\.0\) on node vpn-node, 10\.244\.1\.10 tun0, filter `tcp`/);
  t.match(md, /Doctor was not run for this capture/);
  const spec = { ...record.spec, stopOnFirstMatch: false };
  delete spec.inventory;
  const anywhere = liveReportMeta({
    record: { ...record, spec },
    agents,
    collector: null,
    state: 'timeout',
    reason: 'timeout',
    inventory: INVENTORY,
    generatedAt: '2026-12-01T10:00:00.000Z',
  });
  t.match(anywhere.reproduce?.command, /--collector COLLECTOR_URL /);
  t.notMatch(anywhere.reproduce?.command, /--inventory/);
  t.match(anywhere.reproduce?.notes.join('\n'), /COLLECTOR_URL: .*every address/);
  t.match(anywhere.reproduce?.notes.join('\n'), /stopOnFirstMatch: false/);
  t.end();
});

/** A deep copy of `doc` with the member at `path` removed (or, with `value`, set). */
function without(doc: Record<string, unknown>, path: (string | number)[]): unknown {
  const copy = structuredClone(doc);
  let at: unknown = copy;
  for (const k of path.slice(0, -1)) at = (at as Record<string | number, unknown>)[k];
  const last = path[path.length - 1];
  if (Array.isArray(at) && typeof last === 'number') at.splice(last, 1);
  else Reflect.deleteProperty(at as object, last as string);
  return copy;
}

void t.test('strict: a missing required member, a wrong value or an unknown member fails', (t) => {
  const files = docOf(FILES);
  const liveDoc = docOf(live);
  const missing: [Record<string, unknown>, (string | number)[]][] = [
    [files, ['schemaVersion']],
    [files, ['hoptraceVersion']],
    [files, ['generatedAt']],
    [files, ['inputs', 0, 'sha256']],
    [files, ['inventory']],
    [files, ['selector', 'client']],
    [files, ['doctor', 'result']],
    [files, ['whatToChange', 'questions', 1]],
    [files, ['whatToChange', 'snat', 'runbook']],
    [files, ['reproduce', 'command']],
    [files, ['verdict', 'layer']],
    [files, ['points', 0, 'flow']],
    [files, ['clock', 1, 'status']],
    [liveDoc, ['capture']],
    [liveDoc, ['inputs', 0, 'agentId']],
    [liveDoc, ['capture', 'request', 'timeoutMs']],
  ];
  for (const [doc, path] of missing)
    t.not(reportSchemaErrors(without(doc, path)).length, 0, `without ${path.join('.')}`);
  t.not(reportSchemaErrors({ ...files, schemaVersion: 2 }).length, 0, 'another schemaVersion');
  t.not(reportSchemaErrors({ ...files, extra: 1 }).length, 0, 'an unknown top-level member');
  t.not(
    reportSchemaErrors({ ...files, capture: liveDoc['capture'] }).length,
    0,
    'files with a capture',
  );
  t.not(
    reportSchemaErrors({ ...files, inputs: [{ name: 'a', file: 'b', sha256: 'xyz', bytes: 1 }] })
      .length,
    0,
    'a sha256 that is not one',
  );
  t.end();
});

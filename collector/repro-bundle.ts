/**
 * A repro's bundle: report.md (the timeline as text, to paste), report.json (proto/
 * repro-report.schema.json, `schemaVersion`), report.html (one self-contained page with the
 * timeline picture), timeline.svg (the picture alone: the probes across the pod deletion, each by
 * its verdict, the broken window shaded, the deletion and the replacement marked),
 * evidence.pcapng (core/repro/repro-evidence.ts), inventory.json (the inventory the verdicts
 * were computed from) and SHA256SUMS (common/sha256sums.ts: the digest of every other file).
 * Every text form carries the hoptrace version and the collector's runtime, the inputs (each
 * capture's agent and its version, node, target, interface, filter, the events received) and
 * each capture's health.
 *
 * Written once when the repro finishes (collector/repro.ts), after the agents answered for the
 * evidence frames; while it runs, the text forms and inventory.json are rendered on request, and
 * neither evidence.pcapng nor SHA256SUMS exists yet (a rendering is not a fixed set of bytes).
 * Pure but for hashing: the view and what the shell gathered in, files out.
 */
import type { Inventory } from '../common/inventory';
import { MANIFEST, manifestOf, sha256Hex } from '../common/sha256sums';
import { hoptraceVersion } from '../common/version';
import { collectorRuntimeText } from '../core/report/inputs-text';
import type { CollectorRuntime } from '../core/report/report-document';
import type { ReproEvidenceSummary } from '../core/repro/repro-evidence';
import { renderReproHtml, type ReproHtmlSection } from '../core/report/report-html';
import { renderReproSvg } from '../core/report/repro-svg';
import { REPRO_TIMES_NOTE } from '../core/repro/repro-core';
import type { ReproPointView, ReproView } from './repro-state';

export const REPRO_FILES = [
  'report.md',
  'report.json',
  'report.html',
  'timeline.svg',
  'evidence.pcapng',
  'inventory.json',
  'SHA256SUMS',
] as const;
export type ReproFileName = (typeof REPRO_FILES)[number];

/** report.json's contract version (proto/repro-report.schema.json). */
export const REPRO_REPORT_SCHEMA_VERSION = 1;

export const REPRO_TYPES: Record<ReproFileName, string> = {
  'report.md': 'text/markdown; charset=utf-8',
  'report.json': 'application/json; charset=utf-8',
  'report.html': 'text/html; charset=utf-8',
  'timeline.svg': 'image/svg+xml; charset=utf-8',
  'evidence.pcapng': 'application/vnd.tcpdump.pcap',
  'inventory.json': 'application/json; charset=utf-8',
  SHA256SUMS: 'text/plain; charset=utf-8',
};

/** What each file is, for the web view's download list. */
export const REPRO_FILE_LABELS: Record<ReproFileName, string> = {
  'report.md': 'the timeline as text, to paste into a ticket',
  'report.json': 'everything, for tools (proto/repro-report.schema.json)',
  'report.html': 'one self-contained page with the picture',
  'timeline.svg': 'the picture alone',
  'evidence.pcapng': "the probes' packets, as the agents retained them (headers only)",
  'inventory.json': 'the inventory the verdicts were computed from',
  SHA256SUMS: 'the SHA-256 of every other file, for sha256sum -c',
};

export function isReproFile(name: string): name is ReproFileName {
  return (REPRO_FILES as readonly string[]).includes(name);
}

/** One capture of the repro as its report names it: `backend`, `decap (vpn-0)`. */
export interface ReproCaptureRow {
  capture: string;
  captureId: string | null;
  point: string;
  epoch: number;
  pod: string | null;
  agentId: string | null;
  agentVersion: string | null;
  node: string | null;
  target: string | null;
  iface: string | null;
  /** The capture filter ('' = every packet on the interface). */
  filter: string;
  state: string;
  events: number;
  packets: number;
  kernelDrops: number | null;
  queueDrops: number;
  lost: number;
  /** Events the collector received and let go, unanalysed, past its memory bound for repros. */
  unheld: number;
  error: { code: string; message: string } | null;
}

/** What the bundle is rendered from besides the view. */
export interface ReproBundleInput {
  view: ReproView;
  generatedAt: string;
  /** The inventory as used; null when it is not known (a view read back from disk). */
  inventory: Inventory | null;
  /** What evidence.pcapng holds; null with `evidenceMissing` saying why there is none. */
  evidence: ReproEvidenceSummary | null;
  evidenceMissing?: string;
  /** The version each agent's hello named. */
  agentVersions?: ReadonlyMap<string, string>;
  /** What analysed the repro: this collector's Node and platform. */
  runtime: CollectorRuntime;
  /** The files are written as a bundle with SHA256SUMS (false: one rendered on request). */
  manifest?: boolean;
}

/** Every capture of the repro, backend first, then each attachment's decap and egress. */
export function reproCaptures(
  v: ReproView,
  agentVersions: ReadonlyMap<string, string> = new Map(),
): ReproCaptureRow[] {
  const row = (
    label: string,
    epoch: number,
    pod: string | null,
    p: ReproPointView,
    iface: string,
    target: string | null,
  ): ReproCaptureRow => ({
    capture: label,
    captureId: p.captureId ?? null,
    point: p.name,
    epoch,
    pod,
    agentId: p.agentId,
    agentVersion: p.agentId === null ? null : (agentVersions.get(p.agentId) ?? null),
    node: p.node ?? null,
    target: p.target ?? target,
    iface: p.iface ?? iface,
    filter: '',
    state: p.state,
    events: p.events,
    packets: p.packets,
    kernelDrops: p.kernelDrops,
    queueDrops: p.queueDrops,
    lost: p.lost,
    // A view saves it only when some were let go (and one saved before it was counted has none).
    unheld: p.unheld ?? 0,
    error: p.error ?? null,
  });
  return [
    row('backend', 0, null, v.backend, v.spec.backend.iface, v.spec.backend.target),
    ...v.attachments.flatMap((a) =>
      a.points.map((p) =>
        row(
          `${p.name} (${a.pod.name})`,
          a.epoch,
          a.pod.name,
          { ...p, node: p.node ?? a.pod.node },
          p.name === 'decap' ? v.spec.decapIface : v.spec.egressIface,
          a.pod.netns,
        ),
      ),
    ),
  ];
}

/** report.json as an object (proto/repro-report.schema.json). */
export function reproReportDocument(input: ReproBundleInput): Record<string, unknown> {
  const v = input.view;
  const captures = reproCaptures(v, input.agentVersions);
  const { inventory, ...spec } = v.spec;
  return {
    schemaVersion: REPRO_REPORT_SCHEMA_VERSION,
    kind: 'repro',
    hoptraceVersion: hoptraceVersion(),
    runtime: input.runtime,
    generatedAt: input.generatedAt,
    id: v.id,
    state: v.state,
    createdAt: v.createdAt,
    finishedAt: v.finishedAt,
    finalReason: v.finalReason,
    inputs: {
      ...spec,
      inventoryGiven: inventory !== undefined,
      captures: captures.map((c) => ({
        capture: c.capture,
        captureId: c.captureId,
        point: c.point,
        epoch: c.epoch,
        pod: c.pod,
        agentId: c.agentId,
        agentVersion: c.agentVersion,
        node: c.node,
        target: c.target,
        iface: c.iface,
        filter: c.filter,
      })),
    },
    captureHealth: captures.map((c) => ({
      capture: c.capture,
      point: c.point,
      epoch: c.epoch,
      node: c.node,
      iface: c.iface,
      state: c.state,
      events: c.events,
      packets: c.packets,
      kernelDrops: c.kernelDrops,
      queueDrops: c.queueDrops,
      lost: c.lost,
      unheld: c.unheld,
      error: c.error,
    })),
    attachments: v.attachments.map((a) => ({
      epoch: a.epoch,
      pod: { name: a.pod.name, ip: a.pod.ip, node: a.pod.node, netns: a.pod.netns },
      attachedAt: a.attachedAt,
      detachedAt: a.detachedAt,
      detachReason: a.detachReason,
    })),
    marks: v.marks,
    timeline: v.timeline,
    summary: v.summary,
    cautions: (v.lossText ?? []).filter((l) => l !== ''),
    text: v.text,
    evidence: input.evidence,
    evidenceMissing: input.evidence === null ? (input.evidenceMissing ?? 'not gathered') : null,
    inventoryFile: input.inventory === null ? null : 'inventory.json',
    ...(input.manifest === true ? { manifest: MANIFEST } : {}),
  };
}

const dash = (x: string | number | null): string => (x === null ? '—' : String(x));

/** Who analysed the repro and what its captures were, in one sentence (report.md and .html). */
function runtimeLine(input: ReproBundleInput): string {
  return `Analysed by the collector: ${collectorRuntimeText(hoptraceVersion(), input.runtime)}; the agents captured and decoded the packets (each capture's agent and its version as its hello announced it below; the events are those the collector received from it).`;
}

/** What SHA256SUMS is, when the bundle has one. */
function manifestLine(input: ReproBundleInput): string[] {
  return input.manifest === true
    ? [
        `${MANIFEST}: the SHA-256 of every other file of this bundle, written with it; check them with \`sha256sum -c ${MANIFEST}\` in the bundle's directory`,
      ]
    : [];
}

/** The capture health table's columns (report.md and report.html), healthCells' order. */
const HEALTH_HEAD = [
  'capture',
  'state',
  'events',
  'packets',
  'kernel drops',
  'agent drops',
  'lost',
  'unheld',
  'error',
] as const;

/** What the health table's counts are, for a reader who was not there. */
const HEALTH_NOTE =
  "kernel drops (the kernel's capture buffer was full; cannot count: the cap fallback source), agent drops (the agent's queue was full) and lost (events lost on the way to the collector) as each capture's agent reported them; unheld: events the collector received and let go, unanalysed, past its memory bound for repros — the probes of their time are not judged from them.";

function healthCells(c: ReproCaptureRow): string[] {
  return [
    c.capture,
    c.state,
    String(c.events),
    String(c.packets),
    c.kernelDrops === null ? 'cannot count' : String(c.kernelDrops),
    String(c.queueDrops),
    String(c.lost),
    String(c.unheld),
    c.error === null ? '' : `${c.error.code}: ${c.error.message}`,
  ];
}

function evidenceLines(input: ReproBundleInput): string[] {
  const e = input.evidence;
  if (e === null) return [`evidence.pcapng: none (${input.evidenceMissing ?? 'not gathered'})`];
  const digest = e.sha256 === undefined ? '' : `; ${e.bytes ?? '?'} bytes, SHA-256 ${e.sha256}`;
  return [
    `evidence.pcapng: ${e.packets} packets in ${e.interfaces.length} interfaces (${e.interfaces.map((i) => `${i.name} ${i.packets}`).join(', ') || 'none'}); headers only${digest}`,
    ...e.problems.map((p) => `missing at ${p.capture}: ${p.code} — ${p.detail}`),
    ...(e.probesWithoutPackets.length === 0
      ? []
      : [
          `no matched packet at any capture (nothing to keep): ${e.probesWithoutPackets.join(', ')}`,
        ]),
  ];
}

function renderMarkdown(input: ReproBundleInput): string {
  const v = input.view;
  const caps = reproCaptures(v, input.agentVersions);
  const cell = (s: string): string => s.replace(/\|/g, '\\|');
  return [
    `# hoptrace repro ${v.id}: ${v.summary === null ? v.state : v.summary.recovered ? 'recovered' : 'NOT recovered'}`,
    '',
    `- generated: ${input.generatedAt} (hoptrace ${hoptraceVersion()})`,
    `- created: ${v.createdAt}; ${v.finishedAt === null ? 'still running' : `finished ${v.finishedAt}`}`,
    `- client: \`${v.spec.client}\`; VPN pods: ${v.attachments.map((a) => `${a.pod.name} (${a.pod.ip} on ${a.pod.node}, attached ${a.attachedAt})`).join(', ')}`,
    '',
    '```text',
    ...v.text,
    '```',
    '',
    REPRO_TIMES_NOTE,
    '',
    '## Inputs',
    '',
    runtimeLine(input),
    '',
    '| capture | capture id | agent | node | target | interface | filter | events received |',
    '|---|---|---|---|---|---|---|---|',
    ...caps.map(
      (c) =>
        `| ${cell(c.capture)} | ${dash(c.captureId)} | ${cell(c.agentId === null ? '—' : `${c.agentId}${c.agentVersion === null ? '' : ` (${c.agentVersion})`}`)} | ${dash(c.node)} | ${cell(dash(c.target))} | ${dash(c.iface)} | ${c.filter === '' ? '(every packet)' : cell(c.filter)} | ${c.events} |`,
    ),
    '',
    '## Capture health',
    '',
    HEALTH_NOTE,
    '',
    `| ${HEALTH_HEAD.join(' | ')} |`,
    `|${HEALTH_HEAD.map(() => '---|').join('')}`,
    ...caps.map((c) => `| ${healthCells(c).map(cell).join(' | ')} |`),
    '',
    '## Evidence',
    '',
    ...evidenceLines(input).map((l) => `- ${l}`),
    `- inventory.json: ${input.inventory === null ? 'not known' : 'the inventory the verdicts were computed from'}`,
    ...manifestLine(input).map((l) => `- ${l}`),
    '',
  ].join('\n');
}

function htmlSections(input: ReproBundleInput): ReproHtmlSection[] {
  const caps = reproCaptures(input.view, input.agentVersions);
  const e = input.evidence;
  return [
    {
      title: 'Inputs',
      cls: 'inputs',
      note: [runtimeLine(input), ...manifestLine(input)].join(' '),
      head: [
        'capture',
        'capture id',
        'agent',
        'node',
        'target',
        'interface',
        'filter',
        'events received',
      ],
      rows: caps.map((c) => [
        c.capture,
        dash(c.captureId),
        c.agentId === null
          ? '—'
          : `${c.agentId}${c.agentVersion === null ? '' : ` (${c.agentVersion})`}`,
        dash(c.node),
        dash(c.target),
        dash(c.iface),
        c.filter === '' ? '(every packet)' : c.filter,
        String(c.events),
      ]),
    },
    {
      title: 'Capture health',
      cls: 'health',
      note: HEALTH_NOTE,
      head: [...HEALTH_HEAD],
      rows: caps.map(healthCells),
    },
    {
      title: 'Evidence',
      cls: 'evidence',
      note: evidenceLines(input)[0] ?? '',
      head: ['capture', 'packets or problem', 'detail'],
      rows:
        e === null
          ? []
          : [
              ...e.interfaces.map((i) => [i.capture, `${i.packets} packets`, i.name]),
              ...e.problems.map((p) => [p.capture, p.code, p.detail]),
            ],
    },
  ];
}

/**
 * Every file of the bundle (`evidence`: evidence.pcapng's bytes; null: not in the bundle), the
 * reports naming evidence.pcapng's digest and SHA256SUMS, which comes last and lists the others.
 */
export function renderReproBundle(
  input: ReproBundleInput,
  evidence: Buffer | null,
): Map<ReproFileName, Buffer> {
  const full: ReproBundleInput = {
    ...input,
    manifest: true,
    evidence:
      input.evidence === null || evidence === null
        ? input.evidence
        : { ...input.evidence, sha256: sha256Hex(evidence), bytes: evidence.length },
  };
  const out = new Map<ReproFileName, Buffer>();
  for (const name of REPRO_FILES) {
    if (name === 'evidence.pcapng') {
      if (evidence !== null) out.set(name, evidence);
      continue;
    }
    const body = renderReproFile(full, name);
    if (body !== null) out.set(name, Buffer.from(body, 'utf8'));
  }
  out.set(MANIFEST, Buffer.from(manifestOf(out), 'utf8'));
  return out;
}

/**
 * One text file of the bundle; null for evidence.pcapng and SHA256SUMS (only as written, by
 * renderReproBundle), and for inventory.json when not known.
 */
export function renderReproFile(input: ReproBundleInput, name: ReproFileName): string | null {
  const v = input.view;
  const picture = {
    rows: v.timeline,
    marks: v.marks,
    summary: v.summary,
    generatedAt: input.generatedAt,
    id: v.id,
    state: v.state,
    finalReason: v.finalReason,
    cautions: (v.lossText ?? []).filter((l) => l !== ''),
  };
  switch (name) {
    case 'report.html':
      return renderReproHtml({
        ...picture,
        hoptraceVersion: hoptraceVersion(),
        sections: htmlSections(input),
      });
    case 'timeline.svg':
      return renderReproSvg(picture);
    case 'report.json':
      return JSON.stringify(reproReportDocument(input), null, 2) + '\n';
    case 'report.md':
      return renderMarkdown(input);
    case 'inventory.json':
      return input.inventory === null ? null : JSON.stringify(input.inventory, null, 2) + '\n';
    case 'evidence.pcapng':
    case 'SHA256SUMS':
      return null;
  }
}

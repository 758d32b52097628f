/**
 * A repro's bundle, rendered from its view when asked (a repro's state lives in memory and in
 * repros/<id>.json): report.md (the timeline as text, to paste), report.json (the view with the
 * hoptrace version), report.html (one self-contained page with the timeline picture) and
 * timeline.svg (the picture alone: the probes across the pod deletion, each by its verdict, the
 * broken window shaded, the deletion and the replacement marked).
 */
import { renderReproHtml } from '../core/report/report-html';
import { renderReproSvg } from '../core/report/repro-svg';
import { hoptraceVersion } from '../common/version';
import type { ReproView } from './repro-state';

export const REPRO_FILES = ['report.md', 'report.json', 'report.html', 'timeline.svg'] as const;
export type ReproFileName = (typeof REPRO_FILES)[number];

const TYPES: Record<ReproFileName, string> = {
  'report.md': 'text/markdown; charset=utf-8',
  'report.json': 'application/json; charset=utf-8',
  'report.html': 'text/html; charset=utf-8',
  'timeline.svg': 'image/svg+xml; charset=utf-8',
};

export function isReproFile(name: string): name is ReproFileName {
  return (REPRO_FILES as readonly string[]).includes(name);
}

/** One file of a repro's bundle; `generatedAt` is passed in (ISO 8601). */
export function reproBundleFile(
  v: ReproView,
  name: ReproFileName,
  generatedAt: string,
): { contentType: string; body: string } {
  const input = {
    rows: v.timeline,
    marks: v.marks,
    summary: v.summary,
    generatedAt,
    id: v.id,
    state: v.state,
    finalReason: v.finalReason,
    cautions: (v.lossText ?? []).filter((l) => l !== ''),
  };
  const body =
    name === 'report.html'
      ? renderReproHtml(input)
      : name === 'timeline.svg'
        ? renderReproSvg(input)
        : name === 'report.json'
          ? JSON.stringify({ hoptraceVersion: hoptraceVersion(), generatedAt, repro: v }, null, 2) +
            '\n'
          : [
              `# hoptrace repro ${v.id}: ${v.summary === null ? v.state : v.summary.recovered ? 'recovered' : 'NOT recovered'}`,
              '',
              `- generated: ${generatedAt} (hoptrace ${hoptraceVersion()})`,
              `- created: ${v.createdAt}; ${v.finishedAt === null ? 'still running' : `finished ${v.finishedAt}`}`,
              `- client: \`${v.spec.client}\`; VPN pods: ${v.attachments.map((a) => `${a.pod.name} (${a.pod.ip} on ${a.pod.node}, attached ${a.attachedAt})`).join(', ')}`,
              '',
              '```text',
              ...v.text,
              '```',
              '',
            ].join('\n');
  return { contentType: TYPES[name], body };
}

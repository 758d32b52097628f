/**
 * What the web view shows, read from the collector's sessions (captures and repros) and the
 * reports in the data directory.
 */
import type { AnalysisResult } from '../../core/report/analysis-result';
import { renderReproSvg } from '../../core/report/repro-svg';
import { renderSequenceSvg } from '../../core/report/sequence-svg';
import type { SessionManager } from '../sessions';
import type { BundleFile } from './ui-pages';
import type { BundleBody, UiSource } from './ui-routes';

const FILES: readonly (BundleFile & { kind: 'md' | 'json'; contentType: string })[] = [
  {
    name: 'report.md',
    label: 'the report, to paste into a ticket',
    kind: 'md',
    contentType: 'text/markdown; charset=utf-8',
  },
  {
    name: 'report.json',
    label: 'the analysis as JSON',
    kind: 'json',
    contentType: 'application/json; charset=utf-8',
  },
];

export function sessionsUiSource(sessions: SessionManager): UiSource {
  const result = (id: string): AnalysisResult | null => {
    const text = sessions.report(id, 'json');
    if (text === null) return null;
    try {
      return JSON.parse(text) as AnalysisResult;
    } catch {
      return null;
    }
  };
  return {
    captures: () => sessions.list(),
    capture: (id) => sessions.get(id),
    result,
    repros: () => sessions.repros.list(),
    repro: (id) => sessions.repros.get(id),
    files: (id) => FILES.filter((f) => sessions.report(id, f.kind) !== null),
    file: (id, name): BundleBody | null => {
      const f = FILES.find((x) => x.name === name);
      if (f === undefined) return null;
      const body = sessions.report(id, f.kind);
      return body === null ? null : { contentType: f.contentType, body };
    },
    captureSvg: (id) => {
      const r = result(id);
      if (r === null) return null;
      const v = sessions.get(id);
      const lanes = v?.points.map((p) => ({
        point: p.name,
        ...(p.node === null ? {} : { node: p.node }),
        iface: p.iface,
      }));
      return renderSequenceSvg(r, lanes === undefined ? {} : { lanes });
    },
    reproSvg: (id) => {
      const v = sessions.repros.get(id);
      if (v === undefined || v.timeline.length === 0) return null;
      return renderReproSvg({ rows: v.timeline, marks: v.marks, summary: v.summary });
    },
  };
}

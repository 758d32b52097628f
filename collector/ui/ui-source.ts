/**
 * What the web view shows, read from the collector's sessions (captures and repros) and the
 * reports in the data directory.
 */
import type { AnalysisResult } from '../../core/report/analysis-result';
import { renderReproSvg } from '../../core/report/repro-svg';
import { renderSequenceSvg } from '../../core/report/sequence-svg';
import type { SessionManager } from '../sessions';
import { BUNDLE_FILES, BUNDLE_TYPES, type BundleFileName } from '../store';
import type { BundleBody, UiSource } from './ui-routes';
import { REPRO_FILE_LABELS } from '../repro-bundle';
import { liveLanes } from '../capture-reports';
import { archiveName } from '../bundle-archive';
import { MANIFEST } from '../../common/sha256sums';
import type { BundleFile } from './ui-pages';

const LABELS: Record<BundleFileName, string> = {
  'report.md': 'the report, to paste into a ticket',
  'report.json': 'the analysis and its evidence as JSON (proto/report.schema.json)',
  'report.html': 'the report as one self-contained page, with the picture',
  'sequence.svg': 'the sequence picture alone',
  'evidence.pcapng': 'the packets of the matched connection at every point, for Wireshark',
  'inventory.json': 'the inventory the verdict was computed from',
  SHA256SUMS: 'the SHA-256 of every other file, for sha256sum -c',
};

/**
 * The bundle's files with the whole bundle first, when it has a SHA256SUMS to check it with (a
 * bundle without one is not offered as an archive: collector/bundle-archive.ts).
 */
function withArchive(id: string, files: BundleFile[]): BundleFile[] {
  if (!files.some((f) => f.name === MANIFEST)) return files;
  const label = `the whole bundle: every file below in one archive, which unpacks to hoptrace-${id}/ — check it there with sha256sum -c ${MANIFEST}`;
  return [{ name: archiveName(id), label }, ...files];
}

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
    listCounts: () => ({
      olderCaptures: sessions.olderFinished(),
      olderRepros: sessions.repros.olderFinished(),
      pinnedRepros: sessions.repros.pinned(),
    }),
    files: (id) =>
      withArchive(
        id,
        BUNDLE_FILES.filter((name) => sessions.bundleFile(id, name) !== null).map((name) => ({
          name,
          label: LABELS[name],
        })),
      ),
    file: (id, name): BundleBody | null => {
      const n = BUNDLE_FILES.find((x) => x === name);
      if (n === undefined) return null;
      const body = sessions.bundleFile(id, n);
      return body === null ? null : { contentType: BUNDLE_TYPES[n], body };
    },
    captureSvg: (id) => {
      const r = result(id);
      if (r === null) return null;
      const v = sessions.get(id);
      return renderSequenceSvg(r, v === undefined ? {} : { lanes: liveLanes(v.points) });
    },
    reproFiles: (id) =>
      withArchive(
        id,
        sessions.repros.bundleNames(id).map((name) => ({ name, label: REPRO_FILE_LABELS[name] })),
      ),
    reproFile: (id, name) => sessions.repros.bundleFile(id, name),
    archive: (id) => sessions.bundleArchive(id),
    reproArchive: (id) => sessions.repros.bundleArchive(id),
    reproSvg: (id) => {
      const v = sessions.repros.get(id);
      if (v === undefined || v.timeline.length === 0) return null;
      return renderReproSvg({ rows: v.timeline, marks: v.marks, summary: v.summary });
    },
  };
}

/**
 * Identity headers of the request, offline: the analysis keeps no payload bytes (events carry
 * keys, not bytes), so the request's first data segment is read again from each point's file, by
 * its frame number, and its first bytes are looked at (core/decode/identity-headers.ts). Only
 * files can be read twice; a live capture's report says the headers were not looked for.
 */
import type { AnalysisResult, IdentityHeaderScan } from '../core/report/analysis-result';
import { framePayloadSpan } from '../core/decode/frame';
import { identityHeadersIn } from '../core/decode/identity-headers';
import { isHoptraceError } from '../common/errors';
import { openCaptureFile } from './pcap-file';
import type { PointFile } from './analyze-files';

/** The frame of the request's first data segment at each point (request direction, payload). */
function requestDataFrame(r: AnalysisResult, point: string): number | null {
  const p = r.points.find((x) => x.name === point);
  return p?.flow.find((f) => f.dir === 'request' && f.payloadLength > 0)?.frame ?? null;
}

/** Reads frame `frame` of `file` and returns the identity headers at the start of its payload. */
function headersAt(file: string, frame: number): ReturnType<typeof identityHeadersIn> | string {
  const reader = openCaptureFile(file);
  try {
    for (const f of reader.frames()) {
      if (f.index < frame) continue;
      if (f.index > frame) break;
      const span = framePayloadSpan(f.linktype, f.data);
      return span === null
        ? 'the frame has no payload bytes captured'
        : identityHeadersIn(f.data, span.start, span.end);
    }
    return `the file has no frame ${frame} any more`;
  } finally {
    reader.close();
  }
}

/** Which identity headers the request carried at each point whose file can be read again. */
export function scanIdentityHeaders(points: PointFile[], r: AnalysisResult): IdentityHeaderScan {
  const scan: IdentityHeaderScan = { scanned: [], notScanned: [], seen: [] };
  for (const p of points) {
    const frame = requestDataFrame(r, p.name);
    if (p.file === '-') {
      scan.notScanned.push({ point: p.name, why: 'standard input cannot be read twice' });
      continue;
    }
    if (frame === null) {
      scan.notScanned.push({ point: p.name, why: 'no data segment of the request was seen here' });
      continue;
    }
    let got: ReturnType<typeof headersAt>;
    try {
      got = headersAt(p.file, frame);
    } catch (e) {
      if (!isHoptraceError(e)) throw e;
      got = e.message;
    }
    if (typeof got === 'string') {
      scan.notScanned.push({ point: p.name, why: got });
      continue;
    }
    scan.scanned.push(p.name);
    for (const h of got) scan.seen.push({ point: p.name, frame, ...h });
  }
  return scan;
}

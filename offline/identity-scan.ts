/**
 * Identity headers of the request, offline: the analysis keeps no payload bytes (events carry
 * keys, not bytes), so the request's first data segment is read again from each point's file, by
 * its frame number, and handed to the scan the live route shares (core/report/identity-scan.ts).
 */
import type { AnalysisResult, IdentityHeaderScan } from '../core/report/analysis-result';
import { scanIdentityHeaders as scanFrames, type ScanFrame } from '../core/report/identity-scan';
import { isHoptraceError } from '../common/errors';
import { openCaptureFile } from './pcap-file';
import type { PointFile } from './analyze-files';

/** Frame `frame` of `file` as the scan takes it, or why it cannot be had. */
function frameAt(file: string, frame: number): ScanFrame | string {
  const reader = openCaptureFile(file);
  try {
    for (const f of reader.frames()) {
      if (f.index < frame) continue;
      if (f.index > frame) break;
      return {
        linktype: f.linktype,
        data: Uint8Array.from(f.data), // the reader reuses its buffer
        origLen: f.wireLength,
        cutBy: `the file holds ${f.data.length} of the frame's ${f.wireLength} bytes (the capture's snaplen); capture with a larger snaplen (tcpdump -s 0) to see all`,
      };
    }
    return `the file has no frame ${frame} any more`;
  } finally {
    reader.close();
  }
}

/** Which identity headers the request carried at each point whose file can be read again. */
export function scanIdentityHeaders(points: PointFile[], r: AnalysisResult): IdentityHeaderScan {
  const files = new Map(points.map((p) => [p.name, p.file]));
  return scanFrames(r, (point, packet) => {
    const file = files.get(point);
    if (file === undefined) return 'no capture file was given for this point';
    if (file === '-') return 'standard input cannot be read twice';
    try {
      return frameAt(file, packet.frame);
    } catch (e) {
      if (!isHoptraceError(e)) throw e;
      return e.message;
    }
  });
}

/**
 * Identity headers of the request, offline: the analysis keeps no payload bytes (events carry
 * keys, not bytes), so the request's data segments are read again from each point's file, by
 * their frame numbers, and handed to the scan the live route shares (core/report/identity-scan.ts).
 * The scan asks for a point's segments in capture order, so one reader per file moves forward
 * through it (a file pass per point, not per segment) and starts again only if asked for an
 * earlier frame. With the analysis's resume points (offline/seek-points.ts) a reader starts at
 * the last one before the frame asked for, not at the file's first frame, and jumps ahead to one
 * when the frame asked for lies past it.
 */
import type { AnalysisResult, IdentityHeaderScan } from '../core/report/analysis-result';
import { scanIdentityHeaders as scanFrames, type ScanFrame } from '../core/report/identity-scan';
import { isHoptraceError } from '../common/errors';
import {
  openCaptureFile,
  type CaptureFileReader,
  type CaptureFrame,
  type ResumePoint,
} from './pcap-file';
import type { PointFile } from './analyze-files';
import { resumeFor } from './seek-points';
import { isStreamInput, readOnceText } from './point-inputs';

/** A forward-moving reader of one capture file's frames by number. */
class FrameCursor {
  private reader: CaptureFileReader | null = null;
  private frames: Iterator<CaptureFrame, void> | null = null;
  private last: CaptureFrame | null = null;

  constructor(
    private readonly file: string,
    /** Dropped once a reader could not resume at one (the file changed): then one forward pass. */
    private seek: readonly ResumePoint[] | undefined,
  ) {}

  /** Frame `frame` of the file as the scan takes it, or why it cannot be had. */
  at(frame: number): ScanFrame | string {
    const resume = resumeFor(this.seek, frame);
    const last = this.last;
    if (
      this.reader === null ||
      last === null ||
      last.index > frame ||
      (resume !== undefined && resume.framesBefore >= last.index)
    )
      this.reopen(resume, frame);
    else this.reader.skipUntil(frame);
    for (let f = this.last; ; f = this.advance()) {
      if (f === null) return `the file has no frame ${frame} any more`;
      if (f.index < frame) continue;
      if (f.index > frame) return `the file has no frame ${frame} any more`;
      return {
        linktype: f.linktype,
        data: Uint8Array.from(f.data), // the reader reuses its buffer
        origLen: f.wireLength,
        cutBy: `the file holds ${f.data.length} of the frame's ${f.wireLength} bytes (the capture's snaplen); capture with a larger snaplen (tcpdump -s 0) to see all`,
      };
    }
  }

  close(): void {
    this.reader?.close();
    this.reader = null;
    this.frames = null;
    this.last = null;
  }

  private reopen(resume: ResumePoint | undefined, frame: number): void {
    this.close();
    // Small reads: the request's segments are usually near where the analysis found them, and a
    // fresh 1 MiB buffer per file costs more to touch than the frames before them take to read.
    this.reader = openCaptureFile(this.file, { chunkSize: 64 << 10, resume });
    if (resume !== undefined && !this.reader.resumed) this.seek = undefined;
    // The frames before the one asked for are read past without building each one (a resume
    // point can lie thousands of frames before it: ~4 µs a frame built, in a cold process).
    this.reader.skipUntil(frame);
    this.frames = this.reader.frames();
    this.advance();
  }

  private advance(): CaptureFrame | null {
    const n = this.frames?.next();
    this.last = n === undefined || n.done === true ? null : n.value;
    return this.last;
  }
}

/**
 * Which identity headers the request carried at each point whose file can be read again; `seek`
 * holds the analysis's resume points by point name (analyzeFiles' `seek` option).
 */
export function scanIdentityHeaders(
  points: PointFile[],
  r: AnalysisResult,
  seek?: ReadonlyMap<string, readonly ResumePoint[]>,
): IdentityHeaderScan {
  const files = new Map(points.map((p) => [p.name, p.file]));
  const cursors = new Map<string, FrameCursor>();
  try {
    return scanFrames(r, (point, packet) => {
      const file = files.get(point);
      if (file === undefined) return 'no capture file was given for this point';
      if (isStreamInput(file)) return readOnceText(file, 'to have its headers looked at');
      let cursor = cursors.get(point);
      if (cursor === undefined) {
        cursor = new FrameCursor(file, seek?.get(point));
        cursors.set(point, cursor);
      }
      try {
        return cursor.at(packet.frame);
      } catch (e) {
        if (!isHoptraceError(e)) throw e;
        cursor.close();
        return e.message;
      }
    });
  } finally {
    for (const c of cursors.values()) c.close();
  }
}

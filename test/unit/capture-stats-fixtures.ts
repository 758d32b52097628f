/**
 * What a capture file's readers say about it once read to the end: the JS reader
 * (offline/pcap-file.ts) and the C fast path (offline/summary-file.ts), for the tests that hold
 * the two to the same counts.
 */
import { openCaptureFile, type CaptureFileStats } from '../../offline/pcap-file';
import { openSummaryPcap } from '../../offline/summary-file';

/** The JS reader's stats after reading every frame of `path` (throws its error, if any). */
export function jsStats(path: string): CaptureFileStats {
  const r = openCaptureFile(path);
  const frames = r.frames();
  while (frames.next().done !== true);
  return r.stats();
}

/** The fast path's stats after reading every frame of `path`, in chunks of `chunkSize` bytes. */
export function fastStats(path: string, chunkSize?: number): CaptureFileStats {
  const r = openSummaryPcap(path, chunkSize === undefined ? {} : { chunkSize });
  if (r === null) throw new Error(`the fast path did not take ${path}`);
  try {
    while (r.next() !== null);
    return r.stats();
  } finally {
    r.close();
  }
}

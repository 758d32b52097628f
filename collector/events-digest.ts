/**
 * Each point's events as the collector stored them (events-<point>.pb, collector/event-file.ts),
 * for a finished capture's report inputs: the file's path in the data directory, its size and its
 * SHA-256, taken once the appends in flight at the verdict are on disk (a finished capture takes
 * no more), so whoever holds the data directory can tell the events the report was made from.
 * Read a chunk at a time without blocking the event loop: an events file may be large.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { HoptraceError } from '../common/errors';
import type { ReportInput, StoredEventsFile } from '../core/report/report-document';
import type { CaptureStore } from './store';

/** The SHA-256 and size of the file at `path`, or null when there is none. */
async function fileDigest(path: string): Promise<{ bytes: number; sha256: string } | null> {
  const hash = createHash('sha256');
  let bytes = 0;
  try {
    for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new HoptraceError('STORE_IO', `cannot read events (${String(e)})`, {
      where: path,
      hint: 'check --data-dir and its permissions',
    });
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Each point's stored events file (null: none was stored), by point name. */
export async function storedEventsFiles(
  store: CaptureStore,
  id: string,
  points: readonly string[],
): Promise<Map<string, StoredEventsFile | null>> {
  const out = new Map<string, StoredEventsFile | null>();
  for (const point of points) {
    const digest = await fileDigest(await store.settledEventsPath(id, point));
    const file = `captures/${id}/events-${point}.pb`;
    out.set(point, digest === null ? null : { file, ...digest });
  }
  return out;
}

/** `inputs` with each live point's stored events file, where one was hashed. */
export function withEventsFiles(
  inputs: readonly ReportInput[],
  files: ReadonlyMap<string, StoredEventsFile | null>,
): ReportInput[] {
  return inputs.map((i) => {
    const f = files.get(i.name);
    return i.live === undefined || f === undefined
      ? i
      : { ...i, live: { ...i.live, eventsFile: f } };
  });
}

/**
 * File replay: the same PacketEvents a live agent sends, produced from a pcap/pcapng file.
 */
import type { PacketEvent } from '../common/event';
import { openCaptureFile, type CaptureFileReader, type CaptureFileStats } from './pcap-file';
import { openSummaryPcap, summaryEvents } from './summary-file';
import { decodeFrame, type DecodeOptions } from '../core/decode/frame';
import { toPacketEvent } from '../core/decode/event';

export interface ReplayContext {
  point: string;
  node: string;
  /** Interface name when the file does not carry one (pcapng if_name wins); default 'file'. */
  iface?: string;
}

/**
 * Reads `path`, decodes every frame and yields one PacketEvent per frame. Throws HoptraceError
 * (FILE_*). `onEnd` gets the file's format and what it recorded about its capture once every frame
 * has been read.
 */
export function* replayCaptureFile(
  path: string,
  ctx: ReplayContext,
  opts?: DecodeOptions,
  onEnd?: (format: CaptureFileReader['format'], stats: CaptureFileStats) => void,
): Generator<PacketEvent> {
  const reader = openCaptureFile(path);
  const evCtx = { point: ctx.point, node: ctx.node, iface: ctx.iface ?? 'file' };
  for (const f of reader.frames()) {
    yield toPacketEvent(f, decodeFrame(f.linktype, f.data, opts), evCtx);
  }
  onEnd?.(reader.format, reader.stats());
}

/**
 * The same events (and errors) as replayCaptureFile, faster: pcap and pcapng files go through the
 * native addon's decoder fast path (offline/summary-file.ts); without the addon, the JS path above.
 */
export function* replayCaptureFileFast(
  path: string,
  ctx: ReplayContext,
  opts?: DecodeOptions,
): Generator<PacketEvent> {
  const reader = openSummaryPcap(path, { decode: opts });
  if (reader === null) {
    yield* replayCaptureFile(path, ctx, opts);
    return;
  }
  yield* summaryEvents(reader, { point: ctx.point, node: ctx.node, iface: ctx.iface ?? 'file' });
}

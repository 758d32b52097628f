/**
 * File replay: the same PacketEvents a live agent sends, produced from a pcap/pcapng file.
 */
import type { PacketEvent } from '../common/event';
import { openCaptureFile } from './capture/pcap-file';
import { decodeFrame, type DecodeOptions } from './decode/frame';

export interface ReplayContext {
  point: string;
  node: string;
  /** Interface name when the file does not carry one (pcapng if_name wins); default 'file'. */
  iface?: string;
}

/** Reads `path`, decodes every frame and yields one PacketEvent per frame. Throws HoptraceError (FILE_*). */
export function* replayCaptureFile(
  path: string,
  ctx: ReplayContext,
  opts?: DecodeOptions,
): Generator<PacketEvent> {
  const reader = openCaptureFile(path);
  for (const f of reader.frames()) {
    const d = decodeFrame(f.linktype, f.data, opts);
    const ev: PacketEvent = {
      point: ctx.point,
      node: ctx.node,
      iface: f.ifaceName ?? ctx.iface ?? 'file',
      linktype: d.linktype,
      tsNs: f.tsNs,
      frame: f.index,
      outer: d.outer,
      inner: d.inner,
      tunnels: d.tunnels,
      keys: d.keys,
      truncated: d.truncated,
      wireLength: f.wireLength,
    };
    if (d.related !== undefined) ev.related = d.related;
    if (d.error !== undefined) ev.error = d.error;
    yield ev;
  }
}

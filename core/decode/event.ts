/**
 * Frame + decode result → PacketEvent: the one place events are built, shared by file replay and
 * live capture so both produce identical events.
 */
import type { PacketEvent } from '../../common/event';
import type { DecodedFrame } from './frame';

/** What a source knows about one captured frame besides its bytes. */
export interface FrameMeta {
  /** 1-based frame number within the source. */
  index: number;
  /** Nanoseconds since the Unix epoch. */
  tsNs: bigint;
  wireLength: number;
  /** Interface name carried by the frame itself (pcapng if_name); wins over `ctx.iface`. */
  ifaceName?: string;
}

/** Where the frame was captured. */
export interface EventContext {
  point: string;
  node: string;
  iface: string;
}

/** Builds the PacketEvent for one decoded frame (plain values only, nothing views the frame). */
export function toPacketEvent(frame: FrameMeta, d: DecodedFrame, ctx: EventContext): PacketEvent {
  const ev: PacketEvent = {
    point: ctx.point,
    node: ctx.node,
    iface: frame.ifaceName ?? ctx.iface,
    linktype: d.linktype,
    tsNs: frame.tsNs,
    frame: frame.index,
    outer: d.outer,
    inner: d.inner,
    tunnels: d.tunnels,
    keys: d.keys,
    truncated: d.truncated,
    wireLength: frame.wireLength,
  };
  if (d.related !== undefined) ev.related = d.related;
  if (d.error !== undefined) ev.error = d.error;
  return ev;
}

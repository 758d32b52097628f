/**
 * Framing between the capture worker (worker.ts, inside the target namespace) and its parent
 * (ns-capture.ts), over the worker's stdout:
 *
 *   length (u32 BE, counts type + body) | type (u8) | body
 *   type 1: one hoptrace.v1.PacketEvent (common/codec.ts)
 *   type 2: one UTF-8 JSON control message (WorkerControl)
 */
import { decodePacketEvent, encodePacketEvent } from '../../common/codec';
import type { PacketEvent } from '../../common/event';
import type { CaptureStats } from './source';

export const FRAME_EVENT = 1;
export const FRAME_CONTROL = 2;
/** Largest frame accepted: an event is a few hundred bytes, this only stops runaway lengths. */
export const MAX_FRAME = 1024 * 1024;

/** An error as it crosses the process boundary. */
export interface WireError {
  code: string;
  message: string;
  where?: string;
  hint?: string;
}

/** Control messages from the worker. */
export type WorkerControl =
  | { kind: 'ready'; linktype: string; pid: number; source?: 'native' | 'cap' }
  | { kind: 'warning'; message: string }
  | { kind: 'stats'; stats: CaptureStats }
  | { kind: 'error'; error: WireError }
  | { kind: 'end' };

function frame(type: number, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out.writeUInt32BE(body.length + 1, 0);
  out[4] = type;
  out.set(body, 5);
  return out;
}

/** One event frame. */
export function encodeEventFrame(ev: PacketEvent): Buffer {
  return frame(FRAME_EVENT, encodePacketEvent(ev));
}

/** One control frame. */
export function encodeControlFrame(msg: WorkerControl): Buffer {
  return frame(FRAME_CONTROL, Buffer.from(JSON.stringify(msg), 'utf8'));
}

/** What the parser hands on. */
export type WorkerFrame =
  { type: 'event'; event: PacketEvent } | { type: 'control'; msg: WorkerControl };

/**
 * Incremental parser: feed it stdout chunks as they come (a frame may span several chunks, a chunk
 * may hold many frames). Throws Error on a malformed stream (then the stream is unusable).
 */
export class WorkerFrameParser {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** Parses `chunk` and returns every frame it completes. */
  push(chunk: Buffer): WorkerFrame[] {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < 5) return [];
    let buf = this.pending.length === 1 ? chunk : Buffer.concat(this.pending, this.pendingBytes);
    const out: WorkerFrame[] = [];
    let at = 0;
    while (buf.length - at >= 5) {
      const len = buf.readUInt32BE(at);
      if (len < 1 || len > MAX_FRAME) throw new Error(`bad frame length ${len} at byte ${at}`);
      if (buf.length - at < 4 + len) break;
      const type = buf[at + 4];
      const body = buf.subarray(at + 5, at + 4 + len);
      if (type === FRAME_EVENT) out.push({ type: 'event', event: decodePacketEvent(body) });
      else if (type === FRAME_CONTROL) {
        out.push({ type: 'control', msg: JSON.parse(body.toString('utf8')) as WorkerControl });
      } else throw new Error(`unknown frame type ${String(type)} at byte ${at}`);
      at += 4 + len;
    }
    buf = buf.subarray(at);
    // Copy the remainder: the chunk it views may be large and is otherwise released.
    this.pending = buf.length > 0 ? [Buffer.from(buf)] : [];
    this.pendingBytes = buf.length;
    return out;
  }

  /** Bytes received that do not yet form a whole frame. */
  get buffered(): number {
    return this.pendingBytes;
  }
}

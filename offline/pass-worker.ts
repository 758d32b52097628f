/**
 * The worker thread of offline/pass-pool.ts: runs one later point's pass (FilePointStream, the
 * native fast path) per job and posts what it kept, its count and the file's capture record; an
 * error goes back with its code. Bumps the shared progress word per block read, the posted word
 * after each answer.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { isHoptraceError } from '../common/errors';
import type { PacketEvent } from '../common/event';
import { FilePointStream } from './point-stream';
import { SIGNAL, type PassMessage } from './pass-pool';

const { port, signal } = workerData as { port: MessagePort; signal: Int32Array };

function answer(message: PassMessage): void {
  port.postMessage(message);
  Atomics.add(signal, SIGNAL.posted, 1);
  Atomics.notify(signal, SIGNAL.posted);
}

port.on('message', (msg: PassMessage) => {
  if (msg.type !== 'job') return;
  const { id, job } = msg;
  try {
    const stream = new FilePointStream(job.name, job.file, true, undefined, job.gated, {
      onBlock: () => Atomics.add(signal, SIGNAL.progress, 1),
    });
    const events: PacketEvent[] = [...stream.events(job.plan)];
    answer({
      type: 'done',
      id,
      result: {
        events,
        count: stream.capturedEvents(),
        recorded: stream.fileRecord(),
        seek: stream.seekPoints(),
      },
    });
  } catch (e) {
    const error = isHoptraceError(e)
      ? {
          code: e.code,
          detail: e.detail,
          message: e.message,
          ...(e.where === undefined ? {} : { where: e.where }),
          ...(e.hint === undefined ? {} : { hint: e.hint }),
        }
      : { detail: String(e), message: e instanceof Error ? e.message : String(e) };
    answer({ type: 'failed', id, error });
  }
});
// Nothing to do with the parent's own port: jobs come on the transferred one.
parentPort?.unref();

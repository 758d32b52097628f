/**
 * The agent side of the capture trials, in a process of its own (`node agent-child.js`), so that
 * its CPU is the agent's alone: what agent/runtime.ts does with a capture — NsCapture's encoded
 * delivery, each chunk wrapped in the Envelope it sends to the collector — and nothing of the
 * benchmark's own work (starting the flood, reading interface counters, polling). The bench reads
 * this process's CPU from /proc like the worker's. Like the agent, it is one long-lived process
 * that runs capture after capture (each with a fresh worker), so its JIT is as warm as an agent's
 * that has run captures before.
 *
 * Protocol, one JSON line each way, one capture at a time:
 *   parent → {"start":AgentChildArgs}   child → {"ready":true,"source":"native"}
 *   parent → "progress"                 child → {"delivered":N,"queueDrops":N}
 *   parent → "stop"                     child → {"delivered":N,"kernelDrops":N,"queueDrops":N}
 * A failure answers {"error":"…"}; stdin closed ends the process.
 */
import { createInterface } from 'node:readline';
import { NsCapture, type CaptureSpec } from '../agent';
import { encodeEnvelope } from '../common/envelope';

export interface AgentChildArgs {
  spec: CaptureSpec;
  netnsPath: string;
}

/** Counters the child reports (kernelDrops only on stop). */
export interface AgentChildReport {
  delivered: number;
  queueDrops: number;
  kernelDrops?: number | null;
}

function say(msg: object): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

/** One capture, as the agent runtime runs it. */
async function start(args: AgentChildArgs): Promise<{ cap: NsCapture; delivered: () => number }> {
  const cap = new NsCapture(args.spec, {
    netnsPath: args.netnsPath,
    statsIntervalMs: 200,
    onWarning: () => undefined,
  });
  let seq = 0;
  await cap.startEncoded(
    (encoded) => {
      encodeEnvelope({
        seq: ++seq,
        kind: 'events',
        events: { captureId: 'bench', point: 'bench', events: [], encoded },
      });
    },
    () => undefined,
  );
  // Packets handed on: each packet event, and what each flow counter counts (NsCapture's own
  // count, PacketEvent.fold).
  return { cap, delivered: () => cap.stats().packets };
}

async function main(): Promise<void> {
  let run: Awaited<ReturnType<typeof start>> | undefined;
  for await (const line of createInterface({ input: process.stdin })) {
    try {
      if (line === 'progress' && run !== undefined) {
        say({ delivered: run.delivered(), queueDrops: run.cap.stats().queueDrops });
      } else if (line === 'stop' && run !== undefined) {
        const { cap, delivered } = run;
        run = undefined;
        await cap.stop();
        const s = cap.stats();
        say({ delivered: delivered(), kernelDrops: s.kernelDrops, queueDrops: s.queueDrops });
      } else if (line.startsWith('{') && run === undefined) {
        const msg = JSON.parse(line) as { start: AgentChildArgs };
        run = await start(msg.start);
        say({ ready: true, source: run.cap.sourceKind });
      } else {
        say({
          error: `unexpected request ${line.slice(0, 80)} (capture running: ${run !== undefined})`,
        });
      }
    } catch (e) {
      say({ error: e instanceof Error ? e.message : String(e) });
    }
  }
  await run?.cap.stop();
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    say({ error: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  },
);

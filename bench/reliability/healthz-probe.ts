/**
 * GET /healthz in a loop from a worker thread of its own, so the latencies are the collector's
 * and not this process's event loop, busy with the simulated agents: one request at a time on a
 * kept-alive connection, 10 ms apart, each timed from sending to the last byte.
 */
import { request, Agent } from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { join } from 'node:path';

/** [ms since the probe started, latency in ms] */
export type Sample = [number, number];

/** A probe running until `stop`, which resolves with every sample. */
export interface HealthzProbe {
  stop(): Promise<Sample[]>;
}

const TIMEOUT_MS = 10_000;

export function startHealthzProbe(url: string): HealthzProbe {
  const w = new Worker(join(__dirname, 'healthz-probe.js'), { workerData: { url } });
  const done = new Promise<Sample[]>((resolve, reject) => {
    w.once('message', (m: Sample[]) => {
      resolve(m);
    });
    w.once('error', reject);
  });
  return {
    stop: async () => {
      w.postMessage('stop');
      const samples = await done;
      await w.terminate();
      return samples;
    },
  };
}

function probe(url: string): void {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const samples: Sample[] = [];
  const t0 = performance.now();
  let stopping = false;
  parentPort?.on('message', () => {
    stopping = true;
  });
  const once = (): void => {
    if (stopping) {
      parentPort?.postMessage(samples);
      return;
    }
    const start = performance.now();
    let settled = false;
    const settle = (latency: number): void => {
      if (settled) return;
      settled = true;
      samples.push([start - t0, latency]);
      setTimeout(once, 10);
    };
    const req = request(url, { agent, timeout: TIMEOUT_MS }, (res) => {
      res.resume();
      res.on('end', () => {
        settle(performance.now() - start);
      });
    });
    req.on('timeout', () => {
      req.destroy();
      settle(TIMEOUT_MS);
    });
    req.on('error', () => {
      settle(performance.now() - start);
    });
    req.end();
  };
  once();
}

if (!isMainThread && (workerData as { url?: string } | null)?.url !== undefined)
  probe((workerData as { url: string }).url);

/**
 * A real agent without root: CollectorLink + AgentRuntime whose captures replay a capture file
 * and retain what they deliver, frame for frame, as a live capture does (so the collector's
 * frames requests are answered and evidence.pcapng is built). Used by frames-e2e.test.ts and by
 * the simulated cluster of kubectl-fixtures.ts.
 */
import { FileSource } from '../../agent/capture/file-source';
import { RetentionStore, type RetentionStoreOptions } from '../../agent/capture/retention-store';
import { CollectorLink } from '../../agent/link/collector-link';
import { AgentRuntime } from '../../agent/runtime';
import type { Hello } from '../../common/wire';

export interface ReplayAgentOptions {
  /** The collector's agents URL (ws:// or wss://). */
  url: string;
  token: string;
  /** The CA to trust for wss://. */
  ca?: Buffer;
  agentId: string;
  node: string;
  /** The one namespace the agent reports, and every target resolves to. */
  ns: { path: string; address: string };
  /** The file each capture replays: one for all, or one per point. */
  pcap: string | ((point: string) => string);
  /** Where captures retain their frames; null: no retention. */
  retention: (Partial<RetentionStoreOptions> & { dir: string }) | null;
  /** The version its hello announces (default `test`). */
  version?: string;
}

/** Starts the agent; it is closed at teardown. Returns its link (a test may close it early). */
export function startReplayAgent(
  t: { teardown(fn: () => Promise<void>): void },
  o: ReplayAgentOptions,
): CollectorLink {
  const hello: Hello = {
    agentId: o.agentId,
    node: o.node,
    version: o.version ?? 'test',
    nodeAddresses: [],
    namespaces: [
      { path: o.ns.path, inode: 1, addresses: [o.ns.address], interfaces: ['eth0', 'tun0'] },
    ],
    spoolFirstSeq: 0,
  };
  const link = new CollectorLink({
    url: o.url,
    token: o.token,
    ...(o.ca === undefined ? {} : { ca: o.ca }),
    hello: () => hello,
    backoff: { minMs: 10, maxMs: 50 },
  });
  const store =
    o.retention === null
      ? undefined
      : new RetentionStore({ onWarning: () => undefined, ...o.retention });
  const runtime = new AgentRuntime(o.node, {
    send: (kind: 'events' | 'status' | 'error', body: never) => {
      link.send(kind as 'events', body);
    },
    resolveTarget: () => Promise.resolve({ path: o.ns.path, dev: 1, inode: 1, via: 'ip' }),
    namespaceAddresses: () => Promise.resolve({ addresses: [o.ns.address] }),
    // A replay is its own final word once it ends: its counters are the capture's last ones.
    makeCapture: (spec, _netns, retain) =>
      Object.assign(
        new FileSource(
          typeof o.pcap === 'string' ? o.pcap : o.pcap(spec.point),
          spec,
          retain === undefined ? {} : { retain },
        ),
        {
          finalStats: true,
        },
      ),
    nowMs: () => Date.now(),
    ...(store === undefined ? {} : { retention: store }),
  });
  link.onCommand((cmd) => {
    runtime.handle(cmd);
  });
  link.onRequest((req) => {
    if (req.kind !== 'framesRequest') return;
    void runtime.frames(req.framesRequest).then((framesReply) => {
      link.reply({ kind: 'framesReply', framesReply });
    });
  });
  t.teardown(async () => {
    await runtime.close();
    store?.close();
    await link.close();
  });
  return link;
}

/**
 * A live capture without root, over loopback: the real hub, sessions and data directory, and
 * replay agents (replay-agent.ts) that retain what they deliver, so the collector fetches evidence
 * frames and writes the whole bundle. Shared by frames-e2e.test.ts and live-bundle.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RetentionStoreOptions } from '../../agent/capture/retention-store';
import { createAgentHub } from '../../collector/hub';
import { silentLogger } from '../../collector/logger';
import { SessionManager } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import type { ReportDocument } from '../../core/report/report-document';
import { PCAPS } from './corpus';
import { eventually } from './eventually';
import { startReplayAgent } from './replay-agent';
import { Signal, TOKEN, closeServer, listen } from './transport-fixtures';

export const PCAP = join(PCAPS, 'zeek_http-get.pcap');
export const POINTS = [
  { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
  { name: 'egress', target: '10.244.1.10', iface: 'eth0' },
  { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
];

export function tempDir(t: { teardown(fn: () => void): void }, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `hoptrace-${name}-`));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** One agent: its link, its runtime; captures replay PCAP and retain as they go. */
export function startAgent(
  t: { teardown(fn: () => Promise<void>): void },
  port: number,
  agentId: string,
  node: string,
  ns: { path: string; address: string },
  retention: (Partial<RetentionStoreOptions> & { dir: string }) | null,
  pcapOf: (point: string) => string = () => PCAP,
  version?: string,
): void {
  startReplayAgent(t, {
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    agentId,
    node,
    ns,
    pcap: pcapOf,
    retention,
    ...(version === undefined ? {} : { version }),
  });
}

export interface LoopbackCollector {
  sessions: SessionManager;
  store: CaptureStore;
  port: number;
  stored: Signal;
  frames: string[];
}

/** A collector on loopback with its data directory. */
export async function collector(
  t: { teardown(fn: () => Promise<void>): void },
  dir: string,
): Promise<LoopbackCollector> {
  const { server, port } = await listen();
  const store = new CaptureStore({ dir, fsync: false });
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: store.collectorId,
    lastSeqStore: store.lastSeq,
  });
  const sessions = new SessionManager({ hub, store, logger: silentLogger(), debounceMs: 0 });
  sessions.start();
  const stored = new Signal();
  const frames: string[] = [];
  sessions.onFrames((id, point) => {
    frames.push(`${id}/${point}`);
    stored.notify();
  });
  t.teardown(async () => {
    await sessions.close();
    await hub.close();
    await closeServer(server);
  });
  return { sessions, store, port, stored, frames };
}

export async function waitAgents(sessions: SessionManager, n: number): Promise<void> {
  while (sessions.agents().filter((a) => a.connected).length < n)
    await new Promise((r) => setTimeout(r, 10));
}

/** Whether capture `id`'s report names every point's stored events file (hashed after the verdict). */
function eventsHashed(c: LoopbackCollector, id: string): boolean {
  const doc = JSON.parse(c.sessions.report(id, 'json') ?? '{}') as Partial<ReportDocument>;
  return doc.inputs?.every((i) => 'eventsFile' in i) === true;
}

/**
 * A capture of POINTS that resolves; returns its id once every point's frames are stored and its
 * reports name the stored events files — the rewrites after the verdict done, the bundle settled
 * (a test then asserts what it holds).
 */
export async function capture(c: LoopbackCollector): Promise<string> {
  const view = await c.sessions.create({
    points: POINTS,
    client: '141.142.228.5',
    timeoutMs: 20_000,
    stopOnFirstMatch: true,
    settleMs: 30_000,
  });
  await c.stored.wait(() => POINTS.every((p) => c.frames.includes(`${view.id}/${p.name}`)));
  await eventually(() => eventsHashed(c, view.id), 10_000);
  return view.id;
}

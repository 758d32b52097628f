/**
 * One simulated agent in a process of its own (`node agent-child.js '<json>'`), so the agent-kill
 * scenario can SIGKILL it for real. The JSON names it ({url, token, agentId, node, podIp}). For
 * each capture command it stops at each stage until the parent writes "go" on stdin:
 *
 *   child → {"stage":"connected"}                      (hello answered)
 *   child → {"stage":"command","captureId","point"}    parent → go
 *   statuses arming and capturing sent; acknowledged:
 *   child → {"stage":"confirmed"}                      parent → go
 *   the point's packets of the connection sent; acknowledged:
 *   child → {"stage":"delivered"}
 *
 * The parent kills it at the stage it wants to; stdin closed ends it.
 */
import { createInterface } from 'node:readline';
import { SimAgent } from './sim-agent';
import { journeyEvents, journeyOf, JOURNEY_POINTS, type JourneyPoint } from './sim-events';
import { waitUntil } from './wait';

interface ChildArgs {
  url: string;
  token: string;
  agentId: string;
  node: string;
  podIp: string;
}

function say(msg: object): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`);
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as ChildArgs;
  const agent = new SimAgent({ ...args, backoff: { minMs: 100, maxMs: 1000 } });
  const gos: (() => void)[] = [];
  const go = (): Promise<void> => new Promise((resolve) => gos.push(resolve));
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (l) => {
    if (l.trim() === 'go') gos.shift()?.();
  });
  const acked = (): Promise<void> =>
    waitUntil(() => agent.spooled === 0, 30_000, 'acknowledged', 5);
  agent.onCommand((cmd) => {
    if (cmd.kind !== 'capture') return;
    const { captureId, point, iface } = cmd.capture;
    if (!(JOURNEY_POINTS as readonly string[]).includes(point)) return;
    void (async () => {
      say({ stage: 'command', captureId, point });
      await go();
      agent.sendStatus(captureId, point, 'arming', 0);
      agent.sendStatus(captureId, point, 'capturing', 0);
      await acked();
      say({ stage: 'confirmed' });
      await go();
      const events = journeyEvents(point as JourneyPoint, args.node, iface, journeyOf(captureId));
      agent.sendEvents(captureId, point, events);
      await acked();
      say({ stage: 'delivered' });
    })();
  });
  agent.start();
  await waitUntil(() => agent.connected, 20_000, 'connected');
  say({ stage: 'connected' });
  await new Promise<void>((resolve) => lines.once('close', resolve));
  agent.close();
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    say({ error: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  },
);

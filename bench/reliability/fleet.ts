/**
 * Simulated agents around one collector: a fleet connects, each agent answers capture commands
 * the way agent/runtime.ts does (status arming, then capturing; stopped on stop), and captures
 * armed on the fleet give every agent one point to stream into. The streams are driven here:
 * open-loop at an offered rate, the spool dropping and counting what it has no room for.
 */
import type { CaptureView } from '../../collector';
import type { LiveCollector } from '../../lab/live-collector';
import { SimAgent, type SimAgentOptions } from './sim-agent';
import { streamBatch } from './sim-events';
import { waitUntil } from './wait';

/** The pod address of the i-th agent of a fleet: 10.77.0.1, 10.77.0.2, … */
export function podIpOf(i: number): string {
  return `10.77.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** One capture point an agent streams into. */
export interface Stream {
  agent: SimAgent;
  captureId: string;
  point: string;
  /** The next frame number (frames of dropped batches are used up too: the capture saw them). */
  nextFrame: number;
}

/** How often agent/runtime.ts reports a running capture's status. */
const STATUS_INTERVAL_MS = 1000;

/**
 * Answers capture and stop commands as the agent runtime does: status arming then capturing, a
 * status every second with the packets seen (spooled + dropped), stopped on stop. Returns a
 * function that ends the periodic statuses.
 */
export function answerCommands(agent: SimAgent): () => void {
  const running = new Map<string, { captureId: string; point: string; timer: NodeJS.Timeout }>();
  const seen = (captureId: string, point: string): number => {
    const t = agent.tally(captureId, point);
    return t.spooled + t.lost;
  };
  agent.onCommand((cmd) => {
    if (cmd.kind === 'capture') {
      const { captureId, point } = cmd.capture;
      const key = `${captureId}/${point}`;
      // A command resent after a reconnect is not a second capture.
      if (running.has(key)) return;
      agent.sendStatus(captureId, point, 'arming', 0);
      agent.sendStatus(captureId, point, 'capturing', 0);
      const timer = setInterval(() => {
        agent.sendStatus(captureId, point, 'capturing', seen(captureId, point));
      }, STATUS_INTERVAL_MS);
      running.set(key, { captureId, point, timer });
      return;
    }
    for (const [key, r] of running) {
      if (
        r.captureId !== cmd.stop.captureId ||
        (cmd.stop.point !== '' && r.point !== cmd.stop.point)
      )
        continue;
      clearInterval(r.timer);
      agent.sendStatus(r.captureId, r.point, 'stopped', seen(r.captureId, r.point));
      running.delete(key);
    }
  });
  return () => {
    for (const r of running.values()) clearInterval(r.timer);
    running.clear();
  };
}

/** Simulated agents that answer commands; `close` closes them and ends their statuses. */
export interface Fleet {
  agents: SimAgent[];
  close(): void;
}

/** Who a simulated agent is. */
export interface AgentName {
  agentId: string;
  node: string;
  podIp: string;
}

/** Agents, one per name, that answer commands once started (connectFleet). */
export function makeFleet(
  c: LiveCollector,
  names: readonly AgentName[],
  extra: Partial<SimAgentOptions> = {},
): Fleet {
  const agents: SimAgent[] = [];
  const enders: (() => void)[] = [];
  const fleet: Fleet = {
    agents,
    close: () => {
      for (const end of enders) end();
      for (const a of agents) a.close();
    },
  };
  for (const name of names) {
    const a = new SimAgent({ url: c.agentsUrl, token: c.token, ...name, ...extra });
    enders.push(answerCommands(a));
    agents.push(a);
  }
  return fleet;
}

/** Starts the agents of a fleet and waits until every one completed its hello. */
export async function connectFleet(fleet: Fleet): Promise<void> {
  for (const a of fleet.agents) a.start();
  try {
    await waitUntil(
      () => fleet.agents.every((a) => a.connected),
      20_000,
      `${fleet.agents.length} agents connected`,
    );
  } catch (e) {
    fleet.close();
    throw e;
  }
}

/** `n` connected agents named `<prefix>-agent-<i>` on nodes `<prefix>-node-<i>`. */
export async function startFleet(
  c: LiveCollector,
  prefix: string,
  n: number,
  extra: Partial<SimAgentOptions> = {},
): Promise<Fleet> {
  const names = Array.from({ length: n }, (_, i) => ({
    agentId: `${prefix}-agent-${i}`,
    node: `${prefix}-node-${i}`,
    podIp: podIpOf(i),
  }));
  const fleet = makeFleet(c, names, extra);
  await connectFleet(fleet);
  return fleet;
}

/**
 * Captures that give each agent one point (up to 8 points a capture, the API's limit), with a
 * client that never appears (192.0.2.1, TEST-NET-1) and hour-long timeouts: the captures stay
 * live and keep every event the agents stream. Resolves once every agent was armed.
 */
export async function armStreams(c: LiveCollector, agents: SimAgent[]): Promise<Stream[]> {
  const streams: Stream[] = [];
  const views: CaptureView[] = [];
  for (let i = 0; i < agents.length; i += 8) {
    const group = agents.slice(i, i + 8);
    // The API wants 2 points at least: a lone agent gets two.
    const points = (group.length === 1 ? [group[0]!, group[0]!] : group).map((a, k) => ({
      name: `p${k}`,
      target: a.podIp,
      iface: k === 0 && group.length === 1 ? 'tun0' : 'eth0',
    }));
    const v = await c.createCapture({
      points,
      client: '192.0.2.1',
      timeoutMs: 3_600_000,
      settleMs: 3_600_000,
    });
    views.push(v);
    group.forEach((a, k) =>
      streams.push({ agent: a, captureId: v.id, point: `p${k}`, nextFrame: 1 }),
    );
  }
  await waitUntil(
    async () => {
      const all = await Promise.all(views.map((v) => c.capture(v.id)));
      return all.every((v) => v.points.every((p) => p.state === 'capturing'));
    },
    20_000,
    'every point capturing',
    50,
  );
  return streams;
}

/** Streams being fed; `stop` ends the feeding (what is spooled is still sent). */
export interface Feed {
  stop(): void;
  /** Events the captures "saw" (spooled or dropped). */
  produced(): number;
}

/**
 * Feeds each stream `ratePerStream` events a second in batches of `batch` (every `tickMs`): what
 * the spool has no room for is dropped and counted, as a capture cannot slow the network down.
 * `Infinity` feeds as fast as the spool takes them (closed loop: nothing dropped).
 */
export function feed(streams: Stream[], ratePerStream: number, batch: number, tickMs = 20): Feed {
  const t0 = Date.now();
  let produced = 0;
  const one = (s: Stream): void => {
    if (s.agent.spoolFull()) s.agent.drop(s.captureId, s.point, batch);
    else
      s.agent.sendEvents(
        s.captureId,
        s.point,
        streamBatch(s.agent.node, s.point, s.agent.podIp, s.nextFrame, batch),
      );
    s.nextFrame += batch;
    produced += batch;
  };
  const timer = setInterval(() => {
    const elapsed = (Date.now() - t0) / 1000;
    for (const s of streams) {
      if (ratePerStream === Infinity) {
        // Closed loop: top the spool up, a bounded number of batches per tick.
        for (let k = 0; k < 8 && !s.agent.spoolFull(); k++) one(s);
        continue;
      }
      while (s.nextFrame - 1 + batch <= ratePerStream * elapsed) one(s);
    }
  }, tickMs);
  return {
    stop: () => {
      clearInterval(timer);
    },
    produced: () => produced,
  };
}

/** Resolves once every agent's spool is empty (everything acknowledged). */
export function drained(agents: SimAgent[], timeoutMs: number): Promise<void> {
  return waitUntil(() => agents.every((a) => a.spooled === 0), timeoutMs, 'every spool drained');
}

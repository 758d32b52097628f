/**
 * The live lab: the same scenarios as lab/run.ts, but captured by hoptrace itself. One collector
 * subprocess per lab run (loopback, temp data dir, random token); per scenario the topology, one
 * agent per lab node (host namespace, scoped to that node's namespaces), a capture armed through
 * `POST /v1/captures`, the probe, and the verdict from `GET /v1/captures/:id` — the events travel
 * worker → agent → WebSocket → collector. Everything is stopped and removed in `finally`, and on
 * SIGINT/SIGTERM (lab/netns.ts, lab/live-procs.ts).
 */
import { FINAL_STATES, type CaptureView, type PointView } from '../collector';
import { ADDR } from './addresses';
import { stopChild } from './child';
import { labNodes, startAgent, waitConnected, type LabNode, type LiveAgent } from './live-agents';
import { LiveCollector, type CaptureRequestBody } from './live-collector';
import { Netns } from './netns';
import { assertLabPrerequisites } from './prereq';
import { prepareProbe, sendProbe, type PreparedProbe, type ProbeResult } from './probe';
import { backendObserved, compareWithExpectation, newProbeId, type ScenarioRun } from './run';
import { selectorOf, type Scenario } from './scenarios';
import { buildTopology, NS, type Topology } from './topology';
import type { LabVerdict } from './verdict';

export { LiveCollector } from './live-collector';

/**
 * Settle time asked of the collector: a request whose analysis stops changing (no-return, dropped)
 * is resolved this long after the last new packet. Lab packets arrive within milliseconds.
 */
export const LIVE_SETTLE_MS = 1200;
const LIVE_TIMEOUT_MS = 20_000;

/** What one live scenario run produced. */
export interface LiveRun {
  scenario: Scenario;
  prefix: string;
  probeId: string;
  captureId: string;
  probe: ProbeResult;
  appObserved: ScenarioRun['appObserved'];
  /** Final session state (resolved, timeout, failed …) and why. */
  state: string;
  finalReason: string | null;
  points: PointView[];
  /** Each point's lab namespace (its full name, prefix included). */
  namespaces: Record<string, string>;
  verdict: LabVerdict | null;
  /** From the probe's return to the collector's finishedAt (0 when it finished before that). */
  timeToVerdictMs: number;
  mismatches: string[];
  durationMs: number;
}

/** The pod IP a lab namespace holds (capture targets are pod IPs, resolved by the agents). */
const POD_IP: Record<string, string> = {
  [NS.vpnPod]: ADDR.vpnPod,
  [NS.backendPod]: ADDR.backendPod,
  [NS.proxyPod]: ADDR.proxyPod,
};

/** One scenario's namespaces and agents, handed to a `withLiveScene` callback. */
export interface LiveScene {
  scenario: Scenario;
  lab: Netns;
  topo: Topology;
  collector: LiveCollector;
  probeId: string;
  agents: LiveAgent[];
  /** Starts the agents of `nodes` (default: both lab nodes) and waits until they are listed. */
  startAgents(nodes?: LabNode[]): Promise<LiveAgent[]>;
  /** The three points of the scenario as capture-request points (pod IP targets). */
  points(): CaptureRequestBody['points'];
  /** The capture request for the scenario's probe. */
  request(): CaptureRequestBody;
  /**
   * Prepares the probe: for a keep-alive scenario this opens (and warms up) its connection, so
   * call it before `collector.createCapture`; send it once every point captures.
   */
  prepareProbe(): Promise<PreparedProbe>;
  /** Prepares and sends the probe at once (a keep-alive connection opens now, inside the capture). */
  sendProbe(): Promise<ProbeResult>;
  /** The backend application's log so far. */
  backendLog(): string;
}

/** Builds `scenario`, runs `fn`, then stops agents and servers and removes the namespaces. */
export async function withLiveScene<T>(
  collector: LiveCollector,
  scenario: Scenario,
  fn: (scene: LiveScene) => Promise<T>,
): Promise<T> {
  assertLabPrerequisites();
  const lab = new Netns();
  const agents: LiveAgent[] = [];
  let topo: Topology | undefined;
  try {
    topo = await buildTopology(lab, scenario, __dirname);
    const built = topo;
    const viewRoot = `${collector.tmpDir}/nodes-${lab.prefix}`;
    const probeId = newProbeId();
    const scene: LiveScene = {
      scenario,
      lab,
      topo: built,
      collector,
      probeId,
      agents,
      async startAgents(nodes = labNodes(scenario.proxyPod)) {
        const started = nodes.map((n) => startAgent(collector, lab, n, viewRoot));
        agents.push(...started);
        await waitConnected(collector, agents);
        return started;
      },
      points() {
        return built.points.map((p) => {
          const target = POD_IP[p.ns];
          if (target === undefined) throw new Error(`no pod IP for namespace ${p.ns}`);
          return { name: p.name, target, iface: p.iface };
        });
      },
      request() {
        return {
          points: scene.points(),
          ...selectorOf(scenario),
          timeoutMs: LIVE_TIMEOUT_MS,
          settleMs: LIVE_SETTLE_MS,
        };
      },
      prepareProbe: () => prepareProbe(lab, scenario, probeId),
      sendProbe: () => sendProbe(lab, scenario, probeId),
      backendLog: () => built.backendLog(),
    };
    return await fn(scene);
  } finally {
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
    for (const p of topo?.processes ?? []) await stopChild(p.child).catch(() => undefined);
    await lab.destroy();
  }
}

/** True when the capture reached a final state. */
export function isFinal(v: CaptureView): boolean {
  return (FINAL_STATES as readonly string[]).includes(v.state);
}

/** Every point confirmed its capture runs; throws naming a point that failed instead. */
export function allCapturing(v: CaptureView): boolean {
  const failed = v.points.find((p) => p.state === 'failed');
  if (failed !== undefined)
    throw new Error(
      `point ${failed.name} failed while arming: ${failed.error?.code ?? '?'} ${failed.error?.message ?? ''}`,
    );
  return v.points.every((p) => p.state === 'capturing');
}

/** The verdict fields the lab compares, from a capture view. */
export function labVerdictOf(v: CaptureView): LabVerdict | null {
  const x = v.verdict;
  if (x === null) return null;
  const out: LabVerdict = {
    layer: x.layer,
    rewrittenBetween: x.rewrittenBetween,
    observed: x.observed,
    evidence: x.evidence,
    hint: x.hint,
  };
  if (x.reason !== undefined) out.reason = x.reason;
  if (x.outer !== undefined) out.outer = x.outer;
  return out;
}

/** Hooks around the probe (the restart test kills and restarts the collector there). */
export interface LiveHooks {
  /** After every point is capturing, before the probe. */
  beforeProbe?: () => Promise<void>;
  /** After the probe returned, before waiting for the verdict. */
  afterProbe?: () => Promise<void>;
  /** Changes the scenario's capture request before it is sent (e.g. `evidencePayload`). */
  request?: (body: CaptureRequestBody) => CaptureRequestBody;
}

/**
 * Prepares the probe (a keep-alive connection opens before the capture exists), arms a capture in
 * `scene`, sends the probe, waits for the verdict and compares it.
 */
export async function runArmedProbe(scene: LiveScene, hooks: LiveHooks = {}): Promise<LiveRun> {
  const started = Date.now();
  const { collector, scenario } = scene;
  const prepared = await scene.prepareProbe();
  let probe: ProbeResult;
  let created: CaptureView;
  try {
    const body = scene.request();
    created = await collector.createCapture(hooks.request?.(body) ?? body);
    await collector.waitCapture(created.id, allCapturing, 'every point capturing', 15_000);
    await hooks.beforeProbe?.();
    probe = await prepared.send();
  } finally {
    await prepared.close();
  }
  const probeEnd = Date.now();
  await hooks.afterProbe?.();
  const final = await collector.waitCapture(
    created.id,
    isFinal,
    'a final state',
    LIVE_TIMEOUT_MS + 5000,
  );
  const finishedAt = final.finishedAt === null ? probeEnd : Date.parse(final.finishedAt);
  const verdict = labVerdictOf(final);
  const appObserved = backendObserved(scene.backendLog(), scene.probeId);
  const run: LiveRun = {
    scenario,
    prefix: scene.lab.prefix,
    probeId: scene.probeId,
    captureId: final.id,
    probe,
    appObserved,
    state: final.state,
    finalReason: final.finalReason,
    points: final.points,
    namespaces: Object.fromEntries(scene.topo.points.map((p) => [p.name, scene.lab.full(p.ns)])),
    verdict,
    timeToVerdictMs: Math.max(0, finishedAt - probeEnd),
    mismatches: [],
    durationMs: 0,
  };
  run.mismatches = compareWithExpectation(scenario.expect, {
    verdict,
    analyzerError: verdict === null ? `capture ${final.state}: ${final.finalReason ?? ''}` : null,
    probe,
    appObserved,
  });
  if (final.state !== 'resolved')
    run.mismatches.push(`capture ended ${final.state}: ${final.finalReason ?? ''}`);
  run.durationMs = Date.now() - started;
  return run;
}

/** Runs `scenario` live against `collector`: topology, agents, capture, probe, verdict. */
export async function runLiveScenario(
  collector: LiveCollector,
  scenario: Scenario,
  hooks: LiveHooks = {},
): Promise<LiveRun> {
  const t0 = Date.now();
  return withLiveScene(collector, scenario, async (scene) => {
    await scene.startAgents();
    const run = await runArmedProbe(scene, hooks);
    run.durationMs = Date.now() - t0;
    return run;
  });
}

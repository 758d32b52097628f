/**
 * `hoptrace repro` in the live lab: a fresh connection every interval from the client (curl with
 * its own source port and a probe marker), the collector's repro session capturing at decap, egress
 * and backend the whole time, the VPN pod deleted after probe N and a replacement with a new
 * address coming up after a delay — the decap and egress points follow it by themselves (the VPN
 * node's agent reports the new namespace in its next hello). The return routes are read from the
 * node namespaces at the end, so the summary can say why the path did (not) come back.
 */
import { randomBytes } from 'node:crypto';
import type { ReproView } from '../collector';
import type { ReturnRoute } from '../core/repro/repro-core';
import { ADDR } from './addresses';
import { stopChild } from './child';
import { labNodes, startAgent, waitConnected, type LiveAgent } from './live-agents';
import type { LiveCollector } from './live-collector';
import { delay, Netns } from './netns';
import { assertLabPrerequisites } from './prereq';
import { LabVpnPods } from './repro-pod';
import { findScenario } from './scenarios';
import { buildTopology, NS, type Topology } from './topology';

/** How the tunnel range's return path is built, and what the reschedule must do to it. */
export interface ReproScenario {
  name: string;
  description: string;
  /**
   * `pod`: the VPN node routes 10.90.0.0/24 via the VPN pod's own IP (pinned: the seed's warning).
   * `vip`: via a stable gateway address the active VPN pod holds and announces (gratuitous ARP).
   */
  returnVia: 'pod' | 'vip';
  /** The VPN pod masquerades the tunnel range (SNAT mode: no return route is used). */
  masquerade: boolean;
  expect: {
    /** Verdict of the probes before the deletion (and after, when it recovers). */
    good: 'preserved' | 'vpn-pod';
    recovered: boolean;
    /** Verdict of the probes through the replacement when it does not recover. */
    afterBroken?: 'no-return';
  };
}

/** A stable gateway address on the VPN node's pod subnet (what keepalived or kube-vip would own). */
export const VPN_VIP = '10.244.1.100';
/** The replacement pod's address: the old one is gone, as after a reschedule. */
export const REPLACEMENT_IP = '10.244.1.11';

export const REPRO_SCENARIOS: readonly ReproScenario[] = [
  {
    name: 'pinned-route',
    description: `the VPN node routes ${ADDR.tunnelCidr} via the VPN pod's IP ${ADDR.vpnPod}: the route outlives the pod`,
    returnVia: 'pod',
    masquerade: false,
    expect: { good: 'preserved', recovered: false, afterBroken: 'no-return' },
  },
  {
    name: 'stable-gateway',
    description: `the VPN node routes ${ADDR.tunnelCidr} via ${VPN_VIP}, a gateway address the active VPN pod takes over`,
    returnVia: 'vip',
    masquerade: false,
    expect: { good: 'preserved', recovered: true },
  },
  {
    name: 'snat',
    description: `the VPN pod masquerades ${ADDR.tunnelCidr} (the pinned route is still there, and unused)`,
    returnVia: 'pod',
    masquerade: true,
    expect: { good: 'vpn-pod', recovered: true },
  },
];

/** Probe schedule and reschedule timing. */
export interface ReproOptions {
  count: number;
  intervalMs: number;
  /** The pod is deleted right after this probe (1-based). */
  deleteAfter: number;
  /** From the deletion to the replacement's namespace being ready. */
  replacementDelayMs: number;
  /** curl --max-time, seconds. */
  maxTimeS: number;
}

export const DEFAULT_REPRO_OPTIONS: ReproOptions = {
  count: 22,
  intervalMs: 500,
  deleteAfter: 4,
  replacementDelayMs: 1500,
  maxTimeS: 1,
};

/** What one repro run produced. */
export interface ReproRun {
  scenario: ReproScenario;
  prefix: string;
  view: ReproView;
  deletedAtMs: number;
  replacementReadyAtMs: number;
  durationMs: number;
}

interface CurlResult {
  ok: boolean;
  httpCode: string | null;
  error: string | null;
}

async function probe(lab: Netns, id: string, sport: number, maxTimeS: number): Promise<CurlResult> {
  const url = `http://${ADDR.backendPod}:${ADDR.backendPort}/hoptrace-probe-${id}`;
  const res = await lab.execStatus(
    NS.client,
    'curl',
    [
      '-s',
      '-S',
      '--noproxy',
      '*',
      '--max-time',
      String(maxTimeS),
      '--local-port',
      String(sport),
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      url,
    ],
    (maxTimeS + 5) * 1000,
  );
  const code = res.stdout.trim();
  const httpCode = code === '' || code === '000' ? null : code;
  return {
    ok: res.code === 0 && httpCode === '200',
    httpCode,
    error:
      res.code === 0 ? null : `curl exit ${res.code}: ${res.stderr.trim().split('\n')[0] ?? ''}`,
  };
}

/** `ip -j route show DST` in a node namespace, as ReturnRoutes. */
async function readRoutes(
  lab: Netns,
  ns: string,
  node: string,
  dst: string,
): Promise<ReturnRoute[]> {
  const { stdout } = await lab.ip(ns, '-j', 'route', 'show', dst);
  const parsed: unknown = JSON.parse(stdout === '' ? '[]' : stdout);
  if (!Array.isArray(parsed)) return [];
  return parsed.map((r: unknown) => {
    const o = typeof r === 'object' && r !== null ? (r as Record<string, unknown>) : {};
    return {
      node,
      dst: typeof o['dst'] === 'string' ? o['dst'] : dst,
      via: typeof o['gateway'] === 'string' ? o['gateway'] : null,
      dev: typeof o['dev'] === 'string' ? o['dev'] : null,
    };
  });
}

async function getRepro(c: LiveCollector, id: string): Promise<ReproView> {
  return (await c.api('GET', `/v1/repros/${id}`)) as ReproView;
}

async function waitRepro(
  c: LiveCollector,
  id: string,
  ok: (v: ReproView) => boolean,
  what: string,
  ms = 15_000,
): Promise<ReproView> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await getRepro(c, id);
    if (ok(v)) return v;
    if (Date.now() > deadline)
      throw new Error(
        `repro ${id}: ${what} not reached after ${ms} ms: ${JSON.stringify({ backend: v.backend, attachments: v.attachments })}`,
      );
    await delay(50);
  }
}

/** Runs one repro scenario against `collector`; the namespaces are always removed. */
export async function runRepro(
  collector: LiveCollector,
  sc: ReproScenario,
  opts: ReproOptions = DEFAULT_REPRO_OPTIONS,
  /** Called after each probe with the view and how many probes have settled (all but the last). */
  onProbe?: (view: ReproView, settled: number) => void,
): Promise<ReproRun> {
  assertLabPrerequisites();
  const started = Date.now();
  const base = findScenario(sc.masquerade ? 'vpn-pod-masquerade' : 'preserve');
  if (base === undefined) throw new Error('base scenario missing');
  const lab = new Netns();
  const viewRoot = `${collector.tmpDir}/nodes-${lab.prefix}`;
  const pods = new LabVpnPods(lab, viewRoot);
  const agents: LiveAgent[] = [];
  let topo: Topology | undefined;
  try {
    topo = await buildTopology(lab, base, __dirname);
    if (sc.returnVia === 'vip') {
      await lab.ip(NS.vpnPod, 'addr', 'add', `${VPN_VIP}/24`, 'dev', 'eth0');
      await lab.ip(NS.vpnNode, 'route', 'replace', ADDR.tunnelCidr, 'via', VPN_VIP);
    }
    pods.startDaemon(NS.vpnPod);
    for (const n of labNodes(false))
      agents.push(startAgent(collector, lab, n, viewRoot, { refreshMs: 250 }));
    await waitConnected(collector, agents);

    const created = (await collector.api('POST', '/v1/repros', {
      workload: { netns: `${lab.prefix}${NS.vpnPod}*`, podCidr: ADDR.clusterCidr },
      decapIface: 'vx0',
      egressIface: 'eth0',
      backend: { target: ADDR.backendPod, iface: 'eth0' },
      client: ADDR.clientTunnel,
      timeoutMs: 120_000,
    })) as ReproView;
    const id = created.id;
    await waitRepro(
      collector,
      id,
      (v) =>
        v.backend.state === 'capturing' &&
        (v.attachments[0]?.points.every((p) => p.state === 'capturing') ?? false),
      'every point capturing',
    );

    const run = randomBytes(3).toString('hex');
    const sportBase = 41000 + Math.floor(Math.random() * 20000);
    let deletion: Promise<void> | undefined;
    let deletedAtMs = 0;
    let replacementReadyAtMs = 0;
    for (let n = 1; n <= opts.count; n++) {
      const t0 = Date.now();
      const probeId = `r${run}n${String(n).padStart(2, '0')}`;
      const sport = sportBase + n;
      const res = await probe(lab, probeId, sport, opts.maxTimeS);
      await collector.api('POST', `/v1/repros/${id}/probes`, {
        probeId,
        sport,
        startedAtMs: t0,
        endedAtMs: Date.now(),
        ...res,
      });
      if (onProbe !== undefined) onProbe(await getRepro(collector, id), n - 1);
      if (n === opts.deleteAfter) {
        // The deletion itself is awaited (the next probe starts after it); the replacement comes
        // up in the background while probing goes on, so the probes see the gap and the new pod.
        // The last probe's packets may still sit in the capture's ring or batch (up to ~100 ms):
        // deleting the pod now would take them with its namespace, as a real eviction can. The
        // lab is about the reschedule, not that race, so it deletes once the probe was captured
        // and served (waitRepro fails loudly past its bound).
        const answered = res.ok;
        const v = await waitRepro(
          collector,
          id,
          (view) =>
            !answered || view.timeline.some((r) => r.probeId === probeId && r.servedBy !== null),
          `probe ${probeId} captured before the deletion`,
          5_000,
        );
        const pod = v.attachments.at(-1)?.pod;
        if (pod === undefined) throw new Error('no pod attached to delete');
        const d = await pods.deletePod(pod);
        deletedAtMs = d.deletedAtMs;
        await collector.api('POST', `/v1/repros/${id}/marks`, {
          kind: 'deleted',
          atMs: d.deletedAtMs,
          detail: d.detail,
        });
        deletion = (async () => {
          await delay(Math.max(0, d.deletedAtMs + opts.replacementDelayMs - Date.now()));
          await pods.createPod({
            ns: `${NS.vpnPod}-r1`,
            ip: REPLACEMENT_IP,
            hostDev: 'veth-vpn-r1',
            masquerade: sc.masquerade,
            ...(sc.returnVia === 'vip' ? { vip: VPN_VIP } : {}),
          });
          replacementReadyAtMs = Date.now();
          await collector.api('POST', `/v1/repros/${id}/marks`, {
            kind: 'replacement-ready',
            atMs: replacementReadyAtMs,
            detail: `${lab.full(`${NS.vpnPod}-r1`)} (${REPLACEMENT_IP}) up on vpn-node`,
          });
        })();
        continue;
      }
      const wait = t0 + opts.intervalMs - Date.now();
      if (wait > 0) await delay(wait);
    }
    await deletion;
    // Events of the last probes are still on their way from the agents (batching, FIN/ACK).
    await delay(800);
    const routes = [
      ...(await readRoutes(lab, NS.vpnNode, 'vpn-node', ADDR.tunnelCidr)),
      ...(await readRoutes(lab, NS.backendNode, 'backend-node', ADDR.tunnelCidr)),
    ];
    // The answer comes once the bundle is written: the agents answered for the evidence frames
    // (each after its capture stopped; bounded by the collector's frames timeout).
    const view = (await collector.api(
      'POST',
      `/v1/repros/${id}/finish`,
      { returnRoutes: routes },
      collector.token,
      60_000,
    )) as ReproView;
    return {
      scenario: sc,
      prefix: lab.prefix,
      view,
      deletedAtMs,
      replacementReadyAtMs,
      durationMs: Date.now() - started,
    };
  } finally {
    await Promise.all(agents.map((a) => a.stop().catch(() => undefined)));
    await pods.stopAll();
    for (const p of topo?.processes ?? []) await stopChild(p.child).catch(() => undefined);
    await lab.destroy();
  }
}

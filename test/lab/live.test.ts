// The live lab: every scenario captured by hoptrace itself (agents in the host namespace, scoped
// to their lab node, capture workers inside the lab's namespaces, events over WebSocket to one
// collector on loopback), plus the failure paths: the collector SIGKILLed and restarted
// mid-capture, an agent with a wrong token, a point whose agent is missing, an interface that
// does not exist. Needs root; fails with the reason otherwise. Traffic stays inside the lab.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { reportInputs } from '../../collector/capture-reports';
import { parseEventFile } from '../../collector/event-file';
import { framesToFetch } from '../../collector/frames-fetch';
import { decodeStoredFrames, type StoredFrames } from '../../common/frames-wire';
import { labNodes, startAgent } from '../../lab/live-agents';
import {
  isFinal,
  LIVE_SETTLE_MS,
  LiveCollector,
  runArmedProbe,
  runLiveScenario,
  withLiveScene,
  type LiveRun,
} from '../../lab/live';
import { waitAgents } from '../../lab/live-collector';
import { delay, listNamespaces } from '../../lab/netns';
import { ipv6EndpointsWithoutBrackets } from '../../lab/run';
import { missingPrerequisites } from '../../lab/prereq';
import { appSeesProbe, findScenario, SCENARIOS, type Scenario } from '../../lab/scenarios';
import { checkBundle } from '../unit/bundle-check';
import { ADDR } from '../../lab/addresses';
import type { Finding } from '../../core/doctor/checks';

const missing = missingPrerequisites();

function scenario(name: string): Scenario {
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
}

/** Waits until `text()` matches `re` (a log line); false after `ms`. */
async function waitText(text: () => string, re: RegExp, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (re.test(text())) return true;
    await delay(25);
  }
  return re.test(text());
}

/** Agent and capture-worker processes whose command line mentions one of `marks`. */
function labProcesses(marks: readonly string[]): string[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => /dist\/(cli\/main\.js agent|agent\/capture\/worker\.js)/.test(l))
    .filter((l) => marks.some((m) => l.includes(m)))
    .map((l) => l.trim());
}

/**
 * The evidence frames the collector fetched for each point of a finished capture (they are asked
 * for right after the verdict, once the agents stopped: waits for every point's file).
 */
async function storedFrames(
  dataDir: string,
  captureId: string,
  points: readonly string[],
): Promise<Map<string, StoredFrames>> {
  const dir = join(dataDir, 'captures', captureId);
  const deadline = Date.now() + 30_000;
  while (!points.every((p) => existsSync(join(dir, `frames-${p}.pb`))) && Date.now() < deadline)
    await delay(50);
  const out = new Map<string, StoredFrames>();
  for (const p of points) {
    const file = join(dir, `frames-${p}.pb`);
    if (existsSync(file)) out.set(p, decodeStoredFrames(readFileSync(file)));
  }
  return out;
}

if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  const prefixes: string[] = [];
  let collector: LiveCollector | undefined;
  const live = (): LiveCollector => {
    if (collector === undefined) throw new Error('the collector did not start');
    return collector;
  };
  t.before(async () => {
    collector = await LiveCollector.start();
  });
  t.teardown(async () => {
    await collector?.close();
  });
  const times: string[] = [];

  // One collector for all scenarios; each scenario has its own namespaces and agents.
  for (const s of SCENARIOS) {
    void t.test(`live ${s.name}`, async (t) => {
      const run: LiveRun = await runLiveScenario(live(), s);
      prefixes.push(run.prefix);
      const v = run.verdict;
      times.push(`${s.name} ${run.timeToVerdictMs} ms`);
      t.equal(run.state, 'resolved', `the capture resolved (${run.finalReason ?? '-'})`);
      t.equal(v?.layer, s.expect.layer, `layer (reason: ${v?.reason ?? '-'})`);
      t.same(v?.rewrittenBetween, s.expect.rewrittenBetween, 'hop (rewrittenBetween)');
      t.equal(v?.observed['backend']?.src ?? null, s.expect.backendSrc, 'backend observed src');
      if (s.expect.sportChanges === true)
        t.not(v?.observed['egress']?.sport, v?.observed['backend']?.sport, 'source port changed');
      if (appSeesProbe(s.expect))
        t.equal(run.appObserved?.src, s.expect.backendSrc, 'the backend application agrees');
      for (const p of run.points)
        t.not(p.state, 'failed', `point ${p.name} did not fail (${p.error?.code ?? '-'})`);
      t.same(run.mismatches, [], 'no mismatch with the scenario');
      if (s.ipv6 && v !== null)
        t.same(
          ipv6EndpointsWithoutBrackets(v),
          [],
          'IPv6 endpoints in the evidence as [addr]:port',
        );
      t.ok(
        run.timeToVerdictMs < LIVE_SETTLE_MS + 3000,
        `verdict ${run.timeToVerdictMs} ms after the probe returned`,
      );
      // The evidence frames: the real packets of the matched connection, at every point.
      const dir = live().dataDir;
      const inputs = reportInputs(
        JSON.parse(
          readFileSync(join(dir, 'captures', run.captureId, 'report-inputs.json'), 'utf8'),
        ),
      );
      const want = inputs === null ? new Map<string, number[]>() : framesToFetch(inputs.result);
      const names = run.points.map((p) => p.name);
      const frames = await storedFrames(dir, run.captureId, names);
      for (const name of names) {
        const f = frames.get(name);
        const asked = want.get(name) ?? [];
        t.ok(f !== undefined, `${name}: evidence frames stored`);
        if (f === undefined) continue;
        t.same(f.missing, [], `${name}: none missing`);
        t.same(
          f.records.map((r) => r.frame),
          asked,
          `${name}: every frame of the matched connection (${asked.length})`,
        );
        if (asked.length > 0) t.not(f.linkType, null, `${name}: the capture's link type`);
        t.ok(
          f.records.every((r) => r.data.length > 0 && r.data.length <= f.snaplen),
          `${name}: real bytes, at most the retention snaplen (${f.snaplen})`,
        );
      }
      // The bundle, form by form (test/unit/bundle-check.ts), once the collector has rewritten it
      // with the frames it fetched.
      const capDir = join(dir, 'captures', run.captureId);
      const readDoc = (): { evidence?: { packets: number } | null } =>
        JSON.parse(readFileSync(join(capDir, 'report.json'), 'utf8')) as {
          evidence?: { packets: number } | null;
        };
      const until = Date.now() + 15_000;
      while ((readDoc().evidence ?? null) === null && Date.now() < until) await delay(50);
      const doc = checkBundle(t, capDir, {
        points: names,
        layer: s.expect.layer,
        namespaces: run.namespaces,
      });
      // Every lab node runs on this host's clock: a bounded offset brackets 0, and no hop's
      // clock-corrected latency is negative.
      for (const c of doc.clock ?? [])
        if (c.status === 'bounded')
          t.ok(
            BigInt(c.lowNs ?? '1') <= 0n && 0n <= BigInt(c.highNs ?? '-1'),
            `clock of ${c.point}: [${c.lowNs ?? '?'}, ${c.highNs ?? '?'}] ns brackets 0 (one host clock)`,
          );
      for (const h of doc.hops ?? [])
        if (h.latencyNs !== null)
          t.ok(BigInt(h.latencyNs) >= 0n, `hop ${h.from}→${h.to}: ${h.latencyNs} ns, not negative`);
      t.equal(
        doc.evidence?.packets,
        inputs?.result.points.reduce((n, p) => n + p.flow.length, 0) ?? -1,
        'evidence.pcapng: every packet of the verdict the collector holds',
      );
      // Sent only once the connection opened: the backend application saw it, so frames on the
      // wire carried it — but the capture did not ask for the payload, so the agents kept every
      // frame only up to its payload (headers only): the request line is in none of them.
      // (test/lab/live-evidence.test.ts asks for the payload and finds it.)
      if (s.request === 'http' && appSeesProbe(s.expect))
        t.notOk(
          [...frames.values()].some((f) =>
            f.records.some((r) => Buffer.from(r.data).includes(`hoptrace-probe-${run.probeId}`)),
          ),
          "headers only: the probe's request line is in no retained frame",
        );
    });
  }

  void t.test("live cni-masquerade with doctor: the agents' findings in the report", (t) =>
    withLiveScene(live(), scenario('cni-masquerade'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      await scene.startAgents();
      const run = await runArmedProbe(scene, {
        request: (b) => ({ ...b, doctor: { tunnelRange: ADDR.tunnelCidr } }),
      });
      t.equal(run.state, 'resolved', `the capture resolved (${run.finalReason ?? '-'})`);
      // Doctor runs through the agents once the capture ended; wait here, with the scene still up.
      const capDir = join(live().dataDir, 'captures', run.captureId);
      type Doc = {
        doctor: { status: string; detail?: string; result?: { findings: Finding[] } };
      };
      const read = (): Doc => JSON.parse(readFileSync(join(capDir, 'report.json'), 'utf8')) as Doc;
      const until = Date.now() + 20_000;
      while (/had not answered/.test(read().doctor.detail ?? '') && Date.now() < until)
        await delay(100);
      const doc = read();
      t.equal(doc.doctor.status, 'given', `doctor ran (${doc.doctor.detail ?? ''})`);
      t.ok(
        (doc.doctor.result?.findings ?? []).some(
          (f) => f.check === 'masquerade' && f.severity === 'error',
        ),
        "doctor's finding: the tunnel range is masqueraded",
      );
      const md = readFileSync(join(capDir, 'report.md'), 'utf8');
      const what = md.slice(md.indexOf('## What to change'));
      t.match(what, /Doctor findings from doctor's checks through the agents/);
      t.match(what, /ERROR masquerade/, 'What to change names the finding');
      t.match(md, /--doctor-tunnel-range 10\.90\.0\.0\/24/, 'and the Reproduce line asks for it');
    }),
  );

  void t.test('collector SIGKILLed mid-capture and restarted: verdict right, no event lost', (t) =>
    withLiveScene(live(), scenario('preserve'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      const c = live();
      const port = c.port;
      await scene.startAgents();
      let downFrom = 0n;
      let downUntil = 0n;
      const now = (): bigint => BigInt(Date.now()) * 1_000_000n;
      const run = await runArmedProbe(scene, {
        beforeProbe: async () => {
          await c.kill();
          downFrom = now();
          t.notOk(c.running(), 'the collector is down while the request is sent');
        },
        afterProbe: async () => {
          downUntil = now();
          await c.restart();
          t.equal(c.port, port, 'restarted on the same port');
          await waitAgents(
            c,
            (list) =>
              scene.agents.every((a) => list.some((x) => x.agentId === a.agentId && x.connected)),
            'agents reconnected',
          );
        },
      });
      t.equal(run.state, 'resolved', `resolved after the restart (${run.finalReason ?? '-'})`);
      t.equal(run.verdict?.layer, 'preserved', `layer (reason: ${run.verdict?.reason ?? '-'})`);
      t.equal(run.appObserved?.src, '10.90.0.42', 'the backend application saw the client');
      for (const point of ['decap', 'egress', 'backend'])
        t.equal(run.verdict?.observed[point]?.src, '10.90.0.42', `the request is seen at ${point}`);
      // Lossless: the store holds every frame each worker numbered, 1..N without a gap, and as
      // many as the agent reported capturing; frames captured while the collector was down are there.
      for (const p of run.points) {
        const file = join(c.dataDir, 'captures', run.captureId, `events-${p.name}.pb`);
        const { events, corruptRecords } = parseEventFile(readFileSync(file));
        const frames = events.map((e) => e.frame).sort((a, b) => a - b);
        const gaps = frames.filter((f, i) => f !== i + 1);
        t.equal(corruptRecords, 0, `${p.name}: no corrupt record`);
        t.ok(frames.length > 0, `${p.name}: ${frames.length} events stored`);
        t.same(gaps, [], `${p.name}: frames 1..${frames.length}, no gap or duplicate`);
        t.equal(p.events, frames.length, `${p.name}: the API counts what the store holds`);
        t.ok(p.packets <= frames.length, `${p.name}: agent reported ${p.packets} captured`);
        t.equal(p.lost, 0, `${p.name}: no loss reported`);
        const during = events.filter((e) => e.tsNs >= downFrom && e.tsNs <= downUntil).length;
        t.ok(during > 0, `${p.name}: ${during} events captured while the collector was down`);
      }
      t.match(c.logs(), /session resumed/, 'the collector resumed the session from its data dir');
    }),
  );

  void t.test('agent refusal, a missing point, a missing interface', (t) =>
    withLiveScene(live(), scenario('preserve'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      const c = live();
      const [vpnNode, backendNode] = labNodes(false);
      if (vpnNode === undefined || backendNode === undefined) throw new Error('lab nodes');
      const viewRoot = join(c.tmpDir, `nodes-${scene.lab.prefix}`);

      await t.test('an agent with a wrong token is refused', async (t) => {
        const wrong = join(c.tmpDir, 'wrong-token');
        writeFileSync(wrong, 'not-the-token\n', { mode: 0o600 });
        const intruder = startAgent(c, scene.lab, backendNode, viewRoot, {
          tokenFile: wrong,
          agentId: `intruder-${scene.lab.prefix.slice(2, 8)}`,
        });
        try {
          t.ok(
            await waitText(() => c.logs(), /"code":"AUTH_REFUSED"/),
            'the collector logs AUTH_REFUSED',
          );
          t.ok(await waitText(intruder.output, /AUTH_REFUSED/), 'the agent reports AUTH_REFUSED');
          const agents = await c.agents();
          t.notOk(
            agents.some((a) => a.agentId === intruder.agentId),
            'GET /v1/agents does not list it',
          );
          const health = (await fetch(`${c.url}/healthz`).then((r) => r.json())) as {
            agentsConnected: number;
          };
          t.equal(health.agentsConnected, 0, '/healthz counts no connected agent');
        } finally {
          await intruder.stop();
        }
      });

      await t.test(
        "per-agent identity: another node's token and the shared token are refused",
        async (t) => {
          // The backend node's agent holding the VPN node's token (a compromised node speaking
          // for another), then the shared API token.
          for (const [tokenFile, code] of [
            [c.nodeTokenFile('vpn-node'), 'AUTH_WRONG_NODE'],
            [c.tokenFile, 'AUTH_REFUSED'],
          ] as const) {
            const before = c.logs().length;
            const intruder = startAgent(c, scene.lab, backendNode, viewRoot, {
              tokenFile,
              agentId: `${code.toLowerCase().replace(/_/g, '-')}-${scene.lab.prefix.slice(2, 8)}`,
            });
            try {
              t.ok(
                await waitText(() => c.logs().slice(before), new RegExp(`"code":"${code}"`)),
                `the collector logs ${code}`,
              );
              t.ok(await waitText(intruder.output, new RegExp(code)), `the agent reports ${code}`);
              const agents = await c.agents();
              t.notOk(
                agents.some((a) => a.agentId === intruder.agentId && a.connected),
                'it is not connected',
              );
            } finally {
              await intruder.stop();
            }
          }
        },
      );

      await t.test('backend agent not started: the verdict names the missing point', async (t) => {
        await scene.startAgents([vpnNode]);
        const created = await c.createCapture(scene.request());
        const armed = await c.waitCapture(
          created.id,
          (v) =>
            v.points.filter((p) => p.name !== 'backend').every((p) => p.state === 'capturing') ||
            isFinal(v),
          'decap and egress capturing',
        );
        t.equal(armed.state, 'capturing', 'the capture runs without the backend point');
        const probe = await scene.sendProbe();
        t.equal(probe.httpCode, '200', 'the request itself succeeds');
        const v = await c.waitCapture(created.id, isFinal, 'final', 20_000);
        const backend = v.points.find((p) => p.name === 'backend');
        t.equal(backend?.state, 'failed', 'the backend point failed');
        t.match(
          backend?.error?.code ?? '',
          /^(TARGET_NOT_FOUND|AGENT_NOT_CONNECTED)$/,
          `with ${backend?.error?.code ?? '-'}: ${backend?.error?.message ?? ''}`,
        );
        t.equal(v.verdict?.layer, 'unknown', 'not called a drop');
        t.match(
          v.verdict?.reason ?? '',
          /backend/,
          `the reason names backend: ${v.verdict?.reason ?? ''}`,
        );
        t.ok(
          v.verdict?.evidence.some((e) => e.point === 'backend' && /capture/.test(e.detail)),
          'the backend evidence says its capture did not run',
        );
        t.equal(v.verdict?.observed['decap']?.src, '10.90.0.42', 'decap still saw the request');
      });

      await t.test('an interface that does not exist: CAPTURE_NO_INTERFACE', async (t) => {
        await scene.startAgents([backendNode]);
        const req = scene.request();
        req.points = req.points.map((p) => (p.name === 'backend' ? { ...p, iface: 'nope0' } : p));
        const created = await c.createCapture(req);
        const v = await c.waitCapture(
          created.id,
          (x) => x.points.some((p) => p.name === 'backend' && p.state === 'failed'),
          'backend failed',
        );
        const backend = v.points.find((p) => p.name === 'backend');
        t.equal(backend?.error?.code, 'CAPTURE_NO_INTERFACE', 'GET shows CAPTURE_NO_INTERFACE');
        t.match(
          backend?.error?.message ?? '',
          /nope0/,
          `names it: ${backend?.error?.message ?? ''}`,
        );
        t.match(backend?.error?.message ?? '', /eth0/, 'and lists the interfaces that exist');
        const cancelled = await c.cancel(created.id);
        t.equal(cancelled.state, 'cancelled', 'cancelled with DELETE');
      });
    }),
  );

  void t.test('nothing of the live lab is left', async (t) => {
    t.comment(`time to verdict: ${times.join(', ')}`);
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, [], 'no namespace of this run');
    // Agents name their view dir (under the collector's temp dir); workers their namespace.
    t.same(labProcesses([live().tmpDir, ...prefixes]), [], 'no agent or capture worker process');
  });
}

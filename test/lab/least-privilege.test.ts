// Least privilege, on real processes: the live lab's agents run as the DaemonSet runs them (uid 0,
// only the capabilities of agent/capabilities.ts, no_new_privs) and their /proc/PID/status says
// so, as do their capture workers'; a capture through them gives the scenario's verdict; an agent
// started without CAP_SYS_ADMIN says at start what it lacks and its capture points fail with
// AGENT_NOT_PERMITTED, never a stack trace. Needs root; traffic stays inside the lab.
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { AGENT_CAPABILITIES, capabilityBits } from '../../agent';
import { isFinal, LiveCollector, runArmedProbe, withLiveScene } from '../../lab/live';
import { AGENT_CAPABILITY_NAMES, labNodes, startAgent } from '../../lab/live-agents';
import { waitAgents } from '../../lab/live-collector';
import { delay } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario, type Scenario } from '../../lab/scenarios';

const missing = missingPrerequisites();
const DOCUMENTED = AGENT_CAPABILITIES.map((c) => c.bit).sort((a, b) => a - b);

function scenario(name: string): Scenario {
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
}

const status = (pid: number): string => readFileSync(`/proc/${pid}/status`, 'utf8');
const bits = (text: string, field: string): number[] =>
  [...(capabilityBits(text, field) ?? new Set([-1]))].sort((a, b) => a - b);

/** The capture workers the agent `pid` started (nsenter execs node worker.js: same PID). */
function workersOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        return (
          new RegExp(`^PPid:\\s*${pid}$`, 'm').test(status(p)) &&
          readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('worker.js')
        );
      } catch {
        return false; // gone meanwhile
      }
    });
}

/** What a process's status says of its privileges, for one assertion per process. */
function privileges(pid: number): Record<string, unknown> {
  const s = status(pid);
  return {
    uid: /^Uid:\s*(\d+)/m.exec(s)?.[1],
    CapEff: bits(s, 'CapEff'),
    CapPrm: bits(s, 'CapPrm'),
    CapBnd: bits(s, 'CapBnd'),
    CapAmb: bits(s, 'CapAmb'),
    NoNewPrivs: /^NoNewPrivs:\s*(\d)/m.exec(s)?.[1],
  };
}

const EXPECTED = {
  uid: '0',
  CapEff: DOCUMENTED,
  CapPrm: DOCUMENTED,
  CapBnd: DOCUMENTED,
  CapAmb: DOCUMENTED,
  NoNewPrivs: '1',
};

async function waitText(text: () => string, re: RegExp, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (re.test(text())) return true;
    await delay(25);
  }
  return re.test(text());
}

if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
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

  void t.test('the documented set is the four capabilities, each with its reason', (t) => {
    t.same(AGENT_CAPABILITY_NAMES, ['NET_RAW', 'NET_ADMIN', 'SYS_ADMIN', 'SYS_PTRACE']);
    t.same(
      DOCUMENTED,
      [12, 13, 19, 21],
      'CAP_NET_ADMIN 12, NET_RAW 13, SYS_PTRACE 19, SYS_ADMIN 21',
    );
    t.end();
  });

  void t.test('live agents and their capture workers hold exactly the documented set', (t) =>
    withLiveScene(live(), scenario('cni-masquerade'), async (scene) => {
      const agents = await scene.startAgents();
      for (const a of agents)
        t.same(privileges(a.child.pid ?? -1), EXPECTED, `agent ${a.agentId}: uid 0, only those`);
      let workers = 0;
      const run = await runArmedProbe(scene, {
        beforeProbe: () => {
          // Every point is capturing: each runs its worker inside its namespace now.
          for (const a of agents) {
            for (const w of workersOf(a.child.pid ?? -1)) {
              workers++;
              t.same(privileges(w), EXPECTED, `capture worker ${w} of ${a.agentId}`);
            }
          }
          return Promise.resolve();
        },
      });
      t.equal(workers, 3, 'one worker per point (decap, egress, backend)');
      // The verdict needs every capture; the conntrack evidence (nfnetlink: CAP_NET_ADMIN) too.
      t.equal(run.state, 'resolved', `resolved (${run.finalReason ?? '-'})`);
      t.equal(run.verdict?.layer, 'cni-masquerade', `layer (${run.verdict?.reason ?? '-'})`);
      t.same(run.mismatches, [], 'no mismatch with the scenario');
      const v = await live().waitCapture(
        run.captureId,
        (x) => x.verdict?.conntrack !== undefined,
        'conntrack evidence',
        5000,
      );
      t.equal(
        v.verdict?.conntrack?.status,
        'confirms',
        `conntrack read inside the namespaces confirms it (${v.verdict?.conntrack?.detail ?? '-'})`,
      );
      t.notMatch(live().logs(), /CONNTRACK_READ_FAILED/, 'no conntrack read failed');
      for (const a of agents)
        t.notMatch(a.output(), /AGENT_NOT_PERMITTED/, `${a.agentId} was refused nothing`);
    }),
  );

  void t.test('an agent without CAP_SYS_ADMIN says so with a code, never a stack trace', (t) =>
    withLiveScene(live(), scenario('preserve'), async (scene) => {
      const [, backendNode] = labNodes(false);
      if (backendNode === undefined) throw new Error('lab nodes');
      const c = live();
      const agent = startAgent(c, scene.lab, backendNode, `${c.tmpDir}/nodes-${scene.lab.prefix}`, {
        agentId: `nosysadmin-${scene.lab.prefix.slice(2, 8)}`,
        capabilities: AGENT_CAPABILITY_NAMES.filter((n) => n !== 'SYS_ADMIN'),
      });
      scene.agents.push(agent);
      t.ok(
        await waitText(agent.output, /"code":"AGENT_NOT_PERMITTED".*lacks CAP_SYS_ADMIN/),
        'at start it logs AGENT_NOT_PERMITTED naming CAP_SYS_ADMIN',
      );
      // Read once it runs (setpriv has exec'd node), so this is the agent's own set.
      t.same(
        privileges(agent.child.pid ?? -1)['CapEff'],
        [12, 13, 19],
        'it runs without CAP_SYS_ADMIN',
      );
      await waitAgents(
        c,
        (list) => list.some((a) => a.agentId === agent.agentId && a.connected),
        'the agent without CAP_SYS_ADMIN connected',
      );
      // Pod IP targets on its node: it cannot enter any namespace to find them.
      const created = await c.createCapture({
        points: scene.points().map((p) => ({ ...p, node: backendNode.node })),
        timeoutMs: 5000,
      });
      // The first point failing ends the capture (the request can never be selected).
      const v = await c.waitCapture(created.id, isFinal, 'the capture failed');
      t.equal(v.state, 'failed', `the capture failed (${v.finalReason ?? '-'})`);
      const failed = v.points.filter((p) => p.state === 'failed');
      t.equal(failed[0]?.name, 'decap', 'the first point failed');
      for (const p of failed) {
        t.equal(p.error?.code, 'AGENT_NOT_PERMITTED', `${p.name}: ${p.error?.message ?? '-'}`);
        t.match(p.error?.message ?? '', /lacks CAP_SYS_ADMIN/, `${p.name} names the capability`);
      }
      t.notMatch(agent.output(), /\n\s+at .+:\d+:\d+/, 'no stack trace in its output');
      t.equal(agent.child.exitCode, null, 'it keeps running');
    }),
  );
}

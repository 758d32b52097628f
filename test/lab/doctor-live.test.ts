// Doctor and conntrack evidence through the agent protocol (root, never skipped): a live lab with
// the collector on loopback and one agent per lab node. POST /v1/doctor asks the agents
// (DoctorRequest/DoctorReport) and a finished capture gets the flow's conntrack entries from the
// agents (ConntrackQuery/ConntrackReport) in its verdict and report.
import t from 'tap';
import type { DoctorResult } from '../../core/doctor/checks';
import { ADDR, ADDR6 } from '../../lab/addresses';
import { LiveCollector, runArmedProbe, withLiveScene } from '../../lab/live';
import { delay, listNamespaces } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario, type Scenario } from '../../lab/scenarios';

function scenario(name: string): Scenario {
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
}

const missing = missingPrerequisites();
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

  void t.test('cni-masquerade: doctor via agents, conntrack evidence in the report', (t) =>
    withLiveScene(live(), scenario('cni-masquerade'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      await scene.startAgents();
      const r = (await live().api('POST', '/v1/doctor', {
        vpn: ADDR.vpnPod,
        backend: ADDR.backendPod,
        tunnelRange: ADDR.tunnelCidr,
        client: ADDR.clientTunnel,
      })) as DoctorResult;
      const masq = r.findings.filter((f) => f.check === 'masquerade' && f.severity === 'error');
      t.equal(masq.length, 1, JSON.stringify(r.findings, null, 1));
      t.equal(masq[0]?.node, 'vpn-node', 'named by the agent that read it');
      t.match(masq[0]?.subject, /-A IP-MASQ-AGENT -j MASQUERADE/);
      const route = r.findings.find((f) => f.check === 'return-route');
      t.equal(route?.severity, 'error', 'no return route in this scenario');
      t.equal(route?.node, 'backend-node');

      const run = await runArmedProbe(scene);
      t.equal(run.verdict?.layer, 'cni-masquerade');
      // The conntrack evidence lands shortly after the verdict (one round trip to the agents).
      let md = '';
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && !md.includes('## Conntrack')) {
        const res = await fetch(`${live().url}/v1/captures/${run.captureId}/report.md`, {
          headers: { authorization: `Bearer ${live().token}` },
        });
        md = res.ok ? await res.text() : '';
        if (!md.includes('## Conntrack')) await delay(100);
      }
      t.match(md, /## Conntrack/);
      t.match(md, /\*\*confirms\*\*: conntrack in vpn-node holds the source NAT/);
      t.match(
        md,
        /\| vpn-node \| vpn-node \| \S+ \| `10\.90\.0\.42:\d+ -> 10\.244\.2\.5:8080` \| `10\.244\.2\.5:8080 -> 192\.168\.50\.1:\d+` \| yes \| no \|/,
      );
    }),
  );

  void t.test('preserve: doctor via agents finds no error', (t) =>
    withLiveScene(live(), scenario('preserve'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      await scene.startAgents();
      const r = (await live().api('POST', '/v1/doctor', {
        vpn: ADDR.vpnPod,
        backend: ADDR.backendPod,
      })) as DoctorResult;
      t.equal(r.summary.errors, 0, JSON.stringify(r.findings, null, 1));
    }),
  );

  void t.test('kube-proxy-ipv6: doctor via agents reads the IPv6 routes and rules', (t) =>
    withLiveScene(live(), scenario('kube-proxy-ipv6'), async (scene) => {
      prefixes.push(scene.lab.prefix);
      await scene.startAgents();
      const r = (await live().api('POST', '/v1/doctor', {
        vpn: ADDR6.vpnPod,
        backend: ADDR6.backendPod,
        tunnelRange: ADDR6.tunnelCidr,
      })) as DoctorResult;
      t.equal(r.client, 'fd00:10:90::1', "the range's first host");
      t.equal(r.summary.errors, 0, JSON.stringify(r.findings, null, 1));
      // Only facts the agents read for IPv6 (DoctorRequest.family) name ip6tables.
      t.same(
        r.findings.filter((f) => f.check === 'masquerade').map((f) => `${f.severity} ${f.subject}`),
        [
          'ok nat rules read: ip6tables 0, ip6tables-legacy 0, nftables 0; IPVS: not in this kernel (no /proc/net/ip_vs)',
          'ok nat rules read: ip6tables 0, ip6tables-legacy 0, nftables 0; IPVS: not in this kernel (no /proc/net/ip_vs)',
        ],
      );
      const route = r.findings.find((f) => f.check === 'return-route');
      t.equal(route?.severity, 'ok');
      t.match(route?.subject, /^fd00:10:90::\/64 via fd00:192:168:50::1 dev up0/);
    }),
  );

  void t.test('an unknown pod IP is DOCTOR_NO_AGENT (409)', async (t) => {
    await t.rejects(
      live().api('POST', '/v1/doctor', { vpn: '10.1.2.3', backend: '10.1.2.4' }),
      /DOCTOR_NO_AGENT/,
    );
  });

  void t.test('no namespace of this test is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

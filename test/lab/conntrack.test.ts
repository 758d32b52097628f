// Conntrack evidence against real kernel NAT (root, never skipped): run a NAT scenario with the
// three tcpdump points, read the flow's conntrack entries in the VPN pod, the VPN node and the
// backend node right after the request (agent/doctor/read.ts, via nsenter), and check that the
// SNAT entry sits in the namespace that did the NAT and that it confirms the packet verdict.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { readConntrack } from '../../agent/doctor/read';
import { analyzeFiles } from '../../cli/analyze';
import { flowTuples, withConntrackEvidence } from '../../core/attribute/conntrack-evidence';
import { renderReportMarkdown } from '../../core/report/report';
import type { ConntrackEntry } from '../../common/wire';
import { ADDR } from '../../lab/addresses';
import { startCapture, type RunningCapture } from '../../lab/capture';
import { stopChild } from '../../lab/child';
import { delay, listNamespaces, Netns } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { sendProbe } from '../../lab/probe';
import { newProbeId } from '../../lab/run';
import { findScenario } from '../../lab/scenarios';
import { buildTopology, NS, type LabProcess } from '../../lab/topology';

const DIST_LAB = join(__dirname, '../../lab');
const prefixes: string[] = [];

async function runWithConntrack(name: string, out: string) {
  const scenario = findScenario(name);
  if (scenario === undefined) throw new Error(`no scenario ${name}`);
  const lab = new Netns();
  prefixes.push(lab.prefix);
  let processes: LabProcess[] = [];
  const captures: RunningCapture[] = [];
  try {
    const topo = await buildTopology(lab, scenario, DIST_LAB);
    processes = topo.processes;
    const points = topo.points.map((p) => ({ ...p, file: join(out, `${name}-${p.name}.pcap`) }));
    for (const p of points) captures.push(await startCapture(lab, p));
    await sendProbe(lab, scenario, newProbeId());
    await delay(300);
    for (const c of captures.splice(0)) await c.stop();
    const { verdict, points: summary } = analyzeFiles({
      points: points.map(({ name: n, file }) => ({ name: n, file })),
      inventory: topo.inventory,
      selector: { client: ADDR.clientTunnel, dst: scenario.target.ip, dport: scenario.target.port },
    });
    const tuples = flowTuples(verdict);
    const entries: ConntrackEntry[] = [];
    for (const [role, ns, node] of [
      ['vpn', NS.vpnPod, 'vpn-node'],
      ['vpn-node', NS.vpnNode, 'vpn-node'],
      ['backend-node', NS.backendNode, 'backend-node'],
    ] as const) {
      entries.push(
        ...(await readConntrack(
          { name: role, target: `/run/netns/${lab.full(ns)}`, routeTo: [] },
          tuples,
          { node },
        )),
      );
    }
    return { verdict: withConntrackEvidence(verdict, entries), entries, points: summary };
  } finally {
    for (const c of captures) await c.stop().catch(() => undefined);
    for (const p of processes) await stopChild(p.child).catch(() => undefined);
    await lab.destroy();
  }
}

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  const base = mkdtempSync(join(tmpdir(), 'hoptrace-conntrack-'));
  t.teardown(() => {
    rmSync(base, { recursive: true, force: true });
  });

  void t.test(
    'cni-masquerade: the SNAT entry is on the VPN node and confirms the verdict',
    async (t) => {
      const { verdict, entries, points } = await runWithConntrack('cni-masquerade', base);
      t.equal(verdict.layer, 'cni-masquerade');
      const snat = entries.filter((e) => e.snat);
      t.same(
        snat.map((e) => e.name),
        ['vpn-node'],
        JSON.stringify(entries, null, 1),
      );
      t.equal(snat[0]?.orig.src, ADDR.clientTunnel);
      t.equal(snat[0]?.reply.dst, ADDR.vpnNodeUplink, 'the reply goes to the node address');
      // nf_conntrack tracks in a namespace only once a rule there needs it (no NAT rule in the VPN pod).
      t.notOk(
        entries.some((e) => e.name === 'vpn'),
        'the VPN pod, without NAT rules, tracks nothing',
      );
      t.equal(verdict.conntrack?.status, 'confirms');
      t.match(
        verdict.confirmedBy?.[0],
        /conntrack vpn-node on vpn-node: orig 10\.90\.0\.42:\d+ -> 10\.244\.2\.5:8080, reply 10\.244\.2\.5:8080 -> 192\.168\.50\.1:\d+ \[SNAT\]/,
      );
      const md = renderReportMarkdown({ verdict, points }, { generatedAt: 'now', inputs: [] });
      t.match(md, /## Conntrack/);
      t.match(
        md,
        /\| vpn-node \| vpn-node \| \S+ \| `10\.90\.0\.42:\d+ -> 10\.244\.2\.5:8080` \| `10\.244\.2\.5:8080 -> 192\.168\.50\.1:\d+` \| yes \| no \|/,
      );
    },
  );

  void t.test(
    'kube-proxy NodePort: SNAT+DNAT on the backend node confirms kube-proxy',
    async (t) => {
      const { verdict, entries } = await runWithConntrack('kube-proxy-nodeport', base);
      t.equal(verdict.layer, 'kube-proxy');
      const nat = entries.filter((e) => e.snat);
      t.same(
        nat.map((e) => e.name),
        ['backend-node'],
        JSON.stringify(entries, null, 1),
      );
      t.ok(nat[0]?.dnat, 'the NodePort DNAT is on the same entry');
      t.equal(nat[0]?.reply.src, ADDR.backendPod);
      t.equal(verdict.conntrack?.status, 'confirms');
    },
  );

  void t.test('vpn-pod-masquerade: the SNAT entry is in the VPN pod', async (t) => {
    const { verdict, entries } = await runWithConntrack('vpn-pod-masquerade', base);
    t.equal(verdict.layer, 'vpn-pod');
    t.same(
      entries.filter((e) => e.snat).map((e) => e.name),
      ['vpn'],
    );
    t.equal(verdict.conntrack?.status, 'confirms');
  });

  void t.test('preserve: no NAT rule anywhere, so no entry, and the verdict stands', async (t) => {
    const { verdict, entries } = await runWithConntrack('preserve', base);
    t.equal(verdict.layer, 'preserved');
    t.same(entries, [], 'no namespace on the path loaded conntrack');
    t.equal(verdict.conntrack?.status, 'no-entries');
    t.notMatch(verdict.reason ?? '', /conntrack disagrees/, 'no disagreement is claimed');
  });

  void t.test('no namespace of this test is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

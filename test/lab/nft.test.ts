// The native nftables scenarios write no iptables rule: after building each one's topology,
// iptables-save and ip6tables-save print nothing in any of its namespaces, and nft lists the
// scenario's table (kube-proxy's nftables mode, the CNI masquerade) where it belongs. Runs as
// root; without the tools it fails with the reason.
import { join } from 'node:path';
import t from 'tap';
import { stopChild } from '../../lab/child';
import { listNamespaces, Netns } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';
import { buildTopology, NS } from '../../lab/topology';

const CASES = [
  { name: 'kube-proxy-nft', ns: NS.backendNode, table: 'table ip kube-proxy' },
  { name: 'cni-masquerade-nft', ns: NS.vpnNode, table: 'table ip cni-nat' },
] as const;

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  for (const c of CASES) {
    void t.test(`${c.name}: nft rules only`, async (t) => {
      const s = findScenario(c.name);
      if (s === undefined) throw new Error(`no scenario ${c.name}`);
      const lab = new Netns();
      try {
        const topo = await buildTopology(lab, s, join(__dirname, '..', '..', 'lab'));
        for (const p of topo.processes) await stopChild(p.child);
        for (const full of lab.namespaces()) {
          const ns = full.slice(lab.prefix.length);
          for (const save of ['iptables-save', 'ip6tables-save']) {
            const { stdout } = await lab.exec(ns, save, []);
            t.equal(stdout, '', `${save} in ${ns}: no iptables table, no rule`);
          }
          const { stdout } = await lab.exec(ns, 'nft', ['list', 'tables']);
          t.equal(stdout.trim(), ns === c.ns ? c.table : '', `nft tables in ${ns}`);
        }
        const { stdout } = await lab.exec(c.ns, 'nft', ['list', 'ruleset']);
        t.match(stdout, /masquerade/, 'the ruleset masquerades');
        if (c.name === 'kube-proxy-nft') {
          t.match(stdout, /ip daddr \. meta l4proto \. th dport vmap @service-ips/, 'verdict map');
          t.match(stdout, /masquerade fully-random/, 'fully-random');
        }
      } finally {
        await lab.destroy();
      }
      t.notOk(
        (await listNamespaces()).some((n) => n.startsWith(lab.prefix)),
        'namespaces gone',
      );
    });
  }
}

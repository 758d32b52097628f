// `hoptrace doctor` against real misconfigured labs (root, never skipped): each scenario's
// namespaces are built with lab/topology.ts, checked in local mode, and torn down in `finally`.
// Also the denied-source test (policy drop vs missing route) with live captures.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runLocalDoctor } from '../../cli/doctor';
import type { DoctorResult } from '../../core/doctor/checks';
import { ADDR } from '../../lab/addresses';
import { stopChild } from '../../lab/child';
import { listNamespaces, Netns } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';
import { buildTopology, NS, type LabProcess } from '../../lab/topology';

const DIST_LAB = join(__dirname, '../../lab');
const DENIED = '10.90.0.66';
const prefixes: string[] = [];

/** Builds `scenario`, applies `extra`, runs the doctor, always removes the namespaces. */
async function doctorLab(
  name: string,
  extra: (lab: Netns) => Promise<void> = () => Promise.resolve(),
  denied = false,
): Promise<DoctorResult> {
  const scenario = findScenario(name);
  if (scenario === undefined) throw new Error(`no scenario ${name}`);
  const lab = new Netns();
  prefixes.push(lab.prefix);
  let processes: LabProcess[] = [];
  try {
    const topo = await buildTopology(lab, scenario, DIST_LAB);
    processes = topo.processes;
    await extra(lab);
    const p = (ns: string): string => `/run/netns/${lab.full(ns)}`;
    return await runLocalDoctor({
      netns: {
        vpn: p(NS.vpnPod),
        'vpn-node': p(NS.vpnNode),
        'backend-node': p(NS.backendNode),
        backend: p(NS.backendPod),
        client: p(NS.client),
      },
      tunnelRange: ADDR.tunnelCidr,
      client: ADDR.clientTunnel,
      dst: scenario.target.ip,
      knownNetns: `/run/netns/${lab.prefix}*`,
      denied: denied ? { source: DENIED, target: scenario.target } : undefined,
    });
  } finally {
    for (const proc of processes) await stopChild(proc.child).catch(() => undefined);
    await lab.destroy();
  }
}

const of = (r: DoctorResult, check: string, severity?: string) =>
  r.findings.filter(
    (f) => f.check === check && (severity === undefined || f.severity === severity),
  );

const missing = missingPrerequisites();
if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('a correct preserve lab has no error', async (t) => {
    const r = await doctorLab('preserve');
    t.equal(r.summary.errors, 0, JSON.stringify(r.findings, null, 1));
    t.equal(r.summary.warnings, 0, 'and no warning');
    const route = of(r, 'return-route', 'ok')[0];
    t.match(route?.detail, /VPN node's address 192\.168\.50\.1/);
    t.equal(
      of(r, 'masquerade', 'ok').length,
      2,
      'no masquerade in the VPN pod nor on the VPN node',
    );
  });

  void t.test('cni-masquerade: the VPN node masquerades the tunnel range', async (t) => {
    const r = await doctorLab('cni-masquerade');
    const m = of(r, 'masquerade', 'error');
    t.equal(m.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(m[0]?.subject, /-A IP-MASQ-AGENT -j MASQUERADE/);
    t.match(m[0]?.namespace, /^vpn-node /);
    t.match(m[0]?.detail, /POSTROUTING → IP-MASQ-AGENT/);
    t.match(m[0]?.fix, /nonMasqueradeCIDRs/);
    t.equal(of(r, 'masquerade', 'ok').length, 1, 'the VPN pod itself does not masquerade');
  });

  void t.test('vpn-pod-masquerade: the VPN pod masquerades', async (t) => {
    const r = await doctorLab('vpn-pod-masquerade');
    const m = of(r, 'masquerade', 'error');
    t.equal(m.length, 1);
    t.match(m[0]?.namespace, /^vpn /);
    t.match(m[0]?.subject, /-A POSTROUTING -s 10\.90\.0\.0\/24 -o eth0 -j MASQUERADE/);
  });

  void t.test('no-return: no route back to the tunnel range', async (t) => {
    const r = await doctorLab('no-return');
    const e = of(r, 'return-route', 'error');
    t.equal(e.length, 1);
    t.match(
      e[0]?.detail,
      /no route for 10\.90\.0\.0\/24: replies to 10\.90\.0\.42 follow the default route via 192\.168\.50\.254, which is not the VPN path/,
    );
    t.match(e[0]?.fix, /ip route replace 10\.90\.0\.0\/24 via/);
  });

  void t.test(
    'preserve-strict-rpf: strict rp_filter is a warning naming the interface',
    async (t) => {
      const r = await doctorLab('preserve-strict-rpf');
      t.equal(r.summary.errors, 0);
      const w = of(r, 'rp-filter', 'warning');
      t.ok(
        w.some((f) => f.namespace.startsWith('backend-node') && f.subject === 'up0'),
        JSON.stringify(w, null, 1),
      );
      t.ok(w.some((f) => f.namespace.startsWith('vpn-node')));
      t.match(w[0]?.fix, /sysctl -w net\.ipv4\.conf\.\S+\.rp_filter=2/);
    },
  );

  void t.test('a return route pinned to a deleted pod address is an error naming it', async (t) => {
    const r = await doctorLab('preserve', async (lab) => {
      await lab.ip(
        NS.backendNode,
        'route',
        'replace',
        ADDR.tunnelCidr,
        'via',
        '10.244.1.99',
        'dev',
        'up0',
        'onlink',
      );
    });
    const e = of(r, 'return-route', 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(e[0]?.detail, /still points at 10\.244\.1\.99, a pod address that no namespace holds/);
    t.match(e[0]?.subject, /10\.90\.0\.0\/24 via 10\.244\.1\.99 dev up0 onlink/);
  });

  void t.test('a return route to the live VPN pod is a warning (pod addresses move)', async (t) => {
    const r = await doctorLab('preserve', async (lab) => {
      await lab.ip(
        NS.backendNode,
        'route',
        'replace',
        ADDR.tunnelCidr,
        'via',
        ADDR.vpnPod,
        'dev',
        'up0',
        'onlink',
      );
    });
    t.equal(r.summary.errors, 0);
    const w = of(r, 'return-route', 'warning');
    t.match(w[0]?.detail, /10\.244\.1\.10, a pod address \(the VPN pod's\)/);
  });

  /** Loads an nft ruleset into namespace `ns` (native nftables: invisible to iptables-save). */
  const nftLoad = async (lab: Netns, ns: string, ruleset: string): Promise<void> => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-nft-'));
    try {
      writeFileSync(join(dir, 'rules.nft'), ruleset);
      await lab.exec(ns, 'nft', ['-f', join(dir, 'rules.nft')]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  // The CNI's masquerade as native nft (Calico and Cilium can write nft), and kube-proxy's
  // nftables mode: the 0x4000 mark-for-masquerade, then `masquerade fully-random`.
  const NFT_CNI = (exclude: boolean): string => `
table inet cni {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ${exclude ? `ip saddr ${ADDR.tunnelCidr} return` : ''}
    ip saddr ${ADDR.tunnelCidr} oifname "up0" counter masquerade
  }
}
table ip kube-proxy {
  chain nat-postrouting {
    type nat hook postrouting priority 110; policy accept;
    jump masquerading
  }
  chain masquerading {
    meta mark & 0x00004000 == 0 return
    meta mark set meta mark ^ 0x00004000
    masquerade fully-random
  }
}
`;

  void t.test('native nftables: a masquerade iptables-save cannot see is found', async (t) => {
    const r = await doctorLab('preserve', (lab) => nftLoad(lab, NS.vpnNode, NFT_CNI(false)));
    const e = of(r, 'masquerade', 'error').filter((f) => f.namespace.startsWith('vpn-node'));
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(
      e[0]?.subject,
      /inet cni postrouting: ip saddr 10\.90\.0\.0\/24 meta oifname up0 masquerade/,
    );
    t.match(
      e[0]?.detail,
      /reached nftables postrouting → inet cni postrouting\) masquerades every packet/,
    );
    t.same(
      of(r, 'masquerade', 'warning').filter((f) => f.namespace.startsWith('vpn-node')),
      [],
      "kube-proxy's chain (priority 110) never sees a packet the CNI's (srcnat, 100) masqueraded",
    );
  });

  void t.test(
    'native nftables: the tunnel range excluded before the masquerade is ok',
    async (t) => {
      const r = await doctorLab('preserve', (lab) => nftLoad(lab, NS.vpnNode, NFT_CNI(true)));
      t.same(
        of(r, 'masquerade', 'error'),
        [],
        'the return before the masquerade excludes the tunnel range',
      );
      const ok = of(r, 'masquerade', 'ok').find((f) => f.namespace.startsWith('vpn-node'));
      t.equal(ok, undefined, "kube-proxy's marked masquerade stays a warning, so no ok either");
      const w = of(r, 'masquerade', 'warning').filter((f) => f.namespace.startsWith('vpn-node'));
      t.equal(w.length, 1, "kube-proxy's mark-for-masquerade is a warning with its condition");
      t.match(w[0]?.subject, /ip kube-proxy masquerading: masquerade fully-random/);
      t.match(w[0]?.detail, /masquerades packets when not \(meta mark & 0x4000 == 0\)/);
      t.match(
        w[0]?.detail,
        /reached nftables postrouting → ip kube-proxy nat-postrouting → ip kube-proxy masquerading/,
      );
      const vpn = of(r, 'masquerade', 'ok').find((f) => f.namespace.startsWith('vpn '));
      t.match(vpn?.subject, /^nat rules read: iptables \d+, iptables-legacy 0, nftables 0$/);
    },
  );

  void t.test('iptables-legacy: a masquerade only the legacy backend holds is found', async (t) => {
    const r = await doctorLab('preserve', async (lab) => {
      await lab.exec(NS.vpnNode, 'iptables-legacy', [
        '-w',
        '-t',
        'nat',
        '-A',
        'POSTROUTING',
        '-s',
        ADDR.tunnelCidr,
        '-o',
        'up0',
        '-j',
        'MASQUERADE',
      ]);
    });
    const e = of(r, 'masquerade', 'error').filter((f) => f.namespace.startsWith('vpn-node'));
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(e[0]?.subject, /^\(legacy\) -A POSTROUTING -s 10\.90\.0\.0\/24 -o up0 -j MASQUERADE$/);
    t.match(e[0]?.detail, /reached legacy POSTROUTING\)/);
  });

  const addDenied = async (lab: Netns): Promise<void> => {
    await lab.ip(NS.client, 'addr', 'add', `${DENIED}/24`, 'dev', 'vx0');
  };

  void t.test('denied source: a drop at the policy point is policy', async (t) => {
    const r = await doctorLab(
      'preserve',
      async (lab) => {
        await addDenied(lab);
        await lab.iptables(NS.backendNode, '-I', 'FORWARD', '-s', DENIED, '-j', 'DROP');
      },
      true,
    );
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'ok', JSON.stringify(d));
    t.match(d?.detail, /refused by policy: the SYN \(ISN \d+\) arrived at node/);
  });

  void t.test('denied source: ICMP admin-prohibited is policy', async (t) => {
    const r = await doctorLab(
      'preserve',
      async (lab) => {
        await addDenied(lab);
        await lab.iptables(
          NS.backendNode,
          '-I',
          'FORWARD',
          '-s',
          DENIED,
          '-j',
          'REJECT',
          '--reject-with',
          'icmp-admin-prohibited',
        );
      },
      true,
    );
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'ok', JSON.stringify(d));
    t.match(d?.detail, /refused by policy: ICMP/);
  });

  void t.test('denied source: never arriving is a missing route, not policy', async (t) => {
    const r = await doctorLab(
      'preserve',
      async (lab) => {
        await addDenied(lab);
        // The VPN node has no usable route for this source (policy routing into a blackhole).
        await lab.ip(NS.vpnNode, 'rule', 'add', 'from', DENIED, 'blackhole');
      },
      true,
    );
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'error', JSON.stringify(d));
    t.match(d?.detail, /never reached the backend's node: it failed for lack of a route/);
  });

  void t.test('no namespace of this test is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

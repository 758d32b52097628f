// `hoptrace doctor` against real misconfigured labs (root, never skipped): each scenario's
// namespaces are built with lab/topology.ts, checked in local mode, and torn down in `finally`.
// Also the denied-source test (policy drop vs missing route) with live captures, and the IPv6
// checks on a dual-stack lab (ip6tables, ip6tables-legacy, nft ip6/inet, ip -6 route).
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runDoctor, runLocalDoctor, type LocalDoctorOptions } from '../../cli/doctor';
import { EXIT } from '../../cli/exit-codes';
import type { DoctorResult } from '../../core/doctor/checks';
import { ADDR, ADDR6 } from '../../lab/addresses';
import { stopChild } from '../../lab/child';
import { listNamespaces, Netns, runCommand } from '../../lab/netns';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario, type Scenario } from '../../lab/scenarios';
import { buildTopology, NS, type LabProcess } from '../../lab/topology';

const DIST_LAB = join(__dirname, '../../lab');
const DENIED = '10.90.0.66';
const prefixes: string[] = [];

function scenarioNamed(name: string): Scenario {
  const s = findScenario(name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
}

/** What a lab doctor run adds to its scenario. */
interface LabRun {
  /** Applied once the topology is built (rules, routes, addresses). */
  extra?: (lab: Netns) => Promise<void>;
  /** Run the denied-source test too. */
  denied?: boolean;
  /** The denied-source test's port on the scenario's target (default: the scenario's). */
  deniedPort?: number;
  /**
   * Run through the CLI (`hoptrace doctor --netns … --json`) with this PATH, restored after: the
   * tools doctor finds are the ones in it. The exit code is returned with the result.
   */
  path?: string;
}

/** Builds `scenario`, applies `extra`, runs the doctor, always removes the namespaces. */
async function doctorLab(
  named: string | Scenario,
  run: LabRun = {},
): Promise<DoctorResult & { exit?: number }> {
  const scenario = typeof named === 'string' ? scenarioNamed(named) : named;
  const lab = new Netns();
  prefixes.push(lab.prefix);
  let processes: LabProcess[] = [];
  try {
    const topo = await buildTopology(lab, scenario, DIST_LAB);
    processes = topo.processes;
    await run.extra?.(lab);
    const p = (ns: string): string => `/run/netns/${lab.full(ns)}`;
    // The request's family is the target's: an IPv6 target is checked against the IPv6 range.
    const v6 = isIPv6(scenario.target.ip);
    const opts: LocalDoctorOptions = {
      netns: {
        vpn: p(NS.vpnPod),
        'vpn-node': p(NS.vpnNode),
        'backend-node': p(NS.backendNode),
        backend: p(NS.backendPod),
        client: p(NS.client),
      },
      tunnelRange: v6 ? ADDR6.tunnelCidr : ADDR.tunnelCidr,
      client: v6 ? ADDR6.clientTunnel : ADDR.clientTunnel,
      dst: scenario.target.ip,
      knownNetns: `/run/netns/${lab.prefix}*`,
      denied:
        run.denied === true
          ? {
              source: DENIED,
              target: { ip: scenario.target.ip, port: run.deniedPort ?? scenario.target.port },
            }
          : undefined,
    };
    if (run.path === undefined) return await runLocalDoctor(opts);
    return await doctorCli(opts, run.path);
  } finally {
    for (const proc of processes) await stopChild(proc.child).catch(() => undefined);
    await lab.destroy();
  }
}

/** `hoptrace doctor` in local mode through its command line, with `path` as PATH meanwhile. */
async function doctorCli(
  o: LocalDoctorOptions,
  path: string,
): Promise<DoctorResult & { exit: number }> {
  const argv = [
    ...Object.entries(o.netns).flatMap(([role, file]) => ['--netns', `${role}=${file}`]),
    ...['--tunnel-range', o.tunnelRange, '--client', o.client ?? '', '--dst', o.dst ?? ''],
    ...['--known-netns', o.knownNetns ?? '', '--json'],
  ];
  const saved = process.env['PATH'];
  process.env['PATH'] = path;
  try {
    let json = '';
    const exit = await runDoctor(argv, (line) => (json += line));
    return { ...(JSON.parse(json) as DoctorResult), exit };
  } finally {
    process.env['PATH'] = saved;
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
    const r = await doctorLab('preserve', {
      extra: async (lab) => {
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
      },
    });
    const e = of(r, 'return-route', 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(e[0]?.detail, /still points at 10\.244\.1\.99, a pod address that no namespace holds/);
    t.match(e[0]?.subject, /10\.90\.0\.0\/24 via 10\.244\.1\.99 dev up0 onlink/);
  });

  void t.test('a return route to the live VPN pod is a warning (pod addresses move)', async (t) => {
    const r = await doctorLab('preserve', {
      extra: async (lab) => {
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
      },
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
    const r = await doctorLab('preserve', {
      extra: (lab) => nftLoad(lab, NS.vpnNode, NFT_CNI(false)),
    });
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
      const r = await doctorLab('preserve', {
        extra: (lab) => nftLoad(lab, NS.vpnNode, NFT_CNI(true)),
      });
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
      t.match(
        vpn?.subject,
        /^nat rules read: iptables \d+, iptables-legacy 0, nftables 0; IPVS: not in this kernel \(no \/proc\/net\/ip_vs\)$/,
      );
    },
  );

  void t.test('iptables-legacy: a masquerade only the legacy backend holds is found', async (t) => {
    const r = await doctorLab('preserve', {
      extra: async (lab) => {
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
      },
    });
    const e = of(r, 'masquerade', 'error').filter((f) => f.namespace.startsWith('vpn-node'));
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(e[0]?.subject, /^\(legacy\) -A POSTROUTING -s 10\.90\.0\.0\/24 -o up0 -j MASQUERADE$/);
    t.match(e[0]?.detail, /reached legacy POSTROUTING\)/);
  });

  const addDenied = async (lab: Netns): Promise<void> => {
    await lab.ip(NS.client, 'addr', 'add', `${DENIED}/24`, 'dev', 'vx0');
  };
  /** The denied source added, and the backend's node rejecting it with this ICMP error. */
  const rejectedAtNode =
    (icmp: string) =>
    async (lab: Netns): Promise<void> => {
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
        icmp,
      );
    };

  void t.test('denied source: a drop at the policy point is policy', async (t) => {
    const r = await doctorLab('preserve', {
      denied: true,
      extra: async (lab) => {
        await addDenied(lab);
        await lab.iptables(NS.backendNode, '-I', 'FORWARD', '-s', DENIED, '-j', 'DROP');
      },
    });
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'ok', JSON.stringify(d));
    t.match(d?.detail, /refused by policy: the SYN \(ISN \d+\) arrived at node/);
  });

  void t.test('denied source: ICMP admin-prohibited is policy', async (t) => {
    const r = await doctorLab('preserve', {
      denied: true,
      extra: rejectedAtNode('icmp-admin-prohibited'),
    });
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'ok', JSON.stringify(d));
    t.match(d?.detail, /refused by policy: ICMP/);
  });

  void t.test('denied source: never arriving is a missing route, not policy', async (t) => {
    const r = await doctorLab('preserve', {
      denied: true,
      extra: async (lab) => {
        await addDenied(lab);
        // The VPN node has no usable route for this source (policy routing into a blackhole).
        await lab.ip(NS.vpnNode, 'rule', 'add', 'from', DENIED, 'blackhole');
      },
    });
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'error', JSON.stringify(d));
    t.match(d?.detail, /never reached the backend's node: it failed for lack of a route/);
  });

  void t.test(
    'denied source: ICMP host unreachable from the node is a missing route',
    async (t) => {
      // The backend's node answers the SYN that reached it with host unreachable (3/1): a route
      // problem, not policy — and the finding says the SYN got to the node.
      const r = await doctorLab('preserve', {
        denied: true,
        extra: rejectedAtNode('icmp-host-unreachable'),
      });
      const d = of(r, 'denied-source')[0];
      t.equal(d?.severity, 'error', JSON.stringify(d));
      t.match(
        d?.detail,
        /reached the backend's node \S+ and an ICMP error said its destination is unreachable \(no route\), not prohibited: it failed for lack of a route/,
      );
      t.match(
        d?.detail,
        /ICMP type 3 code 1 \(host unreachable\) from [\d.]+; the SYN \(ISN \d+\) arrived at node/,
      );
      t.notMatch(d?.detail, /refused by policy|never reached/);
    },
  );

  void t.test('denied source: a RST from the backend pod itself is not policy', async (t) => {
    // Nothing listens on this port in the backend pod: its kernel answers the SYN with a RST.
    // Policy let the source through to the pod, so the test must not say "refused by policy".
    const r = await doctorLab('preserve', {
      denied: true,
      deniedPort: ADDR.backendPort + 1,
      extra: addDenied,
    });
    const d = of(r, 'denied-source')[0];
    t.equal(d?.severity, 'error', JSON.stringify(d));
    t.match(
      d?.detail,
      /was answered: the SYN \(ISN \d+\) reached the backend pod and the pod answered it with a RST/,
    );
    t.notMatch(d?.detail, /refused by policy/);
  });

  // --- IPv6: the dual-stack preserve lab, the request to the backend pod's IPv6 address -------

  /** `preserve` with IPv6 on every link (lab/ipv6-plan.ts); the doctor checks fd00:10:90::/64. */
  const preserve6 = (returnRoute = true): Scenario => ({
    ...scenarioNamed('preserve'),
    name: returnRoute ? 'preserve-ipv6' : 'no-return-ipv6',
    ipv6: true,
    returnRoute,
    target: { ip: ADDR6.backendPod, port: ADDR.backendPort },
  });
  const onVpnNode = (r: DoctorResult, severity: string) =>
    of(r, 'masquerade', severity).filter((f) => f.namespace.startsWith('vpn-node '));
  /** ip6tables (nf_tables) `-t nat ARGS` on the VPN node. */
  const ip6nat = (lab: Netns, ...args: string[]) => lab.ip6tables(NS.vpnNode, '-t', 'nat', ...args);
  const MASQ6 = ['-s', ADDR6.tunnelCidr, '-o', 'up0', '-j', 'MASQUERADE'];

  void t.test('IPv6: a correct dual-stack path has no error', async (t) => {
    const r = await doctorLab(preserve6());
    t.equal(r.tunnelRange, 'fd00:10:90::/64');
    t.equal(r.summary.errors, 0, JSON.stringify(r.findings, null, 1));
    const route = of(r, 'return-route');
    t.same(
      route.map((f) => f.severity),
      ['ok'],
    );
    t.match(route[0]?.subject, /^fd00:10:90::\/64 via fd00:192:168:50::1 dev up0/);
    t.match(route[0]?.detail, /VPN node's address fd00:192:168:50::1 \(stable\)/);
    const masq = of(r, 'masquerade');
    t.same(
      masq.map((f) => `${f.severity} ${f.subject}`),
      [
        'ok nat rules read: ip6tables 0, ip6tables-legacy 0, nftables 0; IPVS: not in this kernel (no /proc/net/ip_vs)',
        'ok nat rules read: ip6tables 0, ip6tables-legacy 0, nftables 0; IPVS: not in this kernel (no /proc/net/ip_vs)',
      ],
      'the VPN pod and the VPN node read with ip6tables, both backends',
    );
    t.match(
      masq[1]?.detail,
      /no MASQUERADE\/SNAT rule applies to sources in fd00:10:90::\/64 leaving by up0/,
    );
    const rp = of(r, 'rp-filter');
    t.same(
      rp.map((f) => f.severity),
      ['warning', 'warning'],
    );
    t.match(rp[0]?.detail, /Linux has no reverse path filter sysctl for IPv6/);
  });

  void t.test('IPv6: no return route for the tunnel range is an error', async (t) => {
    const r = await doctorLab(preserve6(false));
    const e = of(r, 'return-route', 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.match(
      e[0]?.detail,
      /has no route for fd00:10:90::\/64: replies to fd00:10:90::42 follow the default route via fd00:192:168:50::fe, which is not the VPN path$/,
    );
    t.match(e[0]?.fix, /^ip route replace fd00:10:90::\/64 via/);
  });

  void t.test('IPv6: ip6tables masquerading the tunnel range is an error', async (t) => {
    const r = await doctorLab(preserve6(), {
      extra: (lab) => ip6nat(lab, '-A', 'POSTROUTING', ...MASQ6),
    });
    const e = onVpnNode(r, 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.equal(e[0]?.subject, '-A POSTROUTING -s fd00:10:90::/64 -o up0 -j MASQUERADE');
    t.match(e[0]?.detail, /\(reached POSTROUTING\) masquerades every packet from fd00:10:90::\/64/);
    t.same(
      of(r, 'masquerade', 'ok').map((f) => f.namespace.split(' ')[0]),
      ['vpn'],
    );
  });

  void t.test(
    'IPv6: ip6tables excluding the cluster CIDR before the masquerade is ok',
    async (t) => {
      const r = await doctorLab(preserve6(), {
        extra: async (lab) => {
          await ip6nat(lab, '-A', 'POSTROUTING', '-d', ADDR6.clusterCidr, '-j', 'RETURN');
          await ip6nat(lab, '-A', 'POSTROUTING', ...MASQ6);
        },
      });
      const ok = of(r, 'masquerade', 'ok').filter((f) => f.namespace.startsWith('vpn-node '));
      t.equal(ok.length, 1, JSON.stringify(r.findings, null, 1));
      t.equal(
        ok[0]?.subject,
        'nat rules read: ip6tables 2, ip6tables-legacy 0, nftables 0; IPVS: not in this kernel (no /proc/net/ip_vs)',
      );
      t.same(of(r, 'masquerade', 'error'), []);
    },
  );

  void t.test('IPv6: a masquerade only ip6tables-legacy holds is found', async (t) => {
    const r = await doctorLab(preserve6(), {
      extra: async (lab) => {
        await lab.exec(NS.vpnNode, 'ip6tables-legacy', [
          '-w',
          '-t',
          'nat',
          '-A',
          'POSTROUTING',
          ...MASQ6,
        ]);
      },
    });
    const e = onVpnNode(r, 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.equal(e[0]?.subject, '(legacy) -A POSTROUTING -s fd00:10:90::/64 -o up0 -j MASQUERADE');
    t.match(e[0]?.detail, /reached legacy POSTROUTING\)/);
  });

  void t.test('IPv6: native nft table ip6 masquerading the tunnel range is an error', async (t) => {
    const r = await doctorLab(preserve6(), {
      extra: (lab) =>
        lab.nft(
          NS.vpnNode,
          `table ip6 cni6 {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip6 saddr ${ADDR6.tunnelCidr} oifname "up0" masquerade
  }
}
`,
        ),
    });
    const e = onVpnNode(r, 'error');
    t.equal(e.length, 1, JSON.stringify(r.findings, null, 1));
    t.equal(e[0]?.subject, 'ip6 cni6 post: ip6 saddr fd00:10:90::/64 meta oifname up0 masquerade');
    t.match(
      e[0]?.detail,
      /reached nftables postrouting → ip6 cni6 post\) masquerades every packet/,
    );
  });

  /** An inet table (both families) masquerading the tunnel range, and an IPv4-only ip table. */
  const NFT_INET6 = (exclude: boolean): string => `
table ip v4only {
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    masquerade
  }
}
table inet cni {
  chain post {
    type nat hook postrouting priority 110; policy accept;
    ${exclude ? `ip6 daddr ${ADDR6.clusterCidr} return` : ''}
    ip saddr ${ADDR.tunnelCidr} masquerade
    ip6 saddr ${ADDR6.tunnelCidr} oifname "up0" counter masquerade
  }
}
`;

  void t.test('IPv6: an inet table masquerading ip6 saddr is an error', async (t) => {
    const r = await doctorLab(preserve6(), {
      extra: (lab) => lab.nft(NS.vpnNode, NFT_INET6(false)),
    });
    const e = onVpnNode(r, 'error');
    t.equal(e.length, 1, 'the ip table and the inet ip saddr rule do not count');
    t.equal(e[0]?.subject, 'inet cni post: ip6 saddr fd00:10:90::/64 meta oifname up0 masquerade');
  });

  void t.test(
    'IPv6: the inet table excluding the cluster CIDR is ok, the ip table never counts',
    async (t) => {
      const r = await doctorLab(preserve6(), {
        extra: (lab) => lab.nft(NS.vpnNode, NFT_INET6(true)),
      });
      t.same(of(r, 'masquerade', 'error'), [], JSON.stringify(r.findings, null, 1));
      t.same(of(r, 'masquerade', 'warning'), []);
      const ok = of(r, 'masquerade', 'ok').filter((f) => f.namespace.startsWith('vpn-node '));
      t.equal(
        ok[0]?.subject,
        'nat rules read: ip6tables 0, ip6tables-legacy 0, nftables 3; IPVS: not in this kernel (no /proc/net/ip_vs)',
      );
    },
  );

  /** A directory for PATH: links to `tools` (from this PATH) and executable `scripts`. */
  const toolDir = async (
    tools: string[],
    scripts: Record<string, string> = {},
  ): Promise<string> => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-path-'));
    for (const tool of tools) {
      const found = (await runCommand('sh', ['-c', `command -v ${tool}`])).stdout.trim();
      symlinkSync(found, join(dir, tool));
    }
    for (const [name, body] of Object.entries(scripts)) {
      writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(dir, name), 0o755);
    }
    return dir;
  };

  void t.test('IPv6: ip6tables-save missing is an unread nat table, exit 4', async (t) => {
    // Everything doctor runs for IPv6 (sh and cat read /proc/net/ip_vs) but ip6tables-save and
    // ip6tables-legacy-save.
    const dir = await toolDir(['nsenter', 'ip', 'nft', 'sh', 'cat']);
    try {
      const r = await doctorLab(preserve6(), { path: dir });
      t.equal(r.exit, EXIT.findings);
      const reads = of(r, 'read');
      t.same(
        reads.map((f) => `${f.severity} ${f.namespace.split(' ')[0] ?? ''}`),
        ['error vpn', 'error vpn-node', 'warning backend-node'],
        JSON.stringify(reads, null, 1),
      );
      t.match(
        reads[0]?.detail,
        /^could not read nat \(not checked here: masquerade\): DOCTOR_READ_FAILED: nat table: ip6tables-save -t nat: .*No such file/,
      );
      t.same(of(r, 'masquerade'), [], 'no masquerade finding, ok or not, without the rules');
      t.equal(of(r, 'return-route', 'ok').length, 1, 'the routes were read: that check runs');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void t.test('IPv6: ip6tables-save failing is an unread nat table, exit 4', async (t) => {
    const dir = await toolDir([], {
      'ip6tables-save':
        'echo "ip6tables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Invalid argument" >&2; exit 1',
    });
    try {
      const r = await doctorLab(preserve6(), { path: `${dir}:${process.env['PATH'] ?? ''}` });
      t.equal(r.exit, EXIT.findings);
      const read = of(r, 'read', 'error').filter((f) => f.namespace.startsWith('vpn-node '));
      t.match(read[0]?.detail, /could not read nat .*Could not fetch rule set generation id/);
      t.same(onVpnNode(r, 'ok'), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void t.test('no namespace of this test is left', async (t) => {
    const left = (await listNamespaces()).filter((n) => prefixes.some((p) => n.startsWith(p)));
    t.same(left, []);
  });
}

/**
 * `hoptrace doctor`: from the facts agents (or the local mode) read in the namespaces on the path
 * to findings — the checks that separate a working preserved path from a lucky one (the seed):
 * rp_filter, the backend node's return route for the tunnel range and where it points, masquerade
 * rules that do not exclude the tunnel range, and the denied-source test. The tunnel range is IPv4
 * or IPv6; the facts must have been read for its family (NamespaceFacts.family). Pure: no I/O, no
 * clock.
 */
import { familyOf, inCidr, parseCidr, podCidrAround, type Family } from '../../common/cidr';
import { FACT_PARTS, type FactPart, type NamespaceFacts, type RouteEntry } from '../../common/wire';
import { LEGACY_PREFIX } from './iptables-save';
import { findTunnelMasquerade, MASQUERADE_HITS, notWalkedText } from './nat';
import { NFT_ENTRY } from './nft';
import { ipvsText } from './ipvs';
import { effectiveRpFilter } from './sysctl';
import { STABLE_NEXT_HOP } from '../attribute/hints';

export type Severity = 'error' | 'warning' | 'ok';

/** One result of one check, with what to change. */
export interface Finding {
  severity: Severity;
  check: 'rp-filter' | 'return-route' | 'masquerade' | 'denied-source' | 'read';
  node: string;
  /** Role name and namespace file, e.g. `backend-node (/run/netns/x)`. */
  namespace: string;
  /** The interface, route or rule the finding is about. */
  subject: string;
  detail: string;
  fix: string;
}

/** The outcome of the denied-source test (core/doctor/denied.ts classifies it). */
export interface DeniedOutcome {
  source: string;
  target: string;
  refusedBy:
    'policy-reset' | 'policy-icmp' | 'policy-drop' | 'no-route' | 'allowed' | 'inconclusive';
  node: string;
  /** Whether the client's SYN was captured at the backend's node. */
  reachedNode: boolean;
  detail: string;
}

/** Everything the checks need. Role names: `vpn`, `vpn-node`, `backend-node` (others are read only for addresses). */
export interface DoctorInput {
  facts: NamespaceFacts[];
  /** IPv4 or IPv6; its family is the family of every check. */
  tunnelRange: string;
  /** The client's tunnel address (default: the first host of the tunnel range + 1). */
  client: string;
  /** The request's destination (backend pod, Service or NodePort address), when known. */
  dst?: string | undefined;
  /** Addresses held by some namespace the agents know (pods that exist). */
  liveAddresses: string[];
  /** Node name → its addresses. */
  nodeAddresses: Record<string, string[]>;
  /** Pod CIDRs; default: the /16 (IPv6: /48) around every known pod address. */
  podCidrs?: string[] | undefined;
  denied?: DeniedOutcome | undefined;
}

/** The report `hoptrace doctor` prints (and `--json` emits). */
export interface DoctorResult {
  tunnelRange: string;
  client: string;
  findings: Finding[];
  summary: { errors: number; warnings: number; ok: number };
}

const where = (f: NamespaceFacts): string => `${f.name} (${f.netns || f.target || '?'})`;

/** The parts read for one address family: all but the addresses; rp_filter for IPv4 only. */
const FAMILY_PARTS: Record<Family, FactPart[]> = {
  4: ['rp_filter', 'routes', 'nat', 'nft'],
  6: ['routes', 'nat', 'nft'],
};

/** The family of the checks: the tunnel range's (callers validate it; IPv4 if it does not parse). */
const familyOfInput = (input: DoctorInput): Family => familyOf(input.tunnelRange) ?? 4;

/**
 * The parts of a namespace's facts that were not read for `family`. A report with an error but no
 * list (an older agent) counts as nothing read: an empty part is never taken for "nothing there".
 * Facts read for the other family (an older agent asked about IPv6 reads IPv4) leave every part
 * of `family` unread.
 */
export function unreadParts(f: NamespaceFacts, family: Family): Set<FactPart> {
  const listed = Array.isArray(f.unread) ? f.unread : [];
  if (f.errorCode !== '' && listed.length === 0) return new Set(FACT_PARTS);
  const out = new Set(f.family === family ? listed : [...listed, ...FAMILY_PARTS[family]]);
  // Read in part (the collector left some of it out): judged on none of it, as if not read.
  for (const l of f.leftOut ?? []) out.add(l.part);
  return out;
}

type Check = 'masquerade' | 'rp-filter' | 'return-route';

/** What each check reads for each family, in the words the read finding uses. */
const CHECK_NEEDS: Record<Family, Record<Check, FactPart[]>> = {
  // iptables (both backends) and native nftables: a masquerade in either is a masquerade.
  4: { masquerade: ['nat', 'nft'], 'rp-filter': ['rp_filter'], 'return-route': ['routes'] },
  // Linux has no IPv6 rp_filter: that check reads nothing and says so (rpFilter6Finding).
  6: { masquerade: ['nat', 'nft'], 'rp-filter': [], 'return-route': ['routes'] },
};

/** A check cannot run on a namespace when a part it reads was not read. */
const blocked = (check: Check, family: Family, unread: Set<FactPart> | undefined): boolean =>
  CHECK_NEEDS[family][check].some((p) => unread?.has(p) ?? false);

/** The checks a role runs on its namespace (doctor's path order). */
const ROLE_CHECKS: Record<string, Check[]> = {
  vpn: ['masquerade'],
  'vpn-node': ['masquerade', 'rp-filter'],
  'backend-node': ['return-route', 'rp-filter'],
};

/** Why parts were not read: the agent's message, or facts of the other family. */
function unreadReason(f: NamespaceFacts, family: Family): string {
  const own = f.message || f.errorCode;
  if (f.family === family) return own;
  const other = `the agent read IPv${f.family} facts, not IPv${family} (an agent older than IPv6 doctor support): upgrade it`;
  return own === '' ? other : `${other}; ${own}`;
}

/**
 * A namespace that could not be read in full: an error finding naming what was not read and the
 * checks that therefore did not run there (they say nothing, rather than "ok" about nothing).
 */
function readFinding(f: NamespaceFacts, unread: Set<FactPart>, family: Family): Finding {
  const skipped = (ROLE_CHECKS[f.name] ?? []).filter((c) => blocked(c, family, unread));
  const leftOut = f.leftOut ?? [];
  const inPart = FACT_PARTS.filter((p) => leftOut.some((l) => l.part === p));
  const parts = FACT_PARTS.filter((p) => unread.has(p) && !inPart.includes(p));
  const notRun =
    skipped.length === 0
      ? 'no check of this namespace depends on it'
      : `not checked here: ${skipped.join(', ')}`;
  const clauses: string[] = [];
  if (parts.length > 0)
    clauses.push(
      `could not read ${parts.length === FACT_PARTS.length ? 'this namespace' : parts.join(', ')} (${notRun}): ${unreadReason(f, family)}`,
    );
  if (inPart.length > 0) {
    const details = [...new Set(leftOut.map((l) => l.detail))].join('; ');
    clauses.push(
      `read ${inPart.join(', ')} in part only${parts.length > 0 ? '' : ` (${notRun})`}: the agent's report held more than the collector keeps of one namespace (${details})`,
    );
  }
  const fix =
    parts.length > 0
      ? `run the agent (or doctor) as root with iproute2, ${family === 6 ? 'ip6tables' : 'iptables'}, nft and nsenter; check that the target exists`
      : `compare with what \`hoptrace doctor\` reads on ${f.node || 'that node'} itself: no namespace holds that much, so check the agent there`;
  return {
    severity: skipped.length === 0 ? 'warning' : 'error',
    check: 'read',
    node: f.node,
    namespace: where(f),
    subject: f.target || '(node namespace)',
    detail: clauses.join('; '),
    fix,
  };
}

function rpFilterFindings(f: NamespaceFacts): Finding[] {
  // The interfaces the path uses here: where the lookups for the client and the backend lead.
  const ifaces = [
    ...new Set(f.lookups.map((l) => l.route?.dev ?? '').filter((d) => d !== '' && d !== 'lo')),
  ];
  // sysctl's key for an interface: a '.' in its name is written '/' (eth0.100 → eth0/100).
  const key = (iface: string): string => `net.ipv4.conf.${iface.replace(/\./g, '/')}.rp_filter`;
  const valueOf = (iface: string): string =>
    String(f.rpFilter.find((v) => v.iface === iface)?.value ?? 'not read');
  const all = valueOf('all');
  const out: Finding[] = [];
  const loose: string[] = [];
  const unknown: string[] = [];
  for (const iface of ifaces) {
    const own = valueOf(iface);
    const eff = effectiveRpFilter(f.rpFilter, iface);
    if (eff === null) unknown.push(iface);
    else if (eff === 1) {
      out.push({
        severity: 'warning',
        check: 'rp-filter',
        node: f.node,
        namespace: where(f),
        subject: iface,
        detail: `strict reverse path filtering on ${iface} (net.ipv4.conf.all.rp_filter=${all}, ${key(iface)}=${own}; the kernel applies the maximum): on a preserved path, a packet from the tunnel range is dropped whenever the route back to it leaves by another interface`,
        fix: `sysctl -w ${key(iface)}=2${all === '1' ? ' (enough even with all=1: the kernel applies max(all, iface))' : ''}`,
      });
    } else loose.push(`${iface}=${eff}`);
  }
  // A value that was not read is never taken for 0: the check says it could not judge.
  if (unknown.length > 0) {
    out.push({
      severity: 'warning',
      check: 'rp-filter',
      node: f.node,
      namespace: where(f),
      subject: unknown.join(', '),
      detail: `not checked: reverse path filtering on ${unknown.join(', ')} is unknown — ${unknown.map((i) => `${key(i)}=${valueOf(i)}`).join(', ')}, net.ipv4.conf.all.rp_filter=${all} (the kernel applies max(all, iface); sysctl's output held no value for what says 'not read')`,
      fix: `read it by hand: sysctl net.ipv4.conf.all.rp_filter ${unknown.map(key).join(' ')} (1 is strict: set 2)`,
    });
  }
  if (out.length === 0 && loose.length > 0) {
    out.push({
      severity: 'ok',
      check: 'rp-filter',
      node: f.node,
      namespace: where(f),
      subject: loose.join(', '),
      detail: 'reverse path filtering is loose (2) or off (0) on the path interfaces',
      fix: '',
    });
  }
  return out;
}

/**
 * Linux has no rp_filter for IPv6 (net.ipv4.conf.*.rp_filter applies to IPv4 only): nothing of the
 * kernel's to read. A firewall can still filter by reverse path, and doctor does not read that.
 */
function rpFilter6Finding(f: NamespaceFacts): Finding {
  return {
    severity: 'warning',
    check: 'rp-filter',
    node: f.node,
    namespace: where(f),
    subject: '(IPv6: no rp_filter in Linux)',
    detail:
      'not checked: Linux has no reverse path filter sysctl for IPv6 (rp_filter is net.ipv4 only), so the kernel does not drop a packet from the tunnel range for arriving on another interface than the route back; a firewall rule can (ip6tables -m rpfilter, nft fib saddr . iif oif missing drop, firewalld IPv6_rpfilter), and doctor does not read those',
    fix: 'if such a rule is installed, make the route back to the tunnel range leave by the interface the requests arrive on, or exempt the tunnel range from it',
  };
}

function isDefault(r: RouteEntry): boolean {
  return r.dst === 'default' || r.dst === '0.0.0.0/0' || r.dst === '::/0';
}

/** The most specific route of the table covering `ip`. */
function coveringRoute(routes: readonly RouteEntry[], ip: string): RouteEntry | null {
  let best: RouteEntry | null = null;
  let bestBits = -1;
  for (const r of routes) {
    const bits = isDefault(r) ? 0 : (parseCidr(r.dst)?.bits ?? -1);
    if (bits < 0 || (!isDefault(r) && !inCidr(ip, r.dst))) continue;
    if (bits > bestBits) {
      best = r;
      bestBits = bits;
    }
  }
  return best;
}

function routeText(r: RouteEntry): string {
  return [
    r.type,
    r.dst,
    r.gateway === '' ? '' : `via ${r.gateway}`,
    r.dev === '' ? '' : `dev ${r.dev}`,
    ...r.flags,
  ]
    .filter((s) => s !== '')
    .join(' ');
}

function returnRouteFindings(input: DoctorInput, f: NamespaceFacts): Finding[] {
  const base = { check: 'return-route' as const, node: f.node, namespace: where(f) };
  const range = input.tunnelRange;
  const stable = `ip route replace ${range} via <a stable next hop>: ${STABLE_NEXT_HOP}`;
  const lookup = f.lookups.find((l) => l.to === input.client);
  const table = coveringRoute(f.routes, input.client);
  if (lookup === undefined && table === null) return [];
  const used = lookup?.route ?? null;
  if (used === null || ['unreachable', 'blackhole', 'prohibit', 'throw'].includes(used.type)) {
    return [
      {
        ...base,
        severity: 'error',
        subject: used === null ? `route get ${input.client}` : routeText(used),
        detail: `node ${f.node} has no route back to ${input.client} (${lookup?.error || used?.type || 'no route'}): replies to the tunnel range die here`,
        fix: stable,
      },
    ];
  }
  const entry = table ?? used;
  const vpn = input.facts.filter((x) => x.name === 'vpn').flatMap((x) => x.addresses);
  const vpnNodeNames = new Set(input.facts.filter((x) => x.name === 'vpn-node').map((x) => x.node));
  const vpnNodeAddrs = [
    ...input.facts.filter((x) => x.name === 'vpn-node').flatMap((x) => x.addresses),
    ...[...vpnNodeNames].flatMap((n) => input.nodeAddresses[n] ?? []),
  ];
  const allNodeAddrs = Object.values(input.nodeAddresses).flat();
  const gw = used.gateway;
  const subject = routeText(entry);
  if (table === null || isDefault(table)) {
    const viaVpn = gw !== '' && (vpn.includes(gw) || vpnNodeAddrs.includes(gw));
    if (!viaVpn) {
      return [
        {
          ...base,
          severity: 'error',
          subject,
          detail: `node ${f.node} has no route for ${range}: replies to ${input.client} follow the default route${gw === '' ? '' : ` via ${gw}`}, which is not the VPN path`,
          fix: stable,
        },
      ];
    }
  }
  if (gw === '') {
    return [
      {
        ...base,
        severity: 'ok',
        subject,
        detail: `replies to ${range} leave directly by ${used.dev}`,
        fix: '',
      },
    ];
  }
  if (vpnNodeAddrs.includes(gw)) {
    return [
      {
        ...base,
        severity: 'ok',
        subject,
        detail: `the return route points at the VPN node's address ${gw} (stable)`,
        fix: '',
      },
    ];
  }
  const podCidrs = input.podCidrs ?? [
    ...new Set(
      input.liveAddresses
        .filter((a) => !allNodeAddrs.includes(a))
        .map(podCidrAround)
        .filter((c): c is string => c !== null),
    ),
  ];
  const isPodRange = podCidrs.some((c) => inCidr(gw, c));
  const live = input.liveAddresses.includes(gw) || vpn.includes(gw);
  if (!live && isPodRange) {
    return [
      {
        ...base,
        severity: 'error',
        subject,
        detail: `the return route on node ${f.node} still points at ${gw}, a pod address that no namespace holds any more (a deleted pod's address): replies to ${range} go nowhere`,
        fix: `${stable}; a pod address moves with every reschedule`,
      },
    ];
  }
  if (vpn.includes(gw) || (live && isPodRange && !allNodeAddrs.includes(gw))) {
    return [
      {
        ...base,
        severity: 'warning',
        subject,
        detail: `the return route points at ${gw}, a pod address${vpn.includes(gw) ? " (the VPN pod's)" : ''}: it breaks when the pod is rescheduled and gets a new address`,
        fix: stable,
      },
    ];
  }
  if (allNodeAddrs.includes(gw)) {
    return [
      {
        ...base,
        severity: 'warning',
        subject,
        detail: `the return route points at ${gw}, a node address but not the VPN node's: replies reach the VPN only if that node forwards ${range} on`,
        fix: stable,
      },
    ];
  }
  return [
    {
      ...base,
      severity: 'error',
      subject,
      detail: `the return route points at ${gw}, which is neither the VPN node nor a VPN pod address (nor any address an agent reports)`,
      fix: stable,
    },
  ];
}

/**
 * Which backend holds the nat rules read: `nat rules read: iptables 4, iptables-legacy 0,
 * nftables 3` (for IPv6: ip6tables, ip6tables-legacy).
 */
function natRulesText(f: NamespaceFacts, family: Family): string {
  let iptables = 0;
  let legacy = 0;
  let nft = 0;
  for (const r of f.natRules) {
    if (r.chain === NFT_ENTRY) continue;
    if (r.chain.startsWith(LEGACY_PREFIX)) legacy++;
    else if (r.chain.includes(' '))
      nft++; // native nft chains are `FAMILY TABLE CHAIN`
    else iptables++;
  }
  const tool = family === 6 ? 'ip6tables' : 'iptables';
  return (
    `nat rules read: ${tool} ${iptables}, ${tool}-legacy ${legacy}, nftables ${nft}; ` +
    ipvsText(f.ipvsState, f.ipvs)
  );
}

function masqueradeFindings(input: DoctorInput, f: NamespaceFacts): Finding[] {
  const lookup = input.dst === undefined ? undefined : f.lookups.find((l) => l.to === input.dst);
  const egress = lookup?.route?.dev;
  const walk = findTunnelMasquerade(f.natRules, f.natChains, {
    tunnelRange: input.tunnelRange,
    dst: input.dst,
    egressIface: egress === '' ? undefined : egress,
  });
  const fix =
    f.name === 'vpn'
      ? `remove the VPN software's own masquerade for ${input.tunnelRange} (a PostUp/up script, OpenVPN/WireGuard container entrypoint), or keep it and document SNAT mode`
      : `exclude ${input.tunnelRange} from masquerade in the CNI's own configuration (ip-masq-agent nonMasqueradeCIDRs, Calico IPPool natOutgoing, Cilium nonMasqueradeCIDRs / native-routing CIDR), not by hand: the agent rewrites its chains on restart`;
  const base = { check: 'masquerade' as const, node: f.node, namespace: where(f) };
  const leaving = `from ${input.tunnelRange}${egress === undefined ? '' : ` leaving by ${egress}`}`;
  const notWalked = notWalkedText(walk);
  // An ok speaks of every rule: only when the walk reached all it had to.
  if (walk.hits.length === 0 && notWalked === null) {
    return [
      {
        ...base,
        severity: 'ok',
        subject: natRulesText(f, familyOfInput(input)),
        detail: `no MASQUERADE/SNAT rule applies to sources in ${input.tunnelRange}${egress === undefined ? '' : ` leaving by ${egress}`}`,
        fix: '',
      },
    ];
  }
  const out: Finding[] = walk.hits.map((h) => {
    const more =
      h.moreConditions === 0 ? '' : ` and ${h.moreConditions} more conditions (not listed)`;
    return {
      ...base,
      severity: h.conditions.length === 0 ? ('error' as const) : ('warning' as const),
      subject: h.rule.text,
      detail: `${h.rule.text} (reached ${h.path.join(' → ')}) ${h.conditions.length === 0 ? 'masquerades every packet' : `masquerades packets when ${h.conditions.join(' and ')}${more}`} ${leaving}: the backend sees ${f.name === 'vpn' ? "the VPN pod's" : "this node's"} address instead of the client's`,
      fix,
    };
  });
  const left = walk.hitsLeftOut;
  if (left.count > 0) {
    out.push({
      ...base,
      severity: left.unconditional > 0 ? 'error' : 'warning',
      subject: `${left.count} more MASQUERADE/SNAT rules`,
      detail: `${left.count} more MASQUERADE/SNAT rules (${left.unconditional} of them for every packet) masquerade packets ${leaving}: not listed, the first ${MASQUERADE_HITS} are`,
      fix,
    });
  }
  if (notWalked !== null) {
    out.push({
      ...base,
      severity: 'warning',
      subject: natRulesText(f, familyOfInput(input)),
      detail: `not checked in full: ${notWalked}, so a MASQUERADE/SNAT rule there for sources in ${input.tunnelRange} is not ruled out`,
      fix: `read the rules past that point by hand (${familyOfInput(input) === 6 ? 'ip6tables-save' : 'iptables-save'} -t nat, nft list ruleset) on ${f.node || 'that node'}`,
    });
  }
  return out;
}

function deniedFinding(d: DeniedOutcome): Finding {
  const base = {
    check: 'denied-source' as const,
    node: d.node,
    namespace: '',
    subject: `${d.source} → ${d.target}`,
  };
  switch (d.refusedBy) {
    case 'policy-reset':
    case 'policy-icmp':
    case 'policy-drop':
      return { ...base, severity: 'ok', detail: `refused by policy: ${d.detail}`, fix: '' };
    case 'no-route':
      return {
        ...base,
        severity: 'error',
        detail: `the request from the denied source ${d.reachedNode ? `reached the backend's node ${d.node} and an ICMP error said its destination is unreachable (no route), not prohibited` : "never reached the backend's node"}: it failed for lack of a route, not by policy, so the test proves nothing about the policy (${d.detail})`,
        fix: 'fix the path first (return route, masquerade), then repeat the denied-source test',
      };
    case 'allowed':
      return {
        ...base,
        severity: 'error',
        detail: `the request from a source policy should refuse was answered: ${d.detail}`,
        fix: 'check the NetworkPolicy: it must select the backend and not allow this source (and the source must survive to the backend, or policy sees another address)',
      };
    case 'inconclusive':
      return {
        ...base,
        severity: 'warning',
        detail: d.detail,
        fix: 'repeat with captures at the client and the backend node',
      };
  }
}

/** Runs every check over the facts; findings in path order (VPN pod, VPN node, backend node). */
export function runDoctorChecks(input: DoctorInput): DoctorResult {
  const findings: Finding[] = [];
  const family = familyOfInput(input);
  const unread = new Map(input.facts.map((f) => [f, unreadParts(f, family)]));
  for (const [f, parts] of unread) if (parts.size > 0) findings.push(readFinding(f, parts, family));
  // Only checks whose facts were read: a part not read is reported above, never judged "ok".
  const run: Record<Check, (f: NamespaceFacts) => Finding[]> = {
    masquerade: (f) => masqueradeFindings(input, f),
    'rp-filter': (f) => (family === 6 ? [rpFilter6Finding(f)] : rpFilterFindings(f)),
    'return-route': (f) => returnRouteFindings(input, f),
  };
  // Path order (ROLE_CHECKS' order), and within a namespace its checks in the table's order.
  for (const [role, checks] of Object.entries(ROLE_CHECKS)) {
    for (const f of input.facts) {
      if (f.name !== role) continue;
      for (const c of checks) if (!blocked(c, family, unread.get(f))) findings.push(...run[c](f));
    }
  }
  if (input.denied !== undefined) findings.push(deniedFinding(input.denied));
  const count = (s: Severity): number => findings.filter((x) => x.severity === s).length;
  return {
    tunnelRange: input.tunnelRange,
    client: input.client,
    findings,
    summary: { errors: count('error'), warnings: count('warning'), ok: count('ok') },
  };
}

/** The report as text: one block per finding, errors first within the path order. */
export function renderDoctorText(r: DoctorResult): string {
  const mark: Record<Severity, string> = { error: 'ERROR', warning: 'WARN ', ok: 'ok   ' };
  const lines = [
    `hoptrace doctor — tunnel range ${r.tunnelRange}, client ${r.client}: ${r.summary.errors} error(s), ${r.summary.warnings} warning(s), ${r.summary.ok} ok`,
    '',
  ];
  for (const f of r.findings) {
    lines.push(
      `${mark[f.severity]} ${f.check}  node ${f.node || '?'}${f.namespace === '' ? '' : `  ${f.namespace}`}`,
    );
    lines.push(`      ${f.subject}`);
    lines.push(`      ${f.detail}`);
    if (f.fix !== '') lines.push(`      fix: ${f.fix}`);
  }
  return lines.join('\n') + '\n';
}

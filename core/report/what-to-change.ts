/**
 * "What to change": one section built from the verdict and doctor's findings, following the field
 * guide's three questions in its order — does the backend enforce policy per client, can the
 * cluster route the tunnel range back to a stable gateway, is the workload a forwarder or a proxy —
 * then the concrete steps of preserve mode and the runbook of SNAT mode. Structured, so every form
 * (Markdown here, the HTML view) renders the same content. Pure: doctor's findings and the
 * inventory are passed in; what was not read is said to be unread, never "ok".
 */
import { replyPath } from '../attribute/reply-path';
import { replyPoints } from './reply-points';
import type { Layer } from '../attribute/layer';
import { MASQUERADE_KNOBS, STABLE_NEXT_HOP, exampleTunnelRange } from '../attribute/hints';
import type { DoctorResult, Finding } from '../doctor/checks';
import type { Inventory } from '../../common/inventory';
import { inCidr } from '../../common/cidr';
import type { AnalysisResult } from './analysis-result';
import { identityText } from './identity-text';

/** What doctor contributed to a report: its findings, or why there are none. */
export type DoctorEvidence =
  | { status: 'given'; source: string; result: DoctorResult }
  | { status: 'not-run'; detail: string }
  | { status: 'unreadable'; source: string; detail: string };

/** One thing to do: words, and a command or configuration line to adapt (`<placeholders>`). */
export interface ChangeStep {
  text: string;
  command?: string;
  /** The verdict, a doctor finding, or the field guide's advice for every such path. */
  basis: 'verdict' | 'doctor' | 'guide';
  /** Where each CNI takes the setting (the masquerade step). */
  knobs?: readonly { cni: string; knob: string }[];
  /** Doctor's findings this step is about (errors and warnings). */
  findings?: Finding[];
}

export type QuestionId = 'per-client-policy' | 'return-route' | 'forwarder-or-proxy';

/** One of the guide's three questions and what this capture (and doctor) say about it. */
export interface ChangeQuestion {
  id: QuestionId;
  question: string;
  /** `owner`: only the receiving service's owner can answer. */
  answer: 'yes' | 'no' | 'forwarder' | 'proxy' | 'unknown' | 'owner';
  detail: string;
  findings: Finding[];
}

export interface WhatToChange {
  layer: Layer;
  /** The tunnel range the steps name: doctor's, else the client address's /24 (/64). */
  tunnelRange: string;
  /**
   * Where `tunnelRange` comes from: `doctor` (its --tunnel-range, holding this client) or `assumed`
   * (the client address's /24 or /64: an example, not read from anything).
   */
  tunnelRangeSource: 'doctor' | 'assumed';
  questions: ChangeQuestion[];
  preserve: { applies: string; steps: ChangeStep[] };
  snat: { applies: string; runbook: string; steps: ChangeStep[] };
  doctor: { status: DoctorEvidence['status']; text: string };
}

const REWRITES: readonly Layer[] = ['vpn-pod', 'cni-masquerade', 'kube-proxy'];

/** The nodes of the path as the inventory knows them: the VPN pod's and the backend's. */
function pathNodes(
  r: AnalysisResult,
  inv: Inventory | undefined,
): { vpnNode?: string; vpnNodeAddress?: string; backendNode?: string } {
  const pods = Object.values(inv?.pods ?? {});
  const v = r.verdict;
  const vpnNode =
    (v.layer === 'cni-masquerade' ? v.node : undefined) ??
    pods.find((p) => p.role === 'vpn')?.node ??
    r.points.find((p) => p.name === 'egress')?.node ??
    null;
  const last = r.points[r.points.length - 1];
  const backendIp = last?.observed?.dst;
  const backendNode =
    (v.layer === 'kube-proxy' ? v.node : undefined) ?? pods.find((p) => p.ip === backendIp)?.node;
  const out: { vpnNode?: string; vpnNodeAddress?: string; backendNode?: string } = {};
  if (vpnNode !== null) {
    out.vpnNode = vpnNode;
    const addr = inv?.nodes[vpnNode]?.[0];
    if (addr !== undefined) out.vpnNodeAddress = addr;
  }
  if (backendNode !== undefined) out.backendNode = backendNode;
  return out;
}

const problems = (d: DoctorEvidence | undefined, checks: Finding['check'][]): Finding[] =>
  d?.status === 'given'
    ? d.result.findings.filter((f) => f.severity !== 'ok' && checks.includes(f.check))
    : [];

const oks = (d: DoctorEvidence | undefined, check: Finding['check']): Finding[] =>
  d?.status === 'given'
    ? d.result.findings.filter((f) => f.severity === 'ok' && f.check === check)
    : [];

/** Doctor's state in one sentence that never claims more than was read. */
function doctorText(d: DoctorEvidence | undefined, clientSrc: string | undefined): string {
  if (d === undefined || d.status === 'not-run')
    return (
      (d?.detail ?? 'doctor was not run') +
      ': nothing about return routes, rp_filter or masquerade rules was read for this report'
    );
  if (d.status === 'unreadable')
    return `could not read ${d.source}: ${d.detail}; no doctor findings are used`;
  const s = d.result.summary;
  const unread = d.result.findings.filter((f) => f.check === 'read');
  const parts = [
    `doctor findings from ${d.source} (tunnel range ${d.result.tunnelRange}, client ${d.result.client}): ` +
      `${s.errors} error(s), ${s.warnings} warning(s), ${s.ok} ok`,
  ];
  if (unread.length > 0)
    parts.push(
      `not read: ${unread.map((f) => `${f.namespace} on ${f.node}`).join('; ')} — the checks there did not run`,
    );
  if (clientSrc !== undefined && !inCidr(clientSrc, d.result.tunnelRange))
    parts.push(
      `this request's client ${clientSrc} is outside that tunnel range: the findings are about another path and are not used here`,
    );
  return parts.join('; ');
}

/**
 * Where a reply that did not come back stopped, when it came back past the backend's node: seen at
 * `from`, a point before the last that saw the request, and not at `to` (reply-path.ts).
 */
function replyStop(r: AnalysisResult): { from: string; to: string } | null {
  const pts = replyPoints(r.points);
  const rp = replyPath(pts);
  const lastSeen = pts.filter((p) => p.seen).pop();
  if (rp?.kind !== 'missing' || rp.lastSeenAt === null || rp.lastSeenAt === lastSeen?.name)
    return null;
  return { from: rp.lastSeenAt, to: rp.missingAt };
}

function questions(
  r: AnalysisResult,
  d: DoctorEvidence | undefined,
  range: string,
): ChangeQuestion[] {
  const v = r.verdict;
  const identity = identityText(r);
  const seen = v.after?.src ?? r.points[r.points.length - 1]?.observed?.src;
  const today = REWRITES.includes(v.layer)
    ? `Today the backend sees ${seen ?? 'a rewritten address'} for every client of this path.`
    : v.layer === 'preserved' || v.layer === 'no-return'
      ? `Today the backend sees the client's own address ${v.client?.src ?? ''}.`
      : v.layer === 'proxy'
        ? `Today the backend sees the proxy's address ${seen ?? ''}.`
        : '';
  const q1: ChangeQuestion = {
    id: 'per-client-policy',
    question: 'Does the backend enforce policy per client?',
    answer: 'owner',
    detail:
      `Only the receiving service's owner can answer. If quotas, bans, authorization or audit records use ` +
      `the source address, the address has to survive every hop: preserve mode. If not, SNAT is the cheaper ` +
      `design. ${today} Identity headers: ${identity.text}.`,
    findings: [],
  };
  const routeFindings = problems(d, ['return-route', 'rp-filter']);
  const routeOk = oks(d, 'return-route');
  const routeUnread = problems(d, ['read']);
  let answer: ChangeQuestion['answer'] = 'unknown';
  let detail: string;
  const stop = v.layer === 'no-return' ? replyStop(r) : null;
  if (stop !== null) {
    answer = 'no';
    detail =
      `the request reached the backend with the client address and the reply came back as far as ` +
      `${stop.from}, never to ${stop.to}: the route from the backend toward ${stop.from} works, and ` +
      `what lies between ${stop.from} and ${stop.to} dropped the reply (when those are the VPN pod's ` +
      `egress and its tunnel: the pod's route to ${range} over the tunnel, the addresses the VPN accepts ` +
      'for this client, or rp_filter there).';
  } else if (v.layer === 'no-return') {
    answer = 'no';
    detail = `the request reached the backend with the client address and no reply came back: there is no working route back to ${range} (or rp_filter dropped it).`;
  } else if (v.layer === 'preserved') {
    answer = 'yes';
    detail =
      'the reply came back with the client address preserved: a route exists now. Whether it survives ' +
      "a reschedule of the VPN pod is what doctor's return-route check and `hoptrace repro` tell.";
  } else if (v.layer === 'proxy') {
    detail = "not needed for this path: the proxy's connection is answered to the proxy.";
  } else {
    detail = REWRITES.includes(v.layer)
      ? `the source was rewritten, so the replies went to the rewritten address: this capture did not test a route back to ${range}.`
      : `the capture did not get far enough to tell (${v.layer}).`;
  }
  if (routeFindings.some((f) => f.check === 'return-route')) {
    answer = 'no';
    detail += ' Doctor: the return route is missing or not stable (below).';
  } else if (routeOk.length > 0 && answer === 'unknown') {
    answer = 'yes';
    detail += ` Doctor: ${routeOk.map((f) => f.detail).join('; ')}.`;
  } else if (d?.status !== 'given') detail += ' Doctor was not run: no route was read.';
  if (routeUnread.length > 0) detail += ' Doctor could not read every namespace (below).';
  const q2: ChangeQuestion = {
    id: 'return-route',
    question: `Can the cluster route ${range} back to a stable gateway?`,
    answer,
    detail,
    findings: [...routeFindings, ...routeUnread],
  };
  const last = r.points[r.points.length - 1];
  const q3: ChangeQuestion =
    v.layer === 'proxy'
      ? {
          id: 'forwarder-or-proxy',
          question: 'Is the workload a forwarder or a proxy?',
          answer: 'proxy',
          detail:
            'a proxy: the backend saw a new connection carrying the same request. The address was never going ' +
            'to survive; identity has to come from the proxy (SNAT mode below).',
          findings: [],
        }
      : {
          id: 'forwarder-or-proxy',
          question: 'Is the workload a forwarder or a proxy?',
          answer: last?.seenRequest === true && !last.proxied ? 'forwarder' : 'unknown',
          detail:
            last?.seenRequest === true && !last.proxied
              ? `a forwarder: ${last.name} saw the same connection (${last.matchedBy.join(', ')}).`
              : `not known: ${last?.name ?? 'the last point'} did not see the request.`,
          findings: [],
        };
  return [q1, q2, q3];
}

/** The owner of a masquerade rule doctor found, by its chain (`-A IP-MASQ-AGENT …`). */
function masqueradeOwner(rule: string): string | null {
  const owners: [RegExp, string][] = [
    [/IP-MASQ-AGENT|ip-masq/i, 'ip-masq-agent'],
    [/cali-/, 'Calico'],
    [/CILIUM/i, 'Cilium'],
    [/FLANNEL/i, 'Flannel'],
    [/KUBE-POSTROUTING|KUBE-MARK-MASQ/, 'kube-proxy'],
  ];
  return owners.find(([re]) => re.test(rule))?.[1] ?? null;
}

function firstStep(r: AnalysisResult, d: DoctorEvidence | undefined, range: string): ChangeStep[] {
  const v = r.verdict;
  const masq = problems(d, ['masquerade']);
  switch (v.layer) {
    case 'vpn-pod':
      return [
        {
          text: `Remove the VPN pod's own masquerade for ${range}: its iptables/nft MASQUERADE or SNAT rule (a wg-quick PostUp, the container's entrypoint) or the VPN software's NAT option.`,
          command: 'iptables -t nat -S POSTROUTING   # inside the VPN pod: find the rule',
          basis: 'verdict',
          findings: masq.filter((f) => f.namespace.startsWith('vpn ')),
        },
      ];
    case 'kube-proxy':
      return [
        {
          text:
            `kube-proxy masqueraded the Service hop${v.node === undefined ? '' : ` on node ${v.node}`}: target the backend pod IP ` +
            'directly (no Service hop), or use `internalTrafficPolicy`/`externalTrafficPolicy: Local` where it applies, ' +
            "or make kube-proxy count the VPN pod's traffic as local (`detectLocalMode`, step below).",
          basis: 'verdict',
        },
      ];
    case 'dropped':
      return [
        {
          text: `The request never reached the backend: check NetworkPolicy and FORWARD drops between the last point that saw it and the backend first. NetworkPolicy is access control, not routing.`,
          command: 'kubectl get networkpolicy -A; iptables -S FORWARD; conntrack -S',
          basis: 'verdict',
        },
      ];
    case 'unknown':
      return [
        {
          text: `The capture could not name the layer (${v.reason ?? 'see the verdict'}): capture at the missing point or complete the inventory first; the steps below are what preserve mode needs on any path.`,
          basis: 'verdict',
        },
      ];
    case 'no-return': {
      const stop = replyStop(r);
      if (stop === null) return [];
      const client = v.client?.src ?? '<client address>';
      return [
        {
          text:
            `The reply came back as far as ${stop.from} and was dropped before ${stop.to}. When those are ` +
            `the VPN pod's egress and its tunnel, look inside the VPN pod: its route to ${client} must ` +
            'leave by the tunnel, the VPN must accept that address for this client (WireGuard AllowedIPs ' +
            'of the peer, OpenVPN iroute), and strict rp_filter there may drop it.',
          command: `ip route get ${client}   # inside the VPN pod: the tunnel interface, not eth0`,
          basis: 'verdict',
        },
      ];
    }
    case 'preserved':
    case 'cni-masquerade':
    case 'proxy':
      return [];
  }
}

function preserveSteps(
  r: AnalysisResult,
  d: DoctorEvidence | undefined,
  inv: Inventory | undefined,
  range: string,
): ChangeStep[] {
  const v = r.verdict;
  const nodes = pathNodes(r, inv);
  const masq = problems(d, ['masquerade']).filter((f) => !f.namespace.startsWith('vpn '));
  const owners = [
    ...new Set(masq.map((f) => masqueradeOwner(f.subject)).filter((o) => o !== null)),
  ];
  const steps = firstStep(r, d, range);
  const nextHop = nodes.vpnNodeAddress ?? '<next hop>';
  steps.push({
    text:
      `On ${nodes.backendNode === undefined ? 'the nodes that host the backends' : `node ${nodes.backendNode} (and every node that hosts a backend)`}, ` +
      `route ${range} back via a stable next hop: ${STABLE_NEXT_HOP}.` +
      (nodes.vpnNode === undefined
        ? ''
        : ` On ${nodes.vpnNode} the route on to the VPN pod must follow whichever pod is active: an address the active pod holds and announces, not today's pod IP.`),
    command: `ip route replace ${range} via ${nextHop}${nodes.vpnNodeAddress === undefined ? '' : `   # ${nodes.vpnNode ?? ''}'s address`}`,
    // The verdict shows a missing route back only when the reply did not get past the backend's node.
    basis: v.layer === 'no-return' && replyStop(r) === null ? 'verdict' : 'guide',
    findings: problems(d, ['return-route']),
  });
  steps.push({
    text:
      'Set loose reverse path filtering (2) on the interfaces the path uses, on the VPN node and the backend nodes: ' +
      'strict mode (1) drops a preserved VPN flow whose route back leaves by another interface. (IPv4 only: Linux has no IPv6 rp_filter.)',
    command: 'sysctl -w net.ipv4.conf.<iface>.rp_filter=2',
    basis: problems(d, ['rp-filter']).length > 0 ? 'doctor' : 'guide',
    findings: problems(d, ['rp-filter']),
  });
  steps.push({
    text:
      `Exclude ${range} from masquerade in the CNI's own configuration, not by hand in iptables (the agent rewrites its chains on restart)` +
      (v.layer === 'cni-masquerade' ? ': this is the layer that rewrote the source here' : '') +
      (owners.length > 0 ? `; the rule doctor found is ${owners.join(' and ')}'s` : '') +
      '.',
    basis: v.layer === 'cni-masquerade' ? 'verdict' : masq.length > 0 ? 'doctor' : 'guide',
    knobs: MASQUERADE_KNOBS.filter((k) => k.cni !== 'kube-proxy'),
    findings: masq,
  });
  steps.push({
    text: 'Keep kube-proxy from masquerading the Service hop for the tunnel range: it masquerades traffic it does not count as local.',
    basis: v.layer === 'kube-proxy' ? 'verdict' : 'guide',
    knobs: MASQUERADE_KNOBS.filter((k) => k.cni === 'kube-proxy'),
  });
  steps.push({
    text:
      'Verify with a fresh connection, then delete the VPN pod and repeat while it reschedules (`hoptrace repro`), ' +
      'and send one request from a source that must be denied (`hoptrace doctor --denied-source`): the refusal must come from policy, not from a missing route.',
    basis: 'guide',
  });
  return steps;
}

function snatPart(r: AnalysisResult): WhatToChange['snat'] {
  const v = r.verdict;
  const last = r.points[r.points.length - 1];
  const seen = v.after?.src ?? last?.observed?.src ?? "the VPN pod's or node's address";
  const backend =
    last?.observed === null || last === undefined
      ? 'the backend'
      : `${last.observed.dst}:${last.observed.dport}`;
  const applies = REWRITES.includes(v.layer)
    ? `This path is in SNAT mode now: the backend sees ${seen}.`
    : v.layer === 'proxy'
      ? `A proxy terminated the connection: the backend sees the proxy's address ${seen}, whatever the network does.`
      : 'Choose SNAT instead when the backend does not need per-client addresses: it removes the return route you would otherwise maintain.';
  const runbook =
    `${backend} sees ${REWRITES.includes(v.layer) || v.layer === 'proxy' ? seen : "one address (the VPN pod's or its node's)"} for every VPN client; ` +
    'no return route is needed and its logs agree with each other. What it costs: the backend cannot tell two ' +
    'VPN clients apart at the network layer, so quotas, bans, rate limits and audit records keyed on the source ' +
    'address apply to all of them together. Per-client identity comes from: <a session token the application ' +
    'checks | a signed header | a PROXY protocol line written by a proxy we control> — trusted only because that ' +
    'proxy sits in the path and the client cannot set it (the proxy drops or overwrites what the client sent). ' +
    'The source address in its logs is not the client.';
  const identity = identityText(r);
  const steps: ChangeStep[] = [
    {
      text: "Write the runbook paragraph above into the service's runbook, with the identity source filled in: the next engineer will assume the address in the log is the client's.",
      basis: 'guide',
    },
    {
      text:
        'Carry the identity another way: a session token, a signed header, or a PROXY protocol line from a proxy you control; ' +
        `trust it only where the client cannot set it. In this capture: ${identity.text}.`,
      basis: r.identityHeaders === undefined ? 'guide' : 'verdict',
    },
  ];
  return { applies, runbook, steps };
}

/** The "What to change" section of a report, from the verdict and doctor's findings (if any). */
export function whatToChange(
  result: AnalysisResult,
  doctor?: DoctorEvidence,
  inventory?: Inventory,
): WhatToChange {
  const v = result.verdict;
  const clientSrc = v.client?.src;
  // Doctor's findings answer for its own tunnel range: a request from outside it is another path's,
  // and they are not used for it (doctorText says so).
  const d =
    doctor?.status === 'given' &&
    clientSrc !== undefined &&
    !inCidr(clientSrc, doctor.result.tunnelRange)
      ? undefined
      : doctor;
  const range = d?.status === 'given' ? d.result.tunnelRange : exampleTunnelRange(clientSrc);
  const preserve =
    v.layer === 'proxy'
      ? {
          applies:
            'Preserve mode does not apply: a proxy opens its own connection, so the client address never reaches the backend.',
          steps: [],
        }
      : {
          applies:
            v.layer === 'preserved'
              ? 'The address survives today; these are what keep it surviving.'
              : 'If the backend needs the client address, in this order:',
          steps: preserveSteps(result, d, inventory, range),
        };
  return {
    layer: v.layer,
    tunnelRange: range,
    tunnelRangeSource: d?.status === 'given' ? 'doctor' : 'assumed',
    questions: questions(result, d, range),
    preserve,
    snat: snatPart(result),
    doctor: { status: doctor?.status ?? 'not-run', text: doctorText(doctor, v.client?.src) },
  };
}

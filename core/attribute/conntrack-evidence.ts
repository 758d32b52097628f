/**
 * Conntrack evidence: the entries of the request's flow in the namespaces that can NAT it (the VPN
 * pod, the VPN node, the backend's node). nf_conntrack records a translation in the namespace that
 * did it, so a SNAT entry there names the layer independently of the packets. It confirms the
 * packet verdict or is reported as disagreeing; it never replaces the packet evidence.
 */
import type { ConntrackEntry, ConntrackTuple } from '../../common/wire';
import type { Layer, Verdict } from './attribute';
import type { Endpoint } from '../correlate/correlate';
import { tupleText } from '../../common/endpoint';
import { countText } from '../../common/counters';
import { REPLY_LIMITS } from '../../common/report-limits';

/** The namespace role whose SNAT a layer means. */
const LAYER_ROLE: Partial<Record<Layer, string>> = {
  'vpn-pod': 'vpn',
  'cni-masquerade': 'vpn-node',
  'kube-proxy': 'backend-node',
};

const ROLE_LAYER: Record<string, Layer> = {
  vpn: 'vpn-pod',
  'vpn-node': 'cni-masquerade',
  'backend-node': 'kube-proxy',
};

/** What the conntrack entries say about the verdict. */
export interface ConntrackEvidence {
  status: 'confirms' | 'disagrees' | 'no-entries' | 'consistent';
  detail: string;
  entries: ConntrackEntry[];
}

/** The tuples to look for: every endpoint the points observed (request direction). */
export function flowTuples(verdict: Pick<Verdict, 'observed' | 'client'>): ConntrackTuple[] {
  const eps: Endpoint[] = [
    ...(verdict.client === null ? [] : [verdict.client]),
    ...Object.values(verdict.observed).filter((e): e is Endpoint => e !== null),
  ];
  const seen = new Map<string, ConntrackTuple>();
  for (const e of eps) {
    const t = { src: e.src, dst: e.dst, sport: e.sport, dport: e.dport };
    seen.set(`${t.src}:${t.sport}>${t.dst}:${t.dport}`, t);
  }
  return [...seen.values()];
}

/** One line per entry for evidence text: `vpn-node on vpn-node: orig … reply … [SNAT]`. */
export function entryText(e: ConntrackEntry): string {
  const nat = [e.snat ? 'SNAT' : '', e.dnat ? 'DNAT' : ''].filter((s) => s !== '').join('+');
  return `${e.name}${e.node === '' ? '' : ` on ${e.node}`}: orig ${tupleText(e.orig)}, reply ${tupleText(e.reply)}${nat === '' ? '' : ` [${nat}]`}`;
}

/**
 * Judges the entries against the packet verdict. Pure and total. `leftOut`: entries the agents
 * listed that the collector did not keep (common/report-limits.ts): the detail says they were
 * not judged.
 */
export function judgeConntrack(
  verdict: Verdict,
  entries: readonly ConntrackEntry[],
  leftOut = 0,
): ConntrackEvidence {
  const ev = judgeKept(verdict, entries);
  if (leftOut <= 0) return ev;
  return {
    ...ev,
    detail: `${ev.detail}; ${countText(leftOut)} more entries the agents listed were left out (at most ${REPLY_LIMITS.entries} kept of one agent's reply) and not judged`,
  };
}

function judgeKept(verdict: Verdict, entries: readonly ConntrackEntry[]): ConntrackEvidence {
  const list = [...entries];
  if (list.length === 0) {
    return {
      status: 'no-entries',
      detail:
        'no conntrack entry of the flow in the namespaces read: nothing there loaded conntrack (the kernel tracks in a namespace only once a NAT or conntrack rule needs it, so no entry also means no NAT), or the entry expired',
      entries: list,
    };
  }
  const snatRoles = [...new Set(list.filter((e) => e.snat).map((e) => e.name))];
  const expected = LAYER_ROLE[verdict.layer];
  if (expected !== undefined) {
    // 'node': VPN and backend on one node, whose namespace is both (only the VPN pod is apart).
    const own = list.filter(
      (e) => e.snat && (e.name === expected || (e.name === 'node' && expected !== 'vpn')),
    );
    if (own.length > 0) {
      return {
        status: 'confirms',
        detail: `conntrack in ${expected} holds the source NAT: ${own.map(entryText).join('; ')}`,
        entries: list,
      };
    }
    const others = snatRoles.map((r) => `${r} (${ROLE_LAYER[r] ?? 'unknown layer'})`);
    return {
      status: 'disagrees',
      detail:
        others.length === 0
          ? `packets say ${verdict.layer}, but no conntrack entry in ${expected} shows source NAT (the entry may have expired, or ${expected} was not read)`
          : `packets say ${verdict.layer}, but conntrack shows the source NAT in ${others.join(', ')}`,
      entries: list,
    };
  }
  if (snatRoles.length > 0 && (verdict.layer === 'preserved' || verdict.layer === 'no-return')) {
    return {
      status: 'disagrees',
      detail: `packets say ${verdict.layer}, but conntrack shows source NAT in ${snatRoles.join(', ')}`,
      entries: list,
    };
  }
  return {
    status: 'consistent',
    detail:
      snatRoles.length === 0
        ? 'no conntrack entry of the flow shows source NAT'
        : `source NAT in ${snatRoles.join(', ')}`,
    entries: list,
  };
}

/** The verdict with the conntrack evidence attached (`conntrack`, and `confirmedBy` when it confirms). */
export function withConntrackEvidence(
  verdict: Verdict,
  entries: readonly ConntrackEntry[],
  leftOut = 0,
): Verdict {
  const ev = judgeConntrack(verdict, entries, leftOut);
  const out: Verdict = { ...verdict, conntrack: ev };
  if (ev.status === 'confirms') {
    const role = LAYER_ROLE[verdict.layer];
    out.confirmedBy = ev.entries
      .filter((e) => e.snat && (e.name === role || (e.name === 'node' && role !== 'vpn')))
      .map((e) => `conntrack ${entryText(e)}`);
  }
  if (ev.status === 'disagrees') {
    out.reason = `${verdict.reason === undefined ? '' : `${verdict.reason}; `}conntrack disagrees: ${ev.detail}`;
  }
  return out;
}

/**
 * Conntrack evidence: the entries of the request's flow in the namespaces that can NAT it (the VPN
 * pod, the VPN node, the backend's node). nf_conntrack records a translation in the namespace that
 * did it, so a SNAT entry there names the layer independently of the packets. It confirms the
 * packet verdict or is reported as disagreeing (or as incomplete, when entries were left out and
 * the ones kept do not decide); it never replaces the packet evidence.
 */
import type { ConntrackEntry, ConntrackTuple } from '../../common/wire';
import type { ConntrackStatus, Layer, Verdict } from './attribute';
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
  status: ConntrackStatus;
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
 * listed that the collector did not keep (REPLY_LIMITS.entries of one reply). On such a partial
 * list a judgement stands only when no left-out entry could change it — when it rests on an entry
 * seen, not on one missing:
 * - `confirms` rests on a SNAT entry seen in the namespace the layer names; an entry more cannot
 *   take it back (on a whole list it confirms too, whatever SNAT shows elsewhere);
 * - `disagrees` of `preserved`/`no-return` rests on a SNAT entry seen anywhere: the packets say no
 *   layer rewrote the source, and one did;
 * - `disagrees` of a rewriting layer rests on an absence — no SNAT entry where the layer says —
 *   and the missing one may be among those left out (kept, it would confirm), so a SNAT seen
 *   elsewhere is not yet a disagreement: `incomplete`;
 * - `consistent` and `no-entries` speak of every entry (none contradicts, none is there):
 *   `incomplete`.
 * A judgement that stands still names the entries it did not judge. `unread`: reads that failed (an
 * agent's error for a namespace, a request without an answer, no tuple to look for) — the entries
 * there were not seen, so the same rule holds for them.
 */
export function judgeConntrack(
  verdict: Verdict,
  entries: readonly ConntrackEntry[],
  leftOut = 0,
  unread: readonly string[] = [],
): ConntrackEvidence {
  const { seen, ...ev } = judgeKept(verdict, entries);
  const cut =
    leftOut > 0
      ? `${countText(leftOut)} more entries the agents listed were left out (at most ${REPLY_LIMITS.entries} kept of one agent's reply)`
      : null;
  const missed = unread.length > 0 ? unreadText(unread) : null;
  if (cut === null && missed === null) return ev;
  if (seen)
    return {
      ...ev,
      detail: [
        ev.detail,
        ...(cut === null ? [] : [`${cut} and not judged`]),
        ...(missed === null ? [] : [`${missed}: not judged`]),
      ].join('; '),
    };
  const why = [cut, missed].filter((x): x is string => x !== null).join('; ');
  const where = cut === null ? 'there' : missed === null ? 'among them' : 'among what was not read';
  return {
    status: 'incomplete',
    detail:
      ev.entries.length === 0
        ? `no entry kept: ${why} and not judged`
        : `not judged: ${why}, and the entry that decides may be ${where}; of the ${countText(ev.entries.length)} kept: ${ev.detail}`,
    entries: ev.entries,
  };
}

/** What the agents could not read (their errors, or the collector's: no reply), in one clause. */
function unreadText(unread: readonly string[]): string {
  const shown = unread.slice(0, 4).join('; ');
  const more = unread.length > 4 ? `; ${countText(unread.length - 4)} more` : '';
  return `${unread.length === 1 ? 'one read' : `${countText(unread.length)} reads`} of the flow's entries failed (${shown}${more})`;
}

/** The judgement of the entries kept; `seen`: it rests on an entry seen, not on one missing. */
interface KeptJudgement extends ConntrackEvidence {
  seen: boolean;
}

function judgeKept(verdict: Verdict, entries: readonly ConntrackEntry[]): KeptJudgement {
  const list = [...entries];
  if (list.length === 0) {
    return {
      status: 'no-entries',
      seen: false,
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
        seen: true,
        detail: `conntrack in ${expected} holds the source NAT: ${own.map(entryText).join('; ')}`,
        entries: list,
      };
    }
    const others = snatRoles.map((r) => `${r} (${ROLE_LAYER[r] ?? 'unknown layer'})`);
    return {
      status: 'disagrees',
      seen: false,
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
      seen: true,
      detail: `packets say ${verdict.layer}, but conntrack shows source NAT in ${snatRoles.join(', ')}`,
      entries: list,
    };
  }
  // A layer conntrack does not name (proxy, dropped, unknown) is consistent whatever the entries:
  // nothing unseen can change it. `preserved`/`no-return` without a SNAT entry rests on an absence.
  return {
    status: 'consistent',
    seen: verdict.layer !== 'preserved' && verdict.layer !== 'no-return',
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
  unread: readonly string[] = [],
): Verdict {
  const ev = judgeConntrack(verdict, entries, leftOut, unread);
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

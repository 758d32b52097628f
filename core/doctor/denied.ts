/**
 * The seed's denied-source test, classified: one request from a source policy should refuse, with
 * captures at the client and at the backend's node (the policy point: NetworkPolicy is enforced on
 * the backend's node). A refusal by policy shows as an ICMP "administratively prohibited" (type 3
 * code 9, 10 or 13, RFC 1812 §5.2.7.1; the type and code are read from the decoder's keys) or a RST
 * that the backend pod never sent back at the client, or as the SYN arriving at the node and going
 * no further; a missing route shows as the SYN never arriving at the node, or as ICMP network/host
 * unreachable. A SYN that reached the backend pod was not refused by policy, whatever came back
 * (a RST then is the pod's: nothing listens on the port). What cannot be told apart — an ICMP
 * error whose code is unknown or says neither, a RST with the pod not captured — is inconclusive.
 * The SYN is followed by its ISN, which NAT leaves alone.
 */
import type { PacketEvent } from '../../common/event';
import type { DeniedOutcome } from './checks';
import { hostPort } from '../../common/endpoint';

const SYN = 0x02;
const RST = 0x04;
const ACK = 0x10;
const PROHIBITED = new Set([9, 10, 13]);

/** Captured events of the test, by point. `backend` (the backend pod) is optional. */
export interface DeniedCaptures {
  source: string;
  target: { ip: string; port: number };
  node: string;
  client: PacketEvent[];
  backendNode: PacketEvent[];
  backend?: PacketEvent[] | undefined;
  /** Whether the client got an HTTP answer. */
  answered: boolean;
}

const flags = (e: PacketEvent): number => e.keys.tcpFlags ?? 0;
const isSyn = (e: PacketEvent): boolean => (flags(e) & (SYN | ACK)) === SYN;

/**
 * What an ICMP error quoting the SYN says, by its type and code (the decoder's keys; an ICMP
 * error's own type/code are `keys`, the packet it quotes is `related`). Policy: RFC 1812 §5.2.7.1's
 * administratively prohibited codes (3/9, 3/10, 3/13) and ICMPv6's (1/1, and 1/5 source address
 * failed ingress/egress policy, 1/6 reject route, RFC 4443 §3.1). No route: network or host
 * unreachable (3/0, 3/1, 3/6, 3/7, 3/11, 3/12; ICMPv6 1/0 no route, 1/3 address unreachable).
 * Anything else — port unreachable (what iptables' REJECT sends unless told otherwise, whether a
 * policy rule or kube-proxy's for a Service without endpoints), fragmentation needed, a code not
 * captured — says neither.
 */
function icmpMeaning(
  e: PacketEvent,
): { kind: 'policy' | 'no-route' | 'other'; text: string } | null {
  const type = e.keys.icmpType;
  const code = e.keys.icmpCode;
  if (type === undefined || code === undefined) return null;
  const v6 = e.inner?.proto === 'icmpv6';
  if (!v6 && type === 3) {
    if (PROHIBITED.has(code))
      return { kind: 'policy', text: `type 3 code ${code} (administratively prohibited)` };
    const noRoute = V4_NO_ROUTE.get(code);
    if (noRoute !== undefined)
      return { kind: 'no-route', text: `type 3 code ${code} (${noRoute})` };
    return {
      kind: 'other',
      text: `type 3 code ${code}${code === 3 ? ' (port unreachable)' : code === 4 ? ' (fragmentation needed)' : ''}`,
    };
  }
  if (v6 && type === 1) {
    if (code === 1 || code === 5 || code === 6)
      return { kind: 'policy', text: `ICMPv6 type 1 code ${code} (${V6_POLICY.get(code) ?? ''})` };
    if (code === 0 || code === 3)
      return {
        kind: 'no-route',
        text: `ICMPv6 type 1 code ${code} (${code === 0 ? 'no route to destination' : 'address unreachable'})`,
      };
  }
  return { kind: 'other', text: `${v6 ? 'ICMPv6 ' : ''}type ${type} code ${code}` };
}

const V4_NO_ROUTE = new Map([
  [0, 'network unreachable'],
  [1, 'host unreachable'],
  [6, 'destination network unknown'],
  [7, 'destination host unknown'],
  [11, 'network unreachable for the type of service'],
  [12, 'host unreachable for the type of service'],
]);
const V6_POLICY = new Map([
  [1, 'administratively prohibited'],
  [5, 'source address failed ingress/egress policy'],
  [6, 'reject route to destination'],
]);

/** Classifies the test; never throws. */
export function classifyDenied(c: DeniedCaptures): DeniedOutcome {
  const target = hostPort(c.target.ip, c.target.port);
  const base = { source: c.source, target, node: c.node };
  const syn = c.client.find(
    (e) => isSyn(e) && e.inner?.src === c.source && e.inner.dport === c.target.port,
  );
  if (syn === undefined) {
    return {
      ...base,
      reachedNode: false,
      refusedBy: 'inconclusive',
      detail: `no SYN from ${c.source} to port ${c.target.port} was captured at the client`,
    };
  }
  const isn = syn.keys.tcpSeq;
  const sameSyn = (e: PacketEvent): boolean => isSyn(e) && e.keys.tcpSeq === isn;
  const atNode = c.backendNode.filter(sameSyn);
  const seen = { ...base, reachedNode: atNode.length > 0 };
  const atPod = c.backend?.filter(sameSyn) ?? [];
  const isRst = (e: PacketEvent): boolean =>
    (flags(e) & RST) !== 0 && e.inner?.dst === c.source && e.inner.sport === c.target.port;
  const rst = c.client.find(isRst);
  const icmp = c.client.find(
    (e) =>
      (e.inner?.proto === 'icmp' || e.inner?.proto === 'icmpv6') &&
      e.related?.src === c.source &&
      e.related.dport === c.target.port,
  );
  const arrived = atNode.length > 0 ? `the SYN (ISN ${isn}) arrived at node ${c.node}` : '';
  const rstFrom = (e: PacketEvent): string =>
    e.inner?.sport === undefined ? (e.inner?.src ?? '?') : hostPort(e.inner.src, e.inner.sport);
  if (c.answered) {
    return { ...seen, refusedBy: 'allowed', detail: `${target} answered ${c.source}` };
  }
  if (atPod.length > 0) {
    // The SYN got into the backend pod: policy (enforced before the pod) let it through, whatever
    // came back. A RST then is the pod's own answer — nothing listens on the port — not a refusal.
    if (rst !== undefined) {
      const podRst = c.backend?.some(isRst) === true;
      return {
        ...seen,
        refusedBy: 'allowed',
        detail: `the SYN (ISN ${isn}) reached the backend pod and ${podRst ? 'the pod answered it with a RST' : `a RST from ${rstFrom(rst)} came back`}: nothing accepts connections on port ${c.target.port} there, so this is the pod refusing the connection, not a policy refusal — policy let the denied source through to the pod`,
      };
    }
    return {
      ...seen,
      refusedBy: 'inconclusive',
      detail: `${arrived === '' ? `the SYN (ISN ${isn})` : arrived} and reached the backend pod, but no answer came back to the client${icmp === undefined ? '' : ` (an ICMP error from ${icmp.inner?.src ?? '?'} quoted the SYN)`} (a missing return route, not policy)`,
    };
  }
  if (icmp !== undefined) {
    const from = icmp.inner?.src ?? '?';
    const m = icmpMeaning(icmp);
    if (m === null) {
      return {
        ...seen,
        refusedBy: 'inconclusive',
        detail: `an ICMP error from ${from} quoted the SYN, but its type and code were not captured: a refusal by policy and a missing route cannot be told apart`,
      };
    }
    if (m.kind === 'policy') {
      return {
        ...seen,
        refusedBy: 'policy-icmp',
        detail: `ICMP ${m.text} from ${from} quoting the SYN${arrived === '' ? '' : `; ${arrived}`}`,
      };
    }
    if (m.kind === 'no-route') {
      return {
        ...seen,
        refusedBy: 'no-route',
        detail: `ICMP ${m.text} from ${from}${arrived === '' ? '' : `; ${arrived}`}`,
      };
    }
    return {
      ...seen,
      refusedBy: 'inconclusive',
      detail: `ICMP ${m.text} from ${from} quoted the SYN: neither administratively prohibited nor network/host unreachable, so it does not say whether policy refused the request`,
    };
  }
  if (rst !== undefined) {
    if (c.backend === undefined && atNode.length > 0) {
      return {
        ...seen,
        refusedBy: 'inconclusive',
        detail: `a RST from ${rstFrom(rst)} answered the SYN${arrived === '' ? '' : `; ${arrived}`}, but the backend pod was not captured: a policy's reset and the pod's own (nothing listening on port ${c.target.port}) look the same from the client`,
      };
    }
    return {
      ...seen,
      refusedBy: 'policy-reset',
      detail: `a RST from ${rstFrom(rst)} answered the SYN${arrived === '' ? '' : `; ${arrived}`}, and ${c.backend === undefined ? `the SYN never reached the backend's node, so the RST is not the pod's` : 'the backend pod never saw it'}`,
    };
  }
  if (atNode.length === 0) {
    return {
      ...seen,
      refusedBy: 'no-route',
      detail: `the SYN (ISN ${isn ?? '?'}) left the client and was never seen at node ${c.node} (${c.backendNode.length} packets captured there)`,
    };
  }
  return {
    ...seen,
    refusedBy: 'policy-drop',
    detail: `${arrived} (seen ${atNode.length}×, from ${atNode[0]?.inner?.src ?? '?'}) and went no further${c.backend === undefined ? '' : ': the backend pod never saw it'}, the drop at the policy point`,
  };
}

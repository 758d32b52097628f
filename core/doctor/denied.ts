/**
 * The seed's denied-source test, classified: one request from a source policy should refuse, with
 * captures at the client and at the backend's node (the policy point: NetworkPolicy is enforced on
 * the backend's node). A refusal by policy shows as a RST or an ICMP "administratively prohibited"
 * (type 3 code 9, 10 or 13, RFC 1812 §5.2.7.1) back at the client, or as the SYN arriving at the
 * node and going no further; a missing route shows as the SYN never arriving at the node.
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
  /** ICMP type/code per event, when the decoder's keys do not carry it (read from the capture). */
  icmpCode?: (e: PacketEvent) => { type: number; code: number } | null;
}

const flags = (e: PacketEvent): number => e.keys.tcpFlags ?? 0;
const isSyn = (e: PacketEvent): boolean => (flags(e) & (SYN | ACK)) === SYN;

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
      refusedBy: 'inconclusive',
      detail: `no SYN from ${c.source} to port ${c.target.port} was captured at the client`,
    };
  }
  const isn = syn.keys.tcpSeq;
  const sameSyn = (e: PacketEvent): boolean => isSyn(e) && e.keys.tcpSeq === isn;
  const atNode = c.backendNode.filter(sameSyn);
  const atPod = c.backend?.filter(sameSyn) ?? [];
  const rst = c.client.find(
    (e) => (flags(e) & RST) !== 0 && e.inner?.dst === c.source && e.inner.sport === c.target.port,
  );
  const icmp = c.client.find(
    (e) =>
      (e.inner?.proto === 'icmp' || e.inner?.proto === 'icmpv6') &&
      e.related?.src === c.source &&
      e.related.dport === c.target.port,
  );
  const arrived = atNode.length > 0 ? `the SYN (ISN ${isn}) arrived at node ${c.node}` : '';
  if (c.answered) {
    return { ...base, refusedBy: 'allowed', detail: `${target} answered ${c.source}` };
  }
  if (icmp !== undefined) {
    const tc = c.icmpCode?.(icmp) ?? null;
    if (tc === null || (tc.type === 3 && PROHIBITED.has(tc.code))) {
      return {
        ...base,
        refusedBy: 'policy-icmp',
        detail: `ICMP ${tc === null ? 'error' : `type ${tc.type} code ${tc.code} (administratively prohibited)`} from ${icmp.inner?.src ?? '?'} quoting the SYN${arrived === '' ? '' : `; ${arrived}`}`,
      };
    }
    if (tc.type === 3 && (tc.code === 0 || tc.code === 1)) {
      return {
        ...base,
        refusedBy: 'no-route',
        detail: `ICMP ${tc.code === 0 ? 'network' : 'host'} unreachable from ${icmp.inner?.src ?? '?'}`,
      };
    }
  }
  if (rst !== undefined) {
    return {
      ...base,
      refusedBy: 'policy-reset',
      detail: `a RST from ${rst.inner?.sport === undefined ? (rst.inner?.src ?? '?') : hostPort(rst.inner.src, rst.inner.sport)} answered the SYN${arrived === '' ? '' : `; ${arrived}`}`,
    };
  }
  if (atNode.length === 0) {
    return {
      ...base,
      refusedBy: 'no-route',
      detail: `the SYN (ISN ${isn ?? '?'}) left the client and was never seen at node ${c.node} (${c.backendNode.length} packets captured there)`,
    };
  }
  if (c.backend !== undefined && atPod.length > 0) {
    return {
      ...base,
      refusedBy: 'inconclusive',
      detail: `${arrived} and reached the backend pod, but no answer came back to the client (a missing return route, not policy)`,
    };
  }
  return {
    ...base,
    refusedBy: 'policy-drop',
    detail: `${arrived} (seen ${atNode.length}×, from ${atNode[0]?.inner?.src ?? '?'}) and went no further${c.backend === undefined ? '' : ': the backend pod never saw it'}, the drop at the policy point`,
  };
}

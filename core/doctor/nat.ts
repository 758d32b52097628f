/**
 * Which nat-table rules would masquerade a packet from the tunnel range: a walk from POSTROUTING
 * through the chains it jumps to, in rule order, the way netfilter traverses them (the first NAT
 * target ends the table for that packet; RETURN ends a chain, ACCEPT the table). Matches hoptrace
 * cannot decide from addresses alone (marks, ipsets, ports) are kept as conditions, so a rule that
 * only applies to marked packets is a warning, not an error. The same walk serves iptables and
 * ip6tables: the family is the tunnel range's, and an address of the other family never matches.
 */
import { covers, overlaps, parseCidr, parseRange, type IpRange } from '../../common/cidr';
import { LEGACY_ENTRY } from './iptables-save';
import { NFT_ENTRY } from './nft';
import type { NatRule } from '../../common/wire';

/** What the packet is known to look like when it reaches POSTROUTING. */
export interface NatContext {
  /** The tunnel range (IPv4 or IPv6): every source in it must be excluded. */
  tunnelRange: string;
  /** The request's destination, when known (the backend or Service address). */
  dst?: string | undefined;
  /** The interface the request leaves by (from `ip route get <dst>`), when known. */
  egressIface?: string | undefined;
}

/** A rule that masquerades (some) packets from the tunnel range. */
export interface MasqueradeHit {
  rule: NatRule;
  /** Chains from POSTROUTING to the rule. */
  path: string[];
  /** Conditions still needed for it to apply; empty = it applies to every such packet. */
  conditions: string[];
}

type Match = { never: true } | { never: false; conds: string[] };

const NEVER: Match = { never: true };

function ifaceMatches(pattern: string, iface: string): boolean {
  return pattern.endsWith('+') ? iface.startsWith(pattern.slice(0, -1)) : pattern === iface;
}

/** `value`: one CIDR, or a comma list of CIDRs and `a-b` ranges (iptables lists, nft sets). */
function addrMatch(neg: boolean, value: string, known: IpRange | null, what: string): Match {
  const ranges = value.split(',').map(parseRange);
  if (ranges.some((r) => r === null) || known === null)
    return { never: false, conds: [`${neg ? '! ' : ''}${what} ${value}`] };
  const inside = ranges.some((r) => r !== null && covers(r, known));
  const touches = ranges.some((r) => r !== null && overlaps(r, known));
  if (!neg) {
    if (inside) return { never: false, conds: [] };
    return touches ? { never: false, conds: [`${what} ${value}`] } : NEVER;
  }
  if (inside) return NEVER;
  return touches ? { never: false, conds: [`! ${what} ${value}`] } : { never: false, conds: [] };
}

/** Evaluates a rule's matches against the tunnel range; returns the target too. */
function evaluate(rule: NatRule, ctx: NatContext): { match: Match; target: string; goto: boolean } {
  const tunnel = parseCidr(ctx.tunnelRange);
  const dst = ctx.dst === undefined ? null : parseCidr(ctx.dst);
  const conds: string[] = [];
  let target = '';
  let goto = false;
  let neg = false;
  const a = rule.args;
  for (let i = 0; i < a.length; i++) {
    const opt = a[i] ?? '';
    if (opt === '!') {
      neg = true;
      continue;
    }
    const val = a[i + 1] ?? '';
    let m: Match | null = null;
    switch (opt) {
      case '-s':
      case '--source':
        m = addrMatch(neg, val, tunnel, 'source');
        i++;
        break;
      case '-d':
      case '--destination':
        m = addrMatch(neg, val, dst, 'destination');
        i++;
        break;
      case '-o':
      case '--out-interface':
        if (ctx.egressIface === undefined)
          m = { never: false, conds: [`${neg ? '! ' : ''}out ${val}`] };
        else m = ifaceMatches(val, ctx.egressIface) !== neg ? { never: false, conds: [] } : NEVER;
        i++;
        break;
      case '-p':
      case '--protocol': {
        // The request is TCP.
        const tcp = ['tcp', '6', 'all', '0'].includes(val.toLowerCase());
        m = tcp !== neg ? { never: false, conds: [] } : NEVER;
        i++;
        break;
      }
      case '-m':
      case '--match':
        i++;
        break;
      case '-j':
      case '--jump':
      case '-g':
      case '--goto':
        target = val;
        goto = opt === '-g' || opt === '--goto';
        // Everything after the target is the target's own options (--to-source, --random-fully).
        i = a.length;
        break;
      case '--comment':
        i++;
        break;
      case '--never':
        // A native nft match the request cannot meet (the other family's header or nfproto).
        m = NEVER;
        i++;
        break;
      case '--nft':
        // A native nft match the walk cannot decide (core/doctor/nft.ts): a condition as written.
        m = { never: false, conds: [`${neg ? '! ' : ''}${val}`] };
        i++;
        break;
      default: {
        // A module option (--mark, --match-set, --dport, --dst-type …): keep it as a condition.
        const vals: string[] = [];
        while (i + 1 < a.length && !(a[i + 1] ?? '').startsWith('-') && a[i + 1] !== '!')
          vals.push(a[++i] ?? '');
        m = {
          never: false,
          conds: [[neg ? '!' : '', opt, ...vals].filter((s) => s !== '').join(' ')],
        };
      }
    }
    neg = false;
    if (m === null) continue;
    if (m.never) return { match: NEVER, target, goto };
    conds.push(...m.conds);
  }
  return { match: { never: false, conds }, target, goto };
}

/** Every rule that masquerades/SNATs packets from the tunnel range on their way to `ctx.dst`. */
export function findTunnelMasquerade(
  rules: readonly NatRule[],
  chains: readonly string[],
  ctx: NatContext,
): MasqueradeHit[] {
  const hits: MasqueradeHit[] = [];
  const byChain = new Map<string, NatRule[]>();
  for (const r of rules) byChain.set(r.chain, [...(byChain.get(r.chain) ?? []), r]);
  const userChains = new Set(chains);

  // Returns true when every packet entering `chain` (under `conds`) ends the nat table there.
  const walk = (chain: string, conds: string[], path: string[]): boolean => {
    if (path.length > 16 || path.slice(0, -1).includes(chain)) return false;
    // Conditions added by earlier rules of this chain: the packets that were not handled yet.
    const local: string[] = [];
    for (const rule of byChain.get(chain) ?? []) {
      const { match, target, goto } = evaluate(rule, ctx);
      if (match.never) continue;
      const all = [...conds, ...local, ...match.conds];
      const unconditional = match.conds.length === 0;
      const unless = `not (${match.conds.join(' and ')})`;
      if (target === 'MASQUERADE' || target === 'SNAT' || target === 'ACCEPT') {
        if (target !== 'ACCEPT') hits.push({ rule, path, conditions: all });
        if (unconditional) return local.length === 0;
        local.push(unless);
      } else if (target === 'RETURN') {
        if (unconditional) return false;
        local.push(unless);
      } else if (userChains.has(target) || byChain.has(target)) {
        const consumed = walk(target, all, [...path, target]);
        if (unconditional && (consumed || goto)) return consumed && local.length === 0;
        if (consumed) local.push(unless);
      }
      // MARK, LOG, CONNMARK … continue with the next rule.
    }
    return false;
  };
  // Each backend's nat table sees the packet from its own entry: iptables (nf_tables), then
  // iptables-legacy and native nftables when they were read.
  for (const entry of ['POSTROUTING', LEGACY_ENTRY, NFT_ENTRY])
    if (entry === 'POSTROUTING' || byChain.has(entry)) walk(entry, [], [entry]);
  return hits;
}

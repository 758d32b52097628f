/**
 * One nat rule's matches judged against what the doctor knows of the request's packet (its source
 * in the tunnel range, its destination and egress interface when known): never, always, or under
 * conditions it keeps as written (marks, ipsets, ports), and the rule's target. The walk of the
 * chains (nat.ts) asks it once per rule.
 */
import { covers, overlaps, parseRange, type IpRange } from '../../common/cidr';
import { cutText } from '../../common/text-cut';
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

/** A rule's matches judged against what is known of the packet, and its target. */
export interface Evaluated {
  match: Match;
  target: string;
  goto: boolean;
}

/**
 * Evaluates a rule's matches against the tunnel range (`tunnel`) and the destination (`dst`);
 * returns the target too. A condition is cut at MAX_TEXT_CHARS (a rule argument may hold 16,384).
 */
export function evaluate(
  rule: NatRule,
  ctx: NatContext,
  tunnel: IpRange | null,
  dst: IpRange | null,
): Evaluated {
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
    for (const c of m.conds) conds.push(cutText(c));
  }
  return { match: { never: false, conds }, target, goto };
}

/**
 * `nft -j list ruleset` (libnftables JSON, schema 1) → the nat rules that can masquerade, in the
 * form the masquerade walk reads (nat.ts): `-s`/`-d`/`-o`/`-p` matches, `-j TARGET`, and
 * `--nft TEXT` for a match hoptrace cannot decide from addresses (marks, named sets it cannot
 * expand, ports). kube-proxy's nftables mode, Calico and Cilium write native nft rules that
 * `iptables-save` never shows, so the doctor reads both.
 *
 *   {"chain": {"family": "ip", "table": "kube-proxy", "name": "nat-postrouting",
 *              "type": "nat", "hook": "postrouting", "prio": 100}}
 *   {"rule":  {"family": "ip", "table": "kube-proxy", "chain": "masquerading",
 *              "expr": [{"match": {"op": "==", "left": {"&": [{"meta": {"key": "mark"}}, 16384]},
 *                        "right": 0}}, {"return": null}]}}
 *
 * Chains are named `FAMILY TABLE CHAIN` (spaces never occur in iptables chain names). Every
 * postrouting nat base chain is reached from one entry chain, NFT_ENTRY, in priority order: each
 * base chain sees the packet unless an earlier one translated it. An `accept` (or `drop`) ends
 * only its own base chain in nftables; it is read as a return from the chain it is in, which can
 * report a rule that a calling chain's accept would skip but never misses one. One address family
 * at a time, the tunnel range's: for IPv4 the tables of family `ip` and `inet`, for IPv6 `ip6`
 * and `inet`; in an `inet` table the other family's header matches (`ip6 saddr` for IPv4, `ip
 * saddr` for IPv6) and `meta nfproto` of the other family never match. The tables iptables-nft
 * and ip6tables-nft own (`ip nat`, `ip6 nat`, …) are read through iptables-save / ip6tables-save
 * and skipped here.
 */
import type { Family } from '../../common/cidr';
import type { NatRule } from '../../common/wire';

/** The chain the walk enters native nftables by. */
export const NFT_ENTRY = 'nftables postrouting';

/** Tables iptables-nft / ip6tables-nft create and iptables-save / ip6tables-save already list. */
const IPTABLES_TABLES = new Set(['nat', 'filter', 'mangle', 'raw', 'security']);

/** What one family's request looks like to nft: its table family, header and nfproto names. */
interface FamilyNames {
  /**
   * nft's name of this family, both as a table family (`inet` tables hold both families) and as
   * the header of `ip saddr` / `ip6 saddr`; `other` is the other family's, which never matches.
   */
  own: 'ip' | 'ip6';
  other: 'ip' | 'ip6';
  /** The header field naming the transport protocol (`ip protocol`, `ip6 nexthdr`). */
  protoField: 'protocol' | 'nexthdr';
  nfproto: 'ipv4' | 'ipv6';
}

const NAMES: Record<Family, FamilyNames> = {
  4: { own: 'ip', other: 'ip6', protoField: 'protocol', nfproto: 'ipv4' },
  6: { own: 'ip6', other: 'ip', protoField: 'nexthdr', nfproto: 'ipv6' },
};

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const isObj = (v: Json | undefined): v is Obj =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export interface NftNat {
  chains: string[];
  rules: NatRule[];
}

/** One value of an expression as text (`10.90.0.0/24`, `@excl`, `{ 10.1.0.0-10.2.255.255 }`). */
function valueText(v: Json | undefined): string {
  if (v === undefined) return '?';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.map(valueText).join(' ');
  const prefix = v['prefix'];
  if (isObj(prefix)) return `${valueText(prefix['addr'])}/${valueText(prefix['len'])}`;
  const range = v['range'];
  if (Array.isArray(range)) return `${valueText(range[0])}-${valueText(range[1])}`;
  const set = v['set'];
  if (Array.isArray(set)) return `{ ${set.map(valueText).join(', ')} }`;
  const payload = v['payload'];
  if (isObj(payload)) return `${valueText(payload['protocol'])} ${valueText(payload['field'])}`;
  const meta = v['meta'];
  if (isObj(meta)) return `meta ${valueText(meta['key'])}`;
  const ct = v['ct'];
  if (isObj(ct)) return `ct ${valueText(ct['key'])}`;
  const [op, args] = Object.entries(v)[0] ?? ['?', null];
  if (Array.isArray(args) && ['&', '|', '^'].includes(op))
    // Marks read as nft and kube-proxy write them: 0x4000.
    return args
      .map((a) => (typeof a === 'number' ? `0x${a.toString(16)}` : valueText(a)))
      .join(` ${op} `);
  return `${op} ${valueText(args)}`;
}

/** Addresses of a value as `a/b` or `a-b` terms, or null when it cannot be expanded. */
function addresses(
  v: Json | undefined,
  sets: Map<string, string[] | null>,
  scope: string,
): string[] | null {
  if (typeof v === 'string') {
    if (v.startsWith('@')) return sets.get(`${scope} ${v.slice(1)}`) ?? null;
    return [v];
  }
  if (!isObj(v)) return null;
  if (isObj(v['prefix']) || Array.isArray(v['range'])) return [valueText(v)];
  const set = v['set'];
  if (!Array.isArray(set)) return null;
  const out: string[] = [];
  for (const e of set) {
    const a = addresses(e, sets, scope);
    if (a === null) return null;
    out.push(...a);
  }
  return out;
}

/** A match as nft prints it: `==` left out, except after a bitwise expression. */
function matchText(m: Obj): string {
  const op = typeof m['op'] === 'string' ? m['op'] : '==';
  const left = m['left'];
  const binop = isObj(left) && ['&', '|', '^'].some((k) => k in left);
  const shown = op === '==' && !binop ? '' : `${op} `;
  return `${valueText(left)} ${shown}${valueText(m['right'])}`;
}

/** One match statement as walk arguments, for a request of the family `names` describes. */
function matchArgs(
  m: Obj,
  sets: Map<string, string[] | null>,
  scope: string,
  names: FamilyNames,
): string[] {
  const op = typeof m['op'] === 'string' ? m['op'] : '==';
  const left = m['left'];
  const right = m['right'];
  const cond = ['--nft', matchText(m)];
  if (op !== '==' && op !== '!=' && op !== 'in') return cond;
  const neg = op === '!=' ? ['!'] : [];
  const payload = isObj(left) ? left['payload'] : undefined;
  // The other family's header (an inet table's rules for it) never matches this request.
  if (isObj(payload) && payload['protocol'] === names.other) return ['--never', matchText(m)];
  if (isObj(payload) && payload['protocol'] === names.own) {
    const field = payload['field'];
    if (field === 'saddr' || field === 'daddr') {
      const list = addresses(right, sets, scope);
      if (list === null || list.length === 0) return cond;
      return [...neg, field === 'saddr' ? '-s' : '-d', list.join(',')];
    }
    if (field === names.protoField && typeof right === 'string') return [...neg, '-p', right];
  }
  const meta = isObj(left) ? left['meta'] : undefined;
  if (isObj(meta) && typeof right === 'string') {
    // nft writes an interface wildcard as "eth*"; iptables as "eth+".
    if (meta['key'] === 'oifname') return [...neg, '-o', right.replace(/\*$/, '+')];
    if (meta['key'] === 'l4proto') return [...neg, '-p', right];
    if (meta['key'] === 'nfproto' && (right === 'ipv4' || right === 'ipv6'))
      return (right === names.nfproto) !== (op === '!=') ? [] : ['--never', matchText(m)];
  }
  return cond;
}

/** A rule's statements as walk arguments and readable text. */
function ruleArgs(
  expr: Json[],
  sets: Map<string, string[] | null>,
  scope: string,
  names: FamilyNames,
): { args: string[]; text: string[] } {
  const args: string[] = [];
  const text: string[] = [];
  for (const stmt of expr) {
    if (!isObj(stmt)) continue;
    const [kind, body] = Object.entries(stmt)[0] ?? ['', null];
    switch (kind) {
      case 'match':
        if (isObj(body)) {
          args.push(...matchArgs(body, sets, scope, names));
          text.push(matchText(body));
        }
        break;
      case 'masquerade':
      case 'snat': {
        const flags = isObj(body) ? body['flags'] : undefined;
        const to =
          isObj(body) && body['addr'] !== undefined ? ` to ${valueText(body['addr'])}` : '';
        text.push(`${kind}${to}${flags === undefined ? '' : ` ${valueText(flags)}`}`);
        args.push('-j', kind === 'masquerade' ? 'MASQUERADE' : 'SNAT');
        return { args, text };
      }
      case 'jump':
      case 'goto': {
        const target = isObj(body) ? valueText(body['target']) : '?';
        text.push(`${kind} ${target}`);
        args.push(kind === 'jump' ? '-j' : '-g', `${scope} ${target}`);
        return { args, text };
      }
      case 'return':
      case 'accept':
      case 'drop':
      case 'reject':
        text.push(kind);
        args.push('-j', 'RETURN');
        return { args, text };
      case 'counter':
      case 'log':
      case 'limit':
      case 'mangle':
      case 'notrack':
      case 'comment':
        break;
      default:
        // A verdict map, dnat, queue …: not a masquerade this walk can follow.
        text.push(kind);
        args.push('--nft', kind);
    }
  }
  return { args, text };
}

/**
 * Parses `nft -j list ruleset` for a request of `family`: the tables that see it (`ip` or `ip6`,
 * and `inet`). Throws on text that is not its JSON.
 */
export function parseNftRuleset(json: string, family: Family): NftNat {
  const doc = JSON.parse(json) as Json;
  const items = isObj(doc) && Array.isArray(doc['nftables']) ? doc['nftables'] : null;
  if (items === null)
    throw new Error('not the output of nft -j list ruleset (no "nftables" array)');
  const names = NAMES[family];
  const wanted = (o: Obj): boolean =>
    (o['family'] === names.own || o['family'] === 'inet') &&
    !(o['family'] === names.own && IPTABLES_TABLES.has(valueText(o['table'] ?? o['name'])));
  const sets = new Map<string, string[] | null>();
  const chains: string[] = [];
  const bases: { name: string; prio: number }[] = [];
  const rules: NatRule[] = [];
  for (const item of items) {
    if (!isObj(item)) continue;
    const set = item['set'] ?? item['map'];
    if (isObj(set) && wanted(set)) {
      const elems = Array.isArray(set['elem']) ? set['elem'] : [];
      const list = addresses({ set: elems }, sets, '');
      sets.set(
        `${valueText(set['family'])} ${valueText(set['table'])} ${valueText(set['name'])}`,
        list,
      );
    }
    const chain = item['chain'];
    if (isObj(chain) && wanted(chain)) {
      const name = `${valueText(chain['family'])} ${valueText(chain['table'])} ${valueText(chain['name'])}`;
      chains.push(name);
      if (chain['type'] === 'nat' && chain['hook'] === 'postrouting')
        bases.push({ name, prio: typeof chain['prio'] === 'number' ? chain['prio'] : 100 });
    }
    const rule = item['rule'];
    if (isObj(rule) && wanted(rule) && Array.isArray(rule['expr'])) {
      const scope = `${valueText(rule['family'])} ${valueText(rule['table'])}`;
      const chainName = `${scope} ${valueText(rule['chain'])}`;
      const { args, text } = ruleArgs(rule['expr'], sets, scope, names);
      rules.push({ chain: chainName, args, text: `${chainName}: ${text.join(' ')}` });
    }
  }
  if (bases.length > 0) chains.push(NFT_ENTRY);
  const entry = bases
    .sort((a, b) => a.prio - b.prio)
    .map((b) => ({
      chain: NFT_ENTRY,
      args: ['-j', b.name],
      text: `hook postrouting priority ${b.prio}: ${b.name}`,
    }));
  return { chains, rules: [...entry, ...rules] };
}

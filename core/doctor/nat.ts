/**
 * Which nat-table rules would masquerade a packet from the tunnel range: a walk from POSTROUTING
 * through the chains it jumps to, in rule order, the way netfilter traverses them (the first NAT
 * target ends the table for that packet; RETURN ends a chain, ACCEPT the table). Matches hoptrace
 * cannot decide from addresses alone (marks, ipsets, ports) are kept as conditions, so a rule that
 * only applies to marked packets is a warning, not an error. The same walk serves iptables and
 * ip6tables: the family is the tunnel range's, and an address of the other family never matches.
 *
 * The rules come from an agent's reply (up to REPLY_LIMITS.natRules, judged by the collector): the
 * walk costs O(rules visited), each rule's matches read once, and it is bounded — at most
 * NAT_WALK_VISITS rule visits (a chain jumped to from many rules is walked once per jump, so
 * nested fan-out would otherwise grow without bound), the first MASQUERADE_CONDITIONS conditions
 * of a hit and the first MASQUERADE_HITS hits listed, the rest counted — and what it did not walk
 * it says (MasqueradeWalk.stopped, tooDeep), never leaving it for "no rule applies".
 */
import { parseCidr } from '../../common/cidr';
import { REPLY_LIMITS } from '../../common/report-limits';
import { cutText } from '../../common/text-cut';
import { LEGACY_ENTRY } from './iptables-save';
import { evaluate, type Evaluated, type NatContext } from './nat-match';
import { NFT_ENTRY } from './nft';
import type { NatRule } from '../../common/wire';

/** A rule that masquerades (some) packets from the tunnel range. */
export interface MasqueradeHit {
  rule: NatRule;
  /** Chains from POSTROUTING to the rule. */
  path: string[];
  /**
   * Conditions still needed for it to apply (all of them: a conjunction); empty = it applies to
   * every such packet. Those of the chains and earlier rules on its way are listed up to
   * MASQUERADE_CONDITIONS, the rule's own always.
   */
  conditions: string[];
  /** Conditions of the way there beyond MASQUERADE_CONDITIONS: not listed. */
  moreConditions: number;
}

/** Rule visits one walk makes at most: four for each rule a reply may hold. */
export const NAT_WALK_VISITS = 4 * REPLY_LIMITS.natRules;
/**
 * Chains on one path at most, the entry's included: nf_tables refuses to load a deeper nesting
 * (nft_chain_validate: -EMLINK at level NFT_JUMP_STACK_SIZE, 16); legacy iptables does not, so a
 * jump past it is named (tooDeep).
 */
export const NAT_WALK_DEPTH = 16;
/** Conditions of the way to a hit it lists (the rest counted: MasqueradeHit.moreConditions). */
export const MASQUERADE_CONDITIONS = 64;
/** Hits a walk lists (the rest counted: MasqueradeWalk.hitsLeftOut). */
export const MASQUERADE_HITS = 64;

/** A rule the walk reached, and the chains from the entry to it. */
export interface WalkPlace {
  rule: NatRule;
  path: string[];
}

/** What a walk of the nat rules found, and what it did not walk. */
export interface MasqueradeWalk {
  /** The first MASQUERADE_HITS rules that masquerade (some) packets from the tunnel range. */
  hits: MasqueradeHit[];
  /** Hits past those listed: how many, and how many of them apply to every packet. */
  hitsLeftOut: { count: number; unconditional: number };
  /**
   * Where the walk used up its NAT_WALK_VISITS visits: that rule, the rest of its chain and of the
   * chains on its path, and the entries `notStarted` were not walked. Null when it did not.
   */
  stopped: (WalkPlace & { notStarted: string[] }) | null;
  /** Jumps past NAT_WALK_DEPTH chains, not followed: the first, and how many. */
  tooDeep: { first: WalkPlace; count: number } | null;
  /** Rule visits made: at most NAT_WALK_VISITS. */
  visits: number;
}

/** Conditions on the way to a rule: the first MASQUERADE_CONDITIONS, and how many in all. */
interface Way {
  listed: string[];
  count: number;
}

/** `parts` one after the other, listed up to MASQUERADE_CONDITIONS: O(that bound). */
function joinWays(...parts: (Way | readonly string[])[]): Way {
  const out: Way = { listed: [], count: 0 };
  for (const p of parts) {
    const listed = 'listed' in p ? p.listed : p;
    out.count += 'listed' in p ? p.count : p.length;
    // A way lists fewer than it holds only once it lists the bound: nothing after it is listed.
    for (const c of listed) {
      if (out.listed.length === MASQUERADE_CONDITIONS) break;
      out.listed.push(c);
    }
  }
  return out;
}

/** A rule of a chain, evaluated once per walk (on its first visit). */
interface Slot {
  rule: NatRule;
  judged: Evaluated | null;
  /** The condition the later rules get when this one did not apply, once asked. */
  unless: string | null;
}

/**
 * Every rule that masquerades/SNATs packets from the tunnel range on their way to `ctx.dst`, and
 * what the walk did not walk. O(rule visits), at most NAT_WALK_VISITS (see the top).
 */
export function findTunnelMasquerade(
  rules: readonly NatRule[],
  chains: readonly string[],
  ctx: NatContext,
): MasqueradeWalk {
  const tunnel = parseCidr(ctx.tunnelRange);
  const dst = ctx.dst === undefined ? null : parseCidr(ctx.dst);
  const byChain = new Map<string, Slot[]>();
  for (const rule of rules) {
    const slot: Slot = { rule, judged: null, unless: null };
    const list = byChain.get(rule.chain);
    if (list === undefined) byChain.set(rule.chain, [slot]);
    else list.push(slot);
  }
  const userChains = new Set(chains);
  const out: MasqueradeWalk = {
    hits: [],
    hitsLeftOut: { count: 0, unconditional: 0 },
    stopped: null,
    tooDeep: null,
    visits: 0,
  };
  // `before`: the conditions of the way there; `own`: the rule's, always listed.
  const hit = (rule: NatRule, path: string[], before: Way, own: readonly string[]): void => {
    if (out.hits.length === MASQUERADE_HITS) {
      out.hitsLeftOut.count++;
      if (before.count === 0 && own.length === 0) out.hitsLeftOut.unconditional++;
      return;
    }
    const conditions = [...before.listed, ...own];
    out.hits.push({ rule, path, conditions, moreConditions: before.count - before.listed.length });
  };

  // Returns true when every packet entering `chain` (under `way`) ends the nat table there.
  const walk = (chain: string, way: Way, path: string[]): boolean => {
    // Conditions added by earlier rules of this chain: the packets that were not handled yet.
    const local: Way = { listed: [], count: 0 };
    const unhandled = (slot: Slot, conds: readonly string[]): void => {
      local.count++;
      if (local.listed.length === MASQUERADE_CONDITIONS) return;
      slot.unless ??= cutText(`not (${conds.join(' and ')})`);
      local.listed.push(slot.unless);
    };
    for (const slot of byChain.get(chain) ?? []) {
      const rule = slot.rule;
      if (out.visits === NAT_WALK_VISITS) {
        out.stopped = { rule, path, notStarted: [] };
        return false;
      }
      out.visits++;
      slot.judged ??= evaluate(rule, ctx, tunnel, dst);
      const { match, target, goto } = slot.judged;
      if (match.never) continue;
      const unconditional = match.conds.length === 0;
      if (target === 'MASQUERADE' || target === 'SNAT' || target === 'ACCEPT') {
        if (target !== 'ACCEPT') hit(rule, path, joinWays(way, local), match.conds);
        if (unconditional) return local.count === 0;
        unhandled(slot, match.conds);
      } else if (target === 'RETURN') {
        if (unconditional) return false;
        unhandled(slot, match.conds);
      } else if (userChains.has(target) || byChain.has(target)) {
        let consumed = false;
        // A loop is not walked again: netfilter refuses to load one (ELOOP).
        const loop = path.includes(target);
        if (!loop && path.length >= NAT_WALK_DEPTH) {
          if (out.tooDeep === null) out.tooDeep = { first: { rule, path }, count: 0 };
          out.tooDeep.count++;
        } else if (!loop) {
          consumed = walk(target, joinWays(way, local, match.conds), [...path, target]);
          if (out.stopped !== null) return false;
        }
        if (unconditional && (consumed || goto)) return consumed && local.count === 0;
        if (consumed) unhandled(slot, match.conds);
      }
      // MARK, LOG, CONNMARK … continue with the next rule.
    }
    return false;
  };
  // Each backend's nat table sees the packet from its own entry: iptables (nf_tables), then
  // iptables-legacy and native nftables when they were read.
  const entries = ['POSTROUTING', LEGACY_ENTRY, NFT_ENTRY].filter(
    (e) => e === 'POSTROUTING' || byChain.has(e),
  );
  for (const entry of entries) {
    if (out.stopped !== null) {
      if (byChain.has(entry)) out.stopped.notStarted.push(entry);
    } else walk(entry, { listed: [], count: 0 }, [entry]);
  }
  return out;
}

/**
 * What a walk did not walk, in words (`the walk stopped at its bound of 262144 rule visits, at
 * -A X … (reached POSTROUTING → X): it and the rules after it in X were not walked, …`); null when
 * it walked every rule it reached.
 */
export function notWalkedText(w: MasqueradeWalk): string | null {
  const parts: string[] = [];
  const s = w.stopped;
  if (s !== null) {
    const last = s.path[s.path.length - 1] ?? '';
    const before =
      s.path.length > 1 ? ', nor the rules after the jump in each chain before it' : '';
    const more =
      s.notStarted.length === 0 ? '' : `; nor the nat table from ${s.notStarted.join(', ')}`;
    parts.push(
      `the walk stopped at its bound of ${NAT_WALK_VISITS} rule visits, at ${s.rule.text} ` +
        `(reached ${s.path.join(' → ')}): it and the rules after it in ${last} were not walked` +
        `${before}${more}`,
    );
  }
  const d = w.tooDeep;
  if (d !== null) {
    parts.push(
      `${d.count} ${d.count === 1 ? 'jump' : 'jumps'} past ${NAT_WALK_DEPTH} chains deep ` +
        `${d.count === 1 ? 'was' : 'were'} not followed (the first: ${d.first.rule.text}, reached ` +
        `${d.first.path.join(' → ')})`,
    );
  }
  return parts.length === 0 ? null : parts.join('; ');
}

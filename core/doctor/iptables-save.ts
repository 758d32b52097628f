/**
 * `iptables-save -t nat` (or `ip6tables-save -t nat`: the same format) text → chains and rules.
 * iptables-save prints every rule as `-A CHAIN <args>` with double quotes around arguments holding
 * spaces (comments), so a small shell-like tokenizer is enough; chains are declared as
 * `:NAME POLICY [packets:bytes]`.
 */
import type { NatRule } from '../../common/wire';

/** Splits one iptables-save line into arguments (double quotes group, backslash escapes). */
export function tokenizeRule(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inQuote = false;
  let has = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === '\\' && i + 1 < line.length) {
      cur += line[++i] ?? '';
      has = true;
    } else if (c === '"') {
      inQuote = !inQuote;
      has = true;
    } else if (!inQuote && (c === ' ' || c === '\t')) {
      if (has) out.push(cur);
      cur = '';
      has = false;
    } else {
      cur += c ?? '';
      has = true;
    }
  }
  if (has) out.push(cur);
  return out;
}

/** One table of an iptables-save document. */
export interface SavedTable {
  chains: string[];
  rules: NatRule[];
}

/** Parses iptables-save output; returns the table `table` (empty when absent). */
export function parseIptablesSave(text: string, table = 'nat'): SavedTable {
  const out: SavedTable = { chains: [], rules: [] };
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      current = line.slice(1);
      continue;
    }
    if (current !== table) continue;
    if (line.startsWith(':')) {
      const name = line.slice(1).split(/\s+/)[0];
      if (name !== undefined && name !== '') out.chains.push(name);
      continue;
    }
    const args = tokenizeRule(line);
    if (args[0] === '-A' && args[1] !== undefined) {
      out.rules.push({ chain: args[1], args: args.slice(2), text: line });
    }
  }
  return out;
}

/** The prefix of iptables-legacy's chains when both backends are read (LEGACY_ENTRY is its POSTROUTING). */
export const LEGACY_PREFIX = 'legacy ';
export const LEGACY_ENTRY = `${LEGACY_PREFIX}POSTROUTING`;

/**
 * An iptables-legacy table beside the nf_tables one: its chains renamed `legacy NAME` (jumps
 * too), so the masquerade walk follows both, each from its own POSTROUTING. Both backends' nat
 * tables see every packet: a rule in either one masquerades it.
 */
export function asLegacy(t: SavedTable): SavedTable {
  const own = new Set([...t.chains, ...t.rules.map((r) => r.chain)]);
  const rename = (c: string): string => (own.has(c) ? `${LEGACY_PREFIX}${c}` : c);
  return {
    chains: t.chains.map(rename),
    rules: t.rules.map((r) => {
      const args = [...r.args];
      const j = args.findIndex((a) => a === '-j' || a === '--jump' || a === '-g' || a === '--goto');
      const target = args[j + 1];
      if (j >= 0 && target !== undefined) args[j + 1] = rename(target);
      return { chain: rename(r.chain), args, text: `(legacy) ${r.text}` };
    }),
  };
}

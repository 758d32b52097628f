/**
 * `iptables-save -t nat` text → chains and rules. iptables-save prints every rule as
 * `-A CHAIN <args>` with double quotes around arguments holding spaces (comments), so a small
 * shell-like tokenizer is enough; chains are declared as `:NAME POLICY [packets:bytes]`.
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

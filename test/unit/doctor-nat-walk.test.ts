/**
 * The masquerade walk (core/doctor/nat.ts) on the largest rule sets an agent's reply may hold
 * (REPLY_LIMITS.natRules), which the collector judges: its work is counted in rule visits — one a
 * rule for a chain walked once, never past NAT_WALK_VISITS — and what it did not walk (its bound,
 * a jump too deep) is a `not checked in full` warning naming where, never an ok. What it lists is
 * bounded too: MASQUERADE_CONDITIONS conditions of the way to a hit, MASQUERADE_HITS hits, the
 * rest counted. The old walk copied a chain's list once per rule and the conditions once per rule
 * (minutes and gigabytes at 65,536 rules in one chain) and re-walked nested jumps without bound.
 */
import t from 'tap';
import {
  findTunnelMasquerade,
  MASQUERADE_CONDITIONS,
  MASQUERADE_HITS,
  NAT_WALK_DEPTH,
  NAT_WALK_VISITS,
} from '../../core/doctor/nat';
import { runDoctorChecks, type Finding } from '../../core/doctor/checks';
import { REPLY_LIMITS } from '../../common/report-limits';
import type { NamespaceFacts, NatRule } from '../../common/wire';

const RANGE = '10.90.0.0/24';
const CTX = { tunnelRange: RANGE, dst: '10.244.2.5', egressIface: 'eth0' };
const MAX = REPLY_LIMITS.natRules;

const rule = (chain: string, ...args: string[]): NatRule => ({
  chain,
  args,
  text: `-A ${chain} ${args.join(' ')}`,
});
const mark = (chain: string, k: number, target: string): NatRule =>
  rule(chain, '-m', 'mark', '--mark', `0x${k.toString(16)}`, '-j', target);

/** The masquerade findings of the VPN node whose nat table is `rules` / `chains`. */
function masquerade(rules: NatRule[], chains: string[]): Finding[] {
  const facts: NamespaceFacts = {
    name: 'vpn-node',
    target: '',
    netns: '/proc/1/ns/net',
    node: 'n1',
    addresses: [],
    rpFilter: [],
    routes: [],
    lookups: [],
    natChains: chains,
    natRules: rules,
    ipvsState: 'absent',
    ipvs: [],
    family: 4,
    errorCode: '',
    message: '',
    unread: [],
  };
  const r = runDoctorChecks({
    facts: [facts],
    tunnelRange: RANGE,
    client: '10.90.0.1',
    dst: CTX.dst,
    liveAddresses: [],
    nodeAddresses: {},
  });
  return r.findings.filter((f) => f.check === 'masquerade');
}

void t.test(`${MAX} conditional masquerades in one chain: each rule visited once`, (t) => {
  const rules = Array.from({ length: MAX }, (_, k) => mark('POSTROUTING', k, 'MASQUERADE'));
  const w = findTunnelMasquerade(rules, [], CTX);
  t.equal(w.visits, MAX, 'one visit a rule');
  t.equal(w.hits.length, MASQUERADE_HITS);
  t.same(w.hitsLeftOut, { count: MAX - MASQUERADE_HITS, unconditional: 0 });
  t.equal(w.stopped, null);
  t.equal(w.tooDeep, null);
  // The last hit listed: the 63 earlier rules' "not (…)" and its own mark.
  t.equal(w.hits[MASQUERADE_HITS - 1]?.conditions.length, MASQUERADE_HITS);
  const f = masquerade(rules, []);
  t.equal(f.length, MASQUERADE_HITS + 1, 'the listed hits and one for the rest');
  t.same(
    f.map((x) => x.severity),
    Array.from({ length: MASQUERADE_HITS + 1 }, () => 'warning'),
  );
  t.equal(
    f[MASQUERADE_HITS]?.detail,
    `${MAX - MASQUERADE_HITS} more MASQUERADE/SNAT rules (0 of them for every packet) masquerade ` +
      `packets from ${RANGE}: not listed, the first ${MASQUERADE_HITS} are`,
  );
  t.ok(
    f.every((x) => x.detail.length < 20_000),
    'no finding lists every earlier rule',
  );
  t.end();
});

void t.test(`${MAX - 1} conditional returns, then a masquerade: its conditions counted`, (t) => {
  const rules = [
    ...Array.from({ length: MAX - 1 }, (_, k) => mark('POSTROUTING', k, 'RETURN')),
    rule('POSTROUTING', '-j', 'MASQUERADE'),
  ];
  const w = findTunnelMasquerade(rules, [], CTX);
  t.equal(w.visits, MAX);
  t.equal(w.hits.length, 1);
  t.equal(w.hits[0]?.conditions.length, MASQUERADE_CONDITIONS);
  t.equal(w.hits[0]?.moreConditions, MAX - 1 - MASQUERADE_CONDITIONS);
  const f = masquerade(rules, []);
  t.equal(f.length, 1);
  t.equal(f[0]?.severity, 'warning', 'conditional: a warning, as before');
  t.match(
    f[0]?.detail,
    new RegExp(
      `^-A POSTROUTING -j MASQUERADE \\(reached POSTROUTING\\) masquerades packets when not \\(--mark 0x0\\) and .* and ${MAX - 1 - MASQUERADE_CONDITIONS} more conditions \\(not listed\\) from`,
    ),
  );
  t.end();
});

void t.test(`${MAX / 2} chains, one jump to each: each rule visited once`, (t) => {
  const chains = Array.from({ length: MAX / 2 }, (_, k) => `C${k}`);
  const rules = [
    ...chains.map((c, k) => mark('POSTROUTING', k, c)),
    ...chains.map((c) => rule(c, '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', 'MASQUERADE')),
  ];
  const w = findTunnelMasquerade(rules, chains, CTX);
  t.equal(w.visits, MAX);
  t.same(w.hitsLeftOut, { count: MAX / 2 - MASQUERADE_HITS, unconditional: 0 });
  t.same(w.hits[1]?.path, ['POSTROUTING', 'C1']);
  t.same(w.hits[1]?.conditions, ['--mark 0x1', '! --dst-type LOCAL']);
  t.end();
});

/**
 * Twelve chains, each jumping to the next from four rules (each on its own mark), the last
 * masquerading: 4^12 ways to the masquerade, each of which the walk follows; then iptables-legacy's
 * nat table, masquerading every packet.
 */
function fanOut(): { rules: NatRule[]; chains: string[] } {
  const chains = Array.from({ length: 12 }, (_, k) => `L${k}`);
  const rules: NatRule[] = [];
  for (let l = 0; l < chains.length; l++) {
    const from = l === 0 ? 'POSTROUTING' : (chains[l - 1] ?? '');
    for (let j = 0; j < 4; j++) rules.push(mark(from, j, chains[l] ?? ''));
  }
  rules.push(rule('L11', '-j', 'MASQUERADE'), rule('legacy POSTROUTING', '-j', 'MASQUERADE'));
  return { rules, chains };
}

void t.test('nested fan-out: the walk stops at its bound and says where', (t) => {
  const { rules, chains } = fanOut();
  const w = findTunnelMasquerade(rules, chains, CTX);
  t.equal(w.visits, NAT_WALK_VISITS, 'the work is bounded');
  t.not(w.stopped, null);
  t.equal(w.hits.length, MASQUERADE_HITS);
  t.ok(w.hitsLeftOut.count > 0);
  const f = masquerade(rules, chains);
  t.notOk(
    f.some((x) => x.severity === 'ok'),
    'never ok',
  );
  const last = f[f.length - 1];
  t.equal(last?.severity, 'warning');
  t.match(
    last?.detail,
    new RegExp(
      `^not checked in full: the walk stopped at its bound of ${NAT_WALK_VISITS} rule visits, at -A (L\\d+) -m mark --mark 0x\\d -j L\\d+ \\(reached POSTROUTING → L0 → .* → \\1\\): it and the rules after it in \\1 were not walked, nor the rules after the jump in each chain before it; nor the nat table from legacy POSTROUTING, so a MASQUERADE/SNAT rule there for sources in 10\\.90\\.0\\.0/24 is not ruled out$`,
    ),
  );
  t.end();
});

/** POSTROUTING → D1 → … → D`depth - 1`, which masquerades every packet. */
function nested(depth: number): { rules: NatRule[]; chains: string[] } {
  const chains = Array.from({ length: depth - 1 }, (_, k) => `D${k + 1}`);
  const rules = chains.map((c, k) => rule(k === 0 ? 'POSTROUTING' : `D${k}`, '-j', c));
  rules.push(rule(chains[chains.length - 1] ?? '', '-j', 'MASQUERADE'));
  return { rules, chains };
}

void t.test(`a jump past ${NAT_WALK_DEPTH} chains deep: named, never ok`, (t) => {
  const deepest = nested(NAT_WALK_DEPTH);
  const ok = masquerade(deepest.rules, deepest.chains);
  t.same(
    ok.map((x) => x.severity),
    ['error'],
    `${NAT_WALK_DEPTH} chains on the path: walked`,
  );
  const deeper = nested(NAT_WALK_DEPTH + 1);
  const f = masquerade(deeper.rules, deeper.chains);
  t.same(
    f.map((x) => x.severity),
    ['warning'],
  );
  t.match(
    f[0]?.detail,
    `not checked in full: 1 jump past ${NAT_WALK_DEPTH} chains deep was not followed (the first: -A D15 -j D16, reached POSTROUTING → D1 → D2 → D3 → D4 → D5 → D6 → D7 → D8 → D9 → D10 → D11 → D12 → D13 → D14 → D15)`,
  );
  t.end();
});

void t.test('a condition as long as a rule argument may be is cut', (t) => {
  const set = Array.from({ length: 1200 }, (_, k) => `192.0.${k >> 8}.${k & 255}`).join(',');
  const rules = [rule('POSTROUTING', '-m', 'set', '--match-set', set, 'dst', '-j', 'MASQUERADE')];
  const [h] = findTunnelMasquerade(rules, [], CTX).hits;
  t.match(h?.conditions[0], /… \(cut: \d+ characters\)$/);
  t.ok((h?.conditions[0]?.length ?? 0) < 2100);
  t.end();
});

/**
 * An agent's doctor and conntrack replies are cut where the collector decodes them
 * (common/envelope.ts, common/report-limits.ts REPLY_LIMITS), as its status text is: an
 * authenticated but hostile agent could otherwise send megabytes of strings in doctor facts or
 * conntrack entries that end up in reports. Strings are cut (the cut says so), lists keep their
 * first entries and count the rest; a doctor part cut so is judged by no check (never "ok" about
 * what was left out), and conntrack evidence says which entries it did not judge.
 */
import t from 'tap';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import { REPLY_LIMITS } from '../../common/report-limits';
import { emptyNamespaceFacts, type ConntrackEntry, type NamespaceFacts } from '../../common/wire';
import { runDoctorChecks } from '../../core/doctor/checks';
import { parseIptablesSave } from '../../core/doctor/iptables-save';
import { judgeConntrack } from '../../core/attribute/conntrack-evidence';
import type { Verdict } from '../../core/attribute/attribute';

const long = (c: string, n: number): string => c.repeat(n);
const cut = (c: string, keep: number, n: number): string =>
  `${long(c, keep)}… (cut: ${n} characters)`;

/** The assert isCut uses (any subtest has it). */
type Asserts = Pick<typeof t, 'ok'>;

/**
 * `got` is `c` × n cut at `keep`: compared as a boolean, so a failure prints the lengths, never a
 * diff of a megabyte (which took tap minutes).
 */
function isCut(t: Asserts, got: string | undefined, c: string, keep: number, n: number): void {
  t.ok(got === cut(c, keep, n), `${c} × ${n} cut at ${keep} (got ${got?.length} characters)`);
}

function decodedFacts(f: NamespaceFacts): NamespaceFacts[] {
  const env = decodeEnvelope(
    encodeEnvelope({
      seq: 0,
      kind: 'doctorReport',
      doctorReport: { requestId: 'q', agentId: 'a1', node: 'n1', facts: [f] },
    }),
  );
  if (env.kind !== 'doctorReport') throw new Error(`not a doctor report: ${env.kind}`);
  return env.doctorReport.facts;
}

void t.test('doctor facts: strings cut, lists bounded, what was left out named', (t) => {
  const base = emptyNamespaceFacts({ name: 'vpn-node', target: '' }, 'n1', 4);
  const huge: NamespaceFacts = {
    ...base,
    netns: long('n', 100_000),
    message: long('m', 1_000_000),
    errorCode: long('E', 5000),
    addresses: Array.from({ length: 300 }, (_, i) => `10.0.${i >> 8}.${i & 255}`),
    rpFilter: [{ iface: long('i', 1000), value: 1 }],
    routes: Array.from({ length: REPLY_LIMITS.routes + 5 }, () => ({
      dst: '10.1.0.0/16',
      gateway: '',
      dev: 'eth0',
      type: '',
      prefsrc: '',
      flags: [],
    })),
    lookups: [{ to: '10.90.0.2', route: null, error: long('x', 50_000) }],
    natChains: [long('c', 5000)],
    natRules: [
      { chain: 'POSTROUTING', args: ['-s', '10.90.0.0/24', '-j', 'RETURN'], text: long('t', 9000) },
      { chain: 'POSTROUTING', args: ['--nft', long('a', 20_000)], text: 'x' },
    ],
  };
  const [f] = decodedFacts(huge);
  if (f === undefined) return t.fail('no facts');
  isCut(t, f.netns, 'n', 512, 100_000);
  isCut(t, f.message, 'm', 2000, 1_000_000);
  isCut(t, f.errorCode, 'E', 64, 5000);
  t.equal(f.addresses.length, 256, 'the first 256 addresses');
  isCut(t, f.rpFilter[0]?.iface, 'i', 64, 1000);
  t.equal(f.routes.length, REPLY_LIMITS.routes);
  isCut(t, f.lookups[0]?.error, 'x', 2000, 50_000);
  isCut(t, f.natChains[0], 'c', 1024, 5000);
  isCut(t, f.natRules[0]?.text, 't', 2000, 9000);
  isCut(t, f.natRules[1]?.args[1], 'a', REPLY_LIMITS.ruleArg, 20_000);
  t.same(
    f.leftOut,
    [
      { part: 'addresses', detail: 'addresses: 44 left out (at most 256 kept)' },
      { part: 'routes', detail: `routes: 5 left out (at most ${REPLY_LIMITS.routes} kept)` },
      { part: 'nat', detail: `rule arguments cut at ${REPLY_LIMITS.ruleArg} characters: 1` },
      { part: 'nft', detail: `rule arguments cut at ${REPLY_LIMITS.ruleArg} characters: 1` },
    ],
    'each part with what was left out of it',
  );
  // The whole decoded reply is small again (the input was ~1.2 MB of strings).
  t.ok(JSON.stringify(f).length < 2_000_000, 'bounded');
  t.end();
});

void t.test('a reply within the bounds is decoded whole, nothing named left out', (t) => {
  const base = emptyNamespaceFacts({ name: 'vpn', target: '/run/netns/vpn' }, 'n1', 4);
  const f: NamespaceFacts = {
    ...base,
    netns: '/run/netns/vpn',
    addresses: ['10.244.1.10'],
    natRules: [
      { chain: 'POSTROUTING', args: ['-s', '10.90.0.0/24', '-j', 'MASQUERADE'], text: 'r' },
    ],
    natChains: [],
  };
  const [got] = decodedFacts(f);
  t.same(got, f);
  t.notOk(got !== undefined && 'leftOut' in got);
  t.end();
});

void t.test(
  'a nat part read in part: the masquerade check does not run, a read finding says why',
  (t) => {
    const saved = parseIptablesSave(
      [
        '*nat',
        ':POSTROUTING ACCEPT [0:0]',
        // Rules of chains nothing jumps to (kube-proxy's many): a bound's worth.
        ...Array.from({ length: REPLY_LIMITS.natRules }, (_, i) => `-A KUBE-SEP-${i} -j RETURN`),
        // Past the bound: the rule that masquerades the tunnel range.
        '-A POSTROUTING -s 10.90.0.0/24 -j MASQUERADE',
        'COMMIT',
      ].join('\n'),
    );
    const base = emptyNamespaceFacts({ name: 'vpn', target: '/run/netns/vpn' }, 'n1', 4);
    const [f] = decodedFacts({
      ...base,
      netns: '/run/netns/vpn',
      natRules: saved.rules,
      natChains: saved.chains,
    });
    if (f === undefined) return t.fail('no facts');
    t.equal(f.natRules.length, REPLY_LIMITS.natRules);
    const r = runDoctorChecks({
      facts: [f],
      tunnelRange: '10.90.0.0/24',
      client: '10.90.0.2',
      liveAddresses: [],
      nodeAddresses: {},
    });
    t.notOk(
      r.findings.some((x) => x.check === 'masquerade'),
      `no masquerade finding, "ok" least of all: ${JSON.stringify(r.findings)}`,
    );
    const read = r.findings.find((x) => x.check === 'read');
    t.equal(read?.severity, 'error');
    t.match(
      read?.detail ?? '',
      /^read nat, nft in part only \(not checked here: masquerade\): the agent's report held more than the collector keeps of one namespace \(nat rules: 1 left out \(at most 65536 kept\)\)$/,
    );
    t.end();
  },
);

void t.test('conntrack entries: strings cut, entries and errors bounded and counted', (t) => {
  const entry = (i: number): ConntrackEntry => ({
    name: 'vpn-node',
    netns: long('n', 1000),
    node: 'n1',
    proto: 'tcp',
    state: long('S', 500),
    orig: { src: '10.90.0.42', dst: '10.244.2.5', sport: 40000 + (i % 1000), dport: 8080 },
    reply: { src: '10.244.2.5', dst: '192.168.50.1', sport: 8080, dport: 40000 + (i % 1000) },
    snat: true,
    dnat: false,
    raw: long('r', 10_000),
  });
  const env = decodeEnvelope(
    encodeEnvelope({
      seq: 0,
      kind: 'conntrackReport',
      conntrackReport: {
        requestId: 'q',
        captureId: 'c',
        agentId: 'a1',
        entries: Array.from({ length: 300 }, (_, i) => entry(i)),
        errors: Array.from({ length: 20 }, () => long('e', 5000)),
      },
    }),
  );
  if (env.kind !== 'conntrackReport') return t.fail(env.kind);
  const r = env.conntrackReport;
  t.equal(r.entries.length, REPLY_LIMITS.entries);
  t.equal(r.entriesLeftOut, 300 - REPLY_LIMITS.entries);
  isCut(t, r.entries[0]?.raw, 'r', 2000, 10_000);
  isCut(t, r.entries[0]?.netns, 'n', 512, 1000);
  isCut(t, r.entries[0]?.state, 'S', 64, 500);
  t.equal(r.errors.length, REPLY_LIMITS.errors + 1);
  isCut(t, r.errors[0], 'e', 2000, 5000);
  t.equal(r.errors.at(-1), `4 more errors left out (at most ${REPLY_LIMITS.errors} kept)`);

  const verdict: Verdict = {
    layer: 'cni-masquerade',
    rewrittenBetween: ['egress', 'backend'],
    client: null,
    observed: {},
    evidence: [],
    hint: 'h',
  };
  const judged = judgeConntrack(verdict, r.entries, r.entriesLeftOut ?? 0);
  t.equal(judged.status, 'confirms', 'on the entries kept');
  t.match(
    judged.detail,
    /; 44 more entries the agents listed were left out \(at most 256 kept of one agent's reply\) and not judged$/,
  );
  t.end();
});

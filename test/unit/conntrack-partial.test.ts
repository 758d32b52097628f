/**
 * Conntrack evidence judged on a reply the collector cut (REPLY_LIMITS.entries kept of one agent's
 * reply, the rest counted): a judgement that rests on an entry seen stands (confirms; a SNAT seen
 * on a path the packets call preserved disagrees), one that rests on an entry missing does not —
 * the missing one may be among those left out — and is `incomplete`, in every form of the report.
 */
import t from 'tap';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import { REPLY_LIMITS } from '../../common/report-limits';
import type { ConntrackEntry, ConntrackReport } from '../../common/wire';
import { judgeConntrack, withConntrackEvidence } from '../../core/attribute/conntrack-evidence';
import type { Verdict } from '../../core/attribute/attribute';
import {
  renderReportJson,
  renderReportMarkdown,
  renderVerdictText,
} from '../../core/report/report';
import { renderReportHtml } from '../../core/report/report-html';
import { placeNotes } from '../../core/report/sequence-notes';
import { cni, liveMeta } from './live-report-fixtures';
import { reportSchemaErrors } from './report-schema';

/** An entry of the flow in `name`: SNAT to the VPN node's address, or none. */
function entry(i: number, name: string, snat: boolean): ConntrackEntry {
  const sport = 40000 + i;
  return {
    name,
    netns: '/proc/1/ns/net',
    node: 'n1',
    proto: 'tcp',
    state: 'TIME_WAIT',
    orig: { src: '10.90.0.42', dst: '10.244.2.5', sport, dport: 8080 },
    reply: {
      src: '10.244.2.5',
      dst: snat ? '192.168.50.1' : '10.90.0.42',
      sport: 8080,
      dport: sport,
    },
    snat,
    dnat: false,
    raw: `tcp 6 117 TIME_WAIT src=10.90.0.42 … sport=${sport}`,
  };
}

/** `entries` as the collector keeps them of one agent's ConntrackReport (decoded, cut, counted). */
function decoded(entries: ConntrackEntry[]): ConntrackReport {
  const env = decodeEnvelope(
    encodeEnvelope({
      seq: 0,
      kind: 'conntrackReport',
      conntrackReport: { requestId: 'q', captureId: 'c', agentId: 'a1', entries, errors: [] },
    }),
  );
  if (env.kind !== 'conntrackReport') throw new Error(`not a conntrack report: ${env.kind}`);
  return env.conntrackReport;
}

function verdict(layer: Verdict['layer']): Verdict {
  return {
    layer,
    rewrittenBetween: ['egress', 'backend'],
    client: { src: '10.90.0.42', sport: 40000, dst: '10.244.2.5', dport: 8080 },
    observed: {},
    evidence: [],
    hint: 'h',
  };
}

const N = REPLY_LIMITS.entries + 44;
const CUT = `44 more entries the agents listed were left out \\(at most ${REPLY_LIMITS.entries} kept of one agent's reply\\)`;

void t.test('a cut reply: what rests on an entry missing is incomplete', (t) => {
  // 300 entries in the backend node without NAT; the 44 past the bound are never read: one of
  // them could be the SNAT that contradicts `preserved`.
  const plain = decoded(Array.from({ length: N }, (_, i) => entry(i, 'backend-node', false)));
  t.equal(plain.entries.length, REPLY_LIMITS.entries);
  t.equal(plain.entriesLeftOut, 44);
  const preserved = judgeConntrack(verdict('preserved'), plain.entries, plain.entriesLeftOut);
  t.equal(preserved.status, 'incomplete', 'not consistent: 44 entries were not read');
  t.match(
    preserved.detail,
    new RegExp(
      `^not judged: ${CUT}, and the entry that decides may be among them; of the 256 kept: no conntrack entry of the flow shows source NAT$`,
    ),
  );
  t.equal(preserved.entries.length, REPLY_LIMITS.entries, 'the kept entries are still listed');

  // Packets say kube-proxy (SNAT in the backend node); the kept entries show SNAT in the VPN node
  // only. On a whole list that disagrees, but the backend node's SNAT entry may be left out — kept,
  // it would confirm — so the SNAT seen elsewhere is not yet a disagreement.
  const vpnNode = decoded(Array.from({ length: N }, (_, i) => entry(i, 'vpn-node', true)));
  const kp = withConntrackEvidence(verdict('kube-proxy'), vpnNode.entries, vpnNode.entriesLeftOut);
  t.equal(kp.conntrack?.status, 'incomplete', 'not disagrees');
  t.equal(kp.reason, undefined, 'no disagreement is written into the reason');
  t.equal(kp.confirmedBy, undefined);
  t.match(
    kp.conntrack?.detail,
    /of the 256 kept: packets say kube-proxy, but conntrack shows the source NAT in vpn-node \(cni-masquerade\)$/,
  );

  // A layer conntrack cannot contradict (proxy): consistent whatever a left-out entry says; its
  // detail names the entries it did not judge.
  const proxy = judgeConntrack(verdict('proxy'), vpnNode.entries, vpnNode.entriesLeftOut);
  t.equal(proxy.status, 'consistent');
  t.match(proxy.detail, /and not judged$/);
  // Nothing kept, entries left out (a pure function: any input).
  const none = judgeConntrack(verdict('preserved'), [], 3);
  t.equal(none.status, 'incomplete', 'not no-entries');
  t.equal(
    none.detail,
    `no entry kept: 3 more entries the agents listed were left out (at most ${REPLY_LIMITS.entries} kept of one agent's reply) and not judged`,
  );
  t.end();
});

void t.test('a cut reply: what rests on an entry seen stands, naming the rest', (t) => {
  const vpnNode = decoded(Array.from({ length: N }, (_, i) => entry(i, 'vpn-node', true)));
  // The SNAT entry where the layer says is seen: a further entry cannot take it back.
  const ok = withConntrackEvidence(
    verdict('cni-masquerade'),
    vpnNode.entries,
    vpnNode.entriesLeftOut,
  );
  t.equal(ok.conntrack?.status, 'confirms');
  t.match(ok.conntrack?.detail, new RegExp(`; ${CUT} and not judged$`));
  t.equal(ok.confirmedBy?.length, REPLY_LIMITS.entries);
  // Packets say the source was kept, and a SNAT entry is seen: a disagreement seen.
  const bad = withConntrackEvidence(verdict('preserved'), vpnNode.entries, vpnNode.entriesLeftOut);
  t.equal(bad.conntrack?.status, 'disagrees');
  t.match(
    bad.reason,
    new RegExp(
      `^conntrack disagrees: packets say preserved, but conntrack shows source NAT in vpn-node; ${CUT} and not judged$`,
    ),
  );
  t.end();
});

void t.test('a whole reply is judged as before', (t) => {
  const whole = decoded(
    Array.from({ length: REPLY_LIMITS.entries }, (_, i) => entry(i, 'backend-node', false)),
  );
  t.equal(whole.entriesLeftOut ?? 0, 0);
  t.equal(
    judgeConntrack(verdict('preserved'), whole.entries, whole.entriesLeftOut).status,
    'consistent',
  );
  t.equal(judgeConntrack(verdict('kube-proxy'), [entry(1, 'vpn-node', true)]).status, 'disagrees');
  t.equal(judgeConntrack(verdict('preserved'), []).status, 'no-entries');
  t.end();
});

void t.test('incomplete in every form: text, Markdown, HTML, picture, report.json', (t) => {
  const plain = decoded(Array.from({ length: N }, (_, i) => entry(i, 'backend-node', false)));
  const result = {
    ...cni,
    verdict: withConntrackEvidence(
      { ...cni.verdict, layer: 'preserved' },
      plain.entries,
      plain.entriesLeftOut,
    ),
  };
  const meta = liveMeta();
  t.match(renderVerdictText(result), new RegExp(`conntrack: incomplete: not judged: ${CUT}`));
  t.match(renderReportMarkdown(result, meta), new RegExp(`\\*\\*incomplete\\*\\*: not judged: `));
  t.match(renderReportHtml(result, meta), /<strong>incomplete<\/strong>: not judged: /);
  t.match(placeNotes(result, [])[0]?.text, new RegExp(`^conntrack incomplete: not judged: ${CUT}`));
  const doc = JSON.parse(renderReportJson(result, meta)) as {
    verdict: { conntrack: { status: string } };
  };
  t.equal(doc.verdict.conntrack.status, 'incomplete');
  t.strictSame(reportSchemaErrors(doc), [], 'report.json knows the status');
  t.end();
});

void t.test('a read that failed is judged as entries not seen', (t) => {
  const failed = ['backend-node: CONNTRACK_READ_FAILED: conntrack: not found'];
  // Nothing read on the backend's node: the old judgement said `no-entries` ("nothing there
  // loaded conntrack … no entry also means no NAT") of a table it never saw.
  const none = judgeConntrack(verdict('preserved'), [], 0, failed);
  t.equal(none.status, 'incomplete');
  t.equal(
    none.detail,
    "no entry kept: one read of the flow's entries failed (backend-node: CONNTRACK_READ_FAILED: conntrack: not found) and not judged",
  );
  // The VPN node read, no NAT there; the backend's node not: `consistent` spoke of both.
  const some = judgeConntrack(verdict('preserved'), [entry(1, 'vpn-node', false)], 0, failed);
  t.equal(some.status, 'incomplete');
  t.match(
    some.detail,
    /^not judged: one read .* failed \(.*\), and the entry that decides may be there; of the 1 kept: /,
  );
  // A SNAT seen where the layer says stands, and the failed read is named.
  const seen = judgeConntrack(verdict('cni-masquerade'), [entry(1, 'vpn-node', true)], 0, failed);
  t.equal(seen.status, 'confirms');
  t.match(seen.detail, /; one read of the flow's entries failed \(backend-node: .*\): not judged$/);
  // Both gaps at once, and many failures named in part.
  const many = Array.from({ length: 6 }, (_, i) => `n${i}: no answer`);
  const both = judgeConntrack(verdict('preserved'), [entry(1, 'vpn-node', false)], 3, many);
  t.match(
    both.detail,
    /^not judged: 3 more entries .*; 6 reads of the flow's entries failed \(n0: no answer; n1: no answer; n2: no answer; n3: no answer; 2 more\), and the entry that decides may be among what was not read; /,
  );
  t.equal(
    withConntrackEvidence(verdict('preserved'), [], 0, failed).conntrack?.status,
    'incomplete',
  );
  const unnamed = judgeConntrack(verdict('unknown'), [entry(1, 'vpn-node', false)], 0, failed);
  t.equal(
    unnamed.status,
    'consistent',
    'a layer conntrack does not name: nothing unseen changes it',
  );
  t.match(unnamed.detail, /; one read .*: not judged$/);
  t.end();
});

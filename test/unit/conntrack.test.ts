// Conntrack evidence, pure: `conntrack -L` lines → entries (NAT from the tuples), flow matching,
// and how the entries confirm or disagree with the packet verdict.
import t from 'tap';
import { matchFlow, parseConntrackLine, parseConntrackOutput } from '../../core/doctor/conntrack';
import {
  flowTuples,
  judgeConntrack,
  withConntrackEvidence,
} from '../../core/attribute/conntrack-evidence';
import type { Verdict } from '../../core/attribute/attribute';
import { renderReportMarkdown, renderVerdictText } from '../../core/report/report';

// Real lines from the lab (conntrack v1.4.7): cni-masquerade on the VPN node, kube-proxy NodePort
// on the backend node, the extended format, and the summary line conntrack prints on stderr.
const OUT = `tcp      6 117 TIME_WAIT src=10.90.0.42 dst=10.244.2.5 sport=45678 dport=8080 src=10.244.2.5 dst=192.168.50.1 sport=8080 dport=45678 [ASSURED] mark=0 use=1
tcp      6 431999 ESTABLISHED src=10.90.0.42 dst=192.168.50.2 sport=40000 dport=30080 src=10.244.2.5 dst=10.244.2.1 sport=8080 dport=40000 [ASSURED] mark=0 use=1
ipv4     2 tcp      6 119 SYN_SENT src=10.90.0.42 dst=10.244.2.5 sport=41000 dport=8080 [UNREPLIED] src=10.244.2.5 dst=10.90.0.42 sport=8080 dport=41000 mark=0 use=1
udp      17 29 src=10.0.0.1 dst=10.0.0.2 sport=53 dport=53 src=10.0.0.2 dst=10.0.0.1 sport=53 dport=53 mark=0 use=1
conntrack v1.4.7 (conntrack-tools): 4 flow entries have been shown.
`;

void t.test('conntrack -L: tuples, state, NAT', (t) => {
  const e = parseConntrackOutput(OUT, { name: 'vpn-node', netns: '/run/netns/x', node: 'n1' });
  t.equal(e.length, 4);
  t.same(e[0]?.orig, { src: '10.90.0.42', dst: '10.244.2.5', sport: 45678, dport: 8080 });
  t.same(e[0]?.reply, { src: '10.244.2.5', dst: '192.168.50.1', sport: 8080, dport: 45678 });
  t.equal(e[0]?.state, 'TIME_WAIT');
  t.ok(e[0]?.snat);
  t.notOk(e[0]?.dnat);
  t.ok(e[1]?.snat && e[1].dnat, 'NodePort: DNAT and masquerade on one entry');
  t.equal(e[2]?.state, 'SYN_SENT');
  t.notOk(e[2]?.snat || e[2]?.dnat, 'extended format, unreplied, no NAT');
  t.equal(e[3]?.proto, 'udp');
  t.equal(e[3]?.state, '');
  t.equal(
    parseConntrackLine('conntrack v1.4.7 (conntrack-tools): 0 flow entries have been shown.'),
    null,
  );
  t.equal(
    parseConntrackLine('tcp 6 10 ESTABLISHED src=1.1.1.1'),
    null,
    'a cut line is not an entry',
  );
  t.end();
});

void t.test('matchFlow: by the original tuple or the reversed reply tuple', (t) => {
  const e = parseConntrackOutput(OUT);
  t.equal(
    matchFlow(e, [{ src: '10.90.0.42', dst: '10.244.2.5', sport: 45678, dport: 8080 }]).length,
    1,
  );
  // The backend's view after the SNAT (192.168.50.1:45678 -> 10.244.2.5:8080) names the same entry.
  t.equal(
    matchFlow(e, [{ src: '192.168.50.1', dst: '10.244.2.5', sport: 45678, dport: 8080 }])[0]?.orig
      .sport,
    45678,
  );
  t.same(matchFlow(e, [{ src: '10.9.9.9', dst: '10.244.2.5', sport: 1, dport: 8080 }]), []);
  t.end();
});

function verdict(layer: Verdict['layer']): Verdict {
  return {
    layer,
    rewrittenBetween: ['egress', 'backend'],
    client: { src: '10.90.0.42', sport: 45678, dst: '10.244.2.5', dport: 8080 },
    observed: {
      egress: { src: '10.90.0.42', sport: 45678, dst: '10.244.2.5', dport: 8080 },
      backend: { src: '192.168.50.1', sport: 45678, dst: '10.244.2.5', dport: 8080 },
    },
    evidence: [],
    hint: 'h',
  };
}

void t.test('judge: confirms, disagrees (never overrides), no entries', (t) => {
  const [vpnNode] = parseConntrackOutput(OUT, { name: 'vpn-node', netns: '/n', node: 'n1' });
  const entries = vpnNode === undefined ? [] : [vpnNode];
  t.equal(flowTuples(verdict('cni-masquerade')).length, 2, 'client and egress are one tuple');
  const ok = withConntrackEvidence(verdict('cni-masquerade'), entries);
  t.equal(ok.conntrack?.status, 'confirms');
  t.match(
    ok.confirmedBy?.[0],
    /^conntrack vpn-node on n1: orig 10\.90\.0\.42:45678 -> 10\.244\.2\.5:8080, reply 10\.244\.2\.5:8080 -> 192\.168\.50\.1:45678 \[SNAT\]$/,
  );
  const bad = withConntrackEvidence(verdict('kube-proxy'), entries);
  t.equal(bad.layer, 'kube-proxy', 'the packet verdict stays');
  t.equal(bad.conntrack?.status, 'disagrees');
  t.match(
    bad.reason,
    /conntrack disagrees: packets say kube-proxy, but conntrack shows the source NAT in vpn-node \(cni-masquerade\)/,
  );
  t.equal(judgeConntrack(verdict('preserved'), entries).status, 'disagrees');
  t.equal(judgeConntrack(verdict('preserved'), []).status, 'no-entries');
  t.equal(judgeConntrack(verdict('proxy'), entries).status, 'consistent');
  const text = renderVerdictText({ verdict: ok, points: [] });
  t.match(text, /conntrack: confirms: conntrack in vpn-node holds the source NAT/);
  const md = renderReportMarkdown({ verdict: ok, points: [] }, { generatedAt: 'now', inputs: [] });
  t.match(
    md,
    /\| vpn-node \| n1 \| TIME_WAIT \| `10\.90\.0\.42:45678 -> 10\.244\.2\.5:8080` \| `10\.244\.2\.5:8080 -> 192\.168\.50\.1:45678` \| yes \| no \|/,
  );
  t.end();
});

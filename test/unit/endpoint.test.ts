/**
 * IPv6 endpoints are written `[addr]:port` wherever an address meets a port (issue 15): in
 * verdict reasons, secondary findings, report tuples and the report's reproduce command, which
 * `--dst` must read back.
 */
import t from 'tap';
import type { Inventory } from '../../common/inventory';
import { hostPort, tupleText } from '../../common/endpoint';
import { parseDstArg } from '../../cli/analyze';
import { analyzeEvents } from '../../core/report/analyze';
import { renderReportMarkdown, renderVerdictText } from '../../core/report/report';
import { exchange, pt, type Ep } from './fixtures-events';

void t.test('hostPort and tupleText bracket IPv6 only', (t) => {
  t.equal(hostPort('10.90.0.42', 40000), '10.90.0.42:40000');
  t.equal(hostPort('fd00:42::14', 8080), '[fd00:42::14]:8080');
  t.equal(
    tupleText({ src: 'fd00:90::42', sport: 40000, dst: '10.96.0.10', dport: 80 }),
    '[fd00:90::42]:40000 -> 10.96.0.10:80',
  );
  t.end();
});

const V6 = {
  client: 'fd00:90::42',
  vpnPod: 'fd00:42:0:1::10',
  vpnNode: 'fd00:50::1',
  backendNode: 'fd00:50::2',
  backendPod: 'fd00:42:0:2::14',
  clusterIp: 'fd00:43::80',
};
const INV6: Inventory = {
  nodes: { 'vpn-node': [V6.vpnNode], 'backend-node': [V6.backendNode] },
  pods: {
    'vpn-0': { ip: V6.vpnPod, node: 'vpn-node', role: 'vpn' },
    'web-1': { ip: V6.backendPod, node: 'backend-node', role: 'backend' },
  },
};

void t.test('an IPv6 Service hop and its masquerade: every endpoint in brackets', (t) => {
  const toService: Ep = { src: V6.client, sport: 40000, dst: V6.clusterIp, dport: 80 };
  const atBackend: Ep = { src: V6.vpnNode, sport: 61000, dst: V6.backendPod, dport: 8080 };
  const result = analyzeEvents({
    points: [
      pt('decap', exchange('decap', toService)),
      pt('egress', exchange('egress', toService, { at: 1n })),
      pt('backend', exchange('backend', atBackend, { at: 2n })),
    ],
    inventory: INV6,
    selector: { client: V6.client },
  });
  t.equal(result.verdict.layer, 'cni-masquerade', result.verdict.reason ?? '');
  const kp = result.verdict.secondary?.find((s) => s.layer === 'kube-proxy');
  t.match(kp?.detail, /DNATed \[fd00:43::80\]:80 -> \[fd00:42:0:2::14\]:8080/);
  const text = renderVerdictText(result);
  t.match(text, /\[fd00:90::42\]:40000 -> \[fd00:43::80\]:80/);
  t.notMatch(text, /fd00:43::80:80/, 'no address:port a reader cannot split');

  const md = renderReportMarkdown(result, {
    generatedAt: '2026-12-01T00:00:00.000Z',
    inputs: [
      { name: 'decap', file: 'd.pcap' },
      { name: 'egress', file: 'e.pcap' },
      { name: 'backend', file: 'b.pcap' },
    ],
    selector: { client: V6.client, dst: V6.clusterIp, dport: 80 },
  });
  // Quoted for the shell: `[…]` is a glob pattern there (sh would expand it on a matching file).
  t.match(md, "--dst '[fd00:43::80]:80'");
  const dst = /--dst '?([^'\s]+)'?/.exec(md)?.[1];
  t.equal(dst, '[fd00:43::80]:80', 'the reproduce command brackets --dst');
  t.same(parseDstArg(dst ?? ''), { dst: V6.clusterIp, dport: 80 }, 'and --dst reads it back');
  t.end();
});

/**
 * A live capture's analysis and session record as the collector holds them at the end (three
 * points, the cni-masquerade verdict), and a doctor result naming the masquerade rule: what the
 * report tests of a live capture start from.
 */
import { analyzeEvents } from '../../core/report/analyze';
import { liveReportMeta } from '../../collector/capture-reports';
import type { SessionRecord } from '../../collector/session';
import type { ReportMeta } from '../../core/report/report-document';
import type { AgentInfo } from '../../collector/hub-types';
import type { DoctorResult } from '../../core/doctor/checks';
import { ADDR, CLIENT, DIRECT, INVENTORY, exchange, pt } from './fixtures-events';

/** The cni-masquerade verdict of three points (the backend sees the VPN node's uplink). */
export const cni = analyzeEvents({
  points: [
    pt('decap', exchange('decap', DIRECT)),
    pt('egress', exchange('egress', DIRECT, { at: 1n })),
    pt(
      'backend',
      exchange('backend', { ...DIRECT, src: ADDR.vpnNodeUplink, sport: 61000 }, { at: 2n }),
    ),
  ],
  inventory: INVENTORY,
  selector: { client: CLIENT },
});

/** One doctor finding: the VPN node masquerades the tunnel range. */
export const DOCTOR: DoctorResult = {
  tunnelRange: '10.90.0.0/24',
  client: CLIENT,
  findings: [
    {
      severity: 'error',
      check: 'masquerade',
      node: 'vpn-node',
      namespace: 'vpn-node (/run/netns/b)',
      subject: '-A IP-MASQ-AGENT -j MASQUERADE',
      detail: 'masquerades every packet from 10.90.0.0/24',
      fix: "exclude 10.90.0.0/24 from masquerade in the CNI's own configuration",
    },
  ],
  summary: { errors: 1, warnings: 0, ok: 0 },
};

/** The finished session of `cni`: each point's namespace as its agent reported it. */
export const record: SessionRecord = {
  id: 'c-0001',
  createdAtMs: 0,
  updatedAtMs: 0,
  finishedAtMs: 1,
  state: 'resolved',
  spec: {
    points: [
      { name: 'decap', target: ADDR.vpnPod, iface: 'tun0', filter: 'tcp' },
      { name: 'egress', target: ADDR.vpnPod, iface: 'eth0', filter: 'tcp port 8080' },
      { name: 'backend', target: 'fd00::5', iface: 'eth0', node: 'backend-node' },
    ],
    client: CLIENT,
    dst: ADDR.backendPod,
    dport: 8080,
    timeoutMs: 30_000,
    stopOnFirstMatch: true,
    settleMs: 2_000,
    inventory: INVENTORY,
  },
  points: ['decap', 'egress', 'backend'].map((name, i) => ({
    name,
    agentId: i < 2 ? 'agent-vpn' : 'agent-backend',
    node: i < 2 ? 'vpn-node' : 'backend-node',
    target: i < 2 ? ADDR.vpnPod : 'fd00::5',
    iface: i === 0 ? 'tun0' : 'eth0',
    state: 'stopped',
    packets: 4,
    events: 4,
    kernelDrops: 0,
    queueDrops: 0,
    lost: 0,
    confirmed: true,
    netns: i < 2 ? '/run/netns/vpn-0' : '/run/netns/web-1',
    netnsAddresses: [],
  })),
  verdict: cni.verdict,
  finalReason: 'conclusive',
};
export const agents = [
  { agentId: 'agent-vpn', node: 'vpn-node', hello: { version: '0.1.0' } },
] as unknown as AgentInfo[];

/** The report meta of a finished, resolved live capture of `r` (default `record`) with `agents`. */
export function liveMeta(r: SessionRecord = record): ReportMeta {
  return liveReportMeta({
    record: r,
    agents,
    collector: 'http://127.0.0.1:7070',
    state: 'resolved',
    reason: 'conclusive',
    inventory: INVENTORY,
    generatedAt: '2026-12-01T10:00:00.000Z',
  });
}

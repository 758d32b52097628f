/**
 * One analysed request per verdict the pictures must draw (preserved, cni-masquerade, kube-proxy,
 * proxy, dropped, no-return), built from the synthetic events of fixtures-events.ts through
 * analyzeEvents, as attribute.test.ts builds them.
 */
import { analyzeEvents, type AnalysisResult } from '../../core/report/analyze';
import {
  ADDR,
  CLIENT,
  DIRECT,
  INVENTORY,
  PROBE_REQUEST,
  exchange,
  pt,
  type Ep,
  type Pt,
} from './fixtures-events';

export const TO_SERVICE: Ep = { src: CLIENT, sport: 40000, dst: ADDR.clusterIp, dport: 80 };
const toProxy: Ep = { src: CLIENT, sport: 40000, dst: ADDR.proxyPod, dport: 8080 };
const fromProxy: Ep = { src: ADDR.proxyPod, sport: 51000, dst: ADDR.backendPod, dport: 8080 };
const from = (src: string, sport = DIRECT.sport): Ep => ({ ...DIRECT, src, sport });

/** decap, egress, backend with the given tuples, 1 µs and 250 µs later. */
export function three(
  decap: Ep,
  egress: Ep,
  backend: Ep,
  names = ['decap', 'egress', 'backend'],
): Pt[] {
  const [a = 'decap', b = 'egress', c = 'backend'] = names;
  return [
    pt(a, exchange(a, decap)),
    pt(b, exchange(b, egress, { at: 1_000n })),
    pt(c, exchange(c, backend, { at: 250_000n })),
  ];
}

export const analyze = (points: Pt[]): AnalysisResult =>
  analyzeEvents({ points, inventory: INVENTORY, selector: { client: CLIENT } });

const unrelated = exchange(
  'backend',
  { src: '10.244.2.77', sport: 1234, dst: ADDR.backendPod, dport: 8080 },
  { isn: 42, tsVal: 1, ipId: 1 },
);

export const SCENARIOS = {
  preserved: () => analyze(three(DIRECT, DIRECT, DIRECT)),
  'cni-masquerade': () => analyze(three(DIRECT, DIRECT, from(ADDR.vpnNodeUplink, 61000))),
  'kube-proxy': () =>
    analyze(
      three(TO_SERVICE, TO_SERVICE, {
        src: ADDR.backendNodeBridge,
        sport: 40000,
        dst: ADDR.backendPod,
        dport: 8080,
      }),
    ),
  proxy: () =>
    analyze([
      pt('decap', exchange('decap', toProxy)),
      pt('egress', exchange('egress', toProxy, { at: 1n })),
      pt(
        'backend',
        exchange('backend', fromProxy, {
          at: 5n,
          isn: 99999,
          tsVal: 31337,
          ipId: 7,
          request: { ...PROBE_REQUEST, payloadHash: 0x99999999, length: 140 },
        }),
      ),
    ]),
  dropped: () =>
    analyze([
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 1 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only', synRetransmits: 1 })),
      pt('backend', unrelated),
    ]),
  'no-return': () =>
    analyze([
      pt('decap', exchange('decap', DIRECT, { phase: 'syn-only', synRetransmits: 2 })),
      pt('egress', exchange('egress', DIRECT, { at: 1n, phase: 'syn-only', synRetransmits: 2 })),
      pt(
        'backend',
        exchange('backend', DIRECT, { at: 2n, phase: 'syn-synack', synRetransmits: 2 }),
      ),
    ]),
} satisfies Record<string, () => AnalysisResult>;

export type ScenarioName = keyof typeof SCENARIOS;

/**
 * Captures of one request across three points (decap and egress on the VPN pod's agent, backend
 * on the backend's), each following its own connection (sim-events.ts journeyOf): the capture
 * body, the agent side that answers a capture command with that connection's packets, and the
 * check of a verdict against the connection it should have followed.
 */
import type { CaptureView } from '../../collector';
import type { CaptureRequestBody } from '../../lab/live-collector';
import type { SimAgent } from './sim-agent';
import {
  BACKEND_POD,
  CLIENT,
  JOURNEY_POINTS,
  VPN_POD,
  journeyEvents,
  journeyOf,
  streamBatch,
  type JourneyPoint,
} from './sim-events';

/** The agents of a journey: the VPN pod's node and the backend's. */
export const JOURNEY_AGENTS = [
  { role: 'vpn', podIp: VPN_POD, points: ['decap', 'egress'] },
  { role: 'backend', podIp: BACKEND_POD, points: ['backend'] },
] as const;

/** decap (tun0) and egress (eth0) in the VPN pod, backend in the backend pod. */
export function journeyCapture(settleMs: number, timeoutMs: number): CaptureRequestBody {
  return {
    points: [
      { name: 'decap', target: VPN_POD, iface: 'tun0' },
      { name: 'egress', target: VPN_POD, iface: 'eth0' },
      { name: 'backend', target: BACKEND_POD, iface: 'eth0' },
    ],
    client: CLIENT,
    settleMs,
    timeoutMs,
  };
}

const isJourneyPoint = (p: string): p is JourneyPoint =>
  (JOURNEY_POINTS as readonly string[]).includes(p);

/**
 * Sends, for every capture command it gets, `noise` events of other traffic and then the
 * capture's connection as that point sees it (statuses are answerCommands' business).
 */
export function sendJourneys(agent: SimAgent, noise: number, batch = 500): void {
  agent.onCommand((cmd) => {
    if (cmd.kind !== 'capture') return;
    const { captureId, point } = cmd.capture;
    if (!isJourneyPoint(point)) return;
    for (let f = 1; f <= noise; f += batch)
      agent.sendEvents(
        captureId,
        point,
        streamBatch(agent.node, point, agent.podIp, f, Math.min(batch, noise - f + 1)),
      );
    agent.sendEvents(
      captureId,
      point,
      journeyEvents(point, agent.node, cmd.capture.iface, journeyOf(captureId)),
    );
  });
}

/** Why a final capture's verdict is not `preserved` about its own connection, or null. */
export function journeyMismatch(v: CaptureView): string | null {
  const want = journeyOf(v.id);
  if (v.state !== 'resolved') return `state ${v.state} (${v.finalReason ?? ''})`;
  const verdict = v.verdict;
  if (verdict?.layer !== 'preserved')
    return `verdict ${verdict?.layer ?? 'none'}: ${verdict?.reason ?? ''}`;
  if (verdict.client?.sport !== want.sport)
    return `followed port ${verdict.client?.sport ?? '?'}, not its own ${want.sport}`;
  return null;
}

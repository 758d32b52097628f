/**
 * Agent SIGKILL: the agent of one point of a capture, in a process of its own (agent-child.ts), is
 * killed at a chosen moment — after the capture command reached it, or after it confirmed the
 * capture but before its packets reached the collector. The connection's packets passed every
 * point, nothing rewritten, so the true verdict is `preserved`; the collector cannot know that
 * without the killed point. An honest report says `preserved` (when the points left prove it) or
 * `unknown` naming the killed point; anything else (`dropped`, `no-return`) is a wrong verdict.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { CaptureView } from '../../collector';
import { collect, stopChild } from '../../lab/child';
import { LiveCollector } from '../../lab/live-collector';
import { spawnTracked } from '../../lab/live-procs';
import { connectFleet, makeFleet } from './fleet';
import { sendJourneys } from './journeys';
import { BACKEND_POD, CLIENT, VPN_POD, type JourneyPoint } from './sim-events';
import { row, type Ctx, type ScenarioOut } from './types';
import { waitUntil } from './wait';

/** One pod address per point, so each point has an agent of its own. */
const POD: Record<JourneyPoint, string> = {
  decap: VPN_POD,
  egress: '10.244.1.11',
  backend: BACKEND_POD,
};
const IFACE: Record<JourneyPoint, string> = { decap: 'tun0', egress: 'eth0', backend: 'eth0' };

interface Case {
  point: JourneyPoint;
  /** Killed once it reported this stage. */
  at: 'command' | 'confirmed';
}

const WHEN = {
  command: 'after the capture command reached it, before it confirmed',
  confirmed: 'after it confirmed the capture, before its packets reached the collector',
};

/** A child agent and the stages it reported. */
class ChildAgent {
  readonly stages: string[] = [];
  constructor(readonly child: ChildProcess) {
    this.stderr = collect(child.stderr, 4000);
    if (child.stdout !== null)
      createInterface({ input: child.stdout }).on('line', (l) => {
        try {
          const m = JSON.parse(l) as { stage?: string; error?: string };
          this.stages.push(m.stage ?? `error: ${m.error ?? l}`);
        } catch {
          this.stages.push(`unparsed: ${l}`);
        }
      });
  }
  readonly stderr: () => string;
  reached(stage: string, timeoutMs: number): Promise<void> {
    return waitUntil(
      () => this.stages.includes(stage),
      timeoutMs,
      `child agent ${stage}`,
      10,
    ).catch((e: unknown) => {
      throw new Error(
        `${e instanceof Error ? e.message : String(e)} (stages: ${this.stages.join(', ')}; stderr: ${this.stderr().slice(-500)})`,
      );
    });
  }
  go(): void {
    this.child.stdin?.write('go\n');
  }
}

/** The verdict's words about `point`: its reason and the point's evidence. */
function wordsAbout(v: CaptureView, point: string): string {
  const verdict = v.verdict;
  if (verdict === null) return '';
  const ev = verdict.evidence.filter((e) => e.point === point).map((e) => e.detail);
  return [verdict.reason ?? '', ...ev].join(' | ');
}

export async function scenarioAgentKill(ctx: Ctx, out: ScenarioOut): Promise<void> {
  const cases: Case[] = [
    { point: 'backend', at: 'command' },
    { point: 'backend', at: 'confirmed' },
    ...(ctx.quick
      ? []
      : ([
          { point: 'egress', at: 'confirmed' },
          { point: 'decap', at: 'confirmed' },
        ] as const)),
  ];
  out.title = 'agent SIGKILL during a capture';
  out.setup =
    'a capture of one connection (SYN, SYN-ACK, nothing rewritten) at decap, egress and backend, one ' +
    'agent per point; the agent of one point is a process of its own and is SIGKILLed; settle 1 s';
  const c = await LiveCollector.start({ allowSharedAgentToken: true });
  const { rows, notes } = out;
  try {
    for (const [i, k] of cases.entries()) {
      const others = (Object.keys(POD) as JourneyPoint[]).filter((p) => p !== k.point);
      const fleet = makeFleet(
        c,
        others.map((p) => ({
          agentId: `akill-${i}-${p}`,
          node: `akill-${i}-${p}-node`,
          podIp: POD[p],
        })),
      );
      for (const a of fleet.agents) sendJourneys(a, 0);
      await connectFleet(fleet);
      const child = new ChildAgent(
        spawnTracked(
          [
            join(__dirname, 'agent-child.js'),
            JSON.stringify({
              url: c.agentsUrl,
              token: c.token,
              agentId: `akill-${i}-${k.point}`,
              node: `akill-${i}-${k.point}-node`,
              podIp: POD[k.point],
            }),
          ],
          undefined,
          [],
          'pipe',
        ),
      );
      try {
        await child.reached('connected', 20_000);
        const v0 = await c.createCapture({
          points: (Object.keys(POD) as JourneyPoint[]).map((p) => ({
            name: p,
            target: POD[p],
            iface: IFACE[p],
          })),
          client: CLIENT,
          settleMs: 1000,
          timeoutMs: 8000,
        });
        await child.reached('command', 10_000);
        if (k.at === 'confirmed') {
          child.go();
          await child.reached('confirmed', 10_000);
        }
        await stopChild(child.child, 'SIGKILL');
        const v = await c.waitCapture(v0.id, (x) => x.finishedAt !== null, 'final', 30_000);
        const layer = v.verdict?.layer ?? 'none';
        const words = wordsAbout(v, k.point);
        const names = layer === 'unknown' && words.includes(k.point);
        const honest = layer === 'preserved' || names;
        rows.push(
          row(
            `${k.point} agent killed ${WHEN[k.at]}`,
            `${layer}: ${(v.verdict?.reason ?? v.finalReason ?? '').slice(0, 220)}`,
            `preserved, or unknown naming ${k.point}`,
            honest,
          ),
        );
        ctx.log(`agent-kill: ${k.point} at ${k.at}: ${layer}`);
      } finally {
        await stopChild(child.child, 'SIGKILL');
        fleet.close();
      }
    }
    const wrong = rows.filter((r) => r.met === false);
    if (wrong.length > 0)
      notes.push(
        'A point whose agent confirmed the capture and then died is not "missing" to the collector ' +
          '(collector/session.ts missingPoints: no events and failed or never confirmed), and the ' +
          'collector does not mark a point failed when its agent disconnects (collector/sessions.ts ' +
          'onAgent returns on a disconnect): the empty point is then read as "the packet never got ' +
          'there" and the verdict is drawn from the absence of events that were simply never delivered.',
      );
  } finally {
    await c.close();
  }
}

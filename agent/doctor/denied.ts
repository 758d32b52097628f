/**
 * The denied-source test's shell: captures at the client, the backend's node (and the backend pod
 * when given), one HTTP request from the denied source address in the client namespace, then the
 * events for core/doctor/denied.ts. The source address must already exist in the client
 * namespace (the doctor adds nothing): curl binds to it with --interface.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { HoptraceError } from '../../common/errors';
import type { PacketEvent } from '../../common/event';
import { NsCapture } from '../capture/ns-capture';
import { hostPort } from '../../common/endpoint';

/** Where and what to test. */
export interface DeniedTestSpec {
  source: string;
  target: { ip: string; port: number };
  node: string;
  clientNetns: string;
  backendNodeNetns: string;
  backendNetns?: string | undefined;
  /** How long curl waits for an answer (default 2 s). */
  timeoutMs?: number | undefined;
}

/** What the test captured (the input of classifyDenied). */
export interface DeniedTestRun {
  source: string;
  target: { ip: string; port: number };
  node: string;
  client: PacketEvent[];
  backendNode: PacketEvent[];
  backend?: PacketEvent[];
  answered: boolean;
}

function curl(netns: string, source: string, url: string, timeoutMs: number): Promise<boolean> {
  const secs = String(Math.max(1, Math.round(timeoutMs / 1000)));
  return new Promise((resolve) => {
    execFile(
      'nsenter',
      [
        `--net=${netns}`,
        '--',
        'curl',
        '-s',
        '-o',
        '/dev/null',
        '--noproxy',
        '*',
        '--interface',
        source,
        '--max-time',
        secs,
        '-w',
        '%{http_code}',
        url,
      ],
      { timeout: timeoutMs + 5000 },
      (err, stdout) => {
        resolve(err === null && /^[1-5]\d\d$/.test(stdout.trim()) && stdout.trim() !== '000');
      },
    );
  });
}

/** Runs the test. Throws DOCTOR_DENIED_TEST_FAILED when a capture cannot start. */
export async function runDeniedTest(spec: DeniedTestSpec): Promise<DeniedTestRun> {
  const points: { name: string; netns: string; filter: string; events: PacketEvent[] }[] = [
    { name: 'client', netns: spec.clientNetns, filter: `host ${spec.source} or icmp`, events: [] },
    { name: 'backend-node', netns: spec.backendNodeNetns, filter: 'tcp or icmp', events: [] },
  ];
  if (spec.backendNetns !== undefined)
    points.push({ name: 'backend', netns: spec.backendNetns, filter: 'tcp', events: [] });
  const captures: NsCapture[] = [];
  try {
    for (const p of points) {
      const c = new NsCapture(
        { point: p.name, node: spec.node, iface: 'any', filter: p.filter },
        { netnsPath: p.netns, batch: { maxBatch: 64, maxDelayMs: 10 } },
      );
      captures.push(c);
      await c.start(
        (events) => p.events.push(...events),
        () => undefined,
      );
    }
    const url = `http://${hostPort(spec.target.ip, spec.target.port)}/hoptrace-denied-${randomBytes(4).toString('hex')}`;
    const answered = await curl(spec.clientNetns, spec.source, url, spec.timeoutMs ?? 2000);
    // Late packets (retransmitted SYNs, ICMP) get a moment to be delivered.
    await new Promise((r) => setTimeout(r, 300));
    await Promise.all(captures.splice(0).map((c) => c.stop()));
    const run: DeniedTestRun = {
      source: spec.source,
      target: spec.target,
      node: spec.node,
      client: points[0]?.events ?? [],
      backendNode: points[1]?.events ?? [],
      answered,
    };
    if (points[2] !== undefined) run.backend = points[2].events;
    return run;
  } catch (e) {
    throw new HoptraceError(
      'DOCTOR_DENIED_TEST_FAILED',
      e instanceof Error ? e.message : String(e),
      {
        where: 'denied-source test',
        hint: 'the agent needs root and libpcap; check the namespaces and that the source address exists in the client namespace',
      },
    );
  } finally {
    await Promise.all(captures.map((c) => c.stop().catch(() => undefined)));
  }
}

/**
 * The collector's requests to an agent (doctor facts, conntrack entries, evidence frames), served
 * a bounded number at a time. Each doctor or conntrack request reads its namespaces one after the
 * other, a child process at a time (agent/doctor/read.ts) whose output may be up to 32 MiB; a
 * frames reply holds up to 4 MiB until written. Run all at once, a burst of requests grew the
 * agent towards its 512 MiB limit (deploy/base/agent.yaml), next to its captures' ~340 MiB
 * (runtime.ts DEFAULT_MAX_CAPTURES). Past the bound a request is answered AGENT_BUSY at once.
 */
import pino from 'pino';
import { HoptraceError } from '../common/errors';
import { FACT_PARTS, emptyNamespaceFacts } from '../common/wire';
import type { FramesReply, FramesRequest, NamespaceFacts } from '../common/wire';
import type { AgentReplyBody, CollectorRequest } from './link/collector-link';
import { framesRefused } from './link/request-refusal';

/**
 * Doctor and conntrack requests answered at once (2: ≤ 64 MiB of child output) and waiting
 * (8 more: each only its decoded request, bounded by common/command-limits.ts). The collector
 * sends one doctor request per agent per `hoptrace doctor` and one conntrack query per agent per
 * finished capture, and gives up on an answer after 10 s (collector/agent-requests.ts).
 */
export const REQUEST_LIMITS = { running: 2, waiting: 8, frames: 8 } as const;

/** At most `limit` tasks at once and `waiting` more queued; beyond that, refused. */
export class TaskGate {
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly limit: number,
    private readonly waiting: number,
  ) {}

  /** Runs `task` once a slot is free; null (and `task` not run) when the gate is full. */
  run<T>(task: () => Promise<T>): Promise<T> | null {
    if (this.active >= this.limit && this.queue.length >= this.waiting) return null;
    return (async () => {
      if (this.active < this.limit) this.active++;
      else await new Promise<void>((resolve) => this.queue.push(resolve)); // handed a slot
      try {
        return await task();
      } finally {
        const next = this.queue.shift();
        if (next === undefined) this.active--;
        else next();
      }
    })();
  }
}

type Answerable = Exclude<CollectorRequest, { kind: 'framesRequest' }>;

/** What serving requests needs (main.ts wires the real ones; tests give fakes). */
export interface RequestDeps {
  answer(req: Answerable): Promise<AgentReplyBody>;
  frames(req: FramesRequest): Promise<FramesReply>;
  reply(body: AgentReplyBody): void;
  agentId(): string;
  node: string;
  logger?: pino.Logger;
}

/** Serves the collector's requests within REQUEST_LIMITS; returns the link's request handler. */
export function serveRequests(
  deps: RequestDeps,
  limits: { running: number; waiting: number; frames: number } = REQUEST_LIMITS,
): (req: CollectorRequest) => void {
  const log = deps.logger ?? pino({ enabled: false });
  const reads = new TaskGate(limits.running, limits.waiting);
  const frames = new TaskGate(limits.frames, 0);
  const busy = (what: string, n: string): HoptraceError =>
    new HoptraceError('AGENT_BUSY', `this agent already answers ${n} ${what} requests`, {
      where: deps.node,
      hint: 'the collector asked more at once than an agent serves; ask again in a moment',
    });
  return (req) => {
    if (req.kind === 'framesRequest') {
      const run = frames.run(() => deps.frames(req.framesRequest));
      if (run === null) {
        const err = busy('frames', String(limits.frames));
        log.warn({ code: err.code, kind: req.kind }, err.message);
        deps.reply({ kind: 'framesReply', framesReply: framesRefused(req.framesRequest, err) });
        return;
      }
      void run.then((framesReply) => {
        deps.reply({ kind: 'framesReply', framesReply });
      });
      return;
    }
    const run = reads.run(() => deps.answer(req));
    if (run === null) {
      const err = busy('doctor and conntrack', `${limits.running} (and holds ${limits.waiting})`);
      log.warn({ code: err.code, kind: req.kind }, err.message);
      deps.reply(readRefused(req, deps.agentId(), deps.node, err));
      return;
    }
    void run.then((body) => {
      deps.reply(body);
    });
  };
}

/** The answer to a doctor or conntrack request that was not read: each target unread, why. */
export function readRefused(
  req: Answerable,
  agentId: string,
  node: string,
  err: HoptraceError,
): AgentReplyBody {
  if (req.kind === 'conntrackQuery') {
    const q = req.conntrackQuery;
    return {
      kind: 'conntrackReport',
      conntrackReport: {
        requestId: q.requestId,
        captureId: q.captureId,
        agentId,
        entries: [],
        errors: q.targets.map((t) => `${t.name}: ${err.message}`),
      },
    };
  }
  const d = req.doctorRequest;
  const facts: NamespaceFacts[] = d.targets.map((t) => ({
    ...emptyNamespaceFacts(t, node, d.family),
    errorCode: err.code,
    message: err.message,
    unread: [...FACT_PARTS],
  }));
  return {
    kind: 'doctorReport',
    doctorReport: { requestId: d.requestId, agentId, node, facts },
  };
}

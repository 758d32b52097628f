/**
 * Request/reply with agents over the hub for `hoptrace doctor`, conntrack evidence and evidence
 * frames: a DoctorRequest, ConntrackQuery or FramesRequest goes out with a fresh requestId, the
 * agent's answer comes back unspooled, and a missing answer is a timeout (the caller reports it,
 * nothing is retried). A doctor or conntrack answer that says the agent refused the request
 * (error_code: DOCTOR_BAD_REQUEST, a bound broken) rejects at once with that code and why. Facts
 * and entries are kept only for the targets sent to that agent, as its hello's node
 * (own-replies.ts); the rest are dropped and logged (AGENT_UNASKED_FACTS).
 */
import { randomBytes } from 'node:crypto';
import { detailOf, ERRORS, HoptraceError, type ErrorCode } from '../common/errors';
import type {
  ConntrackReport,
  ConntrackTuple,
  DoctorReport,
  DoctorTarget,
  FramesReply,
} from '../common/wire';
import type { AgentHub, AgentReply } from './hub-types';
import type { CollectorLogger } from './logger';
import { ownEntries, ownFacts, type Owned } from './own-replies';

interface Pending {
  /** Only the agent asked may answer. */
  agentId: string;
  resolve: (r: AgentReply) => void;
  timer: NodeJS.Timeout;
}

/** The most of an agent's refusal message the collector passes on (the agent is not trusted). */
const MAX_REFUSAL_CHARS = 1024;

/**
 * The error of a report in which the agent refused the request whole (its errorCode), or null:
 * the agent's code when the catalog has it (else WIRE_UNEXPECTED) and its message, cut to
 * MAX_REFUSAL_CHARS.
 */
function refusalOf(
  agentId: string,
  what: string,
  r: { errorCode?: string; message?: string },
): HoptraceError | null {
  const code = r.errorCode;
  if (code === undefined || code === '') return null;
  const known = code in ERRORS ? (code as ErrorCode) : null;
  const said = detailOf(r.message ?? '', code, undefined, undefined);
  const cut = said.length > MAX_REFUSAL_CHARS ? `${said.slice(0, MAX_REFUSAL_CHARS)}…` : said;
  return new HoptraceError(
    known ?? 'WIRE_UNEXPECTED',
    known === null
      ? `refused the ${what} with a code this collector does not know (${code.slice(0, 64)}): ${cut}`
      : `refused the ${what}: ${cut}`,
    { where: `agent ${agentId}` },
  );
}

/** Sends requests to agents and matches their replies. One per hub. */
export class AgentRequests {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly hub: AgentHub,
    private readonly timeoutMs = 10_000,
    private readonly log?: CollectorLogger,
  ) {
    if (hub.onReply === undefined) return;
    hub.onReply((r) => {
      const p = this.pending.get(r.report.requestId);
      if (p === undefined || p.agentId !== r.agentId) return;
      this.pending.delete(r.report.requestId);
      clearTimeout(p.timer);
      p.resolve(r);
    });
  }

  private ask(
    agentId: string,
    send: (requestId: string) => boolean,
    what: string,
    code: ErrorCode = 'DOCTOR_NO_AGENT',
    timeoutMs = this.timeoutMs,
  ): Promise<AgentReply> {
    const requestId = `q-${randomBytes(6).toString('hex')}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        reject(
          new HoptraceError(code, `agent ${agentId} did not answer the ${what} in time`, {
            where: agentId,
            hint: 'the agent may be an older version or disconnected; check GET /v1/agents',
          }),
        );
      }, timeoutMs);
      timer.unref();
      this.pending.set(requestId, { agentId, resolve, timer });
      if (!send(requestId)) {
        clearTimeout(timer);
        this.pending.delete(requestId);
        reject(new HoptraceError(code, `agent ${agentId} is not connected`, { where: agentId }));
      }
    });
  }

  /**
   * Asks one agent for the retained bytes of some frames of a capture point (at most 256).
   * Rejects with FRAMES_NO_AGENT (not connected, no answer within `timeoutMs`).
   */
  async frames(
    agentId: string,
    req: { captureId: string; point: string; frames: number[]; release: boolean },
    timeoutMs: number,
  ): Promise<FramesReply> {
    const r = await this.ask(
      agentId,
      (requestId) =>
        this.hub.send(agentId, { kind: 'framesRequest', framesRequest: { requestId, ...req } }),
      'frames request',
      'FRAMES_NO_AGENT',
      timeoutMs,
    );
    if (r.kind !== 'framesReply')
      throw new HoptraceError('WIRE_UNEXPECTED', `${r.kind} for a frames request`);
    return r.report;
  }

  /**
   * Asks one agent for the doctor facts of `targets`, read for `family`. Rejects with
   * DOCTOR_NO_AGENT (not connected, no answer in time) or the agent's refusal (DOCTOR_BAD_REQUEST).
   */
  async doctor(agentId: string, targets: DoctorTarget[], family: 4 | 6): Promise<DoctorReport> {
    const r = await this.ask(
      agentId,
      (requestId) =>
        this.hub.send(agentId, {
          kind: 'doctorRequest',
          doctorRequest: { requestId, targets, family },
        }),
      'doctor request',
    );
    if (r.kind !== 'doctorReport')
      throw new HoptraceError('WIRE_UNEXPECTED', `${r.kind} for a doctor request`);
    const refused = refusalOf(agentId, 'doctor request', r.report);
    if (refused !== null) throw refused;
    const own = this.owned(agentId, 'doctor facts', (node) =>
      ownFacts(r.report.facts, targets, node),
    );
    return { ...r.report, facts: own };
  }

  /**
   * Asks one agent for the conntrack entries of a flow. Rejects with DOCTOR_NO_AGENT or the
   * agent's refusal (DOCTOR_BAD_REQUEST).
   */
  async conntrack(
    agentId: string,
    captureId: string,
    targets: DoctorTarget[],
    tuples: ConntrackTuple[],
  ): Promise<ConntrackReport> {
    const r = await this.ask(
      agentId,
      (requestId) =>
        this.hub.send(agentId, {
          kind: 'conntrackQuery',
          conntrackQuery: { requestId, captureId, targets, tuples },
        }),
      'conntrack query',
    );
    if (r.kind !== 'conntrackReport')
      throw new HoptraceError('WIRE_UNEXPECTED', `${r.kind} for a conntrack query`);
    const refused = refusalOf(agentId, 'conntrack query', r.report);
    if (refused !== null) throw refused;
    const own = this.owned(agentId, 'conntrack entries', (node) =>
      ownEntries(r.report.entries, targets, node),
    );
    // An agent gone by the time its answer came: none of its entries is taken (ownEntries), so
    // what it was asked is said unread, not left to read as "no entries".
    if (!this.hub.agents().some((a) => a.agentId === agentId))
      return {
        ...r.report,
        entries: own,
        errors: [
          ...r.report.errors,
          `${targets.map((t) => t.name).join(', ')}: agent ${agentId} was no longer connected when its answer came (not taken)`,
        ],
      };
    return { ...r.report, entries: own };
  }

  /**
   * What `agentId` may speak for of its reply, as the node the hub knows it by (its hello's); the
   * dropped part is logged, counted, under AGENT_UNASKED_FACTS.
   */
  private owned<T>(agentId: string, what: string, keep: (node: string | null) => Owned<T>): T[] {
    const node = this.hub.agents().find((a) => a.agentId === agentId)?.node ?? null;
    const { kept, dropped } = keep(node);
    if (dropped.length > 0) {
      const names = [...new Set(dropped)].slice(0, 4).map((n) => JSON.stringify(n.slice(0, 64)));
      this.log?.warn(
        {
          agentId,
          ...(node === null ? {} : { node }),
          count: dropped.length,
          code: 'AGENT_UNASKED_FACTS',
        },
        `${dropped.length} ${what} of agent ${agentId} name namespaces it was not asked for (${names.join(', ')}${dropped.length > names.length ? ', …' : ''}): dropped; what it was asked for is taken as node ${node ?? '(unknown)'}'s`,
      );
    }
    return kept;
  }
}

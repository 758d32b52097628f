/**
 * The agent's runtime: turns the collector's capture/stop commands into captures inside target
 * network namespaces (agent/capture/ns-capture.ts) and streams their events, statuses and errors
 * over the CollectorLink. Live capture always runs in a worker process, also in the agent's own
 * namespace: a `cap` fault (an interface removed mid-capture aborts the process) then ends one
 * capture, not the agent.
 *
 * Nothing the collector asks grows the agent without bound: at most `maxCaptures` captures live
 * at once (more are refused, AGENT_BUSY), a capture is forgotten once its last status is sent
 * (a short history answers a resent command), and a deadline is checked against this node's
 * clock before anything starts (CAPTURE_BAD_DEADLINE).
 */
import pino from 'pino';
import type { NsCapture } from './capture/ns-capture';
import type { RetentionTarget } from './capture/retention';
import type { RetentionStore } from './capture/retention-store';
import { isHoptraceError, HoptraceError } from '../common/errors';
import type {
  CaptureCommand,
  CaptureState,
  CaptureStatus,
  EventBatch,
  FramesReply,
  FramesRequest,
  Hello,
  StopCommand,
} from '../common/wire';
import type { CollectorCommand } from './link/collector-link';
import type { NamespaceInfo, NetnsScope } from './netns/addresses';
import type { ResolvedTarget } from './netns/resolve';
import { joinTicker } from './ticker';
import { framesRefused } from './link/request-refusal';

/** What the runtime needs of a capture (NsCapture; tests give fakes, startEncoded optional). */
type RuntimeCapture = Pick<NsCapture, 'start' | 'stop' | 'stats'> &
  Partial<Pick<NsCapture, 'startEncoded' | 'finalStats'>>;

/** What the runtime needs from the outside world (injected, so it is testable without root). */
export interface AgentDeps {
  send(kind: 'events', body: EventBatch): void;
  send(kind: 'status', body: CaptureStatus): void;
  send(
    kind: 'error',
    body: { code: string; message: string; captureId: string; point: string },
  ): void;
  resolveTarget(target: string): Promise<ResolvedTarget>;
  namespaceAddresses(path: string): Promise<{ addresses: string[] }>;
  makeCapture(
    spec: { point: string; node: string; iface: string; filter?: string; snaplen?: number },
    netnsPath: string,
    retain?: RetentionTarget,
  ): RuntimeCapture;
  nowMs(): number;
  /** Frame retention (evidence frames); absent = none, and frames requests say so. */
  retention?: Pick<RetentionStore, 'open' | 'ended' | 'answer' | 'release'>;
}

interface Running {
  cmd: CaptureCommand;
  capture: RuntimeCapture | undefined;
  state: CaptureState;
  netns: string;
  netnsAddresses: string[];
  errorCode: string;
  message: string;
  /** Leaves the shared status tick (agent/ticker.ts). */
  stopStatus: (() => void) | undefined;
  /** The last status sent, as text, without and with its running counts (statusKeys). */
  lastStatus: string;
  lastCounts: string;
  /** When it was sent (deps.nowMs). */
  lastStatusMs: number;
  deadlineTimer: NodeJS.Timeout | undefined;
  /** Resolves once the capture stopped or failed. */
  done: Promise<void>;
  markDone: () => void;
}

const STATUS_INTERVAL_MS = 1000;
/** A status whose only news is its running counts waits this long after the last one. */
export const COUNTS_INTERVAL_MS = 5000;
/**
 * How long a frames request waits for its capture to stop (the collector sends the stop just
 * before; the worker drains its ring, ~1 s, and may take up to 10 s before it is killed).
 */
export const FRAMES_WAIT_MS = 15_000;

/**
 * Captures live at once by default (`--max-captures`). Each is an nsenter and a Node worker
 * (~50 MiB), a 32 MiB ring and a 2 MiB batch: ~85 MiB. The DaemonSet's limit is 512 MiB
 * (deploy/base/agent.yaml) and the agent itself holds ~60 MiB with up to 4 MiB of spool in
 * flight, so 4 captures (~340 MiB) leave room for the doctor's and conntrack's child processes
 * (agent/requests.ts) and frames replies, where a fifth would put the agent near its limit, and
 * the kernel would kill the agent, with every capture of the node, instead of refusing one.
 * The hello announces the agent's number (Hello.max_captures); agents from before that field ran
 * this default, which collectors assume for them (common/hello-limits.ts).
 */
export const DEFAULT_MAX_CAPTURES = 4;
/** Final statuses kept to answer a resent command of a finished capture (not to re-run it). */
export const FINISHED_KEPT = 64;
/**
 * A deadline further ahead than this is refused (CAPTURE_BAD_DEADLINE): the collector's longest
 * is a repro's 24 h (plus 10 s); 7 days leaves room for clocks that disagree by days.
 */
export const MAX_DEADLINE_AHEAD_MS = 7 * 86_400_000;
/**
 * A deadline timer wakes at least this often and looks at the clock again: setTimeout holds at
 * most 2^31 - 1 ms (~24.8 days; longer fires after 1 ms), and a clock stepped by NTP is followed.
 */
export const DEADLINE_STEP_MS = 3_600_000;

/** Options of the runtime (tests shorten the deadline step). */
export interface RuntimeOptions {
  maxCaptures?: number;
  deadlineStepMs?: number;
}

/** A time as ISO text when Date can say it (9e15 ms cannot be one). */
function isoTime(ms: number): string {
  return Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : `${ms} ms after 1970`;
}

/** `95.0 s`, `3.2 h`, `12.5 days`. */
function spanText(ms: number): string {
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 2 * 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} days`;
}

/** Stopped or failed (a call, so that TypeScript does not narrow the state across awaits). */
function ended(r: Running): boolean {
  return r.state === 'stopped' || r.state === 'failed';
}

function key(captureId: string, point: string): string {
  return `${captureId}\u0000${point}`;
}

/** Runs captures on behalf of the collector. */
export class AgentRuntime {
  /** Captures arming or capturing; a capture leaves once its last status is sent. */
  private readonly running = new Map<string, Running>();
  /** The last statuses of finished captures, oldest first (FINISHED_KEPT). */
  private readonly finished = new Map<string, CaptureStatus>();
  private readonly log: pino.Logger;
  private readonly maxCaptures: number;
  private readonly deadlineStepMs: number;

  constructor(
    private readonly node: string,
    private readonly deps: AgentDeps,
    logger?: pino.Logger,
    opts: RuntimeOptions = {},
  ) {
    this.log = logger ?? pino({ enabled: false });
    this.maxCaptures = opts.maxCaptures ?? DEFAULT_MAX_CAPTURES;
    this.deadlineStepMs = Math.min(opts.deadlineStepMs ?? DEADLINE_STEP_MS, 2 ** 31 - 1);
  }

  /** Entry point for commands from the collector. */
  handle(cmd: CollectorCommand): void {
    if (cmd.kind === 'capture') void this.startCapture(cmd.capture);
    else void this.stopCapture(cmd.stop);
  }

  /** Captures in progress, arming or capturing (for tests and status). */
  active(): { captureId: string; point: string; state: CaptureState }[] {
    return [...this.running.values()].map((r) => ({
      captureId: r.cmd.captureId,
      point: r.cmd.point,
      state: r.state,
    }));
  }

  private status(r: Running): CaptureStatus {
    const s = r.capture?.stats();
    return {
      captureId: r.cmd.captureId,
      point: r.cmd.point,
      state: r.state,
      packets: s?.packets ?? 0,
      kernelDrops: s?.kernelDrops ?? null,
      ifaceDrops: s?.ifaceDrops ?? null,
      queueDrops: s?.queueDrops ?? 0,
      errorCode: r.errorCode,
      message: r.message,
      netns: r.netns,
      netnsAddresses: r.netnsAddresses,
      iface: r.cmd.iface,
      linkType: '',
      ...(s?.folded !== undefined ? { foldedPackets: s.folded } : {}),
      ...(s?.foldFullSent !== undefined && s.foldFullSent > 0
        ? { foldFullSent: s.foldFullSent }
        : {}),
    };
  }

  /**
   * Sends the point's status. From the periodic tick (`ifChanged`) only what changed: at once when
   * anything but its running counts did (state, drops, an error), the counts alone at most every
   * COUNTS_INTERVAL_MS — an idle capture says nothing, a busy one a status every few seconds, and
   * the agent, the link and the collector (which saves the session for each) wake that much less.
   * The last status of a capture (stopped, failed) is always sent, so the final counts are exact.
   */
  private report(r: Running, ifChanged = false): void {
    const status = this.status(r);
    const { packets, foldedPackets, ...rest } = status;
    const text = JSON.stringify(rest);
    const counts = `${packets} ${foldedPackets ?? 0}`;
    const now = this.deps.nowMs();
    if (ifChanged && text === r.lastStatus) {
      if (counts === r.lastCounts || now - r.lastStatusMs < COUNTS_INTERVAL_MS) return;
    }
    r.lastStatus = text;
    r.lastCounts = counts;
    r.lastStatusMs = now;
    this.deps.send('status', status);
  }

  /** Why a capture command is refused before anything starts, or null. */
  private refusal(cmd: CaptureCommand): HoptraceError | null {
    if (this.running.size >= this.maxCaptures)
      return new HoptraceError(
        'AGENT_BUSY',
        `this agent already runs ${this.running.size} captures, its most at once (each a capture worker of ~85 MiB within the agent's memory)`,
        {
          where: this.node,
          hint: 'retry once a capture on this node has ended, or start the agent with a higher --max-captures and memory limit',
        },
      );
    if (cmd.deadlineUnixMs <= 0) return null;
    const now = this.deps.nowMs();
    const left = cmd.deadlineUnixMs - now;
    if (left <= 0)
      return new HoptraceError(
        'CAPTURE_BAD_DEADLINE',
        `the capture's deadline ${isoTime(cmd.deadlineUnixMs)} is ${spanText(-left)} before this agent's clock (${isoTime(now)}): it would stop at once`,
        {
          where: this.node,
          hint: "this node's clock is ahead of the collector's, or the command came after the capture's end; check the nodes' time sync (chrony, NTP)",
        },
      );
    if (left > MAX_DEADLINE_AHEAD_MS)
      return new HoptraceError(
        'CAPTURE_BAD_DEADLINE',
        `the capture's deadline ${isoTime(cmd.deadlineUnixMs)} is ${spanText(left)} after this agent's clock (${isoTime(now)}), beyond the ${MAX_DEADLINE_AHEAD_MS / 86_400_000} days an agent takes`,
        {
          where: this.node,
          hint: "the collector's clock is far ahead of this node's, or the command is not the collector's",
        },
      );
    return null;
  }

  private async startCapture(cmd: CaptureCommand): Promise<void> {
    const k = key(cmd.captureId, cmd.point);
    // A command resent after a reconnect is not a second capture.
    const live = this.running.get(k);
    if (live !== undefined) {
      this.report(live);
      return;
    }
    const last = this.finished.get(k);
    if (last !== undefined) {
      this.deps.send('status', last);
      return;
    }
    let markDone = (): void => undefined;
    const done = new Promise<void>((resolve) => (markDone = resolve));
    const r: Running = {
      cmd,
      capture: undefined,
      state: 'arming',
      netns: '',
      netnsAddresses: [],
      errorCode: '',
      message: '',
      stopStatus: undefined,
      lastStatus: '',
      lastCounts: '',
      lastStatusMs: 0,
      deadlineTimer: undefined,
      done,
      markDone,
    };
    const log = this.log.child({ captureId: cmd.captureId, point: cmd.point });
    const refused = this.refusal(cmd);
    if (refused !== null) {
      log.warn({ code: refused.code, state: 'failed' }, refused.message);
      this.finish(r, refused);
      return;
    }
    this.running.set(k, r);
    this.report(r);
    try {
      const target = await this.deps.resolveTarget(cmd.target);
      r.netns = target.path;
      r.netnsAddresses = (await this.deps.namespaceAddresses(target.path)).addresses;
      const spec: {
        point: string;
        node: string;
        iface: string;
        filter?: string;
        snaplen?: number;
        foldFirst?: number;
      } = {
        point: cmd.point,
        node: this.node,
        iface: cmd.iface,
      };
      if (cmd.filter !== '') spec.filter = cmd.filter;
      if (cmd.snaplen > 0) spec.snaplen = cmd.snaplen;
      // Only a collector that reads flow counters asks for them (an older one would take each
      // counter for a packet).
      if (cmd.foldFlows !== true) spec.foldFirst = 0;
      // Stopped while its namespace was resolved: nothing may start now (it would run on, unowned).
      if (ended(r)) return;
      // Every frame of the capture is retained (bounded) for the evidence frames.
      const retain = this.deps.retention?.open(
        cmd.captureId,
        cmd.point,
        cmd.retainSnaplen ?? 0,
        cmd.snaplen,
        cmd.retainPayload === true,
      );
      const capture =
        retain === undefined || retain === null
          ? this.deps.makeCapture(spec, target.path)
          : this.deps.makeCapture(spec, target.path, retain);
      r.capture = capture;
      const onEnd = (err: HoptraceError | null): void => {
        this.finish(r, err);
      };
      // Encoded delivery when the capture offers it (the namespace worker): no PacketEvent per
      // packet between the capture and the wire.
      await (capture.startEncoded !== undefined
        ? capture.startEncoded((encoded) => {
            this.deps.send('events', {
              captureId: cmd.captureId,
              point: cmd.point,
              events: [],
              encoded,
            });
          }, onEnd)
        : capture.start((events) => {
            this.deps.send('events', { captureId: cmd.captureId, point: cmd.point, events });
          }, onEnd));
      if (ended(r)) return; // stopped or failed while opening
      r.state = 'capturing';
      log.info({ state: 'capturing', netns: r.netns, iface: cmd.iface }, 'capture started');
      this.report(r);
      // Every point's report in one shared tick (agent/ticker.ts): one wake-up a second, not one
      // per point, and a status only where it changed.
      r.stopStatus = joinTicker(STATUS_INTERVAL_MS, () => {
        this.report(r, true);
      });
      if (cmd.deadlineUnixMs > 0) this.armDeadline(r);
    } catch (e) {
      const err = isHoptraceError(e)
        ? e
        : new HoptraceError('CAPTURE_WORKER_FAILED', e instanceof Error ? e.message : String(e));
      log.warn({ code: err.code, state: 'failed' }, 'capture failed');
      this.finish(r, err);
    }
  }

  /**
   * Stops the capture at its deadline, by this node's clock, waking at least every
   * deadlineStepMs to look again (refusal() took the deadline: at most 7 days ahead).
   */
  private armDeadline(r: Running): void {
    const left = r.cmd.deadlineUnixMs - this.deps.nowMs();
    if (left <= 0) {
      void this.stopOne(r);
      return;
    }
    r.deadlineTimer = setTimeout(
      () => {
        this.armDeadline(r);
      },
      Math.min(left, this.deadlineStepMs),
    );
    r.deadlineTimer.unref();
  }

  private finish(r: Running, err: HoptraceError | null): void {
    if (r.state === 'stopped' || r.state === 'failed') return;
    r.stopStatus?.();
    clearTimeout(r.deadlineTimer);
    if (err) {
      r.state = 'failed';
      r.errorCode = err.code;
      r.message = err.message;
      this.deps.send('error', {
        code: err.code,
        message: err.message,
        captureId: r.cmd.captureId,
        point: r.cmd.point,
      });
    } else {
      r.state = 'stopped';
    }
    this.report(r);
    const stats = r.capture?.stats();
    this.deps.retention?.ended(
      r.cmd.captureId,
      r.cmd.point,
      stats?.retention,
      r.capture?.finalStats === true,
    );
    r.markDone();
    // Its last status is sent: forgotten, but for a short history that answers a resent command.
    const k = key(r.cmd.captureId, r.cmd.point);
    if (this.running.get(k) === r) this.running.delete(k);
    this.finished.delete(k);
    this.finished.set(k, this.status(r));
    for (const old of this.finished.keys()) {
      if (this.finished.size <= FINISHED_KEPT) break;
      this.finished.delete(old);
    }
  }

  /**
   * Answers a FramesRequest: once the point's capture has stopped (waiting for it, at most
   * FRAMES_WAIT_MS), the retained bytes of the frames asked for (retention-store.ts). With
   * `release`, the point's frames are dropped once every frame asked for was answered.
   */
  async frames(req: FramesRequest): Promise<FramesReply> {
    const r = this.running.get(key(req.captureId, req.point));
    const live = (): boolean =>
      r !== undefined && (r.state === 'arming' || r.state === 'capturing');
    if (r !== undefined && live()) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        r.done,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, FRAMES_WAIT_MS);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    }
    const store = this.deps.retention;
    const reply: FramesReply =
      store === undefined
        ? framesRefused(req, { code: 'RETENTION_OFF', message: 'this agent retains no frames' })
        : live()
          ? framesRefused(req, {
              code: 'FRAMES_CAPTURE_RUNNING',
              message: `the capture had not stopped ${FRAMES_WAIT_MS} ms after the request`,
            })
          : store.answer(req);
    const answered = reply.records.length + reply.missing.length;
    if (store !== undefined && req.release && !live() && answered >= new Set(req.frames).size)
      store.release(req.captureId, req.point);
    return reply;
  }

  private async stopOne(r: Running): Promise<void> {
    const capture = r.capture;
    if (capture) await capture.stop();
    this.finish(r, null);
  }

  private async stopCapture(cmd: StopCommand): Promise<void> {
    const matching = [...this.running.values()].filter(
      (r) => r.cmd.captureId === cmd.captureId && (cmd.point === '' || r.cmd.point === cmd.point),
    );
    await Promise.all(matching.map((r) => this.stopOne(r)));
  }

  /** Stops every capture (agent shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.running.values()].map((r) => this.stopOne(r)));
  }
}

/**
 * The hello an agent sends: who it is, every address it can see, and how many captures it runs at
 * once (the collector refuses a capture beyond it up front).
 */
export function buildHello(
  agentId: string,
  node: string,
  version: string,
  nodeAddresses: string[],
  namespaces: NamespaceInfo[],
  maxCaptures: number,
): Hello {
  return {
    agentId,
    node,
    version,
    nodeAddresses,
    namespaces: namespaces.map((n) => ({
      path: n.path,
      inode: n.inode,
      addresses: n.addresses,
      interfaces: n.ifaces,
    })),
    spoolFirstSeq: 0,
    maxCaptures,
  };
}

export type { NetnsScope };

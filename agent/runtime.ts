/**
 * The agent's runtime: turns the collector's capture/stop commands into captures inside target
 * network namespaces (agent/capture/ns-capture.ts) and streams their events, statuses and errors
 * over the CollectorLink. Live capture always runs in a worker process, also in the agent's own
 * namespace: a `cap` fault (an interface removed mid-capture aborts the process) then ends one
 * capture, not the agent.
 */
import pino from 'pino';
import type { NsCapture } from './capture/ns-capture';
import { isHoptraceError, HoptraceError } from '../common/errors';
import type {
  CaptureCommand,
  CaptureState,
  CaptureStatus,
  EventBatch,
  Hello,
  StopCommand,
} from '../common/wire';
import type { CollectorCommand } from './link/collector-link';
import type { NamespaceInfo, NetnsScope } from './netns/addresses';
import type { ResolvedTarget } from './netns/resolve';

/** What the runtime needs of a capture (NsCapture; tests give fakes, startEncoded optional). */
type RuntimeCapture = Pick<NsCapture, 'start' | 'stop' | 'stats'> &
  Partial<Pick<NsCapture, 'startEncoded'>>;

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
  ): RuntimeCapture;
  nowMs(): number;
}

interface Running {
  cmd: CaptureCommand;
  capture: RuntimeCapture | undefined;
  state: CaptureState;
  netns: string;
  netnsAddresses: string[];
  errorCode: string;
  message: string;
  statusTimer: NodeJS.Timeout | undefined;
  deadlineTimer: NodeJS.Timeout | undefined;
}

const STATUS_INTERVAL_MS = 1000;

function key(captureId: string, point: string): string {
  return `${captureId}\u0000${point}`;
}

/** Runs captures on behalf of the collector. */
export class AgentRuntime {
  private readonly running = new Map<string, Running>();
  private readonly log: pino.Logger;

  constructor(
    private readonly node: string,
    private readonly deps: AgentDeps,
    logger?: pino.Logger,
  ) {
    this.log = logger ?? pino({ enabled: false });
  }

  /** Entry point for commands from the collector. */
  handle(cmd: CollectorCommand): void {
    if (cmd.kind === 'capture') void this.startCapture(cmd.capture);
    else void this.stopCapture(cmd.stop);
  }

  /** Captures in progress (for tests and status). */
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
    };
  }

  private report(r: Running): void {
    this.deps.send('status', this.status(r));
  }

  private async startCapture(cmd: CaptureCommand): Promise<void> {
    const k = key(cmd.captureId, cmd.point);
    // A command resent after a reconnect is not a second capture.
    if (this.running.has(k)) {
      const r = this.running.get(k);
      if (r) this.report(r);
      return;
    }
    const r: Running = {
      cmd,
      capture: undefined,
      state: 'arming',
      netns: '',
      netnsAddresses: [],
      errorCode: '',
      message: '',
      statusTimer: undefined,
      deadlineTimer: undefined,
    };
    this.running.set(k, r);
    this.report(r);
    const log = this.log.child({ captureId: cmd.captureId, point: cmd.point });
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
      } = {
        point: cmd.point,
        node: this.node,
        iface: cmd.iface,
      };
      if (cmd.filter !== '') spec.filter = cmd.filter;
      if (cmd.snaplen > 0) spec.snaplen = cmd.snaplen;
      const capture = this.deps.makeCapture(spec, target.path);
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
      if (r.state !== 'arming') return; // stopped or failed while opening
      r.state = 'capturing';
      log.info({ state: 'capturing', netns: r.netns, iface: cmd.iface }, 'capture started');
      this.report(r);
      r.statusTimer = setInterval(() => {
        this.report(r);
      }, STATUS_INTERVAL_MS);
      r.statusTimer.unref();
      const left = cmd.deadlineUnixMs > 0 ? cmd.deadlineUnixMs - this.deps.nowMs() : 0;
      if (cmd.deadlineUnixMs > 0) {
        r.deadlineTimer = setTimeout(() => void this.stopOne(r), Math.max(0, left));
        r.deadlineTimer.unref();
      }
    } catch (e) {
      const err = isHoptraceError(e)
        ? e
        : new HoptraceError('CAPTURE_WORKER_FAILED', e instanceof Error ? e.message : String(e));
      log.warn({ code: err.code, state: 'failed' }, 'capture failed');
      this.finish(r, err);
    }
  }

  private finish(r: Running, err: HoptraceError | null): void {
    if (r.state === 'stopped' || r.state === 'failed') return;
    clearInterval(r.statusTimer);
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

/** The hello an agent sends: who it is and every address it can see. */
export function buildHello(
  agentId: string,
  node: string,
  version: string,
  nodeAddresses: string[],
  namespaces: NamespaceInfo[],
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
  };
}

export type { NetnsScope };

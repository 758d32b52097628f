/**
 * An in-memory AgentHub (collector/hub-types.ts) for session, API and CLI tests: agents are added by
 * hand, commands are recorded, messages are delivered through the registered handler.
 */
import type {
  AgentHub,
  AgentInfo,
  AgentMessage,
  AgentReply,
  HubCounters,
} from '../../collector/hub-types';
import type {
  CaptureCommand,
  CaptureStatus,
  DoctorRequest,
  FramesRequest,
  NamespaceInfo,
  StopCommand,
} from '../../common/wire';
import { replayCaptureFile } from '../../offline/replay';

const agentSeqs = new Map<string, number>();

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export type HubCommand =
  | { kind: 'capture'; capture: CaptureCommand }
  | { kind: 'stop'; stop: StopCommand }
  | { kind: 'doctorRequest'; doctorRequest: DoctorRequest }
  | { kind: 'framesRequest'; framesRequest: FramesRequest };

export class FakeHub implements AgentHub {
  readonly list: AgentInfo[] = [];
  readonly sent: { agentId: string; cmd: HubCommand }[] = [];
  /** Called after every send (a test can answer commands, like a real agent). */
  onSend: ((agentId: string, cmd: HubCommand) => void) | undefined;
  private handler: ((m: AgentMessage) => Promise<void>) | undefined;
  private agentHandlers: ((a: AgentInfo) => void)[] = [];
  private replyHandler: ((r: AgentReply) => void) | undefined;
  closed = false;

  addAgent(
    agentId: string,
    node: string,
    nodeAddresses: string[],
    namespaces: NamespaceInfo[] = [],
  ): AgentInfo {
    const a: AgentInfo = {
      agentId,
      node,
      connected: true,
      connectedAtMs: 0,
      lastSeenMs: 0,
      unknownMessages: 0,
      identity: { method: 'shared-token', subject: 'shared token' },
      hello: { agentId, node, version: 'test', nodeAddresses, namespaces, spoolFirstSeq: 1 },
    };
    this.list.push(a);
    for (const h of this.agentHandlers) h(a);
    return a;
  }

  agents(): AgentInfo[] {
    return this.list;
  }

  /** The agent's connection ends (killed) or comes back; handlers hear it as the hub says it. */
  setConnected(agentId: string, connected: boolean): void {
    const a = this.list.find((x) => x.agentId === agentId);
    if (a === undefined) throw new Error(`no agent ${agentId}`);
    a.connected = connected;
    for (const h of this.agentHandlers) h({ ...a });
  }

  send(agentId: string, cmd: HubCommand): boolean {
    if (this.list.find((a) => a.agentId === agentId)?.connected !== true) return false;
    this.sent.push({ agentId, cmd });
    this.onSend?.(agentId, cmd);
    return true;
  }

  onMessage(handler: (msg: AgentMessage) => Promise<void>): void {
    this.handler = handler;
  }

  onAgent(handler: (agent: AgentInfo) => void): void {
    this.agentHandlers.push(handler);
  }

  onReply(handler: (reply: AgentReply) => void): void {
    this.replyHandler = handler;
  }

  /** An agent's answer to a request (a doctor report), as the hub hands it over. */
  reply(r: AgentReply): void {
    this.replyHandler?.(r);
  }

  counters(): HubCounters {
    return {
      connected: this.list.length,
      refusedUnauthenticated: 0,
      refusedMalformed: 0,
      messagesIn: 0,
      duplicatesDropped: 0,
      readPauses: 0,
    };
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  /**
   * Delivers like the hub: numbered per agent id unless the test gives a seq. The numbers go on
   * across FakeHubs (a collector restart in a test): a real agent's seqs only ever increase.
   */
  deliver(msg: DistributiveOmit<AgentMessage, 'seq'> & { seq?: number }): Promise<void> {
    if (!this.handler) throw new Error('no handler registered');
    const seq = msg.seq ?? (agentSeqs.get(msg.agentId) ?? 0) + 1;
    agentSeqs.set(msg.agentId, Math.max(seq, agentSeqs.get(msg.agentId) ?? 0));
    return this.handler({ ...msg, seq });
  }

  captures(): CaptureCommand[] {
    return this.sent.flatMap((s) => (s.cmd.kind === 'capture' ? [s.cmd.capture] : []));
  }

  stops(): StopCommand[] {
    return this.sent.flatMap((s) => (s.cmd.kind === 'stop' ? [s.cmd.stop] : []));
  }
}

export function status(
  captureId: string,
  point: string,
  state: CaptureStatus['state'],
  o: Partial<CaptureStatus> = {},
): CaptureStatus {
  return {
    captureId,
    point,
    state,
    packets: 0,
    kernelDrops: null,
    ifaceDrops: null,
    queueDrops: 0,
    errorCode: '',
    message: '',
    netns: '',
    netnsAddresses: [],
    iface: 'eth0',
    linkType: 'ethernet',
    ...o,
  };
}

/** A FakeHub with the lab's two agents: agent-vpn (10.244.1.10) and agent-backend (10.244.2.5). */
export function twoNodeHub(): FakeHub {
  const hub = new FakeHub();
  hub.addAgent(
    'agent-vpn',
    'vpn-node',
    ['192.168.50.1'],
    [
      {
        path: '/run/netns/vpn',
        inode: 1,
        addresses: ['10.244.1.10'],
        interfaces: ['tun0', 'eth0'],
      },
    ],
  );
  hub.addAgent(
    'agent-backend',
    'backend-node',
    ['192.168.50.2'],
    [{ path: '/run/netns/web', inode: 2, addresses: ['10.244.2.5'], interfaces: ['eth0'] }],
  );
  return hub;
}

/**
 * A repro of the workload in /run/netns/vpn (decap and egress on twoNodeHub's VPN node), the
 * backend on the other node.
 */
export const NETNS_REPRO = {
  workload: { netns: 'vpn' },
  decapIface: 'tun0',
  egressIface: 'eth0',
  backend: { target: '10.244.2.5', iface: 'eth0' },
  client: '10.90.0.42',
  timeoutMs: 600_000,
};

/**
 * Makes the hub's agents answer every capture command like a real agent replaying `pcap`: a
 * capturing status, then the file's events as one batch. `silent` points never answer.
 */
export function answerWithReplay(hub: FakeHub, pcap: string, silent: string[] = []): void {
  hub.onSend = (agentId, cmd) => {
    if (cmd.kind !== 'capture') return;
    const c = cmd.capture;
    if (silent.includes(c.point)) return;
    setImmediate(() => {
      void hub
        .deliver({ kind: 'status', agentId, status: status(c.captureId, c.point, 'capturing') })
        .then(() =>
          hub.deliver({
            kind: 'events',
            agentId,
            batch: {
              captureId: c.captureId,
              point: c.point,
              events: [...replayCaptureFile(pcap, { point: c.point, node: agentId })],
            },
          }),
        );
    });
  };
}

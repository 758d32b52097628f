/**
 * An in-memory AgentHub (collector/hub-types.ts) for session, API and CLI tests: agents are added by
 * hand, commands are recorded, messages are delivered through the registered handler.
 */
import type { AgentHub, AgentInfo, AgentMessage, HubCounters } from '../../collector/hub-types';
import type { CaptureCommand, CaptureStatus, NamespaceInfo, StopCommand } from '../../common/wire';

export type HubCommand =
  { kind: 'capture'; capture: CaptureCommand } | { kind: 'stop'; stop: StopCommand };

export class FakeHub implements AgentHub {
  readonly list: AgentInfo[] = [];
  readonly sent: { agentId: string; cmd: HubCommand }[] = [];
  /** Called after every send (a test can answer commands, like a real agent). */
  onSend: ((agentId: string, cmd: HubCommand) => void) | undefined;
  private handler: ((m: AgentMessage) => Promise<void>) | undefined;
  private agentHandlers: ((a: AgentInfo) => void)[] = [];
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
      hello: { agentId, node, version: 'test', nodeAddresses, namespaces, spoolFirstSeq: 1 },
    };
    this.list.push(a);
    for (const h of this.agentHandlers) h(a);
    return a;
  }

  agents(): AgentInfo[] {
    return this.list;
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

  counters(): HubCounters {
    return {
      connected: this.list.length,
      refusedUnauthenticated: 0,
      refusedMalformed: 0,
      messagesIn: 0,
      duplicatesDropped: 0,
    };
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  deliver(msg: AgentMessage): Promise<void> {
    if (!this.handler) throw new Error('no handler registered');
    return this.handler(msg);
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

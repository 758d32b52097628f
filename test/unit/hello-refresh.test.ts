/** A pod that appears after the agent connected becomes known to the collector without a reconnect. */
import t from 'tap';
import { CollectorLink } from '../../agent/link/collector-link';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import { Signal, TOKEN, closeServer, hello, listen } from './transport-fixtures';

void t.test('refreshHello updates the collector view of the agent namespaces', async (t) => {
  const { server, port } = await listen();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  const seen = new Signal();
  hub.onAgent(() => {
    seen.notify();
  });
  let current = hello('agent-1');
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: TOKEN,
    hello: () => current,
    backoff: { minMs: 10, maxMs: 50 },
  });
  t.teardown(async () => {
    await link.close();
    await hub.close();
    await closeServer(server);
  });
  const connected = new Promise<void>((resolve) => {
    link.onConnected(() => {
      resolve();
    });
  });
  await connected;
  const namespacesOf = (): string[] =>
    hub
      .agents()
      .find((a) => a.agentId === 'agent-1')
      ?.hello.namespaces.flatMap((n) => n.addresses) ?? [];
  t.same(namespacesOf(), [], 'no pod yet');
  current = {
    ...current,
    namespaces: [
      { path: '/run/netns/pod', inode: 7, addresses: ['10.244.1.10'], interfaces: ['eth0'] },
    ],
  };
  t.ok(link.refreshHello(), 'sent on the open connection');
  await seen.wait(() => namespacesOf().includes('10.244.1.10'));
  t.same(namespacesOf(), ['10.244.1.10'], 'the collector knows the new pod');
  t.equal(link.stats().reconnects, 0, 'without a reconnect');
});

/**
 * What a hello may say (adversarial review, F4/F5): node names and agent ids by one rule
 * (common/agent-names.ts), checked before anything is bound.
 */
import t from 'tap';
import { CLOSE_CODES } from '../../common/envelope';
import { AGENT_ID_MAX_LENGTH } from '../../common/agent-names';
import type { Hello } from '../../common/wire';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import type { AgentHub } from '../../collector/hub-types';
import { startAgent } from '../../agent/main';
import { RawAgent, TOKEN, closeServer, hello, listen } from './transport-fixtures';

async function rig(t: {
  teardown(fn: () => Promise<void>): void;
}): Promise<{ hub: AgentHub; port: number; store: ReturnType<typeof memoryLastSeqStore> }> {
  const { server, port } = await listen();
  const store = memoryLastSeqStore();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: store,
  });
  hub.onMessage(() => Promise.resolve());
  t.teardown(async () => {
    await hub.close();
    await closeServer(server);
  });
  return { hub, port, store };
}

/** Sends `h` on a new connection: the helloAck, or the refusal (close code, reason, message). */
async function sayHello(
  port: number,
  h: Hello,
): Promise<{ accepted: boolean; code?: number; reason?: string; message?: string }> {
  const a = RawAgent.connect(port, TOKEN);
  await a.opened;
  a.send({ seq: 0, kind: 'hello', hello: h });
  await a.signal.wait(
    () => a.closeCode !== undefined || a.received.some((e) => e.kind === 'helloAck'),
  );
  if (a.received.some((e) => e.kind === 'helloAck')) {
    a.ws.close();
    await a.closed;
    return { accepted: true };
  }
  const err = a.received.find((e) => e.kind === 'error');
  return {
    accepted: false,
    ...(a.closeCode !== undefined ? { code: a.closeCode } : {}),
    reason: a.closeReason,
    message: err?.kind === 'error' ? err.error.message : '',
  };
}

void t.test('node names and agent ids: one rule, refused before anything is bound', async (t) => {
  const r = await rig(t);
  const bad: [string, Hello, RegExp][] = [
    ['an empty node', { ...hello('a1'), node: '' }, /'' is not a node name/],
    ['a 300-character node', { ...hello('a2'), node: 'n'.repeat(300) }, /\(300 characters\)/],
    ['a node with a space', { ...hello('a3'), node: 'node a' }, /'node a' is not a node name/],
    ['an empty agent id', hello(''), /the agent id is empty/],
    [
      'a 4,000-character agent id',
      hello('x'.repeat(4000)),
      /an agent id of 4000 characters \(at most 260\)/,
    ],
  ];
  for (const [what, h, message] of bad) {
    const got = await sayHello(r.port, h);
    t.notOk(got.accepted, `${what}: refused`);
    t.equal(got.code, CLOSE_CODES.MALFORMED, `${what}: 4400`);
    t.equal(got.reason, 'AGENT_BAD_NAME', `${what}: the code as the close reason`);
    t.match(got.message, /^AGENT_BAD_NAME: hello: /, what);
    t.match(got.message, message, what);
    t.match(got.message, /give the agent a valid --node/, `${what}: what to do`);
    t.equal(r.store.nodeOf(h.agentId), undefined, `${what}: nothing bound`);
  }
  t.equal(r.hub.agents().length, 0, 'none listed');

  // What agents send: `<node>-<6 hex>` of the longest node name, an upper-case host name.
  const longest = 'n'.repeat(253);
  const own = `${longest}-0a1b2c`;
  t.equal(own.length, AGENT_ID_MAX_LENGTH);
  t.ok((await sayHello(r.port, { ...hello(own), node: longest })).accepted, 'the longest own id');
  t.equal(r.store.nodeOf(own), longest, 'bound');
  t.ok((await sayHello(r.port, { ...hello('b1'), node: 'Build_Box.lan' })).accepted, 'a host name');
});

void t.test('the agent checks its own names at start, by the same rule', async (t) => {
  const start = (o: { node?: string; agentId?: string }): Promise<unknown> =>
    startAgent({ collectorUrl: 'ws://127.0.0.1:9/v1/agents', token: TOKEN, ...o });
  await t.rejects(start({ node: 'n'.repeat(254) }), {
    code: 'CLI_USAGE',
    where: '--node',
    message: /is not a node name/,
  });
  await t.rejects(start({ node: 'node-a', agentId: 'x'.repeat(261) }), {
    code: 'CLI_USAGE',
    where: '--agent-id',
    message: /an agent id of 261 characters \(at most 260\)/,
  });
});

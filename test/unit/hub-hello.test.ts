/**
 * What a hello may say and hold (adversarial review, F4/F5/F2): node names and agent ids by one
 * rule (common/agent-names.ts) before anything is bound; entries capped in all, not only per
 * namespace (common/hello-limits.ts); remembered agents bounded in bytes, not only in count.
 */
import t from 'tap';
import { CLOSE_CODES } from '../../common/envelope';
import { AGENT_ID_MAX_LENGTH } from '../../common/agent-names';
import { HELLO_LIMITS, helloEntries, helloHeapBytes } from '../../common/hello-limits';
import type { Hello } from '../../common/wire';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import type { AgentHub } from '../../collector/hub-types';
import { startAgent } from '../../agent/main';
import { RawAgent, TOKEN, closeServer, hello, listen } from './transport-fixtures';

async function rig(
  t: { teardown(fn: () => Promise<void>): void },
  extra: { maxRememberedBytes?: number } = {},
): Promise<{ hub: AgentHub; port: number; store: ReturnType<typeof memoryLastSeqStore> }> {
  const { server, port } = await listen();
  const store = memoryLastSeqStore();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN],
    collectorId: 'c1',
    lastSeqStore: store,
    ...extra,
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

/** A hello of `namespaces` namespaces with `addresses` each, plus `extra` node addresses. */
function wide(agentId: string, namespaces: number, addresses: number, extra: number): Hello {
  return {
    ...hello(agentId),
    nodeAddresses: Array.from({ length: extra }, (_, i) => `192.168.${i >> 8}.${i & 255}`),
    namespaces: Array.from({ length: namespaces }, (_, i) => ({
      path: `/proc/${1000 + i}/ns/net`,
      inode: 4026531000 + i,
      addresses: Array.from({ length: addresses }, (_, j) => `a${j}`),
      interfaces: [],
    })),
  };
}

void t.test(
  'a hello is capped in entries in all: just under is kept, one more refused',
  async (t) => {
    const r = await rig(t);
    // 1,024 namespaces of 31 addresses: every per-namespace cap held, 32,768 entries in all.
    const under = wide('under', 1024, 31, 0);
    t.equal(helloEntries(under), HELLO_LIMITS.entries);
    t.ok((await sayHello(r.port, under)).accepted, 'at the cap: accepted');
    t.ok(r.hub.agents().some((a) => a.agentId === 'under'));

    const over = wide('over', 1024, 31, 1);
    const got = await sayHello(r.port, over);
    t.notOk(got.accepted, 'one entry more: refused');
    t.equal(got.code, CLOSE_CODES.HELLO_TOO_LARGE, '4413');
    t.equal(got.reason, 'HELLO_TOO_LARGE');
    t.match(
      got.message,
      /^HELLO_TOO_LARGE: hello too large: 32769 namespaces, addresses and interfaces in all \(at most 32768\); narrow the agent's namespaces/,
    );
    t.notOk(
      r.hub.agents().some((a) => a.agentId === 'over'),
      'never listed',
    );
  },
);

void t.test('disconnected agents are remembered within a byte budget, newest first', async (t) => {
  const each = helloHeapBytes(wide('gone-0', 200, 8, 0));
  // Room for two of them (a third would pass the budget), far below the count cap of 1,024.
  const r = await rig(t, { maxRememberedBytes: 2 * each + each / 2 });
  for (let i = 0; i < 6; i++) {
    const h = wide(`gone-${i}`, 200, 8, 0);
    t.equal(helloHeapBytes(h), each);
    const a = RawAgent.connect(r.port, TOKEN);
    await a.opened;
    a.send({ seq: 0, kind: 'hello', hello: h });
    await a.next((e) => e.kind === 'helloAck');
    const gone = new Promise<void>((resolve) => {
      r.hub.onAgent((info) => {
        if (info.agentId === h.agentId && !info.connected) resolve();
      });
    });
    a.ws.close();
    await gone;
    t.ok(r.hub.agents().length <= 2, `after ${i + 1}: at most two remembered`);
  }
  t.same(
    r.hub
      .agents()
      .map((a) => a.agentId)
      .sort(),
    ['gone-4', 'gone-5'],
    'the ones seen last',
  );
});

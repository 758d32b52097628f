/**
 * Per-agent identity (issue 17, high #3 and the medium node/pod claims): a peer speaks only for
 * its own node, agent ids stay with the node that first used them, one agent per node, sequence
 * numbers are bounded, and the ways in (node tokens, TokenReview, client certificates).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CollectorLink } from '../../agent/link/collector-link';
import { parseAgentArgs } from '../../cli/agent';
import { parseCollectorArgs } from '../../cli/collector';
import { startCollector } from '../../collector/main';
import { loadToken } from '../../common/auth';
import type { HoptraceError } from '../../common/errors';
import { pod, startFakeApiServer } from './k8s-fixtures';
import {
  chainAuth,
  nodeTokenAuth,
  parseNodeTokens,
  sharedTokenAuth,
  type AgentAuthenticator,
  type AuthRequest,
} from '../../collector/agent-auth';
import { createAgentHub, memoryLastSeqStore } from '../../collector/hub';
import type { AgentMessage } from '../../collector/hub-types';
import { tokenReviewAuth, POD_NAME_EXTRA, POD_UID_EXTRA } from '../../collector/k8s/token-review';
import type { TokenReviewStatus } from '../../collector/k8s/client';
import type { PodObject } from '../../collector/k8s/facts';
import { CLOSE_CODES, MAX_SEQ, encodeEnvelope } from '../../common/envelope';
import { isHoptraceError } from '../../common/errors';
import type { Hello } from '../../common/wire';
import { RawAgent, Signal, TOKEN, batch, closeServer, listen } from './transport-fixtures';

const TOKEN_A = 'token-of-node-a-0123456789';
const TOKEN_B = 'token-of-node-b-0123456789';

function helloFor(agentId: string, node: string): Hello {
  return {
    agentId,
    node,
    version: '0.1.0',
    nodeAddresses: [],
    namespaces: [],
    spoolFirstSeq: 0,
  };
}

async function rig(t: { teardown(fn: () => Promise<void>): void }, auth: AgentAuthenticator) {
  const { server, port } = await listen();
  const store = memoryLastSeqStore();
  const hub = createAgentHub({ server, auth, collectorId: 'c1', lastSeqStore: store });
  const messages: AgentMessage[] = [];
  const signal = new Signal();
  hub.onMessage((msg) => {
    messages.push(msg);
    signal.notify();
    return Promise.resolve();
  });
  t.teardown(async () => {
    await hub.close();
    await closeServer(server);
  });
  const join = async (token: string, agentId: string, node: string): Promise<RawAgent> => {
    const a = RawAgent.connect(port, token);
    await a.opened;
    a.send({ seq: 0, kind: 'hello', hello: helloFor(agentId, node) });
    await a.signal.wait(() => a.received.length > 0 || a.closeCode !== undefined);
    return a;
  };
  return { hub, port, store, messages, signal, join };
}

const nodeTokens = (): AgentAuthenticator =>
  nodeTokenAuth(
    new Map([
      ['node-a', TOKEN_A],
      ['node-b', TOKEN_B],
    ]),
  );

void t.test('the agent token file: one token per node, every mistake named by line', (t) => {
  const m = parseNodeTokens('# nodes\nnode-a  aaaaaaaaaaaaaaaa\n\nnode-b bbbbbbbbbbbbbbbb\n', 'f');
  t.same(
    [...m],
    [
      ['node-a', 'aaaaaaaaaaaaaaaa'],
      ['node-b', 'bbbbbbbbbbbbbbbb'],
    ],
  );
  const cases: [string, RegExp][] = [
    ['node-a', /line 1: not "NODE TOKEN"/],
    ['node-a short', /line 1: the token of node-a is shorter than 16/],
    ['Node_A aaaaaaaaaaaaaaaa', /'Node_A' is not a node name/],
    ['node-a aaaaaaaaaaaaaaaa\nnode-a bbbbbbbbbbbbbbbb', /line 2: node-a is listed twice/],
    ['node-a aaaaaaaaaaaaaaaa\nnode-b aaaaaaaaaaaaaaaa', /line 2: node-b has the token of another/],
    ['# nothing', /lists no node/],
  ];
  for (const [text, re] of cases) {
    try {
      parseNodeTokens(text, 'tokens.txt');
      t.fail(`accepted ${JSON.stringify(text)}`);
    } catch (e) {
      t.ok(isHoptraceError(e) && e.code === 'AUTH_NO_TOKEN' && e.where === 'tokens.txt');
      t.match((e as Error).message, re);
    }
  }
  t.end();
});

void t.test('a node token speaks for its node only', async (t) => {
  const r = await rig(t, nodeTokens());
  const wrong = await r.join(TOKEN_A, 'a-1', 'node-b');
  await wrong.closed;
  t.equal(wrong.closeCode, CLOSE_CODES.WRONG_NODE, "node-a's token cannot say hello for node-b");
  t.equal(wrong.closeReason, 'AUTH_WRONG_NODE');
  const err = wrong.received.find((e) => e.kind === 'error');
  t.match(
    err?.kind === 'error' ? err.error.message : '',
    /node token of node-a may speak for node node-a, not node-b/,
  );
  t.equal(r.hub.agents().length, 0, 'nothing of the refused hello is kept');
  t.equal(r.store.nodeOf('a-1'), undefined, 'and its agent id is not bound');

  const a = await r.join(TOKEN_A, 'a-1', 'node-a');
  t.equal(a.received[0]?.kind, 'helloAck');
  t.same(r.hub.agents()[0]?.identity, { method: 'node-token', subject: 'node token of node-a' });
  const refused = RawAgent.connect(r.port, TOKEN);
  t.equal(await refused.opened, false, 'the shared token is not a node token');
  t.equal(refused.status, 401);
});

void t.test(
  "impersonation: another node's agent id is refused, its seq untouched (issue 17 #3)",
  async (t) => {
    const r = await rig(t, nodeTokens());
    const real = await r.join(TOKEN_A, 'a-1', 'node-a');
    real.send({ seq: 5, kind: 'events', events: batch(1, 2) });
    await real.next((e) => e.kind === 'ack');
    t.equal(r.store.get('a-1'), 5);
    real.ws.close();
    await real.closed;

    // node-b's token holder claims node-a's agent id (under its own node name and under node-a's).
    const asB = await r.join(TOKEN_B, 'a-1', 'node-b');
    await asB.closed;
    t.equal(asB.closeCode, CLOSE_CODES.WRONG_NODE);
    const err = asB.received.find((e) => e.kind === 'error');
    t.match(err?.kind === 'error' ? err.error.message : '', /agent id a-1 belongs to node node-a/);
    const asA = await r.join(TOKEN_B, 'a-1', 'node-a');
    await asA.closed;
    t.equal(asA.closeCode, CLOSE_CODES.WRONG_NODE);
    t.equal(r.store.get('a-1'), 5, "node-a's agent keeps its seq");
    t.equal(r.messages.length, 1, 'nothing of the impostor reached the collector');

    // The real agent comes back and goes on.
    const again = await r.join(TOKEN_A, 'a-1', 'node-a');
    const ack = again.received[0];
    t.equal(ack?.kind === 'helloAck' ? ack.helloAck.lastSeq : -1, 5);
    again.send({ seq: 6, kind: 'events', events: batch(3, 1) });
    await again.next((e) => e.kind === 'ack');
    t.equal(r.store.get('a-1'), 6);
  },
);

void t.test('a sequence number beyond 2^52 is refused, never stored (issue 17 #3)', async (t) => {
  const r = await rig(t, sharedTokenAuth([TOKEN]));
  const a = await r.join(TOKEN, 'x-1', 'node-x');
  a.send({ seq: 2 ** 53 - 1, kind: 'events', events: batch(1, 1) });
  await a.closed;
  t.equal(a.closeCode, CLOSE_CODES.MALFORMED);
  t.equal(r.store.get('x-1'), 0, 'not persisted');
  t.equal(r.messages.length, 0);
  const b = await r.join(TOKEN, 'x-1', 'node-x');
  b.send({ seq: MAX_SEQ, kind: 'events', events: batch(1, 1) });
  await b.next((e) => e.kind === 'ack');
  t.equal(r.store.get('x-1'), MAX_SEQ, '2^52 itself is a valid seq');
  const c = await r.join(TOKEN, 'x-1', 'node-x');
  c.ws.send(
    encodeEnvelope({
      seq: 0,
      kind: 'hello',
      hello: { ...helloFor('x-1', 'node-x'), spoolFirstSeq: MAX_SEQ + 2 },
    }),
  );
  await c.closed;
  t.equal(c.closeCode, CLOSE_CODES.MALFORMED, 'a hello announcing a spool beyond 2^52 too');
});

void t.test(
  'shared token: a second agent claiming a connected node is refused; the first keeps its commands',
  async (t) => {
    const r = await rig(t, sharedTokenAuth([TOKEN]));
    const first = await r.join(TOKEN, 'web-1', 'node-web');
    const claim = await r.join(TOKEN, 'evil-1', 'node-web');
    await claim.closed;
    t.equal(claim.closeCode, CLOSE_CODES.NODE_TAKEN);
    t.equal(claim.closeReason, 'AGENT_NODE_TAKEN');
    t.same(
      r.hub.agents().map((a) => [a.agentId, a.node, a.connected]),
      [['web-1', 'node-web', true]],
    );
    t.ok(r.hub.send('web-1', { kind: 'stop', stop: { captureId: 'c', point: 'p' } }));
    await first.next((e) => e.kind === 'stop');
    // Once the first agent is gone, a new one may speak for the node.
    first.ws.close();
    await first.closed;
    await new Promise((res) => setTimeout(res, 20));
    const next = await r.join(TOKEN, 'web-2', 'node-web');
    t.equal(next.received[0]?.kind, 'helloAck');
  },
);

void t.test('a node identity: a new agent of the node replaces the old connection', async (t) => {
  const r = await rig(t, nodeTokens());
  const old = await r.join(TOKEN_A, 'a-1', 'node-a');
  const restarted = await r.join(TOKEN_A, 'a-2', 'node-a');
  t.equal(restarted.received[0]?.kind, 'helloAck');
  await old.closed;
  t.equal(old.closeCode, CLOSE_CODES.REPLACED);
  while (r.hub.agents().filter((a) => a.connected).length > 1)
    await new Promise((res) => setTimeout(res, 5));
  t.same(
    r.hub
      .agents()
      .filter((a) => a.connected)
      .map((a) => a.agentId),
    ['a-2'],
  );
});

// --- TokenReview ------------------------------------------------------------------------------

const JWT = (exp: number): string =>
  `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify({ exp })).toString('base64url')}.c2ln`;

function fakeApi(o: {
  status?: TokenReviewStatus;
  pod?: PodObject;
  fail?: Error;
  delayMs?: number;
}) {
  const calls = { reviews: 0, pods: 0, audiences: [] as string[][] };
  return {
    calls,
    api: {
      reviewToken: async (_token: string, audiences: string[]) => {
        calls.reviews++;
        calls.audiences.push(audiences);
        if (o.delayMs) await new Promise((r) => setTimeout(r, o.delayMs));
        if (o.fail) throw o.fail;
        return o.status ?? {};
      },
      readPod: (namespace: string, name: string) => {
        calls.pods++;
        return Promise.resolve(o.pod ?? { metadata: { name, namespace } });
      },
    },
  };
}

const bound = (extra: Record<string, string[]> = {}): TokenReviewStatus => ({
  authenticated: true,
  audiences: ['hoptrace'],
  user: {
    username: 'system:serviceaccount:hoptrace:hoptrace-agent',
    extra: { [POD_NAME_EXTRA]: ['hoptrace-agent-x7'], [POD_UID_EXTRA]: ['uid-1'], ...extra },
  },
});
const agentPod: PodObject = {
  metadata: { name: 'hoptrace-agent-x7', namespace: 'hoptrace', uid: 'uid-1' },
  spec: { nodeName: 'worker-3' },
};
const reqWith = (token: string): AuthRequest => ({
  headers: { authorization: `Bearer ${token}` },
});

void t.test("TokenReview: the node is the token's pod's node, read from the API", async (t) => {
  const f = fakeApi({ status: bound(), pod: agentPod });
  const auth = tokenReviewAuth({ api: f.api });
  const token = JWT(Date.now() / 1000 + 600);
  const r = await auth.authenticate(reqWith(token));
  t.same(r, {
    ok: true,
    identity: {
      method: 'service-account',
      node: 'worker-3',
      subject: 'pod hoptrace/hoptrace-agent-x7 (system:serviceaccount:hoptrace:hoptrace-agent)',
    },
  });
  t.same(f.calls.audiences, [['hoptrace']], 'asked for our audience');
  await auth.authenticate(reqWith(token));
  t.equal(f.calls.reviews, 1, 'a second connection within a minute is answered from the cache');
  t.end();
});

void t.test('TokenReview: every reason to refuse is a 401 with the reason', async (t) => {
  const cases: [string, Parameters<typeof fakeApi>[0], RegExp][] = [
    [
      'not authenticated',
      { status: { authenticated: false, error: 'expired' } },
      /did not authenticate the token \(expired\)/,
    ],
    [
      'another audience',
      { status: { ...bound(), audiences: ['api'] } },
      /not for audience hoptrace/,
    ],
    [
      'another service account',
      { status: { ...bound(), user: { username: 'system:serviceaccount:default:default' } } },
      /default:default's, not system:serviceaccount:hoptrace:hoptrace-agent's/,
    ],
    [
      'a token bound to no pod',
      {
        status: { ...bound(), user: { username: 'system:serviceaccount:hoptrace:hoptrace-agent' } },
      },
      /not bound to a pod/,
    ],
    [
      'a pod recreated under the same name',
      { status: bound(), pod: { ...agentPod, metadata: { ...agentPod.metadata, uid: 'uid-2' } } },
      /is gone \(another uid now\)/,
    ],
    [
      "a node name in the token that is not the pod's",
      { status: bound({ 'authentication.kubernetes.io/node-name': ['worker-1'] }), pod: agentPod },
      /names node worker-1, its pod runs on worker-3/,
    ],
  ];
  for (const [what, o, re] of cases) {
    const r = await tokenReviewAuth({ api: fakeApi(o).api }).authenticate(reqWith(JWT(2e9)));
    t.equal(r.ok ? 0 : r.status, 401, what);
    t.match(r.ok ? '' : r.reason, re, what);
  }
  const notJwt = await tokenReviewAuth({ api: fakeApi({}).api }).authenticate(reqWith(TOKEN));
  t.match(notJwt.ok ? '' : notJwt.reason, /not a ServiceAccount token/, 'not even asked');
  t.end();
});

void t.test(
  'TokenReview: an API that cannot answer is a 503; reviews in flight are bounded',
  async (t) => {
    const down = fakeApi({ fail: new Error('ECONNREFUSED') });
    const r = await tokenReviewAuth({ api: down.api }).authenticate(reqWith(JWT(2e9)));
    t.equal(r.ok ? 0 : r.status, 503);
    t.match(r.ok ? '' : r.reason, /TokenReview failed .*ECONNREFUSED/);

    const slow = fakeApi({ status: bound(), pod: agentPod, delayMs: 50 });
    const auth = tokenReviewAuth({ api: slow.api, maxInFlight: 4 });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        Promise.resolve(auth.authenticate(reqWith(JWT(2e9 + i)))),
      ),
    );
    t.equal(slow.calls.reviews, 4, 'a flood of made-up tokens costs the API server 4 requests');
    t.equal(results.filter((x) => !x.ok && x.status === 503).length, 16);
    t.end();
  },
);

void t.test('chained ways in: the first that accepts wins; a 503 is kept over 401s', async (t) => {
  const down = tokenReviewAuth({ api: fakeApi({ fail: new Error('down') }).api });
  const chain = chainAuth([nodeTokens(), down, sharedTokenAuth([TOKEN])]);
  const a = await chain.authenticate(reqWith(TOKEN_A));
  t.equal(a.ok && a.identity.node, 'node-a');
  const s = await chain.authenticate(reqWith(TOKEN));
  t.equal(s.ok && s.identity.method, 'shared-token');
  const jwt = await chain.authenticate(reqWith(JWT(2e9)));
  t.equal(jwt.ok ? 0 : jwt.status, 503, 'the agent retries, not a wrong-token verdict');
  t.end();
});

void t.test(
  'end to end: a projected ServiceAccount token, reviewed by the API server, names the node',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-sa-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const fake = await startFakeApiServer(dir);
    t.teardown(() => fake.close());
    const agentPodObj = pod('hoptrace', 'hoptrace-agent-abc', { node: 'backend-node' });
    if (agentPodObj.metadata) agentPodObj.metadata.uid = 'uid-abc';
    fake.pods = [...fake.pods, agentPodObj];
    const jwt = JWT(Date.now() / 1000 + 3600);
    fake.tokens.set(jwt, {
      username: 'system:serviceaccount:hoptrace:hoptrace-agent',
      pod: 'hoptrace-agent-abc',
      podUid: 'uid-abc',
      audiences: ['hoptrace'],
    });
    const collector = await startCollector({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      kubernetes: { source: { kind: 'kubeconfig', file: fake.kubeconfig } },
      agentAuth: { tokenReview: {} },
      logLevel: 'silent',
    });
    t.teardown(() => collector.close());
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${jwt}\n`);
    const connect = (agentId: string, node: string) => {
      const l = new CollectorLink({
        url: collector.agentsUrl,
        token: () => loadToken({ file: tokenFile }),
        hello: () => helloFor(agentId, node),
        backoff: { minMs: 10, maxMs: 50 },
      });
      t.teardown(() => l.close());
      return l;
    };
    const good = connect('b-1', 'backend-node');
    await new Promise<void>((resolve) => {
      good.onConnected(() => {
        resolve();
      });
    });
    t.same(collector.hub.agents()[0]?.identity, {
      method: 'service-account',
      subject: 'pod hoptrace/hoptrace-agent-abc (system:serviceaccount:hoptrace:hoptrace-agent)',
    });
    t.ok(
      fake.requests.includes('POST /apis/authentication.k8s.io/v1/tokenreviews'),
      'asked the API server',
    );
    const lying = connect('b-2', 'vpn-node');
    const err = await new Promise<HoptraceError>((resolve) => {
      lying.onError(resolve);
    });
    t.equal(err.code, 'AUTH_WRONG_NODE', "the pod's node decides, not the hello");

    writeFileSync(tokenFile, 'not-a-token-the-api-knows.x.y\n');
    const unknown = connect('b-3', 'backend-node');
    const e2 = await new Promise<HoptraceError>((resolve) => {
      unknown.onError(resolve);
    });
    t.equal(e2.code, 'AUTH_REFUSED', 'an unknown token: 401');
  },
);

void t.test('the agent reads its token file again on every connection', async (t) => {
  const { server, port } = await listen();
  const hub = createAgentHub({
    server,
    tokens: [TOKEN_B],
    collectorId: 'c1',
    lastSeqStore: memoryLastSeqStore(),
  });
  hub.onMessage(() => Promise.resolve());
  t.teardown(async () => {
    await hub.close();
    await closeServer(server);
  });
  // The kubelet rotates the token between two connections.
  const reads: string[] = [];
  const link = new CollectorLink({
    url: `ws://127.0.0.1:${port}/v1/agents`,
    token: () => {
      const tok = reads.length === 0 ? TOKEN_A : TOKEN_B;
      reads.push(tok);
      return tok;
    },
    hello: () => helloFor('r-1', 'node-r'),
    backoff: { minMs: 10, maxMs: 50 },
  });
  t.teardown(() => link.close());
  await new Promise<void>((resolve) => {
    link.onConnected(() => {
      resolve();
    });
  });
  t.same(reads, [TOKEN_A, TOKEN_B], 'refused with the old token, connected with the new one');
});

void t.test(
  'an agent whose id the collector has numbered up to 2^52 takes a new id and goes on',
  async (t) => {
    const { server, port } = await listen();
    const store = memoryLastSeqStore();
    store.set('full-1', MAX_SEQ);
    const hub = createAgentHub({ server, tokens: [TOKEN], collectorId: 'c1', lastSeqStore: store });
    const got: AgentMessage[] = [];
    hub.onMessage((m) => {
      got.push(m);
      return Promise.resolve();
    });
    t.teardown(async () => {
      await hub.close();
      await closeServer(server);
    });
    let id = 'full-1';
    const errors: string[] = [];
    const link = new CollectorLink({
      url: `ws://127.0.0.1:${port}/v1/agents`,
      token: TOKEN,
      hello: () => helloFor(id, 'node-f'),
      onSeqExhausted: () => {
        id = 'full-2';
      },
      backoff: { minMs: 10, maxMs: 50 },
    });
    t.teardown(() => link.close());
    link.onError((e) => errors.push(e.code));
    link.send('events', batch(1, 1));
    while (got.length === 0) await new Promise((r) => setTimeout(r, 10));
    t.same(errors, ['WIRE_SEQ_EXHAUSTED']);
    t.equal(got[0]?.agentId, 'full-2', 'delivered under the new id');
    t.ok((got[0]?.seq ?? 0) <= MAX_SEQ);
    t.equal(
      store.nodeOf('full-1'),
      undefined,
      "the old id is over: its node's new id took its place",
    );
    t.equal(store.get('full-1'), 0, 'its seq with it (one id a node)');
  },
);

void t.test('the identity flags: mistakes are coded usage errors', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-idflags-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const tok = join(dir, 'token');
  writeFileSync(tok, `${TOKEN}\n`);
  const nodes = join(dir, 'nodes');
  writeFileSync(nodes, `node-a ${TOKEN_A}\n`);
  const env = {};
  const code = (f: () => unknown): string => {
    try {
      f();
      return 'accepted';
    } catch (e) {
      return isHoptraceError(e) ? `${e.code} ${e.where ?? ''}` : String(e);
    }
  };
  t.equal(
    code(() => parseCollectorArgs(['--token-file', tok, '--token-review-audience', 'x'], env)),
    'CLI_USAGE --token-review-audience',
  );
  t.equal(
    code(() =>
      parseCollectorArgs(
        ['--token-file', tok, '--token-review', '--agent-service-account', 'x'],
        env,
      ),
    ),
    'CLI_USAGE --agent-service-account',
  );
  t.equal(
    code(() => parseCollectorArgs(['--token-file', tok, '--agent-tokens', tok], env)),
    `AUTH_NO_TOKEN ${tok}`,
    'a shared token file is not a node token file',
  );
  const ok = parseCollectorArgs(['--token-file', tok, '--agent-tokens', nodes], env);
  t.same([...(ok.agentAuth?.nodeTokens ?? [])], [['node-a', TOKEN_A]]);
  t.equal(
    code(() => parseAgentArgs(['--collector', 'wss://c:7070/v1/agents', '--cert', tok], env)),
    'CLI_USAGE hoptrace agent',
    '--cert without --key',
  );
  await t.rejects(
    startCollector({
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      agentAuth: { clientCa: 'x' },
      logLevel: 'silent',
    }),
    { code: 'CLI_USAGE', where: '--client-ca' },
  );
  await t.rejects(
    startCollector({
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      agentAuth: { tokenReview: {} },
      logLevel: 'silent',
    }),
    { code: 'CLI_USAGE', where: '--token-review' },
  );
});

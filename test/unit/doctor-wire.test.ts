// Doctor and conntrack over the agent protocol, socket-free: the four new Envelope bodies survive
// protobuf, replies are matched to requests (and time out), and the collector assembles findings
// from agents' reports.
import t from 'tap';
import { AgentRequests } from '../../collector/agent-requests';
import { conntrackForCapture } from '../../collector/conntrack-remote';
import { agentFor, doctorViaAgents, parseDoctorSpec } from '../../collector/doctor-remote';
import type { AgentCommand, AgentHub, AgentInfo, AgentReply } from '../../collector/hub-types';
import type { CollectorLogger, LogFields } from '../../collector/logger';
import { judgeConntrack } from '../../core/attribute/conntrack-evidence';
import type { Verdict } from '../../core/attribute/attribute';
import { decodeEnvelope, encodeEnvelope } from '../../common/envelope';
import type { ConntrackEntry, Envelope, NamespaceFacts } from '../../common/wire';

const FACTS: NamespaceFacts = {
  name: 'backend-node',
  target: '',
  netns: '(agent namespace)',
  node: 'n2',
  addresses: ['192.168.50.2'],
  rpFilter: [{ iface: 'all', value: 2 }],
  routes: [
    {
      dst: '10.90.0.0/24',
      gateway: '10.244.3.17',
      dev: 'eth0',
      type: '',
      prefsrc: '',
      flags: ['onlink'],
    },
  ],
  lookups: [
    {
      to: '10.90.0.42',
      route: {
        dst: '10.90.0.42',
        gateway: '10.244.3.17',
        dev: 'eth0',
        type: '',
        prefsrc: '192.168.50.2',
        flags: [],
      },
      error: '',
    },
    { to: '10.244.2.5', route: null, error: 'RTNETLINK answers: Network is unreachable' },
  ],
  natChains: ['POSTROUTING'],
  natRules: [
    { chain: 'POSTROUTING', args: ['-j', 'MASQUERADE'], text: '-A POSTROUTING -j MASQUERADE' },
  ],
  ipvsState: 'read',
  ipvs: [
    {
      proto: 'tcp',
      address: '10.96.0.10',
      port: 80,
      scheduler: 'rr',
      reals: [{ address: '10.244.2.5', port: 8080, forward: 'Masq' }],
    },
  ],
  family: 4,
  errorCode: '',
  message: '',
  unread: [],
};

const ENTRY: ConntrackEntry = {
  name: 'vpn-node',
  netns: '(agent namespace)',
  node: 'n1',
  proto: 'tcp',
  state: 'TIME_WAIT',
  orig: { src: '10.90.0.42', dst: '10.244.2.5', sport: 40000, dport: 8080 },
  reply: { src: '10.244.2.5', dst: '192.168.50.1', sport: 8080, dport: 40000 },
  snat: true,
  dnat: false,
  raw: 'tcp 6 …',
};

void t.test('Envelope: doctor and conntrack bodies round-trip', (t) => {
  const cases: Envelope[] = [
    {
      seq: 0,
      kind: 'doctorRequest',
      doctorRequest: {
        requestId: 'q-1',
        targets: [{ name: 'vpn', target: '10.244.1.10', routeTo: ['10.244.2.5'] }],
        family: 4,
      },
    },
    {
      seq: 0,
      kind: 'doctorReport',
      doctorReport: { requestId: 'q-1', agentId: 'a', node: 'n2', facts: [FACTS] },
    },
    {
      seq: 0,
      kind: 'conntrackQuery',
      conntrackQuery: {
        requestId: 'q-2',
        captureId: 'c-1',
        targets: [{ name: 'vpn-node', target: '', routeTo: [] }],
        tuples: [ENTRY.orig],
      },
    },
    {
      seq: 0,
      kind: 'conntrackReport',
      conntrackReport: {
        requestId: 'q-2',
        captureId: 'c-1',
        agentId: 'a',
        entries: [ENTRY],
        errors: ['backend-node: CONNTRACK_READ_FAILED x'],
      },
    },
  ];
  for (const env of cases) t.same(decodeEnvelope(encodeEnvelope(env)), env, env.kind);
  t.end();
});

void t.test('Envelope: the address family of doctor requests and facts', (t) => {
  const v6: Envelope = {
    seq: 0,
    kind: 'doctorRequest',
    doctorRequest: { requestId: 'q-6', targets: [], family: 6 },
  };
  t.same(decodeEnvelope(encodeEnvelope(v6)), v6, 'an IPv6 request');
  const facts6 = { ...FACTS, family: 6 as const, routes: [], natRules: [] };
  const report: Envelope = {
    seq: 0,
    kind: 'doctorReport',
    doctorReport: { requestId: 'q-6', agentId: 'a', node: 'n2', facts: [facts6] },
  };
  t.same(decodeEnvelope(encodeEnvelope(report)), report, 'facts read for IPv6');
  // A peer older than the field sends none (proto3: 0): an older collector asks, an older agent
  // read, IPv4.
  const unset = <T>(v: T): T => ({ ...v, family: 0 });
  const old = decodeEnvelope(encodeEnvelope({ ...v6, doctorRequest: unset(v6.doctorRequest) }));
  t.equal(old.kind === 'doctorRequest' ? old.doctorRequest.family : null, 4);
  const oldFacts = decodeEnvelope(
    encodeEnvelope({
      ...report,
      doctorReport: { ...report.doctorReport, facts: [unset(facts6)] },
    }),
  );
  t.equal(oldFacts.kind === 'doctorReport' ? oldFacts.doctorReport.facts[0]?.family : null, 4);
  t.throws(
    () =>
      decodeEnvelope(
        encodeEnvelope({ ...v6, doctorRequest: { ...v6.doctorRequest, family: 5 as 6 } }),
      ),
    /WIRE_MALFORMED: envelope: address family 5 is neither 4 nor 6/,
  );
  t.end();
});

function agent(agentId: string, node: string, nodeAddresses: string[], pods: string[]): AgentInfo {
  return {
    agentId,
    node,
    connected: true,
    connectedAtMs: 0,
    lastSeenMs: 0,
    unknownMessages: 0,
    identity: { method: 'shared-token', subject: 'shared token' },
    hello: {
      agentId,
      node,
      version: 't',
      nodeAddresses,
      namespaces: pods.map((ip, i) => ({
        path: `/proc/${i + 10}/ns/net`,
        inode: i + 1,
        addresses: [ip],
        interfaces: ['eth0'],
      })),
      spoolFirstSeq: 0,
    },
  };
}

/** A hub whose agents answer through `answer` (or never, when it returns null). */
class ReplyHub implements AgentHub {
  readonly sent: { agentId: string; cmd: AgentCommand }[] = [];
  private reply: ((r: AgentReply) => void) | undefined;
  constructor(
    readonly list: AgentInfo[],
    private readonly answer: (agentId: string, cmd: AgentCommand) => AgentReply | null,
  ) {}
  agents(): AgentInfo[] {
    return this.list;
  }
  send(agentId: string, cmd: AgentCommand): boolean {
    if (!this.list.some((a) => a.agentId === agentId)) return false;
    this.sent.push({ agentId, cmd });
    const r = this.answer(agentId, cmd);
    if (r !== null) setImmediate(() => this.reply?.(r));
    return true;
  }
  onReply(h: (r: AgentReply) => void): void {
    this.reply = h;
  }
  onMessage(): void {}
  onAgent(): void {}
  counters() {
    return {
      connected: 0,
      refusedUnauthenticated: 0,
      refusedMalformed: 0,
      messagesIn: 0,
      duplicatesDropped: 0,
      readPauses: 0,
    };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const AGENTS = [
  agent('a1', 'n1', ['192.168.50.1'], ['10.244.1.10']),
  agent('a2', 'n2', ['192.168.50.2'], ['10.244.2.5']),
];

/** A hub whose agents answer conntrack queries with `entriesOf(agentId)`. */
function conntrackHub(
  entriesOf: (agentId: string) => ConntrackEntry[],
  list: AgentInfo[] = AGENTS,
): ReplyHub {
  return new ReplyHub(list, (agentId, cmd) => {
    if (cmd.kind !== 'conntrackQuery') return null;
    const q = cmd.conntrackQuery;
    return {
      kind: 'conntrackReport',
      agentId,
      report: {
        requestId: q.requestId,
        captureId: q.captureId,
        agentId,
        entries: entriesOf(agentId),
        errors: [],
      },
    };
  });
}

/** A verdict of `layer` for ENTRY's flow, masqueraded to the VPN node's address at the backend. */
function verdictOf(layer: string): Verdict {
  return {
    layer,
    client: ENTRY.orig,
    observed: { backend: { src: '192.168.50.1', sport: 40000, dst: '10.244.2.5', dport: 8080 } },
  } as unknown as Verdict;
}

void t.test('doctor via agents: one request per agent, findings from the reports', async (t) => {
  const hub = new ReplyHub(AGENTS, (agentId, cmd) => {
    if (cmd.kind !== 'doctorRequest') return null;
    const facts = cmd.doctorRequest.targets.map((x) =>
      x.name === 'backend-node'
        ? FACTS
        : {
            ...FACTS,
            name: x.name,
            target: x.target,
            node: 'n1',
            addresses: x.name === 'vpn' ? ['10.244.1.10'] : ['192.168.50.1'],
            natRules: [],
            routes: [],
            lookups: [],
          },
    );
    return {
      kind: 'doctorReport',
      agentId,
      report: { requestId: cmd.doctorRequest.requestId, agentId, node: '', facts },
    };
  });
  const req = new AgentRequests(hub, 1000);
  const r = await doctorViaAgents(
    AGENTS,
    req,
    parseDoctorSpec(
      JSON.stringify({ vpn: '10.244.1.10', backend: '10.244.2.5', client: '10.90.0.42' }),
    ),
  );
  t.same(
    hub.sent.map((s) => s.agentId),
    ['a1', 'a2'],
  );
  t.same(
    hub.sent.flatMap((s) =>
      s.cmd.kind === 'doctorRequest' ? s.cmd.doctorRequest.targets.map((x) => x.name) : [],
    ),
    ['vpn', 'vpn-node', 'backend-node'],
  );
  const dead = r.findings.find((f) => f.check === 'return-route');
  t.equal(dead?.severity, 'error');
  t.match(dead?.detail, /still points at 10\.244\.3\.17/);
  t.equal(dead?.node, 'n2');
});

void t.test(
  'doctor via agents, IPv6: the requests ask for IPv6, IPv4 facts are not read',
  async (t) => {
    const hub = new ReplyHub(AGENTS, (agentId, cmd) => {
      if (cmd.kind !== 'doctorRequest') return null;
      // An agent older than IPv6 doctor facts: it ignores the family and reads IPv4.
      const facts = cmd.doctorRequest.targets.map((x) => ({
        ...FACTS,
        name: x.name,
        target: x.target,
        family: 4 as const,
      }));
      return {
        kind: 'doctorReport',
        agentId,
        report: { requestId: cmd.doctorRequest.requestId, agentId, node: '', facts },
      };
    });
    const r = await doctorViaAgents(
      AGENTS,
      new AgentRequests(hub, 1000),
      parseDoctorSpec(
        JSON.stringify({
          vpn: '10.244.1.10',
          backend: '10.244.2.5',
          tunnelRange: 'fd00:10:90::/64',
        }),
      ),
    );
    t.same(
      hub.sent.map((s) => (s.cmd.kind === 'doctorRequest' ? s.cmd.doctorRequest.family : 0)),
      [6, 6],
    );
    t.same(
      hub.sent.flatMap((s) =>
        s.cmd.kind === 'doctorRequest' ? s.cmd.doctorRequest.targets.map((x) => x.routeTo) : [],
      ),
      [[], ['fd00:10:90::1'], ['fd00:10:90::1']],
      "the client is the range's first host; the IPv4 pod address is no destination for it",
    );
    t.same(
      r.findings.filter((f) => f.severity === 'ok'),
      [],
    );
    t.same(
      r.findings.filter((f) => f.check === 'read').map((f) => f.severity),
      ['error', 'error', 'error'],
    );
    t.match(r.findings[0]?.detail, /the agent read IPv4 facts, not IPv6/);
  },
);

void t.test('doctor via agents: errors', async (t) => {
  t.throws(() => agentFor(AGENTS, '10.9.9.9'), /DOCTOR_NO_AGENT/);
  t.equal(agentFor(AGENTS, 'n2//run/netns/x').target, '/run/netns/x');
  t.throws(
    () => parseDoctorSpec('{"vpn": "x"}'),
    /API_BAD_REQUEST: \/v1\/doctor: backend must be a non-empty string/,
  );
  t.throws(
    () => parseDoctorSpec('{"vpn": "a", "backend": "b", "tunnelRange": "fd00::/129"}'),
    /tunnelRange must be an IPv4 or IPv6 CIDR/,
  );
  t.throws(
    () =>
      parseDoctorSpec(
        '{"vpn": "a", "backend": "b", "tunnelRange": "fd00:10:90::/64", "client": "10.90.0.42"}',
      ),
    /client must be an IPv6 address, like tunnelRange fd00:10:90::\/64/,
  );
  t.throws(
    () => parseDoctorSpec('{"vpn": "a", "backend": "b", "dst": "fd00:10:244:2::5"}'),
    /dst must be an IPv4 address, like tunnelRange 10\.90\.0\.0\/24/,
  );
  const silent = new AgentRequests(new ReplyHub(AGENTS, () => null), 50);
  // The request timer is unref'd (a collector's server keeps the loop alive; here nothing would).
  const keep = setInterval(() => undefined, 1000);
  await t.rejects(
    silent.doctor('a1', [], 4),
    /DOCTOR_NO_AGENT: a1: agent a1 did not answer the doctor request in time/,
  );
  await t.rejects(silent.doctor('nobody', [], 4), /is not connected/);
  clearInterval(keep);
});

void t.test(
  'conntrack for a capture: egress and backend agents, node namespaces included',
  async (t) => {
    const hub = conntrackHub((agentId) => (agentId === 'a1' ? [ENTRY] : []));
    const verdict = verdictOf('cni-masquerade');
    const points = [
      { name: 'decap', agentId: 'a1', target: '10.244.1.10' },
      { name: 'egress', agentId: 'a1', target: '10.244.1.10' },
      { name: 'backend', agentId: 'a2', target: '10.244.2.5' },
    ];
    const r = await conntrackForCapture(new AgentRequests(hub, 1000), 'c-1', points, verdict);
    t.same(r.entries, [ENTRY]);
    t.same(
      hub.sent.map((s) =>
        s.cmd.kind === 'conntrackQuery'
          ? [s.agentId, s.cmd.conntrackQuery.targets.map((x) => x.name)]
          : [],
      ),
      [
        ['a1', ['vpn', 'vpn-node']],
        ['a2', ['backend-node']],
      ],
    );
  },
);

/** A logger that keeps its warnings. */
function warnings(): CollectorLogger & { warned: { fields: LogFields; msg: string }[] } {
  const warned: { fields: LogFields; msg: string }[] = [];
  const none = (): void => undefined;
  return {
    warned,
    info: none,
    error: none,
    debug: none,
    warn: (fields, msg) => warned.push({ fields, msg }),
  };
}

void t.test(
  "conntrack: an agent's entries count only for the namespaces it was asked, as its own node's",
  async (t) => {
    // The VPN node's agent (a1) answers for the backend node as well, and names another node.
    const planted: ConntrackEntry = { ...ENTRY, name: 'backend-node', node: 'n2', snat: true };
    const hub = conntrackHub((agentId) =>
      agentId === 'a1' ? [{ ...ENTRY, node: 'n9' }, planted] : [],
    );
    const verdict = verdictOf('kube-proxy');
    const points = [
      { name: 'egress', agentId: 'a1', target: '10.244.1.10' },
      { name: 'backend', agentId: 'a2', target: '10.244.2.5' },
    ];
    const log = warnings();
    const r = await conntrackForCapture(new AgentRequests(hub, 1000, log), 'c-1', points, verdict);
    t.same(r.entries, [ENTRY], "a1's vpn-node entry, as node n1's (the hello's), not n9's");
    t.notOk(
      r.entries.some((e) => e.name === 'backend-node'),
      'nothing of backend-node from the agent that was not asked for it',
    );
    t.not(
      judgeConntrack(verdict, r.entries).status,
      'confirms',
      'the kube-proxy verdict is not confirmed by what a1 said of backend-node',
    );
    t.same(
      log.warned.map((w) => w.fields),
      [{ agentId: 'a1', node: 'n1', count: 1, code: 'AGENT_UNASKED_FACTS' }],
    );
    t.match(log.warned[0]?.msg, /1 conntrack entries of agent a1 .*\("backend-node"\): dropped/);
  },
);

void t.test(
  "doctor: an agent's facts count only for the targets it was sent, as its own node's",
  async (t) => {
    // A backend-node whose return route goes the VPN way: what the VPN agent would like said.
    const clean: NamespaceFacts = {
      ...FACTS,
      node: 'n2',
      routes: [{ ...FACTS.routes[0]!, gateway: '192.168.50.1' }],
      lookups: [],
    };
    const hub = new ReplyHub(AGENTS, (agentId, cmd) => {
      if (cmd.kind !== 'doctorRequest') return null;
      const asked = cmd.doctorRequest.targets.map((x) =>
        x.name === 'backend-node'
          ? FACTS
          : { ...FACTS, name: x.name, target: x.target, node: 'n7', routes: [], lookups: [] },
      );
      // a1 also answers for a target it was not sent, first, and for its vpn target twice.
      const facts = agentId === 'a1' ? [clean, ...asked, asked[0]!] : asked;
      return {
        kind: 'doctorReport',
        agentId,
        report: { requestId: cmd.doctorRequest.requestId, agentId, node: 'n2', facts },
      };
    });
    const log = warnings();
    const req = new AgentRequests(hub, 1000, log);
    const a1 = await req.doctor('a1', [{ name: 'vpn', target: '10.244.1.10', routeTo: [] }], 4);
    t.same(
      a1.facts.map((f) => [f.name, f.node]),
      [['vpn', 'n1']],
      'the one target sent, once, as n1 (its hello), not n7 or n2',
    );
    const r = await doctorViaAgents(
      AGENTS,
      req,
      parseDoctorSpec(
        JSON.stringify({ vpn: '10.244.1.10', backend: '10.244.2.5', client: '10.90.0.42' }),
      ),
    );
    const routes = r.findings.filter((f) => f.check === 'return-route');
    t.same(
      routes.map((f) => [f.node, f.severity]),
      [['n2', 'error']],
      "only the backend agent's own facts are checked for its node, not a1's clean ones",
    );
    t.match(routes[0]?.detail, /still points at 10\.244\.3\.17/);
    t.same(
      log.warned.map((w) => w.fields),
      [
        { agentId: 'a1', node: 'n1', count: 2, code: 'AGENT_UNASKED_FACTS' },
        { agentId: 'a1', node: 'n1', count: 2, code: 'AGENT_UNASKED_FACTS' },
      ],
    );
    t.match(log.warned[0]?.msg, /2 doctor facts of agent a1 .*\("backend-node", "vpn"\)/);
  },
);

void t.test('conntrack: the answer of an agent gone meanwhile is said unread', async (t) => {
  const hub = conntrackHub(() => [ENTRY], [...AGENTS]);
  const req = new AgentRequests(hub, 1000, warnings());
  const asking = req.conntrack(
    'a1',
    'c-1',
    [{ name: 'vpn-node', target: '', routeTo: [] }],
    [ENTRY.orig],
  );
  // a1 leaves between the query and its answer.
  hub.list.splice(0, 1);
  const r = await asking;
  t.same(r.entries, [], 'its entries are not taken');
  // Before, nothing said so: the judgement read "no entries" of a table it had not taken.
  t.match(r.errors, [/^vpn-node: agent a1 was no longer connected when its answer came/]);
  t.end();
});

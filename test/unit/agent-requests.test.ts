/**
 * The agent's doctor, conntrack and frames requests are served a bounded number at a time
 * (agent/requests.ts): the collector's side could send any number at once, and each read is a
 * child process with up to 32 MiB of output. No sockets, no namespaces: fake reads.
 */
import t from 'tap';
import { REQUEST_LIMITS, serveRequests, TaskGate } from '../../agent/requests';
import type { AgentReplyBody, CollectorRequest } from '../../agent/link/collector-link';
import type { FramesReply } from '../../common/wire';

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

function doctor(i: number): CollectorRequest {
  return {
    kind: 'doctorRequest',
    doctorRequest: {
      requestId: `q-${i}`,
      family: 4,
      targets: [
        { name: 'vpn-node', target: '', routeTo: ['10.90.0.42'] },
        { name: 'vpn', target: '10.244.1.10', routeTo: [] },
      ],
    },
  };
}

function harness() {
  const replies: AgentReplyBody[] = [];
  const release: (() => void)[] = [];
  let running = 0;
  let most = 0;
  let answered = 0;
  const handle = serveRequests({
    answer: async (req) => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((r) => release.push(r));
      running--;
      answered++;
      if (req.kind !== 'doctorRequest') throw new Error('doctor requests only here');
      const { requestId } = req.doctorRequest;
      return {
        kind: 'doctorReport',
        doctorReport: { requestId, agentId: 'a1', node: 'n1', facts: [] },
      };
    },
    frames: (req) =>
      new Promise<FramesReply>((resolve) =>
        release.push(() => {
          resolve({
            requestId: req.requestId,
            captureId: req.captureId,
            point: req.point,
            linkType: 1,
            snaplen: 0,
            records: [],
            missing: [],
            retained: 0,
            retentionDropped: 0,
            errorCode: '',
            message: '',
          });
        }),
      ),
    reply: (body) => replies.push(body),
    agentId: () => 'a1',
    node: 'n1',
  });
  const drain = async (): Promise<void> => {
    while (release.length > 0) {
      release.shift()?.();
      await settle();
    }
  };
  return { handle, replies, drain, most: () => most, answered: () => answered };
}

void t.test(
  `doctor and conntrack: ${REQUEST_LIMITS.running} at once, ${REQUEST_LIMITS.waiting} waiting, the rest AGENT_BUSY`,
  async (t) => {
    const h = harness();
    const n = REQUEST_LIMITS.running + REQUEST_LIMITS.waiting + 2;
    for (let i = 0; i < n; i++) h.handle(doctor(i));
    await settle();
    // Refused at once, every target unread with the reason: the collector's doctor says why.
    t.equal(h.replies.length, 2);
    for (const r of h.replies) {
      if (r.kind !== 'doctorReport') return t.fail(r.kind);
      t.same(
        r.doctorReport.facts.map((f) => [f.name, f.errorCode, f.unread.length > 0]),
        [
          ['vpn-node', 'AGENT_BUSY', true],
          ['vpn', 'AGENT_BUSY', true],
        ],
      );
      t.match(
        r.doctorReport.facts[0]?.message,
        /already answers 2 \(and holds 8\) doctor and conntrack requests/,
      );
    }
    t.same(
      h.replies.map((r) => (r.kind === 'doctorReport' ? r.doctorReport.requestId : '')),
      [`q-${n - 2}`, `q-${n - 1}`],
    );
    await h.drain();
    t.equal(h.answered(), n - 2, 'every queued request answered in turn');
    t.equal(h.most(), REQUEST_LIMITS.running, 'never more at once');
    t.equal(h.replies.length, n);
  },
);

void t.test('a conntrack query refused names each namespace it did not read', async (t) => {
  const h = harness();
  for (let i = 0; i < REQUEST_LIMITS.running + REQUEST_LIMITS.waiting; i++) h.handle(doctor(i));
  h.handle({
    kind: 'conntrackQuery',
    conntrackQuery: {
      requestId: 'q-ct',
      captureId: 'c1',
      targets: [{ name: 'node', target: '', routeTo: [] }],
      tuples: [{ src: '10.90.0.42', dst: '10.96.0.10', sport: 40000, dport: 80 }],
    },
  });
  await settle();
  t.match(h.replies, [
    {
      kind: 'conntrackReport',
      conntrackReport: {
        requestId: 'q-ct',
        captureId: 'c1',
        entries: [],
        errors: [/^node: AGENT_BUSY: /],
      },
    },
  ]);
  await h.drain();
});

void t.test(
  `frames: ${REQUEST_LIMITS.frames} at once, the next AGENT_BUSY for every frame`,
  async (t) => {
    const h = harness();
    for (let i = 0; i <= REQUEST_LIMITS.frames; i++)
      h.handle({
        kind: 'framesRequest',
        framesRequest: {
          requestId: `f-${i}`,
          captureId: 'c1',
          point: 'decap',
          frames: [3, 1, 3],
          release: false,
        },
      });
    await settle();
    t.match(h.replies, [
      {
        kind: 'framesReply',
        framesReply: {
          requestId: `f-${REQUEST_LIMITS.frames}`,
          errorCode: 'AGENT_BUSY',
          missing: [
            { frame: 1, reason: 'AGENT_BUSY' },
            { frame: 3, reason: 'AGENT_BUSY' },
          ],
        },
      },
    ]);
    await h.drain();
    t.equal(h.replies.length, REQUEST_LIMITS.frames + 1);
  },
);

void t.test(
  'the gate: a freed slot goes to the one waiting; never more than its limit',
  async (t) => {
    const gate = new TaskGate(1, 1);
    let active = 0;
    let most = 0;
    const ends: (() => void)[] = [];
    const task = (): Promise<void> => {
      active++;
      most = Math.max(most, active);
      return new Promise<void>((r) =>
        ends.push(() => {
          active--;
          r();
        }),
      );
    };
    const a = gate.run(task);
    const b = gate.run(task);
    t.equal(gate.run(task), null, 'full: one running, one waiting');
    ends.shift()?.();
    await a;
    t.equal(active, 1, 'b runs');
    const c = gate.run(task);
    t.not(c, null, 'c waits in the freed place');
    ends.shift()?.();
    await b;
    await settle();
    t.equal(active, 1, 'c runs');
    ends.shift()?.();
    await c;
    t.equal(most, 1);
  },
);
